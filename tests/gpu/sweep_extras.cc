// Tests beyond the case sweep, part 1: communicator queries, back-to-back ordering, ncclMemAlloc'd
// buffers; and the helpers the other extras use.
#include <algorithm>
#include <chrono>
#include <cinttypes>
#include <cstdio>
#include <cstdlib>
#include <functional>
#include <string>
#include <thread>
#include <vector>

#include "sweep_host.h"

namespace sweep {

uint64_t roundUp(uint64_t v, uint64_t a) { return (v + a - 1) / a * a; }

bool syncAndCopy(RankCtx& x, int slots, std::string* why) {
  cudaSetDevice(x.dev);
  cudaError_t e = cudaStreamSynchronize(x.stream);
  if (e == cudaSuccess) e = cudaMemcpy(x.hRes, x.dRes, sizeof(CheckResult) * slots, cudaMemcpyDeviceToHost);
  if (e != cudaSuccess) {
    *why = "rank " + std::to_string(x.rank) + ": CUDA error " + cudaGetErrorString(e);
    x.fatal = true;
    return false;
  }
  return true;
}

namespace {

void testQueries(std::vector<RankCtx*>& L) {
  int version = 0;
  const ncclResult_t vr = ncclGetVersion(&version);
  std::string bad;
  for (RankCtx* x : L) {
    int count = -1, rank = -1, dev = -1;
    const ncclResult_t a = ncclCommCount(x->comm, &count);
    const ncclResult_t b = ncclCommUserRank(x->comm, &rank);
    const ncclResult_t c = ncclCommCuDevice(x->comm, &dev);
    if (a != ncclSuccess || b != ncclSuccess || c != ncclSuccess || count != x->nranks || rank != x->rank ||
        dev != x->dev) {
      bad += " rank " + std::to_string(x->rank) + ": count " + std::to_string(count) + " rank " +
             std::to_string(rank) + " device " + std::to_string(dev) + " (results " + std::to_string(a) + "/" +
             std::to_string(b) + "/" + std::to_string(c) + ");";
    }
  }
  const bool versionOk = vr == ncclSuccess && version / 10000 == NCCL_MAJOR && version >= NCCL_VERSION(2, 19, 0);
  addExtraAll(L, "ncclGetVersion, ncclCommCount/UserRank/CuDevice", bad.empty() && versionOk ? 1 : 0,
              "version " + std::to_string(version) + (bad.empty() ? "; queries match" : ";" + bad));

  // CUDA keeps the per-thread stack limit for every thread the GPU can hold, so a library whose
  // kernels need more than CUDA's default limit raises it for the whole process: on H200 2 KiB
  // instead of 1 KiB costs about 290 MiB of device memory (tools/stack_memory.cu). The sweep's own
  // kernels need far less (loadSweepKernels reserves it before the communicator exists).
  constexpr size_t kCudaDefaultStack = 1024;
  std::string stacks;
  bool stackOk = true;
  for (RankCtx* x : L) {
    size_t limit = 0;
    cudaSetDevice(x->dev);
    const cudaError_t e = cudaDeviceGetLimit(&limit, cudaLimitStackSize);
    stackOk = stackOk && e == cudaSuccess && limit <= kCudaDefaultStack;
    stacks += " rank " + std::to_string(x->rank) + ": " +
              (e == cudaSuccess ? std::to_string(limit) + " B" : std::string(cudaGetErrorString(e))) + ";";
  }
  addExtraAll(L, "per-thread stack limit after creation within CUDA's default of 1024 B", stackOk ? 1 : 0, stacks.substr(1));
}

// 40 different collectives on distinct buffers, queued without any synchronisation, checked at the
// end; then 100 dependent in-place allreduces on one buffer (each multiplies the data by nranks).
void testOrdering(std::vector<RankCtx*>& L, const Options& o) {
  static const int kColls[] = {kAllReduce,  kBroadcast,    kReduce,      kAllGather, kReduceScatter,
                               kAlltoAll,   kSendRecvRing, kGather,      kScatter,   kSendRecvMany};
  static const int kTypes[] = {ncclFloat, ncclInt32, ncclBfloat16, ncclUint8, ncclInt64, ncclHalf};
  static const int kOps[] = {kSum, kMax, kMin, kProd, kAvg};
  constexpr int kCount = 40;
  const int n = L[0]->nranks;
  std::vector<Case> cs;
  std::vector<uint64_t> offs;
  uint64_t off = 0;
  for (int i = 0; i < kCount; ++i) {
    Case c;
    c.coll = kColls[i % 10];
    c.type = kTypes[i % 6];
    c.op = collIsReduction(c.coll) ? kOps[i % 5] : kNoOp;
    c.count = 1000 + 61 * static_cast<uint64_t>(i);
    c.root = i % n;
    c.seed = o.seed * 7919 + 1000 + i;
    const uint64_t need = roundUp(areaBytesFor(c, n), 256);
    if (off + need > L[0]->areaBytes) break;
    cs.push_back(c);
    offs.push_back(off);
    off += need;
  }
  std::vector<std::vector<Placement>> pl(L.size(), std::vector<Placement>(cs.size()));
  for (size_t l = 0; l < L.size(); ++l) {
    RankCtx& x = *L[l];
    cudaSetDevice(x.dev);
    cudaMemsetAsync(x.dRes, 0, sizeof(CheckResult) * cs.size(), x.stream);
    for (size_t i = 0; i < cs.size(); ++i) {
      pl[l][i] = place(cs[i], x.rank, n, x.sendBase + offs[i], x.recvBase + offs[i]);
      prepareCase(cs[i], pl[l][i], paramsFor(cs[i], x.rank, n), x.stream, x.recvBase + offs[i]);
    }
  }
  std::string why;
  for (size_t i = 0; i < cs.size() && why.empty(); ++i) {
    size_t l = 0;
    const ncclResult_t r = groupCall(L, [&](RankCtx& x) {
      ncclRedOp_t op;
      bool created;
      makeOp(cs[i], x, x.comm, &op, &created);
      return issueCase(cs[i], pl[l++][i], op, x.rank, n, x.comm, x.stream);
    });
    if (r != ncclSuccess) why = describe(cs[i]) + " returned " + ncclGetErrorString(r);
  }
  bool pass = why.empty();
  if (pass) {
    for (size_t l = 0; l < L.size(); ++l) {
      RankCtx& x = *L[l];
      cudaSetDevice(x.dev);
      for (size_t i = 0; i < cs.size(); ++i) {
        checkCase(cs[i], pl[l][i], paramsFor(cs[i], x.rank, n), x.dRes + i, x.stream, x.recvBase + offs[i]);
      }
    }
    for (size_t l = 0; l < L.size() && pass; ++l) {
      RankCtx& x = *L[l];
      if (!syncAndCopy(x, static_cast<int>(cs.size()), &why)) {
        pass = false;
        break;
      }
      for (size_t i = 0; i < cs.size(); ++i) {
        if (!evaluate(x, cs[i], x.hRes[i], "ordering: ")) {
          pass = false;
          why = "rank " + std::to_string(x.rank) + ": " + describe(cs[i]) + " wrong";
        }
      }
    }
  }
  addExtraAll(L, "ordering: mixed collectives back-to-back, one sync", pass ? 1 : 0,
              pass ? std::to_string(cs.size()) + " operations checked" : why);
  watchNote(L[0]->rank, "extras: ordering part 1 done");

  // Dependent chain: x <- allreduce(x) in place, kChain times. Result = sum * nranks^(kChain-1), wrapping.
  constexpr int kChain = 100;
  Case ch;
  ch.coll = kAllReduce;
  ch.type = ncclUint32;
  ch.op = kSum;
  ch.count = 4099;
  ch.inplace = 1;
  ch.seed = o.seed * 104729 + 77;
  uint64_t mul = 1;
  for (int i = 1; i < kChain; ++i) mul *= static_cast<uint64_t>(n);
  std::vector<Placement> cpl(L.size());
  for (size_t l = 0; l < L.size(); ++l) {
    RankCtx& x = *L[l];
    cudaSetDevice(x.dev);
    cudaMemsetAsync(x.dRes, 0, sizeof(CheckResult), x.stream);
    cpl[l] = place(ch, x.rank, n, x.sendBase, x.recvBase);
    prepareCase(ch, cpl[l], paramsFor(ch, x.rank, n), x.stream, x.recvBase);
  }
  why.clear();
  for (int i = 0; i < kChain && why.empty(); ++i) {
    size_t l = 0;
    const ncclResult_t r = groupCall(L, [&](RankCtx& x) {
      return issueCase(ch, cpl[l++], ncclSum, x.rank, n, x.comm, x.stream);
    });
    if (r != ncclSuccess) why = std::string("allreduce #") + std::to_string(i) + " returned " + ncclGetErrorString(r);
  }
  pass = why.empty();
  for (size_t l = 0; l < L.size() && pass; ++l) {
    RankCtx& x = *L[l];
    cudaSetDevice(x.dev);
    CaseParams p = paramsFor(ch, x.rank, n);
    p.coll = kChainAllReduce;
    p.mulFactor = mul;
    checkCase(ch, cpl[l], p, x.dRes, x.stream, x.recvBase);
    if (!syncAndCopy(x, 1, &why) || !evaluate(x, ch, x.hRes[0], "ordering chain: ")) {
      pass = false;
      if (why.empty()) why = "rank " + std::to_string(x.rank) + ": wrong values after the chain";
    }
  }
  addExtraAll(L, "ordering: 100 dependent in-place allreduces", pass ? 1 : 0,
              pass ? "uint32 x4099, result = sum * nranks^99 (mod 2^32)" : why);
}

void testMemAlloc(std::vector<RankCtx*>& L) {
  constexpr uint64_t kBytes = 16ull << 20;
  std::vector<Member> m = membersOf(L);
  std::string why;
  for (Member& mb : m) {
    cudaSetDevice(mb.x->dev);
    void* s = nullptr;
    void* r = nullptr;
    ncclResult_t e = ncclMemAlloc(&s, kBytes);
    if (e == ncclSuccess) e = ncclMemAlloc(&r, kBytes);
    if (e != ncclSuccess) why = std::string("ncclMemAlloc: ") + ncclGetErrorString(e) + ": " + ncclGetLastError(nullptr);
    mb.sendArea = static_cast<char*>(s);
    mb.recvArea = static_cast<char*>(r);
  }
  bool pass = why.empty();
  if (pass) {
    Case a;
    a.coll = kAllReduce;
    a.type = ncclFloat;
    a.op = kSum;
    a.count = 1 << 20;
    a.seed = 4242;
    Case g;
    g.coll = kAllGather;
    g.type = ncclInt8;
    g.count = (1 << 20) + 1;
    g.recvOff = 1;
    g.seed = 4343;
    pass = runCaseOn(m, a, false, &why) && runCaseOn(m, g, false, &why);
  }
  for (Member& mb : m) {
    cudaSetDevice(mb.x->dev);
    if (mb.sendArea && ncclMemFree(mb.sendArea) != ncclSuccess && why.empty()) why = "ncclMemFree failed";
    if (mb.recvArea && ncclMemFree(mb.recvArea) != ncclSuccess && why.empty()) why = "ncclMemFree failed";
  }
  pass = pass && why.empty();
  addExtraAll(L, "ncclMemAlloc buffers: allreduce + allgather, ncclMemFree", pass ? 1 : 0,
              pass ? "float x 2^20 sum, int8 x (2^20+1) gather at an odd address" : why);
}

}  // namespace

std::vector<Member> membersOf(std::vector<RankCtx*>& L, uint64_t areaOffset) {
  std::vector<Member> m;
  for (RankCtx* x : L) m.push_back(Member{x, x->comm, x->rank, x->nranks, x->sendBase + areaOffset,
                                          x->recvBase + areaOffset});
  return m;
}

ncclResult_t waitComm(ncclComm_t comm, double timeoutSec) {
  const double deadline = nowSec() + timeoutSec;
  while (true) {
    ncclResult_t state = ncclInProgress;
    const ncclResult_t r = ncclCommGetAsyncError(comm, &state);
    if (r != ncclSuccess) return r;
    if (state != ncclInProgress) return state;
    if (nowSec() > deadline) return ncclInProgress;
    std::this_thread::sleep_for(std::chrono::microseconds(200));
  }
}

void addExtraAll(std::vector<RankCtx*>& L, const std::string& name, int pass, const std::string& detail) {
  for (RankCtx* x : L) x->tally.addExtra(name, pass, detail);
}

bool runCaseOn(std::vector<Member>& M, const Case& c, bool nonblocking, std::string* why) {
  std::vector<Placement> pl(M.size());
  std::vector<CaseParams> ps(M.size());
  std::vector<ncclRedOp_t> ops(M.size(), ncclSum);
  std::vector<int> created(M.size(), 0);
  for (size_t i = 0; i < M.size(); ++i) {
    Member& m = M[i];
    cudaSetDevice(m.x->dev);
    pl[i] = place(c, m.rank, m.nranks, m.sendArea, m.recvArea);
    ps[i] = paramsFor(c, m.rank, m.nranks);
    cudaMemsetAsync(m.x->dRes, 0, sizeof(CheckResult), m.x->stream);
    prepareCase(c, pl[i], ps[i], m.x->stream, m.recvArea);
    bool made = false;
    const ncclResult_t r = makeOp(c, *m.x, m.comm, &ops[i], &made);
    created[i] = made;
    if (r != ncclSuccess) {
      *why = "creating the reduction op: " + std::string(ncclGetErrorString(r));
      return false;
    }
  }
  const bool grouped = M.size() > 1;
  ncclResult_t res = grouped ? ncclGroupStart() : ncclSuccess;
  for (size_t i = 0; i < M.size() && res == ncclSuccess; ++i) {
    cudaSetDevice(M[i].x->dev);
    const ncclResult_t r = issueCase(c, pl[i], ops[i], M[i].rank, M[i].nranks, M[i].comm, M[i].x->stream);
    if (r != ncclSuccess && !(nonblocking && r == ncclInProgress)) res = r;
  }
  if (grouped) {
    const ncclResult_t r = ncclGroupEnd();
    if (res == ncclSuccess && r != ncclSuccess && !(nonblocking && r == ncclInProgress)) res = r;
  }
  if (res == ncclSuccess && nonblocking) {
    for (Member& m : M) {
      const ncclResult_t st = waitComm(m.comm, 120);
      if (st != ncclSuccess && res == ncclSuccess) res = st;
    }
  }
  for (size_t i = 0; i < M.size(); ++i) {
    if (created[i]) ncclRedOpDestroy(ops[i], M[i].comm);
  }
  if (res != ncclSuccess) {
    *why = describe(c) + ": the NCCL call returned " + ncclGetErrorString(res) + ": " + ncclGetLastError(nullptr);
    return false;
  }
  bool pass = true;
  for (size_t i = 0; i < M.size(); ++i) {
    Member& m = M[i];
    cudaSetDevice(m.x->dev);
    checkCase(c, pl[i], ps[i], m.x->dRes, m.x->stream, m.recvArea);
    if (!syncAndCopy(*m.x, 1, why)) return false;
    if (!evaluate(*m.x, c, m.x->hRes[0], "")) {
      pass = false;
      *why = "rank " + std::to_string(m.rank) + " of " + std::to_string(m.nranks) + ": " + describe(c) + " wrong";
    }
  }
  return pass;
}

const char* const kExtraGroups[] = {"ordering", "graphs", "memalloc", "split", "nonblocking", "abort", "args"};
const int kNumExtraGroups = (int)(sizeof(kExtraGroups) / sizeof(kExtraGroups[0]));

void runExtras(std::vector<RankCtx*>& L, const Options& o, IdChannel& ids, bool threadedRanks) {
  const int who = L[0]->rank;
  auto wanted = [&o](const char* group) {
    return o.extraGroups.empty() ||
           std::find(o.extraGroups.begin(), o.extraGroups.end(), std::string(group)) != o.extraGroups.end();
  };
  // Every group, in order, with the note the watchdog prints if it hangs there.
  const struct {
    const char* group;
    const char* note;
    std::function<void()> run;
  } groups[] = {
      {"ordering", "extras: ordering", [&] {
         testQueries(L);
         testOrdering(L, o);
       }},
      {"graphs", "extras: CUDA graphs", [&] { testGraphs(L, o, threadedRanks); }},
      {"memalloc", "extras: ncclMemAlloc", [&] { testMemAlloc(L); }},
      {"split", "extras: ncclCommSplit", [&] { testSplit(L); }},
      {"nonblocking", "extras: non-blocking init", [&] { testNonBlockingInit(L, ids); }},
      {"abort", "extras: abort", [&] { testAbort(L, o); }},
      {"args", "extras: argument checks", [&] { testArgumentChecks(L); }},
  };
  static_assert(sizeof(groups) / sizeof(groups[0]) == sizeof(kExtraGroups) / sizeof(kExtraGroups[0]),
                "kExtraGroups names every group");
  for (const auto& g : groups) {
    if (!wanted(g.group)) continue;
    watchNote(who, "%s", g.note);
    g.run();
  }
  watchNote(who, "extras: done");
}

}  // namespace sweep
