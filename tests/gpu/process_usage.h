// What a test process holds, read from /proc and the CUDA runtime: open file descriptors, threads,
// resident memory and the GPU's free memory. The GPU tests that look for leaks compare two samples.
#pragma once

#include <cuda_runtime.h>
#include <dirent.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>

namespace gpu_test {

// Entries of `dir` whose names start with `prefix` (dot entries left out); -1 when unreadable.
inline int countEntries(const char* dir, const char* prefix = "") {
  DIR* d = opendir(dir);
  if (!d) return -1;
  int n = 0;
  while (dirent* e = readdir(d)) {
    if (e->d_name[0] != '.' && strncmp(e->d_name, prefix, strlen(prefix)) == 0) ++n;
  }
  closedir(d);
  return n;
}

// VmRSS of this process in KiB (0 when /proc says nothing).
inline long residentKiB() {
  std::FILE* f = std::fopen("/proc/self/status", "r");
  long kib = 0;
  for (char line[256]; f != nullptr && std::fgets(line, sizeof(line), f) != nullptr;) {
    if (std::strncmp(line, "VmRSS:", 6) == 0) kib = std::strtol(line + 6, nullptr, 10);
  }
  if (f != nullptr) std::fclose(f);
  return kib;
}

struct ProcessUsage {
  int fds = 0, threads = 0;
  long rssKiB = 0;
  size_t freeGpu = 0;  // the current device's, for every process using it
};

inline ProcessUsage processUsage() {
  ProcessUsage u;
  u.fds = countEntries("/proc/self/fd");
  u.threads = countEntries("/proc/self/task");
  u.rssKiB = residentKiB();
  size_t total = 0;
  cudaMemGetInfo(&u.freeGpu, &total);
  return u;
}

}  // namespace gpu_test
