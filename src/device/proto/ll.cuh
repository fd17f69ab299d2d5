// The LL (low-latency) protocol: every 8 payload bytes travel in a 16-byte line {data, flag,
// data, flag} written with one 16-byte store; the receiver spins on the line until both flags
// equal llFlag(step) (work_math.h), so data and "ready" arrive together, with no fence and no
// tail counter. Half the link bandwidth goes to flags: LL is for small messages.
//
// Each primitive call moves at most one step's payload (llChunkElems) through one slot. Thread t
// of the group handles 16-byte packs t, t + nThreads, ... of the call's payload: pack p is lines
// 2p and 2p + 1 of the slot (the second only when the payload reaches past its first 8 bytes).
// Flow control, barriers and abort: proto/flag_link.cuh.
#pragma once

#include "device/proto/flag_link.cuh"

namespace weft::dev {

// 512 threads, as NCCL's LL (1 block per SM; a thread handles a few packs of a 64 KiB step).
constexpr int kLLThreads = arch::kDefaultBlockThreads;
constexpr int kLLWarps = kLLThreads / arch::kWarpSize;

WEFT_DEV FlagGroup llFullGroup() { return flagFullGroup(kLLWarps); }
WEFT_DEV FlagGroup llSendGroup() { return flagSendGroup(kLLWarps); }
WEFT_DEV FlagGroup llRecvGroup() { return flagRecvGroup(kLLWarps); }

namespace detail {

// Spins until the one or two lines at p carry `flag`; returns their 8 or 16 payload bytes.
static WEFT_DEV Pack16 llReadPack(const char* p, uint32_t flag, bool two, FlagShared* sh,
                                    const volatile uint32_t* abortFlag, bool* aborted) {
  Pack16 a = arch::ldLine16(p), b{};
  if (two) b = arch::ldLine16(p + kLLLineBytes);
  int spins = 0;
  while (a.w[1] != flag || a.w[3] != flag || (two && (b.w[1] != flag || b.w[3] != flag))) {
    if (*aborted) break;
    if (++spins >= kFlagSpinsPerAbortCheck) {
      spins = 0;
      if (arch::ldVolatileShared(&sh->aborted) || (abortFlag && arch::ldRelaxedSys(abortFlag) != 0)) {
        *aborted = true;
        arch::stVolatileShared(&sh->aborted, 1);
        break;
      }
    }
    if (a.w[1] != flag || a.w[3] != flag) a = arch::ldLine16(p);
    if (two && (b.w[1] != flag || b.w[3] != flag)) b = arch::ldLine16(p + kLLLineBytes);
  }
  Pack16 v;
  v.w[0] = a.w[0];
  v.w[1] = a.w[2];
  v.w[2] = b.w[0];
  v.w[3] = b.w[2];
  return v;
}

WEFT_DEV void llWritePack(char* p, const Pack16& v, uint32_t flag, bool two) {
  Pack16 a, b;
  a.w[0] = v.w[0];
  a.w[1] = flag;
  a.w[2] = v.w[1];
  a.w[3] = flag;
  arch::stLine16(p, a);
  if (two) {
    b.w[0] = v.w[2];
    b.w[1] = flag;
    b.w[2] = v.w[3];
    b.w[3] = flag;
    arch::stLine16(p + kLLLineBytes, b);
  }
}

}  // namespace detail

template <typename Fn>
class LLPrims : public FlagLink, public FlagPrimsApi<LLPrims<Fn>> {
  friend class FlagPrimsApi<LLPrims<Fn>>;

 public:
  using T = typename Fn::Elem;

  // chunkElems: what the algorithm will pass at most per call; must not exceed llChunkElems().
  WEFT_DEV LLPrims(const FlagGroup& g, FlagShared* sh, const volatile uint32_t* abortFlag, ConnInfo* recvConn,
                   ConnInfo* sendConn, const T* input, T* output, uint64_t chunkElems, const Fn& fn)
      : FlagLink(g, sh, abortFlag, recvConn, sendConn, kProtoLL), fn_(fn), input_(input), output_(output) {
    (void)chunkElems;
  }

 private:
  // Inlined, for cold functors too: they already run in one non-inlined body per functor
  // (kernel_dispatch.cuh), and a non-inlined member here would put the Prims object in local
  // memory (see SimplePrims::run): with it, a cold int32 all_reduce on Ring/LL took 11 us against
  // 4.6 for float sums (two ranks on one H200, CUDA graph).
  WEFT_DEV void run(int ops, int64_t inOff, int64_t outOff, int64_t n) {
    if (n <= 0) return;  // both ends skip empty calls: no step is used
    const int64_t nBytes = n * (int64_t)sizeof(T);
    const char* in = reinterpret_cast<const char*>(input_ + inOff);
    char* out = reinterpret_cast<char*>(output_ + outOff);
    if (!(ops & (kFlagRecv | kFlagSend))) {
      flagLocal(fn_, ops, tid_, nThreads_, in, out, nBytes);
      return;
    }
    if (ops & kFlagSend) {
      waitSend();
      // The step's size for a network plugin's proxy (abi.h kStepSizeWord); a relaxed store, no
      // fence: that proxy waits for the lines' flags as well.
      if (tid_ == 0 && !aborted()) {
        arch::stRelaxedSys(sendHead_ + kStepSizeWord + sendStep_ % kSteps, llStepSizeWord(sendStep_, nBytes));
      }
    }
    const uint32_t recvFlag = llFlag(recvStep_), sendFlag = llFlag(sendStep_);
    const char* rslot = recvBuff_ + (recvStep_ % kSteps) * stepBytes_;
    char* sslot = sendBuff_ + (sendStep_ % kSteps) * stepBytes_;
    const bool skip = aborted();
    for (int64_t p = tid_; p * 16 < nBytes && !skip; p += nThreads_) {
      const int valid = nBytes - p * 16 < 16 ? (int)(nBytes - p * 16) : 16;
      const bool two = valid > (int)kLLLineDataBytes;
      // The user's bytes before the peer's: the load is in flight while the thread waits for its
      // line, not one more round trip after it (see LL128Prims::run).
      Pack16 r{}, own{};
      if (ops & kFlagSrcIn) own = detail::loadUser(in + p * 16, valid);
      if (ops & kFlagRecv) r = detail::llReadPack(rslot + p * 2 * kLLLineBytes, recvFlag, two, sh_, abortFlag_, &aborted_);
      const Pack16 v = flagCombine(fn_, ops, r, own);
      if (ops & kFlagDstOut) detail::storeUser(out + p * 16, v, valid);
      if (ops & kFlagSend) detail::llWritePack(sslot + p * 2 * kLLLineBytes, v, sendFlag, two);
    }
    probe((ops & kFlagRecv) ? kProbeReceived : kProbeWritten);
    if (ops & kFlagRecv) {
      postRecv(true);
      recvStep_++;
    }
    if (ops & kFlagSend) sendStep_++;
  }

  Fn fn_;
  const T* input_;
  T* output_;
};

}  // namespace weft::dev
