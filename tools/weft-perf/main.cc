// weft-perf: an nccl-tests-style benchmark that uses only the public NCCL API. It is built against
// weft's nccl.h (identical in ABI to NVIDIA's) and links libnccl.so.2 dynamically, so the same
// binary measures weft or NVIDIA NCCL depending on LD_LIBRARY_PATH / LD_PRELOAD; the header line
// names the library that was really loaded.
#include <dlfcn.h>
#include <limits.h>
#include <stdlib.h>

#include <cstdio>
#include <string>

#include "launcher.h"
#include "nccl.h"
#include "options.h"
#include "report.h"
#include "runner.h"

#ifndef WEFT_VERSION_STRING
#error "weft-perf must be compiled against weft's nccl.h (build/include), not another one"
#endif

namespace {

weft::perf::LibraryInfo loadedLibrary() {
  weft::perf::LibraryInfo lib;
  Dl_info info;
  if (dladdr(reinterpret_cast<void*>(&ncclGetVersion), &info) != 0 && info.dli_fname != nullptr) {
    char real[PATH_MAX];
    lib.path = realpath(info.dli_fname, real) ? real : info.dli_fname;
  } else {
    lib.path = "(unknown)";
  }
  if (ncclGetVersion(&lib.version) != ncclSuccess) lib.version = 0;
  return lib;
}

}  // namespace

int main(int argc, char** argv) {
  using namespace weft::perf;
  Options opts;
  std::string error;
  if (!parseOptions(argc, argv, &opts, &error)) {
    fprintf(stderr, "weft-perf: %s (see --help)\n", error.c_str());
    return kExitUsage;
  }
  if (opts.help) {
    printUsage(argv[0]);
    return kExitOk;
  }
  // NVLink multicast can take GPUs out of service on shared machines (DESIGN.md §6): off unless the
  // caller decides otherwise. NCCL reads it at communicator creation, after this.
  const bool nvlsDefaulted = getenv("NCCL_NVLS_ENABLE") == nullptr && setenv("NCCL_NVLS_ENABLE", "0", 1) == 0;
  const LibraryInfo lib = loadedLibrary();
  std::vector<std::string> skipped;
  const std::vector<Case> cases = enumerateCases(opts, lib.version, &skipped);
  if (cases.empty()) {
    fprintf(stderr, "weft-perf: nothing to run with %s (ncclGetVersion %d)\n", lib.path.c_str(), lib.version);
    for (const std::string& s : skipped) fprintf(stderr, "  skipped: %s\n", s.c_str());
    return kExitUsage;
  }
  // With several processes the GPU must stay untouched here: they are forked from this one.
  if (opts.processes == 1 && visibleGpus(true) == 0) return kExitNoGpu;

  Printer printer(opts, cases, lib);
  printer.printHeader(skipped);
  if (nvlsDefaulted) printf("# NCCL_NVLS_ENABLE=0 (set by weft-perf; export NCCL_NVLS_ENABLE to choose)\n");
  int rc;
  if (opts.processes == 1) {
    startWatchdog(opts.timeoutSec);
    rc = runProcess(opts, 0, cases, getUniqueId, &printer);
  } else {
    rc = runProcesses(opts, cases, &printer);
  }
  if (rc == kExitNoGpu) return rc;
  const int finishRc = printer.finish();
  return rc != kExitOk ? rc : finishRc;
}
