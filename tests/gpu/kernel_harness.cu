// Standalone GPU test of weft's device data path (no weft host engine): sets up N ranks in this
// process, builds work items with the planner's math (device/work_math.h), launches the ring
// kernel of the chosen protocol for every rank concurrently and checks every output element.
//
//   weft_kernel_harness [--mode correctness|bandwidth|abort|all] [--proto simple|ll|ll128|all]
//                       [--quick] [--large] [--iters N] [--channels 8,16,24,32]
// correctness: for several rank/GPU layouts, every collective x type x op x in/out-of-place x
//   size x alignment, batched launches, SendRecv patterns; prints a pass/fail table, exits 1 on
//   any failure. --quick: fewer sizes; --large: adds 64 MiB cases. --proto: which protocols run
//   the correctness and abort cases (default simple; all = simple, ll, ll128).
// bandwidth: AllReduce/AllGather/ReduceScatter/Broadcast/Reduce, float sum, 64 MiB..1 GiB on 2
//   GPUs with 8/16/24/32 channels; prints time, algbw and busbw (nccl-tests definitions).
// abort: a rank waits for a peer that never sends; the abort flag is raised after 100 ms and the
//   kernel must exit.
#include <chrono>
#include <cstring>
#include <map>
#include <string>
#include <thread>
#include <vector>

#include "device/kernel_api.h"
#include "device/work_math.h"
#include "harness_data.h"
#include "harness_fabric.h"
#include "harness_runner.h"

using namespace weft::harness;
using namespace weft::dev;

namespace {

struct Options {
  std::string mode = "all";
  bool quick = false;
  bool large = false;
  int iters = 20;
  std::vector<int> channels = {8, 16, 24, 32};
  std::vector<int> protos = {kProtoSimple};
};

const char* protoName(int p) { return p == kProtoLL ? "LL" : p == kProtoLL128 ? "LL128" : "Simple"; }

struct Tally {
  int pass = 0, fail = 0;
};

class Report {
 public:
  void add(const std::string& group, const std::string& what, const std::string& err) {
    Tally& t = tally_[group];
    if (err.empty()) {
      t.pass++;
      return;
    }
    t.fail++;
    if (++printed_ <= 200) std::printf("FAIL [%s] %s: %s\n", group.c_str(), what.c_str(), err.c_str());
  }
  int failures() const {
    int f = 0;
    for (auto& kv : tally_) f += kv.second.fail;
    return f;
  }
  void print() const {
    std::printf("\n%-44s %8s %8s\n", "group", "pass", "fail");
    for (auto& kv : tally_) std::printf("%-44s %8d %8d\n", kv.first.c_str(), kv.second.pass, kv.second.fail);
  }

 private:
  std::map<std::string, Tally> tally_;
  int printed_ = 0;
};

std::string describe(const CollSpec& s) {
  char buf[256];
  std::snprintf(buf, sizeof buf, "%s %s %s count=%llu root=%d %s mis=%u/%u%s chunk=%lld", funcName(s.func),
                typeName(s.type), opName(s.op), (unsigned long long)s.count, s.root, s.inPlace ? "in-place" : "out-of-place",
                s.sendMisalign, s.recvMisalign, s.scalarOnDevice ? " scalar-on-device" : "",
                s.chunkElems == ~0ull ? -1ll : (long long)s.chunkElems);
  return buf;
}

bool opValid(int type, int op) { return op != kRedSumPostDiv || !isFloatType(type); }

int gpuCount() {
  int n = 0;
  HARNESS_CUDA(cudaGetDeviceCount(&n));
  return n;
}

// Every collective/type/op/placement/size of one layout.
void runLayout(const FabricConfig& cfg, const Options& opt, Report& rep, int proto) {
  char name[128];
  const uint32_t step = proto == kProtoLL ? cfg.llStepBytes : proto == kProtoLL128 ? cfg.ll128StepBytes : cfg.stepBytes;
  std::snprintf(name, sizeof name, "%s %d ranks on %d GPU(s), %d ch, step %u B", protoName(proto), cfg.nRanks, cfg.nGpus,
                cfg.nChannels, step);
  std::printf("== %s\n", name);
  std::fflush(stdout);
  const bool large = opt.large && cfg.nGpus >= 2 && cfg.nRanks == 2;
  Fabric fab(cfg);
  Runner run(fab, large ? (size_t(80) << 20) : (size_t(48) << 20));
  run.setProto(proto);
  const int n = cfg.nRanks;
  uint64_t seed = 1;
  auto group = [&](const CollSpec& s) { return std::string(name) + " " + funcName(s.func); };
  auto one = [&](const CollSpec& s) {
    if (fab.broken()) return;
    std::string e = run.runColls({s}, seed++);
    rep.add(group(s), describe(s), e);
  };
  const std::vector<uint64_t> quickSizes = {0, 1, 17, 1025, 65537};
  const std::vector<uint64_t> fullSizes = {0, 1, 2, 3, 7, 15, 16, 17, 31, 33, 255, 1023, 1024, 1025, 4097, 65535, 65536, 65537, 1000003};
  const int funcs[] = {kFuncAllReduce, kFuncReduceScatter, kFuncReduce, kFuncBroadcast, kFuncAllGather};
  // Every type and op, a few sizes, both placements, aligned and shifted by one element.
  for (int f : funcs)
    for (int t = 0; t < kNumDataTypes; t++)
      for (int op = 0; op < kNumRedOps; op++) {
        bool reduces = f == kFuncAllReduce || f == kFuncReduceScatter || f == kFuncReduce;
        if (!reduces && op != kRedSum) continue;
        if (!opValid(t, op)) continue;
        for (uint64_t count : quickSizes)
          for (int inPlace = 0; inPlace < 2; inPlace++)
            for (int shift = 0; shift < 2; shift++) {
              if (opt.quick && shift && count != 1025) continue;
              CollSpec s;
              s.func = f;
              s.type = t;
              s.op = op;
              s.count = count;
              s.root = int(seed % n);
              s.inPlace = inPlace;
              s.sendMisalign = s.recvMisalign = shift ? dataTypeBytes(t) : 0;
              if (shift && !reduces && count == 1025) s.recvMisalign = 3;  // copies: any byte offset
              one(s);
            }
      }
  // All sizes for representative (type, op) pairs, and chunk sizes the planner might not pick.
  const int reps[][2] = {{kFloat32, kRedSum}, {kInt8, kRedMax}, {kFloat16, kRedSum}, {kBfloat16, kRedPreMulSum},
                         {kFloat8e4m3, kRedSum}, {kUint64, kRedSumPostDiv}, {kInt32, kRedProd}, {kFloat64, kRedMin}};
  for (int f : funcs)
    for (auto& tp : reps) {
      bool reduces = f == kFuncAllReduce || f == kFuncReduceScatter || f == kFuncReduce;
      if (!reduces && tp[1] != kRedSum) continue;
      for (uint64_t count : opt.quick ? quickSizes : fullSizes)
        for (int inPlace = 0; inPlace < 2; inPlace++)
          for (uint64_t chunk : {~0ull, 0ull, 5ull, 64ull}) {
            if (opt.quick && chunk == 5) continue;
            CollSpec s;
            s.func = f;
            s.type = tp[0];
            s.op = tp[1];
            s.count = count;
            s.root = n - 1;
            s.inPlace = inPlace;
            s.chunkElems = chunk;
            one(s);
          }
    }
  // PreMulSum with the scalar in device memory.
  for (int f : {kFuncAllReduce, kFuncReduceScatter, kFuncReduce})
    for (int t : {kFloat32, kFloat16, kInt32}) {
      CollSpec s;
      s.func = f;
      s.type = t;
      s.op = kRedPreMulSum;
      s.count = 4099;
      s.scalarOnDevice = true;
      one(s);
    }
  // Several items per channel in one launch, up to kMaxWorksPerChannel.
  if (!fab.broken()) {
    std::vector<CollSpec> batch;
    for (int i = 0; i < kMaxWorksPerChannel; i++) {
      CollSpec s;
      s.func = funcs[i % 5];
      s.type = (i * 5) % kNumDataTypes;
      s.op = (s.func == kFuncBroadcast || s.func == kFuncAllGather) ? kRedSum : (i % 4);
      s.count = 1000 + 37 * i;
      s.root = i % n;
      s.inPlace = i % 3 == 0;
      batch.push_back(s);
    }
    std::string e = run.runColls(batch, seed++);
    rep.add(std::string(name) + " batch", "32 items per channel", e);
  }
  // Large messages.
  if (large) {
    const int bigTypes[][2] = {{kFloat32, kRedSum}, {kFloat16, kRedSum}, {kBfloat16, kRedPreMulSum}, {kInt8, kRedMax}};
    for (int f : funcs)
      for (auto& tp : bigTypes) {
        bool reduces = f == kFuncAllReduce || f == kFuncReduceScatter || f == kFuncReduce;
        if (!reduces && tp[1] != kRedSum) continue;
        CollSpec s;
        s.func = f;
        s.type = tp[0];
        s.op = tp[1];
        uint64_t bytes = 64ull << 20;
        s.count = bytes / dataTypeBytes(tp[0]) / (f == kFuncAllGather || f == kFuncReduceScatter ? n : 1) + 1;
        one(s);
      }
  }
  // SendRecv patterns.
  for (int pattern = 0; pattern < 2; pattern++)
    for (int t : {kInt8, kFloat32, kFloat64})
      for (uint64_t count : {1ull, 17ull, 1025ull, 65537ull, 1000003ull})
        for (int shift = 0; shift < 2; shift++) {
          if (fab.broken()) break;
          P2pSpec s;
          s.pattern = pattern;
          s.type = t;
          s.count = count;
          s.sendMisalign = shift ? 1 : 0;
          s.recvMisalign = shift ? 5 : 0;
          char what[128];
          std::snprintf(what, sizeof what, "%s %s count=%llu mis=%u/%u", pattern ? "alltoall" : "ring-shift", typeName(t),
                        (unsigned long long)count, s.sendMisalign, s.recvMisalign);
          rep.add(std::string(name) + " SendRecv", what, run.runP2p(s, seed++));
        }
  if (fab.broken()) rep.add(std::string(name) + " fabric", "layout", "a hang broke the fabric; later cases skipped");
}

void correctness(const Options& opt, Report& rep) {
  const int g = gpuCount();
  std::vector<FabricConfig> layouts;
  auto add = [&](int nRanks, int nGpus, int nCh, uint32_t step) {
    FabricConfig c;
    c.nRanks = nRanks;
    c.nGpus = nGpus;
    c.nChannels = nCh;
    c.stepBytes = step;
    layouts.push_back(c);
  };
  add(1, 1, 4, 64 << 10);
  if (g >= 2) {
    add(2, 2, 4, 64 << 10);
    add(2, 2, 8, 512 << 10);
    add(4, 2, 4, 128 << 10);
  } else {
    add(2, 1, 4, 64 << 10);
  }
  add(3, 1, 3, 32 << 10);
  add(2, 1, 2, 4 << 10);
  // LL/LL128 steps: the defaults on the first layouts, small ones (many slot wraps per item, and
  // LL128 segments cut short) on the last two.
  layouts[layouts.size() - 2].llStepBytes = 4096;
  layouts[layouts.size() - 2].ll128StepBytes = 16384;
  layouts.back().llStepBytes = 256;
  layouts.back().ll128StepBytes = 4096;
  for (int proto : opt.protos)
    for (const auto& c : layouts) runLayout(c, opt, rep, proto);
}

// nccl-tests' definitions: algbw = S / t; busbw = algbw * factor.
void bandwidth(const Options& opt) {
  if (gpuCount() < 2) {
    std::printf("bandwidth mode needs 2 GPUs\n");
    return;
  }
  const int maxCh = 32;
  FabricConfig cfg;
  cfg.nRanks = 2;
  cfg.nGpus = 2;
  cfg.nChannels = maxCh;
  cfg.stepBytes = 512 << 10;
  Fabric fab(cfg);
  Runner run(fab, size_t(1) << 30);
  std::printf("%-14s %12s %4s %10s %10s %10s\n", "collective", "bytes", "ch", "time(us)", "algbw", "busbw");
  const int funcs[] = {kFuncAllReduce, kFuncAllGather, kFuncReduceScatter, kFuncBroadcast, kFuncReduce};
  for (int f : funcs)
    for (uint64_t bytes = 64ull << 20; bytes <= (1ull << 30); bytes *= 4)
      for (int nCh : opt.channels) {
        if (nCh > maxCh) continue;
        CollSpec s;
        s.func = f;
        s.type = kFloat32;
        s.op = kRedSum;
        s.count = bytes / 4 / (f == kFuncAllGather || f == kFuncReduceScatter ? 2 : 1);
        std::vector<char*> sb = {run.sendArena(0), run.sendArena(1)}, rb = {run.recvArena(0), run.recvArena(1)};
        // Only the first nCh channels get work.
        LaunchWorks works(2, std::vector<std::vector<DevWork>>(maxCh));
        for (int r = 0; r < 2; r++)
          for (int c = 0; c < nCh; c++) {
            ElemRange part = channelPart(s.count, nCh, c, 4);
            if (part.count == 0) continue;
            DevWork w{};
            w.func = (uint8_t)f;
            w.algo = kAlgoRing;
            w.proto = kProtoSimple;
            w.redOp = kRedSum;
            w.dataType = kFloat32;
            w.sendBuff = sb[r];
            w.recvBuff = rb[r];
            w.count = s.count;
            w.chanOffset = part.offset;
            w.chanCount = part.count;
            w.chunkElems = (uint32_t)recommendedChunkElems(f, 2, part.count, 4, cfg.stepBytes);
            w.sendPeer = w.recvPeer = -1;
            works[r][c].push_back(w);
          }
        std::string why;
        fab.launchAsync(works);
        fab.relaunch();
        if (!fab.waitAll(120, &why)) {
          std::printf("%s: %s\n", funcName(f), why.c_str());
          return;
        }
        cudaEvent_t start[2], stop[2];
        for (int r = 0; r < 2; r++) {
          HARNESS_CUDA(cudaSetDevice(fab.device(r)));
          HARNESS_CUDA(cudaEventCreate(&start[r]));
          HARNESS_CUDA(cudaEventCreate(&stop[r]));
          HARNESS_CUDA(cudaEventRecord(start[r], fab.stream(r)));
        }
        for (int i = 0; i < opt.iters; i++) fab.relaunch();
        for (int r = 0; r < 2; r++) {
          HARNESS_CUDA(cudaSetDevice(fab.device(r)));
          HARNESS_CUDA(cudaEventRecord(stop[r], fab.stream(r)));
        }
        if (!fab.waitAll(600, &why)) {
          std::printf("%s: %s\n", funcName(f), why.c_str());
          return;
        }
        float ms = 0;
        for (int r = 0; r < 2; r++) {
          float m = 0;
          HARNESS_CUDA(cudaEventElapsedTime(&m, start[r], stop[r]));
          ms = std::max(ms, m);
          cudaEventDestroy(start[r]);
          cudaEventDestroy(stop[r]);
        }
        double t = ms / 1e3 / opt.iters;
        double S = double(f == kFuncAllGather || f == kFuncReduceScatter ? s.count * 2 : s.count) * 4;
        double algbw = S / t / 1e9;
        double factor = f == kFuncAllReduce ? 2.0 * (2 - 1) / 2 : (f == kFuncAllGather || f == kFuncReduceScatter) ? 0.5 : 1.0;
        std::printf("%-14s %12llu %4d %10.1f %10.2f %10.2f\n", funcName(f), (unsigned long long)S, nCh, t * 1e6, algbw,
                    algbw * factor);
        std::fflush(stdout);
      }
}

// A rank waits for data that never comes; the abort flag must end its kernel.
void abortTest(Report& rep, int proto) {
  const int g = gpuCount();
  FabricConfig cfg;
  cfg.nRanks = 2;
  cfg.nGpus = g >= 2 ? 2 : 1;
  cfg.nChannels = 2;
  cfg.stepBytes = 64 << 10;
  Fabric fab(cfg);
  Runner run(fab, 1 << 20);
  LaunchWorks works(2, std::vector<std::vector<DevWork>>(cfg.nChannels));
  for (int c = 0; c < cfg.nChannels; c++) {
    DevWork w{};
    w.func = kFuncSendRecv;
    w.proto = (uint8_t)proto;
    w.dataType = kUint8;
    w.sendPeer = -1;
    w.recvPeer = 1;
    w.recvBuff = run.recvArena(0);
    w.recvOffset = c * 4096;
    w.recvCount = 4096;
    w.chunkElems = proto == kProtoSimple ? 1024 : 0;
    works[0][c].push_back(w);
  }
  fab.launchAsync(works);  // rank 1 has nothing to do: it never sends
  std::this_thread::sleep_for(std::chrono::milliseconds(100));
  HARNESS_CUDA(cudaSetDevice(fab.device(0)));
  std::string e = cudaStreamQuery(fab.stream(0)) == cudaErrorNotReady ? "" : "kernel finished without data";
  auto t0 = std::chrono::steady_clock::now();
  fab.setAbort(0, 1);
  std::string why;
  bool ok = fab.waitAll(5, &why);
  double ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
  if (e.empty() && !ok) e = "kernel did not exit after the abort flag: " + why;
  std::printf("abort (%s): kernel exited %.1f ms after the flag was raised\n", protoName(proto), ms);
  rep.add(std::string("abort ") + protoName(proto), "receiver waiting for a silent peer", e);
}

}  // namespace

int main(int argc, char** argv) {
  Options opt;
  for (int i = 1; i < argc; i++) {
    std::string a = argv[i];
    if (a == "--mode" && i + 1 < argc) opt.mode = argv[++i];
    else if (a == "--quick") opt.quick = true;
    else if (a == "--large") opt.large = true;
    else if (a == "--iters" && i + 1 < argc) opt.iters = std::atoi(argv[++i]);
    else if (a == "--proto" && i + 1 < argc) {
      std::string p = argv[++i];
      if (p == "simple") opt.protos = {kProtoSimple};
      else if (p == "ll") opt.protos = {kProtoLL};
      else if (p == "ll128") opt.protos = {kProtoLL128};
      else if (p == "all") opt.protos = {kProtoSimple, kProtoLL, kProtoLL128};
      else {
        std::printf("unknown protocol %s (simple|ll|ll128|all)\n", p.c_str());
        return 2;
      }
    }
    else if (a == "--channels" && i + 1 < argc) {
      opt.channels.clear();
      for (char* tok = std::strtok(argv[++i], ","); tok; tok = std::strtok(nullptr, ",")) opt.channels.push_back(std::atoi(tok));
    } else {
      std::printf("usage: %s [--mode correctness|bandwidth|abort|all] [--proto simple|ll|ll128|all] [--quick] [--large] "
                  "[--iters N] [--channels a,b]\n", argv[0]);
      return 2;
    }
  }
  std::printf("weft kernel harness: %d GPU(s)\n", gpuCount());
  for (int p : opt.protos) {
    if (!kernelFunction((Proto)p)) {
      std::printf("protocol %s is not built\n", protoName(p));
      return 2;
    }
    std::printf("  %s kernel: %d threads, %zu B static smem\n", protoName(p), kernelThreads((Proto)p),
                kernelStaticSmem((Proto)p));
  }
  Report rep;
  if (opt.mode == "correctness" || opt.mode == "all") correctness(opt, rep);
  if (opt.mode == "abort" || opt.mode == "all")
    for (int p : opt.protos) abortTest(rep, p);
  if (opt.mode == "bandwidth" || opt.mode == "all") bandwidth(opt);
  rep.print();
  int f = rep.failures();
  std::printf("%s: %d failure(s)\n", f ? "FAILED" : "PASSED", f);
  return f ? 1 : 0;
}
