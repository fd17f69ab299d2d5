// The LL128 protocol: 128-byte lines of 120 payload bytes and an 8-byte flag (step + 1), each
// line stored by 8 lanes of a warp in one instruction and read back the same way; the flag in
// the line's last 8 bytes vouches for the whole line, which holds only where 128-byte stores
// arrive whole (NVLink; the host decides where LL128 is used). 94 % of the link carries data.
//
// Each primitive call moves at most one step's payload (ll128ChunkElems) through one slot. The
// call's nLines = ceil(bytes / 120) lines are cut into warp segments of kLL128SegLines lines;
// warp w takes segments w, w + nWarps, ... Within a segment, 16-byte part c (8 per line) is held
// by lane c % kWarpSize in register slot c / kWarpSize, so on NVIDIA one slot of the warp is four
// whole lines and lane 7 of every 8 holds a flag. Payload placement inside a call (both ends
// derive it from the byte count): parts 0..6 of line L carry bytes [112 L + 16 j, +16), a
// 16-byte aligned stream; the 8 data bytes of part 7 carry bytes [112 nLines + 8 L, +8).
#pragma once

#include "device/proto/flag_link.cuh"

namespace weft::dev {

// The 64-bit line flag travels as two 32-bit words of a Pack16: w[2] low, w[3] high.
constexpr int kFlagHighShift = 32;

// 512 threads on NVIDIA (16 warps, 128 registers each). NCCL runs LL128 with 640, but ptxas
// compiles the non-inlined per-functor loop for up to 128 registers, more than 640 threads allow.
constexpr int kLL128Threads = arch::kDefaultBlockThreads;
constexpr int kLL128Warps = kLL128Threads / arch::kWarpSize;
constexpr int kLL128PartsPerLane = 4;  // register slots per lane and segment
constexpr int kLL128PartsPerLine = kLL128LineBytes / 16;
constexpr int kLL128SegLines = arch::kWarpSize * kLL128PartsPerLane / kLL128PartsPerLine;
static_assert(arch::kWarpSize % 4 == 0 && kLL128SegLines >= 1, "a segment holds whole lines");
static_assert(kLL128Threads <= arch::kMaxBlockThreads, "LL128 block too large");

WEFT_DEV FlagGroup ll128FullGroup() { return flagFullGroup(kLL128Warps); }
WEFT_DEV FlagGroup ll128SendGroup() { return flagSendGroup(kLL128Warps); }
WEFT_DEV FlagGroup ll128RecvGroup() { return flagRecvGroup(kLL128Warps); }

template <typename Fn>
class LL128Prims : public FlagLink, public FlagPrimsApi<LL128Prims<Fn>> {
  friend class FlagPrimsApi<LL128Prims<Fn>>;

 public:
  using T = typename Fn::Elem;

  WEFT_DEV LL128Prims(const FlagGroup& g, FlagShared* sh, const volatile uint32_t* abortFlag, ConnInfo* recvConn,
                      ConnInfo* sendConn, const T* input, T* output, uint64_t chunkElems, const Fn& fn)
      : FlagLink(g, sh, abortFlag, recvConn, sendConn, kProtoLL128), fn_(fn), input_(input), output_(output) {
    (void)chunkElems;
  }

 private:
  WEFT_DEV static uint64_t flagOf(const Pack16& v) { return ((uint64_t)v.w[3] << kFlagHighShift) | v.w[2]; }

  // Inlined into each functor's out-of-line body in the general kernel (kernel_dispatch.cuh) and
  // into the specialized kernels: a non-inlined member keeps the Prims object in local memory.
  // 8-byte Ring/LL128 all_gather, two ranks on one H200 in a CUDA graph: 10.3 us out of line, 6.1
  // inlined (session 16), 3.8 in its specialized kernel (session 17; LL: 3.0).
  WEFT_DEV void run(int ops, int64_t inOff, int64_t outOff, int64_t n) {
    if (n <= 0) return;  // both ends skip empty calls: no step is used
    const int64_t nBytes = n * (int64_t)sizeof(T);
    const char* in = reinterpret_cast<const char*>(input_ + inOff);
    char* out = reinterpret_cast<char*>(output_ + outOff);
    if (!(ops & (kFlagRecv | kFlagSend))) {
      flagLocal(fn_, ops, tid_, nThreads_, in, out, nBytes);
      return;
    }
    if (ops & kFlagSend) waitSend();
    const uint64_t recvFlag = recvStep_ + 1, sendFlag = sendStep_ + 1;
    const char* rslot = recvBuff_ + (recvStep_ % kSteps) * stepBytes_;
    char* sslot = sendBuff_ + (sendStep_ % kSteps) * stepBytes_;
    const int64_t nLines = (nBytes + kLL128LineDataBytes - 1) / kLL128LineDataBytes;
    const int64_t tailBase = nLines * (kLL128LineDataBytes - 8);  // where part 7's bytes start
    const int64_t nSegs = (nLines + kLL128SegLines - 1) / kLL128SegLines;
    const int lane = arch::laneId();
    const bool skip = arch::anyLane(aborted());  // the warp's lanes must loop together
    for (int64_t seg = warp_; seg < nSegs && !skip; seg += nWarps_) {
      Pack16 v[kLL128PartsPerLane];
      int64_t bufOff[kLL128PartsPerLane], dataOff[kLL128PartsPerLane];
      int valid[kLL128PartsPerLane];
      bool active[kLL128PartsPerLane], isFlag[kLL128PartsPerLane];
WEFT_UNROLL
      for (int s = 0; s < kLL128PartsPerLane; s++) {
        const int c = s * arch::kWarpSize + lane;
        const int64_t line = seg * kLL128SegLines + c / kLL128PartsPerLine;
        const int j = c % kLL128PartsPerLine;
        v[s] = Pack16{};
        active[s] = line < nLines;
        isFlag[s] = j == kLL128PartsPerLine - 1;
        bufOff[s] = line * kLL128LineBytes + j * 16;
        dataOff[s] = isFlag[s] ? tailBase + line * 8 : line * (kLL128LineDataBytes - 8) + j * 16;
        const int64_t left = nBytes - dataOff[s];
        const int cap = isFlag[s] ? 8 : 16;
        valid[s] = !active[s] || left <= 0 ? 0 : (left < cap ? (int)left : cap);
      }
      // The user's bytes first: these loads do not depend on the peer, so they are in flight
      // while the warp waits for its lines (NCCL also loads its sources before the receive).
      // After the wait they cost a third dependent round trip per segment (spin, reload, user):
      // the warp holds only 16 lines at a time, so bandwidth is bound by those trips. Two ranks on
      // one H200, CUDA graph, general kernel: 64 MiB all_gather 213 -> 168 us, reduce_scatter
      // 211 -> 159 (session 17).
      Pack16 own[kLL128PartsPerLane];
WEFT_UNROLL
      for (int s = 0; s < kLL128PartsPerLane; s++) {
        own[s] = Pack16{};
        if ((ops & kFlagSrcIn) && valid[s] > 0) own[s] = detail::loadUser(in + dataOff[s], valid[s]);
      }
      if (ops & kFlagRecv) {
        int spins = 0;
        // The 8 lanes of a line must load it in ONE warp instruction: a lane that ran ahead (out
        // of the divergent user loads and stores of the previous segment) could read a data part
        // before the line arrived while the flag lane, later, sees the new flag. Volta and later
        // do not promise to reconverge after divergence; syncWarp does. anyLane reconverges the
        // lanes for every retry.
        arch::syncWarp();
        for (;;) {
          // Descending slots: a line's flag part is read before its data parts (host_emu.h).
          bool ready = true;
WEFT_UNROLL
          for (int s = kLL128PartsPerLane - 1; s >= 0; s--) {
            v[s] = arch::ll128Load(rslot + bufOff[s], isFlag[s], active[s]);
            if (active[s] && isFlag[s] && flagOf(v[s]) != recvFlag) ready = false;
          }
          if (!arch::anyLane(!ready)) break;
          if (arch::anyLane(spinAborted(&spins))) {
            aborted_ = true;
            break;
          }
        }
        // Read every line once more now that all its flags were seen. One warp load does not
        // promise one snapshot of each 128-byte line: its 32-byte sectors may be served at
        // different times, so the flag sector can be new while the first sector is still the
        // previous step's (seen on H200: stale bytes at the start of lines, under load). A line
        // whose flag was visible is visible whole to a later load. NCCL reloads the same way.
        if (!skip && !aborted_) {
WEFT_UNROLL
          for (int s = kLL128PartsPerLane - 1; s >= 0; s--) v[s] = arch::ll128Load(rslot + bufOff[s], isFlag[s], active[s]);
        }
      }
WEFT_UNROLL
      for (int s = 0; s < kLL128PartsPerLane; s++) {
        v[s] = flagCombine(fn_, ops, v[s], own[s]);
        if ((ops & kFlagDstOut) && valid[s] > 0) detail::storeUser(out + dataOff[s], v[s], valid[s]);
      }
      if (ops & kFlagSend) {
        // Likewise for the stores: lanes holding user bytes took other paths than the flag lane
        // (loadUser/storeUser by size), and a flag stored before its line's data parts would
        // vouch for stale data. Reconverge, then build the flag part without a branch.
        arch::syncWarp();
WEFT_UNROLL
        for (int s = 0; s < kLL128PartsPerLane; s++) {
          v[s].w[2] = isFlag[s] ? (uint32_t)sendFlag : v[s].w[2];
          v[s].w[3] = isFlag[s] ? (uint32_t)(sendFlag >> kFlagHighShift) : v[s].w[3];
          arch::ll128Store(sslot + bufOff[s], v[s], isFlag[s], active[s]);
        }
      }
    }
    probe((ops & kFlagRecv) ? kProbeReceived : kProbeWritten);
    if (ops & kFlagRecv) {
      postRecv(false);
      recvStep_++;
    }
    if (ops & kFlagSend) sendStep_++;
  }

  Fn fn_;
  const T* input_;
  T* output_;
};

}  // namespace weft::dev
