// Per-rank state and the case runner: place buffers, poison, fill, issue, check, evaluate.
#include <algorithm>
#include <cinttypes>
#include <cstdio>
#include <cstring>
#include <string>
#include <vector>

#include "sweep_host.h"

namespace sweep {

namespace {

constexpr int kSlots = kSweepBatchCases;  // result slots per rank; the CUDA graph extra checks 300
constexpr uint64_t kBatchBytes = 4ull << 30;    // or this many bytes of regions, whichever comes first

std::string formatElem(int type, uint64_t bits, double val, bool isFloat) {
  char buf[96];
  const TypeInfo& t = typeInfo(type);
  if (isFloat) {
    std::snprintf(buf, sizeof(buf), "%.9g (0x%0*" PRIx64 ")", val, t.bytes * 2, bits);
  } else if (t.isSigned) {
    const int shift = 64 - 8 * t.bytes;
    const int64_t v = static_cast<int64_t>(bits << shift) >> shift;  // sign-extend
    std::snprintf(buf, sizeof(buf), "%" PRId64 " (0x%0*" PRIx64 ")", v, t.bytes * 2, bits);
  } else {
    std::snprintf(buf, sizeof(buf), "%" PRIu64 " (0x%0*" PRIx64 ")", bits, t.bytes * 2, bits);
  }
  return buf;
}

}  // namespace

bool setupRank(RankCtx& x, const Options& o, uint64_t areaBytes) {
  x.maxPrint = o.maxPrint;
  x.areaBytes = areaBytes;
  auto cudaOk = [&](cudaError_t e, const char* what) {
    if (e == cudaSuccess) return true;
    std::printf("FAIL rank %d: %s: %s\n", x.rank, what, cudaGetErrorString(e));
    x.fatal = true;
    return false;
  };
  if (!cudaOk(cudaSetDevice(x.dev), "cudaSetDevice")) return false;
  if (!cudaOk(cudaStreamCreateWithFlags(&x.stream, cudaStreamNonBlocking), "cudaStreamCreate")) return false;
  void* s = nullptr;
  void* r = nullptr;
  if (o.ncclMemAlloc) {
    const ncclResult_t a = ncclMemAlloc(&s, areaBytes);
    const ncclResult_t b = a == ncclSuccess ? ncclMemAlloc(&r, areaBytes) : a;
    if (b != ncclSuccess) {
      std::printf("FAIL rank %d: ncclMemAlloc(%" PRIu64 " bytes): %s: %s\n", x.rank, areaBytes, ncclGetErrorString(b),
                  ncclGetLastError(nullptr));
      x.fatal = true;
      return false;
    }
    x.memAllocated = true;
  } else {
    if (!cudaOk(cudaMalloc(&s, areaBytes), "cudaMalloc(send area)")) return false;
    if (!cudaOk(cudaMalloc(&r, areaBytes), "cudaMalloc(recv area)")) return false;
  }
  x.sendBase = static_cast<char*>(s);
  x.recvBase = static_cast<char*>(r);
  x.resSlots = kSlots;
  if (!cudaOk(cudaMalloc(&x.dRes, sizeof(CheckResult) * kSlots), "cudaMalloc(results)")) return false;
  if (!cudaOk(cudaMallocHost(&x.hRes, sizeof(CheckResult) * kSlots), "cudaMallocHost(results)")) return false;
  if (!cudaOk(cudaMalloc(&x.dScalars, 8 * kNumTypes), "cudaMalloc(scalars)")) return false;
  if (!cudaOk(cudaMemsetAsync(x.dScalars, 0, 8 * kNumTypes, x.stream), "cudaMemset(scalars)")) return false;
  for (int t = 0; t < kNumTypes; ++t) {
    if (typeInfo(t).needsSm90 && !o.fp8) continue;
    if (!cudaOk(launchWriteScalar(static_cast<char*>(x.dScalars) + 8 * t, t, preMulScalar(t), x.stream),
                "write PreMulSum scalar")) {
      return false;
    }
  }
  if (!cudaOk(cudaMemcpyAsync(x.hScalars, x.dScalars, 8 * kNumTypes, cudaMemcpyDeviceToHost, x.stream),
              "copy scalars")) {
    return false;
  }
  return cudaOk(cudaStreamSynchronize(x.stream), "setup sync");
}

void teardownRank(RankCtx& x) {
  cudaSetDevice(x.dev);
  if (x.stream) cudaStreamSynchronize(x.stream);
  if (x.memAllocated) {
    if (x.sendBase) ncclMemFree(x.sendBase);
    if (x.recvBase) ncclMemFree(x.recvBase);
  } else {
    if (x.sendBase) cudaFree(x.sendBase);
    if (x.recvBase) cudaFree(x.recvBase);
  }
  if (x.dRes) cudaFree(x.dRes);
  if (x.hRes) cudaFreeHost(x.hRes);
  if (x.dScalars) cudaFree(x.dScalars);
  if (x.stream) cudaStreamDestroy(x.stream);
  x.sendBase = x.recvBase = nullptr;
  x.dRes = nullptr;
  x.hRes = nullptr;
  x.dScalars = nullptr;
  x.stream = nullptr;
}

Placement place(const Case& c, int rank, int nranks, char* sendArea, char* recvArea) {
  Placement pl;
  const uint64_t es = typeInfo(c.type).bytes;
  pl.inCount = inCountOf(c.coll, c.count, nranks);
  pl.outCount = outCountOf(c.coll, c.count, nranks);
  pl.frontBytes = kPad + static_cast<uint64_t>(c.recvOff);
  pl.region = recvArea + pl.frontBytes;
  if (c.inplace) {
    pl.regionBytes = std::max(pl.inCount, pl.outCount) * es;
    const uint64_t mine = static_cast<uint64_t>(rank) * c.count * es;
    switch (c.coll) {
      case kAllGather:
      case kGather:  // sendbuff = recvbuff + rank * count
        pl.recv = pl.region;
        pl.send = pl.region + mine;
        break;
      case kReduceScatter:
      case kScatter:  // recvbuff = sendbuff + rank * count
        pl.send = pl.region;
        pl.recv = pl.region + mine;
        break;
      default:
        pl.send = pl.recv = pl.region;
        break;
    }
    // Inputs of non-roots are not read by these; leave their buffers poisoned.
    const bool rootOnlyInput = c.coll == kBroadcast || c.coll == kBcast || c.coll == kScatter;
    pl.fillInput = !rootOnlyInput || rank == c.root;
    pl.checkInput = false;
  } else {
    pl.recv = pl.region;
    pl.regionBytes = pl.outCount * es;
    pl.send = sendArea + kPad + static_cast<uint64_t>(c.sendOff);
    pl.fillInput = true;
    pl.checkInput = true;
  }
  return pl;
}

CaseParams paramsFor(const Case& c, int rank, int nranks) {
  CaseParams p;
  p.coll = c.coll;
  p.op = c.op;
  p.gen = genFor(c.coll, c.op);
  p.type = c.type;
  p.rank = rank;
  p.nranks = nranks;
  p.root = c.root;
  p.inplace = c.inplace;
  p.count = c.count;
  p.seed = c.seed;
  p.scalar = preMulScalar(c.type);
  p.tolFactor = toleranceFactor(c.type, c.op, nranks);
  return p;
}

cudaError_t prepareCase(const Case& c, const Placement& pl, const CaseParams& p, cudaStream_t s, char* recvArea) {
  cudaError_t e = cudaMemsetAsync(recvArea, kPoison, pl.frontBytes + pl.regionBytes + kGuard, s);
  if (e == cudaSuccess && pl.fillInput) e = launchFill(pl.send, pl.inCount, p, s);
  return e;
}

ncclResult_t issueCase(const Case& c, const Placement& pl, ncclRedOp_t op, int rank, int nranks, ncclComm_t comm,
                       cudaStream_t s) {
  const ncclDataType_t dt = static_cast<ncclDataType_t>(c.type);
  const uint64_t n = c.count;
  const uint64_t bytes = n * typeInfo(c.type).bytes;
  switch (c.coll) {
    case kAllReduce: return ncclAllReduce(pl.send, pl.recv, n, dt, op, comm, s);
    case kBroadcast: return ncclBroadcast(pl.send, pl.recv, n, dt, c.root, comm, s);
    case kBcast: return ncclBcast(pl.recv, n, dt, c.root, comm, s);
    case kReduce: return ncclReduce(pl.send, pl.recv, n, dt, op, c.root, comm, s);
    case kAllGather: return ncclAllGather(pl.send, pl.recv, n, dt, comm, s);
    case kReduceScatter: return ncclReduceScatter(pl.send, pl.recv, n, dt, op, comm, s);
    case kAlltoAll: return ncclAlltoAll(pl.send, pl.recv, n, dt, comm, s);
    case kGather: return ncclGather(pl.send, pl.recv, n, dt, c.root, comm, s);
    case kScatter: return ncclScatter(pl.send, pl.recv, n, dt, c.root, comm, s);
    default: break;
  }
  // Point to point: always inside a group of its own (nested in the caller's group, if any).
  ncclResult_t first = ncclGroupStart();
  if (first != ncclSuccess) return first;
  auto keep = [&](ncclResult_t r) {
    if (r != ncclSuccess && first == ncclSuccess) first = r;
  };
  if (c.coll == kSendRecvRing || c.coll == kSendRecvSelf) {
    const int to = c.coll == kSendRecvRing ? (rank + 1) % nranks : rank;
    const int from = c.coll == kSendRecvRing ? (rank - 1 + nranks) % nranks : rank;
    keep(ncclSend(pl.send, n, dt, to, comm, s));
    keep(ncclRecv(pl.recv, n, dt, from, comm, s));
  } else {  // kSendRecvMany: message m to peer p is block (m * nranks + p); peers' messages match in order
    for (int m = 0; m < kManyMsgs; ++m) {
      for (int peer = 0; peer < nranks; ++peer) {
        const uint64_t off = (static_cast<uint64_t>(m) * nranks + peer) * bytes;
        keep(ncclSend(pl.send + off, n, dt, peer, comm, s));
        keep(ncclRecv(pl.recv + off, n, dt, peer, comm, s));
      }
    }
  }
  keep(ncclGroupEnd());
  return first;
}

cudaError_t checkCase(const Case& c, const Placement& pl, const CaseParams& p, CheckResult* slot, cudaStream_t s,
                      char* recvArea) {
  cudaError_t e = launchCheckOutput(pl.recv, pl.outCount, p, slot, s);
  if (e == cudaSuccess) e = launchCheckGuard(recvArea, pl.frontBytes, kPoison, 0, slot, s);
  if (e == cudaSuccess) e = launchCheckGuard(pl.region + pl.regionBytes, kGuard, kPoison, kTailGuardTag, slot, s);
  if (e == cudaSuccess && pl.checkInput) e = launchCheckInput(pl.send, pl.inCount, p, slot, s);
  return e;
}

ncclResult_t makeOp(const Case& c, RankCtx& x, ncclComm_t comm, ncclRedOp_t* op, bool* created) {
  *created = false;
  const ncclDataType_t dt = static_cast<ncclDataType_t>(c.type);
  switch (c.op) {
    case kProd: *op = ncclProd; return ncclSuccess;
    case kMin: *op = ncclMin; return ncclSuccess;
    case kMax: *op = ncclMax; return ncclSuccess;
    case kAvg: *op = ncclAvg; return ncclSuccess;
    case kPreMulHost: {
      const ncclResult_t r = ncclRedOpCreatePreMulSum(op, x.hScalars[c.type], dt, ncclScalarHostImmediate, comm);
      *created = r == ncclSuccess;
      return r;
    }
    case kPreMulDev: {
      void* scalar = static_cast<char*>(x.dScalars) + 8 * c.type;
      const ncclResult_t r = ncclRedOpCreatePreMulSum(op, scalar, dt, ncclScalarDevice, comm);
      *created = r == ncclSuccess;
      return r;
    }
    default: *op = ncclSum; return ncclSuccess;
  }
}

bool evaluate(RankCtx& x, const Case& c, const CheckResult& r, const char* context) {
  const unsigned long long bad = r.errors[kBadValue], guard = r.errors[kBadGuard], input = r.errors[kInputChanged];
  if (bad + guard + input == 0) return true;
  if (x.printed++ >= x.maxPrint) {
    if (x.printed == x.maxPrint + 1) std::printf("[rank %d] (further failing cases are not printed)\n", x.rank);
    return false;
  }
  std::string msg = "FAIL rank " + std::to_string(x.rank) + ": " + context + describe(c) + ": " +
                    std::to_string(bad) + " wrong output elements, " + std::to_string(guard) +
                    " guard bytes changed, " + std::to_string(input) + " input elements changed";
  if (r.lowestBadNeg) msg += "; lowest bad element " + std::to_string(~r.lowestBadNeg);
  std::printf("%s\n", msg.c_str());
  const unsigned n = std::min<unsigned>(r.nRecorded, kMaxRecorded);
  for (unsigned i = 0; i < n; ++i) {
    const Mismatch& m = r.rec[i];
    if (m.kind == kBadGuard) {
      const bool tail = m.index >= kTailGuardTag;
      std::printf("    %s guard byte %" PRIu64 ": expected 0x%02x got 0x%02x\n", tail ? "tail" : "front",
                  tail ? m.index - kTailGuardTag : m.index, static_cast<unsigned>(m.expBits),
                  static_cast<unsigned>(m.gotBits));
      continue;
    }
    std::printf("    %s[%" PRIu64 "]: expected %s got %s\n", m.kind == kInputChanged ? "input" : "output", m.index,
                formatElem(c.type, m.expBits, m.expVal, m.isFloat).c_str(),
                formatElem(c.type, m.gotBits, m.gotVal, m.isFloat).c_str());
  }
  return false;
}

void runSweep(std::vector<RankCtx*>& L, const std::vector<Case>& cases, const Options& o, size_t batchCases) {
  batchCases = std::clamp<size_t>(batchCases, 1, kSweepBatchCases);
  const size_t nl = L.size();
  std::vector<Placement> pl(nl);
  std::vector<CaseParams> params(nl);
  std::vector<ncclRedOp_t> ops(nl);
  std::vector<int> created(nl);
  std::vector<ncclResult_t> callRes(nl);
  // Per batch slot: the call result of each local rank (ncclSuccess when it ran).
  std::vector<std::vector<ncclResult_t>> slotRes(kSlots, std::vector<ncclResult_t>(nl, ncclSuccess));
  size_t i = 0;
  while (i < cases.size()) {
    for (RankCtx* x : L) {
      cudaSetDevice(x->dev);
      if (cudaMemsetAsync(x->dRes, 0, sizeof(CheckResult) * kSlots, x->stream) != cudaSuccess) x->fatal = true;
    }
    const size_t first = i;
    uint64_t bytes = 0;
    while (i < cases.size() && i - first < batchCases && bytes < kBatchBytes) {
      const Case& c = cases[i];
      const size_t slot = i - first;
      bool ok = true;
      for (size_t l = 0; l < nl; ++l) {
        RankCtx& x = *L[l];
        cudaSetDevice(x.dev);
        pl[l] = place(c, x.rank, x.nranks, x.sendBase, x.recvBase);
        params[l] = paramsFor(c, x.rank, x.nranks);
        if (prepareCase(c, pl[l], params[l], x.stream, x.recvBase) != cudaSuccess) x.fatal = true;
        bool made = false;
        callRes[l] = makeOp(c, x, x.comm, &ops[l], &made);
        created[l] = made;
        if (callRes[l] != ncclSuccess) ok = false;
      }
      if (!ok) {  // a PreMulSum op could not be made: nobody issues (the other ranks decide the same)
        ncclResult_t why = ncclSuccess;
        for (ncclResult_t r : callRes) why = why == ncclSuccess ? r : why;
        for (ncclResult_t& r : callRes) r = why;
      }
      if (ok) {
        size_t l = 0;
        const ncclResult_t g = groupCall(L, [&](RankCtx& x) {
          const ncclResult_t r = issueCase(c, pl[l], ops[l], x.rank, x.nranks, x.comm, x.stream);
          callRes[l++] = r;
          return r;
        });
        for (size_t k = 0; k < nl; ++k) {
          if (callRes[k] == ncclSuccess) callRes[k] = g;
        }
      }
      for (size_t l = 0; l < nl; ++l) {
        RankCtx& x = *L[l];
        cudaSetDevice(x.dev);
        if (created[l]) ncclRedOpDestroy(ops[l], x.comm);
        slotRes[slot][l] = callRes[l];
        if (callRes[l] == ncclSuccess && checkCase(c, pl[l], params[l], x.dRes + slot, x.stream, x.recvBase) != cudaSuccess) {
          x.fatal = true;
        }
      }
      bytes += pl[0].regionBytes + pl[0].inCount * typeInfo(c.type).bytes;
      ++i;
    }
    bool fatal = false;
    for (size_t l = 0; l < nl; ++l) {
      RankCtx& x = *L[l];
      cudaSetDevice(x.dev);
      cudaError_t e = cudaStreamSynchronize(x.stream);
      if (e == cudaSuccess) e = cudaMemcpy(x.hRes, x.dRes, sizeof(CheckResult) * (i - first), cudaMemcpyDeviceToHost);
      if (e != cudaSuccess || x.fatal) {
        std::printf("FAIL rank %d: CUDA error during cases %zu..%zu (first: %s): %s; stopping the sweep\n", x.rank,
                    first, i - 1, describe(cases[first]).c_str(), cudaGetErrorString(e));
        x.fatal = fatal = true;
      }
    }
    for (size_t k = first; k < i; ++k) {
      for (size_t l = 0; l < nl; ++l) {
        RankCtx& x = *L[l];
        const ncclResult_t r = slotRes[k - first][l];
        bool pass;
        if (x.fatal) {
          pass = false;
        } else if (r != ncclSuccess) {
          pass = false;
          if (x.printed++ < x.maxPrint) {
            std::printf("FAIL rank %d: %s: the NCCL call returned %d (%s): %s\n", x.rank, describe(cases[k]).c_str(),
                        static_cast<int>(r), ncclGetErrorString(r), ncclGetLastError(nullptr));
          }
        } else {
          pass = evaluate(x, cases[k], x.hRes[k - first], "");
        }
        x.tally.addCase(cases[k], !pass);
      }
    }
    watchNote(L[0]->rank, "sweep: %zu of %zu cases done (last: %s)", i, cases.size(), describe(cases[i - 1]).c_str());
    if (fatal) break;
  }
}

// Fills an output region as a one-rank "collective" would leave it, so every type/generator must check
// clean; then breaks one element, one tail guard byte and one input element and expects exactly those.
void runSelfTest(std::vector<RankCtx*>& L, const Options& o) {
  for (RankCtx* x : L) {
    cudaSetDevice(x->dev);
    std::string failures;
    int checks = 0;
    for (int type = 0; type < kNumTypes; ++type) {
      if (typeInfo(type).needsSm90 && !o.fp8) continue;
      for (int op : {kNoOp, kSum, kProd, kMin, kMax, kAvg}) {
        Case c;
        c.coll = op == kNoOp ? kAllGather : kAllReduce;
        c.type = type;
        c.op = op;
        c.count = 4099;
        c.recvOff = typeInfo(type).bytes;
        c.seed = 0xc0ffee + type * 16 + op;
        const Placement pl = place(c, 0, 1, x->sendBase, x->recvBase);
        CaseParams p = paramsFor(c, 0, 1);
        p.tolFactor = 0;  // a one-bit change must be caught for every type, so no tolerance here
        cudaMemsetAsync(x->dRes, 0, sizeof(CheckResult) * 2, x->stream);
        prepareCase(c, pl, p, x->stream, x->recvBase);
        launchFill(pl.recv, pl.outCount, p, x->stream);  // the one-rank result equals the input
        checkCase(c, pl, p, x->dRes, x->stream, x->recvBase);
        launchCorrupt(pl.recv, type, 17, x->stream);
        launchCorrupt(pl.send, type, 4000, x->stream);
        cudaMemsetAsync(pl.region + pl.regionBytes + 3, 0x00, 1, x->stream);
        checkCase(c, pl, p, x->dRes + 1, x->stream, x->recvBase);
        cudaMemcpyAsync(x->hRes, x->dRes, sizeof(CheckResult) * 2, cudaMemcpyDeviceToHost, x->stream);
        const cudaError_t e = cudaStreamSynchronize(x->stream);
        ++checks;
        const CheckResult& clean = x->hRes[0];
        const CheckResult& broken = x->hRes[1];
        const bool ok = e == cudaSuccess && clean.errors[0] + clean.errors[1] + clean.errors[2] == 0 &&
                        broken.errors[kBadValue] == 1 && broken.errors[kBadGuard] == 1 &&
                        broken.errors[kInputChanged] == 1 && ~broken.lowestBadNeg == 17;
        if (!ok && failures.size() < 400) {
          failures += std::string(" ") + typeInfo(type).name + "/" + opName(op) + "(clean " +
                      std::to_string(clean.errors[0] + clean.errors[1] + clean.errors[2]) + ", broken " +
                      std::to_string(broken.errors[0]) + "/" + std::to_string(broken.errors[1]) + "/" +
                      std::to_string(broken.errors[2]) + (e != cudaSuccess ? std::string(", ") + cudaGetErrorString(e) : "") +
                      ")";
        }
      }
    }
    x->tally.addExtra("checker self-test", failures.empty() ? 1 : 0,
                      failures.empty() ? std::to_string(checks) + " type/op combinations: clean data passes, one "
                                         "bad element, guard byte and input element are each caught"
                                       : "rank " + std::to_string(x->rank) + ":" + failures);
  }
}

}  // namespace sweep
