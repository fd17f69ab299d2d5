// weft-status: what the communicators of this host are doing, read from the pages their ranks
// publish in /dev/shm (core/op_ledger.h), from outside the job and at any moment, e.g. while it
// hangs: each rank's process and collectives issued, the ranks behind and the call the others wait
// in, sends and receives posted between host mates that do not match, and call differences found.
//   weft-status [--comm <hash>]      (run as the user who owns the job: the pages are mode 0600)
#include <cinttypes>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>

#include "core/ledger_status.h"

int main(int argc, char** argv) {
  bool filter = false;
  uint64_t only = 0;
  for (int i = 1; i < argc; ++i) {
    if (strcmp(argv[i], "--comm") == 0 && i + 1 < argc) {
      filter = true;
      only = std::strtoull(argv[++i], nullptr, 16);
    } else {
      std::fprintf(stderr, "usage: %s [--comm <communicator hash, hex>]\n", argv[0]);
      return 2;
    }
  }
  int shown = 0;
  for (const weft::core::CommLedgerView& comm : weft::core::scanLedgerPages()) {
    if (filter && comm.commHash != only) continue;
    std::printf("%s", weft::core::describeCommStatus(comm).c_str());
    ++shown;
  }
  if (shown == 0) {
    std::printf("no weft communicator pages%s in /dev/shm readable by this user (ranks publish one per "
                "communicator of more than one rank while it lives)\n", filter ? " of that hash" : "");
    return 1;
  }
  return 0;
}
