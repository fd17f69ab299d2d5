// weft-status: what the communicators of this host are doing, read from the pages their ranks
// publish in /dev/shm (core/op_ledger.h), from outside the job and at any moment, e.g. while it
// hangs: each rank's process and collectives issued, the ranks behind and the call the others wait
// in, sends and receives posted between host mates that do not match, and call differences found.
//   weft-status [--comm <hash>] [--remove-exited]   (as the job's user: the pages are mode 0600)
// --remove-exited deletes the pages of ranks whose process is gone (killed ranks leave theirs); only
// where every rank runs in this pid namespace (another container's live rank would look exited).
#include <cinttypes>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>

#include "core/ledger_status.h"

int main(int argc, char** argv) {
  bool filter = false, removeExited = false;
  uint64_t only = 0;
  for (int i = 1; i < argc; ++i) {
    if (strcmp(argv[i], "--comm") == 0 && i + 1 < argc) {
      filter = true;
      only = std::strtoull(argv[++i], nullptr, 16);
    } else if (strcmp(argv[i], "--remove-exited") == 0) {
      removeExited = true;
    } else {
      std::fprintf(stderr, "usage: %s [--comm <communicator hash, hex>] [--remove-exited]\n", argv[0]);
      return 2;
    }
  }
  int shown = 0;
  for (const weft::core::CommLedgerView& comm : weft::core::scanLedgerPages()) {
    if (filter && comm.commHash != only) continue;
    std::printf("%s", weft::core::describeCommStatus(comm).c_str());
    if (removeExited) {
      const int removed = weft::core::removeExitedPages(comm);
      if (removed > 0) std::printf("  removed the pages of %d exited rank%s\n", removed, removed == 1 ? "" : "s");
    }
    ++shown;
  }
  if (shown == 0) {
    std::printf("no weft communicator pages%s in /dev/shm readable by this user (ranks publish one per "
                "communicator of more than one rank while it lives)\n", filter ? " of that hash" : "");
    return 1;
  }
  return 0;
}
