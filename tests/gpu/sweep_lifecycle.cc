// Tests beyond the case sweep, part 2: communicator lifecycle. ncclCommSplit (color by parity, key
// reversed, NCCL_SPLIT_NOCOLOR), non-blocking init, ncclCommAbort with an operation stuck on the GPU,
// argument validation, and ncclCommFinalize + ncclCommDestroy.
#include <chrono>
#include <cinttypes>
#include <cstdio>
#include <cstring>
#include <string>
#include <thread>
#include <vector>

#include "sweep_host.h"

namespace sweep {

namespace {

std::string str(double v, const char* fmt = "%.3f") {
  char b[64];
  std::snprintf(b, sizeof(b), fmt, v);
  return b;
}

Case smallAllReduce(uint64_t seed) {
  Case c;
  c.coll = kAllReduce;
  c.type = ncclInt32;
  c.op = kSum;
  c.count = 1025;
  c.seed = seed;
  return c;
}

}  // namespace

ncclResult_t finalizeAndDestroy(std::vector<RankCtx*>& L, std::vector<ncclComm_t>& comms, std::string* why) {
  ncclResult_t first = ncclSuccess;
  auto keep = [&](ncclResult_t r, const char* what) {
    if (r == ncclSuccess || r == ncclInProgress || first != ncclSuccess) return;
    first = r;
    *why = std::string(what) + " returned " + ncclGetErrorString(r) + ": " + ncclGetLastError(nullptr);
  };
  int live = 0;
  for (ncclComm_t c : comms) live += c != nullptr;
  if (live > 1) keep(ncclGroupStart(), "ncclGroupStart");
  for (size_t i = 0; i < comms.size(); ++i) {
    if (!comms[i]) continue;
    cudaSetDevice(L[i]->dev);
    keep(ncclCommFinalize(comms[i]), "ncclCommFinalize");
  }
  if (live > 1) keep(ncclGroupEnd(), "ncclGroupEnd (finalize)");
  for (size_t i = 0; i < comms.size(); ++i) {
    if (comms[i]) keep(waitComm(comms[i], 120), "ncclCommFinalize (async state)");
  }
  for (size_t i = 0; i < comms.size(); ++i) {
    if (!comms[i]) continue;
    cudaSetDevice(L[i]->dev);
    keep(ncclCommDestroy(comms[i]), "ncclCommDestroy");
    comms[i] = nullptr;
  }
  return first;
}

void finalizeAndDestroyMain(std::vector<RankCtx*>& L) {
  std::vector<ncclComm_t> comms;
  for (RankCtx* x : L) comms.push_back(x->comm);
  std::string why;
  const double t0 = nowSec();
  const ncclResult_t r = finalizeAndDestroy(L, comms, &why);
  const double dt = nowSec() - t0;
  for (RankCtx* x : L) x->comm = nullptr;
  addExtraAll(L, "ncclCommFinalize + ncclCommDestroy", r == ncclSuccess ? 1 : 0,
              r == ncclSuccess ? "took " + str(dt) + " s" : why);
}

namespace {

// A child communicator of the parent's ranks but rank 0, in which parent rank x.rank must be rank
// x.rank - 1 of n - 1: the first mismatch goes to *why; a child joins the lists to run and free.
void keepChildWithoutRankZero(RankCtx& x, ncclComm_t child, int n, std::vector<RankCtx*>* liveL,
                              std::vector<ncclComm_t>* liveC, std::vector<Member>* M, std::string* why) {
  int size = -1, rank = -1;
  if (!child || ncclCommCount(child, &size) != ncclSuccess || ncclCommUserRank(child, &rank) != ncclSuccess ||
      size != n - 1 || rank != x.rank - 1) {
    if (why->empty()) {
      *why = "rank " + std::to_string(x.rank) + ": got size " + std::to_string(size) + " rank " + std::to_string(rank) +
             ", expected " + std::to_string(n - 1) + "/" + std::to_string(x.rank - 1);
    }
  }
  if (!child) return;
  liveL->push_back(&x);
  liveC->push_back(child);
  M->push_back(Member{&x, child, x.rank - 1, n - 1, x.sendBase, x.recvBase});
}

}  // namespace

void testSplit(std::vector<RankCtx*>& L) {
  const int n = L[0]->nranks;
  // 1. Color by parity, key reversed: within a color, the highest parent rank becomes child rank 0.
  std::vector<ncclComm_t> child(L.size(), nullptr);
  size_t l = 0;
  ncclResult_t r = groupCall(L, [&](RankCtx& x) {
    return ncclCommSplit(x.comm, x.rank % 2, n - x.rank, &child[l++], nullptr);
  });
  std::string why;
  if (r != ncclSuccess) why = std::string("ncclCommSplit returned ") + ncclGetErrorString(r) + ": " + ncclGetLastError(nullptr);
  // The allreduce runs whenever every local rank got a child (even if its size or rank is wrong), so
  // that one rank's mismatch cannot leave its peers waiting in the collective.
  std::vector<Member> M;
  bool allChildren = true;
  for (size_t i = 0; i < L.size(); ++i) {
    RankCtx& x = *L[i];
    const int parity = x.rank % 2;
    const int expSize = (n - parity + 1) / 2;
    const int expRank = (n - 1 - x.rank) / 2;
    int size = -1, rank = -1, dev = -1;
    if (!child[i]) {
      allChildren = false;
      if (why.empty()) why = "rank " + std::to_string(x.rank) + ": no child communicator";
      continue;
    }
    const bool queried = ncclCommCount(child[i], &size) == ncclSuccess &&
                         ncclCommUserRank(child[i], &rank) == ncclSuccess &&
                         ncclCommCuDevice(child[i], &dev) == ncclSuccess;
    if ((!queried || size != expSize || rank != expRank || dev != x.dev) && why.empty()) {
      why = "rank " + std::to_string(x.rank) + ": child size " + std::to_string(size) + " rank " + std::to_string(rank) +
            " device " + std::to_string(dev) + ", expected " + std::to_string(expSize) + "/" + std::to_string(expRank) +
            "/" + std::to_string(x.dev);
    }
    M.push_back(Member{&x, child[i], queried ? rank : expRank, queried ? size : expSize, x.sendBase, x.recvBase});
  }
  std::string runWhy;
  const bool ran = allChildren && r == ncclSuccess && runCaseOn(M, smallAllReduce(9001), false, &runWhy);
  if (!ran && why.empty()) why = runWhy;
  bool pass = why.empty() && ran;
  std::string fdWhy;
  if (finalizeAndDestroy(L, child, &fdWhy) != ncclSuccess && pass) {
    pass = false;
    why = "child: " + fdWhy;
  }
  addExtraAll(L, "ncclCommSplit(color = rank % 2, key reversed) + allreduce on the child", pass ? 1 : 0,
              pass ? "child sizes and ranks as expected; int32 sum checked" : why);

  // 2. NCCL_SPLIT_NOCOLOR on rank 0: it must get NULL; the others form a communicator of n-1 ranks.
  ncclComm_t sentinel = reinterpret_cast<ncclComm_t>(static_cast<uintptr_t>(0x1));
  std::vector<ncclComm_t> c2(L.size(), sentinel);
  l = 0;
  r = groupCall(L, [&](RankCtx& x) {
    return ncclCommSplit(x.comm, x.rank == 0 ? NCCL_SPLIT_NOCOLOR : 7, x.rank, &c2[l++], nullptr);
  });
  why.clear();
  if (r != ncclSuccess) why = std::string("ncclCommSplit returned ") + ncclGetErrorString(r) + ": " + ncclGetLastError(nullptr);
  M.clear();
  std::vector<RankCtx*> liveL;
  std::vector<ncclComm_t> liveC;
  for (size_t i = 0; i < L.size(); ++i) {
    RankCtx& x = *L[i];
    if (c2[i] == sentinel) {
      if (why.empty()) why = "rank " + std::to_string(x.rank) + ": ncclCommSplit did not set *newcomm";
      c2[i] = nullptr;
      continue;
    }
    if (x.rank == 0) {
      if (c2[i] != nullptr && why.empty()) why = "rank 0 (NCCL_SPLIT_NOCOLOR) got a communicator instead of NULL";
      if (c2[i] != nullptr) {
        liveL.push_back(&x);
        liveC.push_back(c2[i]);
      }
      continue;
    }
    keepChildWithoutRankZero(x, c2[i], n, &liveL, &liveC, &M, &why);
  }
  if (r == ncclSuccess && !M.empty()) {
    std::string runWhy;
    if (!runCaseOn(M, smallAllReduce(9002), false, &runWhy) && why.empty()) why = runWhy;
  }
  pass = why.empty();
  if (finalizeAndDestroy(liveL, liveC, &fdWhy) != ncclSuccess && pass) {
    pass = false;
    why = fdWhy;
  }
  addExtraAll(L, "ncclCommSplit with NCCL_SPLIT_NOCOLOR", pass ? 1 : 0,
              pass ? "NULL for the uncolored rank; the rest work as n-1 ranks" : why);
  testShrink(L);
}

// ncclCommShrink of a healthy communicator without rank 0, which takes no part: the others become
// ranks 0..n-2 in order; an allreduce runs on the child, then one on the parent, which a shrink
// leaves working (rank 0 joins that one).
void testShrink(std::vector<RankCtx*>& L) {
  const int n = L[0]->nranks;
  if (n < 2) return;
  std::vector<ncclComm_t> child(L.size(), nullptr);
  size_t l = 0;
  int excluded = 0;
  ncclResult_t r = groupCall(L, [&](RankCtx& x) {
    ncclComm_t* out = &child[l++];
    return x.rank == excluded ? ncclSuccess : ncclCommShrink(x.comm, &excluded, 1, out, nullptr, NCCL_SHRINK_DEFAULT);
  });
  std::string why;
  if (r != ncclSuccess) why = std::string("ncclCommShrink returned ") + ncclGetErrorString(r) + ": " + ncclGetLastError(nullptr);
  std::vector<Member> M;
  std::vector<RankCtx*> liveL;
  std::vector<ncclComm_t> liveC;
  for (size_t i = 0; i < L.size(); ++i) {
    RankCtx& x = *L[i];
    if (x.rank == excluded) continue;
    keepChildWithoutRankZero(x, child[i], n, &liveL, &liveC, &M, &why);
  }
  bool allChildren = true;
  for (size_t i = 0; i < L.size(); ++i) allChildren = allChildren && (L[i]->rank == excluded || child[i] != nullptr);
  if (r == ncclSuccess && allChildren && !M.empty()) {
    std::string runWhy;
    if (!runCaseOn(M, smallAllReduce(9003), false, &runWhy) && why.empty()) why = runWhy;
  }
  std::string fdWhy;
  if (finalizeAndDestroy(liveL, liveC, &fdWhy) != ncclSuccess && why.empty()) why = "child: " + fdWhy;
  std::string parentWhy;
  std::vector<Member> P;
  for (RankCtx* x : L) P.push_back(Member{x, x->comm, x->rank, n, x->sendBase, x->recvBase});
  if (!runCaseOn(P, smallAllReduce(9004), false, &parentWhy) && why.empty()) why = "parent afterwards: " + parentWhy;
  addExtraAll(L, "ncclCommShrink without rank 0 + allreduce on the child, then on the parent", why.empty() ? 1 : 0,
              why.empty() ? "the others renumbered in order; both int32 sums checked" : why);
}

void testNonBlockingInit(std::vector<RankCtx*>& L, IdChannel& ids) {
  const int n = L[0]->nranks;
  ncclUniqueId id;
  std::string why;
  if (!ids.share(L[0]->rank, &id)) {  // one thread driving all ranks acts as rank 0
    addExtraAll(L, "non-blocking init (config.blocking = 0)", 0, "could not share a unique id");
    return;
  }
  ncclConfig_t cfg = NCCL_CONFIG_INITIALIZER;
  cfg.blocking = 0;
  std::vector<ncclComm_t> nb(L.size(), nullptr);
  const double t0 = nowSec();
  size_t l = 0;
  const ncclResult_t r = groupCall(L, [&](RankCtx& x) {
    return ncclCommInitRankConfig(&nb[l++], n, id, x.rank, &cfg);
  });
  if (r != ncclSuccess && r != ncclInProgress) {
    why = std::string("ncclCommInitRankConfig returned ") + ncclGetErrorString(r) + ": " + ncclGetLastError(nullptr);
  }
  for (size_t i = 0; i < L.size() && why.empty(); ++i) {
    if (!nb[i]) {
      why = "no communicator handle returned";
      break;
    }
    const ncclResult_t st = waitComm(nb[i], 120);
    if (st != ncclSuccess) why = std::string("ncclCommGetAsyncError ended with ") + ncclGetErrorString(st);
  }
  const double dt = nowSec() - t0;
  std::vector<Member> M;
  for (size_t i = 0; i < L.size(); ++i) M.push_back(Member{L[i], nb[i], L[i]->rank, n, L[i]->sendBase, L[i]->recvBase});
  bool pass = why.empty();
  if (pass) {
    Case c = smallAllReduce(9003);
    c.type = ncclFloat;
    c.count = 65537;
    pass = runCaseOn(M, c, true, &why);
  }
  std::string fdWhy;
  if (finalizeAndDestroy(L, nb, &fdWhy) != ncclSuccess && pass) {
    pass = false;
    why = fdWhy;
  }
  addExtraAll(L, "non-blocking init (config.blocking = 0), allreduce, finalize", pass ? 1 : 0,
              pass ? "ready after " + str(dt) + " s of ncclCommGetAsyncError polling" : why);
}

void testAbort(std::vector<RankCtx*>& L, const Options& o) {
  const int n = L[0]->nranks;
  std::vector<ncclComm_t> dup(L.size(), nullptr);
  size_t l = 0;
  ncclResult_t r = groupCall(L, [&](RankCtx& x) { return ncclCommSplit(x.comm, 0, x.rank, &dup[l++], nullptr); });
  if (r != ncclSuccess) {
    addExtraAll(L, "ncclCommAbort returns promptly", 0,
                std::string("could not make the communicator to abort: ncclCommSplit: ") + ncclGetErrorString(r));
    for (size_t i = 0; i < L.size(); ++i) {
      if (dup[i]) ncclCommAbort(dup[i]);
    }
    return;
  }
  std::string why, note;
  RankCtx* r0 = nullptr;  // rank 0, when this thread drives it: it gets the receive that never completes
  size_t r0i = 0;
  for (size_t i = 0; i < L.size(); ++i) {
    if (L[i]->rank == 0) {
      r0 = L[i];
      r0i = i;
    }
  }
  constexpr size_t kCount = 1024;
  if (n >= 2) {
    // Warm-up exchange 1 -> 0 so that the connection exists; then rank 0 posts a receive that no one
    // will ever match and the GPU spins on it until the abort.
    l = 0;
    r = groupCall(L, [&](RankCtx& x) {
      ncclComm_t c = dup[l++];
      if (x.rank == 0) return ncclRecv(x.recvBase, kCount, ncclFloat, 1, c, x.stream);
      if (x.rank == 1) return ncclSend(x.sendBase, kCount, ncclFloat, 0, c, x.stream);
      return ncclSuccess;
    });
    for (RankCtx* x : L) {
      cudaSetDevice(x->dev);
      cudaStreamSynchronize(x->stream);
    }
    if (r != ncclSuccess) why = std::string("warm-up send/recv returned ") + ncclGetErrorString(r);
    // Every rank is past the warm-up before any aborts: across hosts an aborted peer's closed
    // connections fail the others' communicator at once (a first-use connection would fail too).
    std::vector<Member> parent = membersOf(L);
    std::string barrierWhy;
    if (!runCaseOn(parent, smallAllReduce(9003), false, &barrierWhy) && why.empty()) {
      why = "the parent's allreduce before the abort failed: " + barrierWhy;
    }
    if (r0 && why.empty()) {
      cudaSetDevice(r0->dev);
      r = ncclRecv(r0->recvBase, kCount, ncclFloat, 1, dup[r0i], r0->stream);
      if (r != ncclSuccess) why = std::string("unmatched ncclRecv returned ") + ncclGetErrorString(r);
      std::this_thread::sleep_for(std::chrono::milliseconds(300));
      const cudaError_t q = cudaStreamQuery(r0->stream);
      // It may end early only by failing: a peer that aborted first fails a communicator that
      // reaches it through the network (ncclRemoteError), which stops its kernels.
      ncclResult_t async = ncclSuccess;
      (void)ncclCommGetAsyncError(dup[r0i], &async);
      if (q == cudaSuccess && async == ncclSuccess && why.empty()) why = "a receive without a matching send completed";
      note = q == cudaErrorNotReady ? "the unmatched receive was still pending at abort; "
             : async != ncclSuccess ? "the unmatched receive was ended by a peer's abort (" +
                                          std::string(ncclGetErrorString(async)) + "); "
                                    : "";
    }
  } else {
    std::vector<Member> M;
    for (size_t i = 0; i < L.size(); ++i) M.push_back(Member{L[i], dup[i], L[i]->rank, n, L[i]->sendBase, L[i]->recvBase});
    runCaseOn(M, smallAllReduce(9004), false, &why);
  }
  double worst = 0;
  for (size_t i = 0; i < L.size(); ++i) {
    cudaSetDevice(L[i]->dev);
    const double t0 = nowSec();
    const ncclResult_t a = ncclCommAbort(dup[i]);
    const double dt = nowSec() - t0;
    worst = dt > worst ? dt : worst;
    if (a != ncclSuccess && why.empty()) why = std::string("ncclCommAbort returned ") + ncclGetErrorString(a);
  }
  if (worst > o.abortLimitSec && why.empty()) why = "ncclCommAbort took " + str(worst) + " s (limit " + str(o.abortLimitSec) + " s)";
  bool drained = true;
  if (r0 && n >= 2) {
    cudaSetDevice(r0->dev);
    const double deadline = nowSec() + 10;
    cudaError_t q = cudaStreamQuery(r0->stream);
    while (q == cudaErrorNotReady && nowSec() < deadline) {
      std::this_thread::sleep_for(std::chrono::milliseconds(5));
      q = cudaStreamQuery(r0->stream);
    }
    drained = q == cudaSuccess;
    if (!drained && why.empty()) {
      why = std::string("the stream of the aborted receive did not drain within 10 s: ") +
            (q == cudaErrorNotReady ? "still running" : cudaGetErrorString(q));
    }
    if (!drained) r0->fatal = true;
  }
  addExtraAll(L, "ncclCommAbort returns promptly (with a receive stuck on the GPU)", why.empty() ? 1 : 0,
              why.empty() ? note + "slowest abort " + str(worst) + " s" : why);
  // The parent must not be affected by aborting a child made by ncclCommSplit (no splitShare).
  bool anyFatal = false;
  for (RankCtx* x : L) anyFatal = anyFatal || x->fatal;
  if (anyFatal) {
    addExtraAll(L, "parent communicator still works after aborting a split child", -1, "skipped: a stream is stuck");
    return;
  }
  std::vector<Member> M = membersOf(L);
  std::string pwhy;
  const bool ok = runCaseOn(M, smallAllReduce(9005), false, &pwhy);
  addExtraAll(L, "parent communicator still works after aborting a split child", ok ? 1 : 0, ok ? "allreduce checked" : pwhy);
}

void testArgumentChecks(std::vector<RankCtx*>& L) {
  std::string why;
  int checks = 0;
  for (RankCtx* x : L) {
    cudaSetDevice(x->dev);
    const int n = x->nranks;
    void* s = x->sendBase + kPad;
    void* d = x->recvBase + kPad;
    auto expect = [&](const char* what, ncclResult_t got, ncclResult_t want) {
      ++checks;
      const char* last = ncclGetLastError(nullptr);
      if (got != want && why.empty()) {
        why = std::string(what) + " returned " + std::to_string(got) + " (" + ncclGetErrorString(got) + "), expected " +
              ncclGetErrorString(want);
      } else if (got != ncclSuccess && (last == nullptr || last[0] == '\0') && why.empty()) {
        why = std::string(what) + ": ncclGetLastError(NULL) is empty after the error";
      }
    };
    const ncclDataType_t badType = static_cast<ncclDataType_t>(ncclNumTypes);
    const ncclDataType_t negType = static_cast<ncclDataType_t>(-1);
    const ncclRedOp_t neverMade = static_cast<ncclRedOp_t>(ncclNumOps + 17);
    const ncclRedOp_t negOp = static_cast<ncclRedOp_t>(-1);
    expect("ncclAllReduce(comm = NULL)", ncclAllReduce(s, d, 16, ncclFloat, ncclSum, nullptr, x->stream),
           ncclInvalidArgument);
    expect("ncclBroadcast(comm = NULL)", ncclBroadcast(s, d, 16, ncclFloat, 0, nullptr, x->stream), ncclInvalidArgument);
    expect("ncclSend(comm = NULL)", ncclSend(s, 16, ncclFloat, 0, nullptr, x->stream), ncclInvalidArgument);
    int count = 0;
    expect("ncclCommCount(comm = NULL)", ncclCommCount(nullptr, &count), ncclInvalidArgument);
    expect("ncclAllReduce(datatype = ncclNumTypes)", ncclAllReduce(s, d, 16, badType, ncclSum, x->comm, x->stream),
           ncclInvalidArgument);
    expect("ncclAllGather(datatype = -1)", ncclAllGather(s, d, 16, negType, x->comm, x->stream), ncclInvalidArgument);
    expect("ncclAllReduce(op never created)", ncclAllReduce(s, d, 16, ncclFloat, neverMade, x->comm, x->stream),
           ncclInvalidArgument);
    expect("ncclReduceScatter(op = -1)", ncclReduceScatter(s, d, 16, ncclFloat, negOp, x->comm, x->stream),
           ncclInvalidArgument);
    expect("ncclBroadcast(root = nranks)", ncclBroadcast(s, d, 16, ncclFloat, n, x->comm, x->stream),
           ncclInvalidArgument);
    expect("ncclReduce(root = -1)", ncclReduce(s, d, 16, ncclFloat, ncclSum, -1, x->comm, x->stream),
           ncclInvalidArgument);
    expect("ncclSend(peer = nranks)", ncclSend(s, 16, ncclFloat, n, x->comm, x->stream), ncclInvalidArgument);
    expect("ncclRecv(peer = -1)", ncclRecv(d, 16, ncclFloat, -1, x->comm, x->stream), ncclInvalidArgument);
    for (int code = 0; code < ncclNumResults; ++code) {
      const char* text = ncclGetErrorString(static_cast<ncclResult_t>(code));
      if ((text == nullptr || text[0] == '\0') && why.empty()) why = "ncclGetErrorString(" + std::to_string(code) + ") is empty";
    }
  }
  addExtraAll(L, "argument checks: NULL comm, bad datatype, bad op, root/peer out of range", why.empty() ? 1 : 0,
              why.empty() ? std::to_string(checks) + " calls gave ncclInvalidArgument and a last-error text" : why);
  // Errors in arguments must leave a blocking communicator usable.
  std::vector<Member> M = membersOf(L);
  std::string uwhy;
  const bool ok = runCaseOn(M, smallAllReduce(9006), false, &uwhy);
  addExtraAll(L, "communicator still works after the argument errors", ok ? 1 : 0, ok ? "allreduce checked" : uwhy);
}

}  // namespace sweep
