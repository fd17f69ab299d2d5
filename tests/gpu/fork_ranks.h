// One process per rank for a GPU test: rank 0 makes the unique id and hands it to the others
// through pipes. Each child runs setup(rank) first (the environment the library reads when it
// first loads its settings, e.g. NCCL_DEBUG_FILE), then body(rank, id), and exits with its result;
// forkRanks returns how many ranks failed (a signal or a nonzero exit).
#pragma once

#include <sys/wait.h>
#include <unistd.h>

#include <cstdio>
#include <functional>
#include <vector>

#include "fd_io.h"
#include "nccl.h"

inline int forkRanks(int n, const std::function<int(int rank, const ncclUniqueId& id)>& body,
                     const std::function<void(int rank)>& setup = nullptr) {
  std::vector<int> reads(n, -1), writes(n, -1);
  for (int g = 1; g < n; ++g) {
    int p[2];
    if (pipe(p) != 0) return n;
    reads[g] = p[0];
    writes[g] = p[1];
  }
  std::vector<pid_t> pids(n);
  for (int g = 0; g < n; ++g) {
    if ((pids[g] = fork()) < 0) return n;
    if (pids[g] > 0) continue;
    if (setup) setup(g);
    ncclUniqueId id;
    if (g == 0) {
      if (ncclGetUniqueId(&id) != ncclSuccess) _exit(4);
      for (int h = 1; h < n; ++h)
        if (!writeAll(writes[h], &id, sizeof(id))) _exit(4);
    } else if (!readAll(reads[g], &id, sizeof(id))) {
      _exit(4);
    }
    for (int h = 1; h < n; ++h) close(reads[h]), close(writes[h]);
    _exit(body(g, id));
  }
  for (int g = 1; g < n; ++g) close(reads[g]), close(writes[g]);
  int failed = 0;
  for (int g = 0; g < n; ++g) {
    int status = 0;
    waitpid(pids[g], &status, 0);
    if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) {
      printf("FAIL rank %d process: status %d\n", g, status);
      ++failed;
    }
  }
  return failed;
}
