// coll_sweep: correctness sweep of every NCCL collective through the public API only, so the same
// binary checks weft and (with LD_LIBRARY_PATH pointing at another libnccl.so.2) NVIDIA's NCCL.
//
//   coll_sweep [-g N] [-m MODES] [--quick] [filters...]      (--help for everything)
//
// MODES (comma list, each run in its own child process): initall, groupinit (one thread drives all
// GPUs, collectives grouped across them), threads (one thread per GPU), procs (one process per GPU),
// or all. Prints one line per (collective, type, op), the extra tests, and a final PASS/FAIL; exits
// non-zero on any failure.
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "sweep_host.h"

using namespace sweep;

namespace {

void usage() {
  std::printf(
      "usage: coll_sweep [options]\n"
      "  -g N                 number of GPUs / ranks (default: all visible)\n"
      "  -m MODES             comma list of initall, groupinit, threads, procs, all (default: all)\n"
      "  --quick              representative subset (all collectives, fewer types/ops/sizes)\n"
      "  --no-sweep           skip the case sweep\n"
      "  --no-extras          skip graphs/ordering/split/abort/non-blocking/memalloc/argument tests\n"
      "  --extras LIST        run only these groups of extras: ordering,graphs,memalloc,split,nonblocking,\n"
      "                       abort,args (e.g. a hang in one group, rerun alone)\n"
      "  --no-selftest        skip the checker self-test\n"
      "  --colls LIST         e.g. AllReduce,Broadcast,Bcast,Reduce,AllGather,ReduceScatter,AlltoAll,\n"
      "                       Gather,Scatter,SendRecvRing,SendRecvSelf,SendRecvMany\n"
      "  --types LIST         int8,uint8,int32,uint32,int64,uint64,half,float,double,bfloat16,fp8e4m3,fp8e5m2\n"
      "  --ops LIST           sum,prod,min,max,avg,premulsum-host,premulsum-dev\n"
      "  --counts LIST        element counts (default 0,1,2,7,1023,1024,1025,65537,2^20-1,2^20+1,large)\n"
      "  --large-bytes N      bytes of the large case (default 64 MiB)\n"
      "  --nccl-mem-alloc     allocate the sweep buffers with ncclMemAlloc\n"
      "  --timeout S          watchdog: fail if nothing progresses for S seconds (default 120)\n"
      "  --max-print N        failing cases printed in detail per rank (default 10)\n"
      "  --seed N             input seed\n"
      "  --host-check         only check on the CPU that the generated inputs give exact results (no GPU)\n");
}

std::vector<std::string> split(const std::string& s) {
  std::vector<std::string> out;
  size_t start = 0;
  while (start <= s.size()) {
    const size_t comma = s.find(',', start);
    const std::string item = s.substr(start, comma == std::string::npos ? std::string::npos : comma - start);
    if (!item.empty()) out.push_back(item);
    if (comma == std::string::npos) break;
    start = comma + 1;
  }
  return out;
}

bool sameName(const std::string& a, const char* b) {
  if (a.size() != std::strlen(b)) return false;
  for (size_t i = 0; i < a.size(); ++i) {
    if (std::tolower(static_cast<unsigned char>(a[i])) != std::tolower(static_cast<unsigned char>(b[i]))) return false;
  }
  return true;
}

template <typename NameOf>
bool parseNames(const std::string& list, int limit, NameOf nameOf, std::vector<int>* out, const char* what) {
  for (const std::string& item : split(list)) {
    int found = -1;
    for (int i = 0; i < limit; ++i) {
      if (sameName(item, nameOf(i))) found = i;
    }
    if (found < 0) {
      std::printf("coll_sweep: unknown %s '%s'\n", what, item.c_str());
      return false;
    }
    out->push_back(found);
  }
  return true;
}

void printTally(const Tally& t, const std::string& mode, int G) {
  std::printf("\n== coll_sweep mode=%s ranks=%d: results\n", mode.c_str(), G);
  if (!t.lines.empty()) {
    std::printf("  %-14s %-9s %-15s %8s %8s  %s\n", "collective", "type", "op", "cases", "failed", "result");
  }
  for (const Tally::Line& l : t.lines) {
    std::printf("  %-14s %-9s %-15s %8llu %8llu  %s\n", l.coll.c_str(), l.type.c_str(), l.op.c_str(),
                static_cast<unsigned long long>(l.cases), static_cast<unsigned long long>(l.failed),
                l.failed ? "FAIL" : "PASS");
  }
  for (const Tally::Extra& e : t.extras) {
    std::printf("  %s  %s: %s\n", e.pass == 1 ? "PASS" : e.pass == 0 ? "FAIL" : "SKIP", e.name.c_str(),
                e.detail.c_str());
  }
  uint64_t cases = 0;
  for (const Tally::Line& l : t.lines) cases += l.cases;
  const bool all = t.ranksMerged == G;
  const bool pass = all && t.allPassed();
  std::printf("== coll_sweep mode=%s ranks=%d: %s (%llu cases per rank, %llu failed rank-cases, %d of %d ranks "
              "reported)\n",
              mode.c_str(), G, pass ? "PASS" : "FAIL", static_cast<unsigned long long>(cases),
              static_cast<unsigned long long>(t.casesFailed), t.ranksMerged, G);
}

constexpr int kModeSkipped = 77;  // a mode's exit status when it cannot run here

int runMode(const std::string& mode, const Options& o, int G) {
  if (mode == "initall" && G > o.devices) {
    // ncclCommInitAll gives each rank a GPU of its own (weft refuses a device listed twice).
    std::printf("== coll_sweep mode=initall ranks=%d: SKIP (ncclCommInitAll takes one rank per GPU; %d GPU(s))\n", G,
                o.devices);
    return kModeSkipped;
  }
  Tally t;
  if (mode == "initall") t = runOneThreadAllGpus(o, G, true);
  else if (mode == "groupinit") t = runOneThreadAllGpus(o, G, false);
  else if (mode == "threads") t = runThreadPerGpu(o, G);
  else t = runProcessPerGpu(o, G);
  printTally(t, mode, G);
  std::fflush(stdout);
  return t.ranksMerged == G && t.allPassed() ? 0 : 1;
}

}  // namespace

int main(int argc, char** argv) {
  setvbuf(stdout, nullptr, _IOLBF, 0);
  Options o;
  int G = -1;
  std::string modeList = "all";
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    auto next = [&]() -> std::string {
      if (i + 1 >= argc) {
        std::printf("coll_sweep: %s needs a value\n", a.c_str());
        std::exit(2);
      }
      return argv[++i];
    };
    if (a == "-h" || a == "--help") {
      usage();
      return 0;
    } else if (a == "-g") {
      G = std::atoi(next().c_str());
    } else if (a == "-m") {
      modeList = next();
    } else if (a == "--quick") {
      o.quick = true;
    } else if (a == "--no-sweep") {
      o.sweep = false;
    } else if (a == "--no-extras") {
      o.extras = false;
    } else if (a == "--extras") {
      std::vector<int> groups;
      if (!parseNames(next(), kNumExtraGroups, [](int g) { return kExtraGroups[g]; }, &groups,
                      "group of extras")) {
        return 2;
      }
      for (int g : groups) o.extraGroups.push_back(kExtraGroups[g]);
    } else if (a == "--no-selftest") {
      o.selfTest = false;
    } else if (a == "--nccl-mem-alloc") {
      o.ncclMemAlloc = true;
    } else if (a == "--colls") {
      if (!parseNames(next(), kNumColls, collName, &o.colls, "collective")) return 2;
    } else if (a == "--types") {
      if (!parseNames(next(), kNumTypes, [](int t) { return typeInfo(t).name; }, &o.types, "type")) return 2;
    } else if (a == "--ops") {
      if (!parseNames(next(), kNumOps, opName, &o.ops, "op")) return 2;
    } else if (a == "--counts") {
      for (const std::string& c : split(next())) o.counts.push_back(std::strtoull(c.c_str(), nullptr, 0));
    } else if (a == "--large-bytes") {
      o.largeBytes = std::strtoull(next().c_str(), nullptr, 0);
    } else if (a == "--timeout") {
      o.timeoutSec = std::atoi(next().c_str());
    } else if (a == "--max-print") {
      o.maxPrint = std::atoi(next().c_str());
    } else if (a == "--host-check") {
      std::string report;
      int checked = 0;
      const double t0 = nowSec();
      const bool ok = hostCheckGenerators(&report, &checked);
      std::printf("coll_sweep --host-check: %s (%d reductions over 12 types, 6 ops, n = 1..8, 3 orders; %.1f s)%s%s\n",
                  ok ? "PASS" : "FAIL", checked, nowSec() - t0, ok ? "" : "\n ", report.c_str());
      return ok ? 0 : 1;
    } else if (a == "--seed") {
      o.seed = std::strtoull(next().c_str(), nullptr, 0);
    } else {
      std::printf("coll_sweep: unknown argument '%s'\n", a.c_str());
      usage();
      return 2;
    }
  }
  std::vector<std::string> modes;
  for (const std::string& m : split(modeList)) {
    if (m == "all") {
      for (const char* x : {"initall", "groupinit", "threads", "procs"}) modes.push_back(x);
    } else if (m == "initall" || m == "groupinit" || m == "threads" || m == "procs") {
      modes.push_back(m);
    } else {
      std::printf("coll_sweep: unknown mode '%s'\n", m.c_str());
      return 2;
    }
  }

  // The parent never touches CUDA: the probe and every mode run in child processes, so that the
  // process-per-GPU mode can fork before any CUDA call.
  Probe probe;
  if (!probeMachine(&probe) || probe.deviceCount == 0) {
    std::printf("coll_sweep: FAIL: no CUDA device found (or the probe failed)\n");
    return 2;
  }
  if (G <= 0) G = probe.deviceCount;
  const char* sharing = std::getenv("NCCL_WEFT_ALLOW_GPU_SHARING");
  if (G > probe.deviceCount && !(sharing && std::atoi(sharing) != 0)) {
    std::printf("coll_sweep: FAIL: -g %d but only %d devices are visible (NCCL_WEFT_ALLOW_GPU_SHARING=1 lets ranks "
                "share GPUs, for tests)\n", G, probe.deviceCount);
    return 2;
  }
  o.devices = probe.deviceCount;
  if (G > probe.deviceCount)
    std::printf("coll_sweep: note: %d ranks share %d GPU(s) (rank r on GPU r %% %d)\n", G, probe.deviceCount,
                probe.deviceCount);
  int minMajor = 1000;
  for (int d = 0; d < std::min(G, probe.deviceCount); ++d) minMajor = std::min(minMajor, probe.majors[d]);
  o.fp8 = minMajor >= 9;
  std::printf("coll_sweep: library %s (ncclGetVersion %d), %d of %d GPUs, modes %s%s\n", probe.libraryPath.c_str(),
              probe.ncclVersion, G, probe.deviceCount, modeList.c_str(), o.quick ? ", quick" : "");
  if (!o.fp8) std::printf("coll_sweep: note: fp8 types skipped (a device is sm_%d0; fp8 needs sm_90)\n", minMajor);
  std::printf("coll_sweep: integer results and float sum/prod/min/max/copies must be exact; avg and PreMulSum on\n"
              "  floating types may differ by |got-exp| <= 2(n+2)*u*sum|terms| (u = 2^-11 half, 2^-8 bfloat16,\n"
              "  2^-4 fp8e4m3, 2^-3 fp8e5m2, 2^-24 float, 2^-53 double), n = %d ranks\n", G);

  int failures = 0;
  std::vector<std::pair<std::string, int>> results;
  for (const std::string& m : modes) {
    std::fflush(stdout);
    const pid_t pid = fork();
    if (pid == 0) _exit(runMode(m, o, G));
    int st = 0;
    waitpid(pid, &st, 0);
    const int code = WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
    if (code != 0 && code != kModeSkipped) {
      ++failures;
      if (!WIFEXITED(st) || code > 1) {
        std::printf("== coll_sweep mode=%s ranks=%d: FAIL (the mode ended with %s %d)\n", m.c_str(), G,
                    WIFEXITED(st) ? "exit status" : "signal", WIFEXITED(st) ? code : WTERMSIG(st));
      }
    }
    results.push_back({m, code});
  }
  std::printf("\ncoll_sweep summary (%d ranks):\n", G);
  for (const auto& r : results) {
    std::printf("  %-10s %s\n", r.first.c_str(), r.second == 0 ? "PASS" : r.second == kModeSkipped ? "SKIP" : "FAIL");
  }
  std::printf("coll_sweep: %s\n", failures ? "FAIL" : "PASS");
  return failures ? 1 : 0;
}
