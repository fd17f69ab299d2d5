#include "harness_runner.h"

#include <cstring>

#include "device/work_math.h"
#include "harness_data.h"

namespace weft::harness {

using namespace weft::dev;

namespace {

constexpr uint64_t kGuard = 256;  // poisoned bytes checked before and after every output

uint64_t align256(uint64_t x) { return (x + 255) & ~uint64_t(255); }

// Where one collective lives in the rank arenas (same offsets on every rank).
struct Placement {
  uint64_t sendOff = 0, recvOff = 0;  // of the (misaligned) buffers
  uint64_t inBytes = 0, outBytes = 0;
  uint64_t recvSpanStart = 0, recvSpanEnd = 0;  // poisoned span checked around the output
};

}  // namespace

Runner::Runner(Fabric& fabric, size_t arenaBytes) : fab_(fabric), arenaBytes_(arenaBytes) {
  const int n = fab_.nRanks();
  dSend_.resize(n);
  dRecv_.resize(n);
  dScalar_.resize(n);
  for (int r = 0; r < n; r++) {
    HARNESS_CUDA(cudaSetDevice(fab_.device(r)));
    HARNESS_CUDA(cudaMalloc(&dSend_[r], arenaBytes_));
    HARNESS_CUDA(cudaMalloc(&dRecv_[r], arenaBytes_));
    HARNESS_CUDA(cudaMalloc(&dScalar_[r], 64));
  }
}

Runner::~Runner() {
  for (int r = 0; r < fab_.nRanks(); r++) {
    cudaSetDevice(fab_.device(r));
    cudaFree(dSend_[r]);
    cudaFree(dRecv_[r]);
    cudaFree(dScalar_[r]);
  }
}

void Runner::buildCollWorks(const CollSpec& s, const std::vector<char*>& sendBuf, const std::vector<char*>& recvBuf,
                            LaunchWorks* works) const {
  const int n = fab_.nRanks();
  const int nCh = fab_.config().nChannels;
  const int es = dataTypeBytes(s.type);
  for (int r = 0; r < n; r++)
    for (int c = 0; c < nCh; c++) {
      ElemRange part = channelPart(s.count, nCh, c, es);
      if (part.count == 0) continue;
      DevWork w{};
      w.func = (uint8_t)s.func;
      w.algo = kAlgoRing;
      w.proto = (uint8_t)proto_;
      w.redOp = (uint8_t)s.op;
      w.dataType = (uint8_t)s.type;
      w.root = s.root;
      w.sendBuff = sendBuf[r];
      w.recvBuff = recvBuf[r];
      w.count = s.count;
      w.chanOffset = part.offset;
      w.chanCount = part.count;
      if (proto_ != kProtoSimple) w.chunkElems = (uint32_t)(s.chunkElems == ~0ull ? 0 : s.chunkElems);
      else
        w.chunkElems = (uint32_t)(s.chunkElems == ~0ull
                                      ? recommendedChunkElems(s.func, n, part.count, es, fab_.config().stepBytes)
                                      : s.chunkElems);
      w.sendPeer = w.recvPeer = -1;
      if (s.op == kRedPreMulSum) {
        w.redOpArg = scalarBits(s.type, n);
        if (s.scalarOnDevice) {
          w.flags = kWorkFlagScalarOnDevice;
          w.redOpArg = reinterpret_cast<uint64_t>(dScalar_[r]);
        }
      } else if (s.op == kRedSumPostDiv) {
        w.redOpArg = (uint64_t)n;
      }
      (*works)[r][c].push_back(w);
    }
}

std::string Runner::runColls(const std::vector<CollSpec>& specs, uint64_t seed, double timeoutSec) {
  const int n = fab_.nRanks();
  const int nCh = fab_.config().nChannels;
  // Lay the collectives out in the arenas.
  std::vector<Placement> place(specs.size());
  uint64_t sendCur = 0, recvCur = 0;
  for (size_t i = 0; i < specs.size(); i++) {
    const CollSpec& s = specs[i];
    const uint64_t es = dataTypeBytes(s.type);
    Placement& p = place[i];
    p.inBytes = (s.func == kFuncReduceScatter ? n * s.count : s.count) * es;
    p.outBytes = (s.func == kFuncAllGather ? n * s.count : s.count) * es;
    uint64_t recvBytes = s.inPlace ? std::max(p.inBytes, p.outBytes) : p.outBytes;
    p.recvSpanStart = align256(recvCur);
    p.recvOff = p.recvSpanStart + kGuard + s.recvMisalign;
    p.recvSpanEnd = p.recvOff + recvBytes + kGuard;
    recvCur = p.recvSpanEnd;
    p.sendOff = align256(sendCur) + kGuard + s.sendMisalign;
    sendCur = p.sendOff + p.inBytes + kGuard;
  }
  if (sendCur > arenaBytes_ || recvCur > arenaBytes_) return "harness: test does not fit the arenas";
  // Inputs, poisoned outputs, scalars.
  std::vector<std::vector<std::vector<uint8_t>>> inputs(specs.size(), std::vector<std::vector<uint8_t>>(n));
  std::vector<std::vector<uint8_t>> hostSend(n, std::vector<uint8_t>(sendCur, 0)), hostRecv(n, std::vector<uint8_t>(recvCur, kPoison));
  std::vector<char*> sendBuf(n), recvBuf(n);
  LaunchWorks works(n, std::vector<std::vector<DevWork>>(nCh));
  for (size_t i = 0; i < specs.size(); i++) {
    const CollSpec& s = specs[i];
    const Placement& p = place[i];
    const uint64_t es = dataTypeBytes(s.type);
    for (int r = 0; r < n; r++) {
      inputs[i][r] = makeInput(s.type, p.inBytes / es, r, seed + i, s.op == kRedProd);
      const auto& in = inputs[i][r];
      recvBuf[r] = dRecv_[r] + p.recvOff;
      if (!s.inPlace) {
        sendBuf[r] = dSend_[r] + p.sendOff;
        std::memcpy(&hostSend[r][p.sendOff], in.data(), in.size());
      } else if (s.func == kFuncAllGather) {
        sendBuf[r] = recvBuf[r] + r * s.count * es;
        std::memcpy(&hostRecv[r][p.recvOff + r * s.count * es], in.data(), in.size());
      } else {
        sendBuf[r] = recvBuf[r];
        std::memcpy(&hostRecv[r][p.recvOff], in.data(), in.size());
      }
      if (s.func == kFuncReduceScatter && s.inPlace) recvBuf[r] = sendBuf[r] + r * s.count * es;
    }
    buildCollWorks(s, sendBuf, recvBuf, &works);
  }
  for (int r = 0; r < n; r++) {
    HARNESS_CUDA(cudaSetDevice(fab_.device(r)));
    HARNESS_CUDA(cudaMemcpy(dSend_[r], hostSend[r].data(), sendCur, cudaMemcpyHostToDevice));
    HARNESS_CUDA(cudaMemcpy(dRecv_[r], hostRecv[r].data(), recvCur, cudaMemcpyHostToDevice));
    for (const CollSpec& s : specs)
      if (s.op == kRedPreMulSum && s.scalarOnDevice) {
        uint64_t bits = scalarBits(s.type, n);
        HARNESS_CUDA(cudaMemcpy(dScalar_[r], &bits, sizeof bits, cudaMemcpyHostToDevice));
      }
  }
  std::string why;
  if (!fab_.launch(works, timeoutSec, &why)) return why;
  for (int r = 0; r < n; r++) {
    HARNESS_CUDA(cudaSetDevice(fab_.device(r)));
    HARNESS_CUDA(cudaMemcpy(hostRecv[r].data(), dRecv_[r], recvCur, cudaMemcpyDeviceToHost));
  }
  // Check.
  for (size_t i = 0; i < specs.size(); i++) {
    const CollSpec& s = specs[i];
    const Placement& p = place[i];
    const uint64_t es = dataTypeBytes(s.type);
    const uint64_t cnt = s.count;
    for (int r = 0; r < n; r++) {
      const uint8_t* buf = hostRecv[r].data();
      const uint8_t* base = buf + p.recvOff;
      std::string e;
      // Where the output is within the receive span, and what must hold there.
      uint64_t outStart = p.recvOff, outLen = p.outBytes;
      if (s.func == kFuncReduceScatter && s.inPlace) outStart = p.recvOff + r * cnt * es;
      bool writes = !(s.func == kFuncReduce && r != s.root);
      if (writes) {
        const uint8_t* out = buf + outStart;
        switch (s.func) {
          case kFuncBroadcast: e = checkBytes(out, inputs[i][s.root].data(), outLen, "broadcast"); break;
          case kFuncAllGather:
            for (int b = 0; b < n && e.empty(); b++) e = checkBytes(out + b * cnt * es, inputs[i][b].data(), cnt * es, "allgather block");
            break;
          default: {
            std::vector<const uint8_t*> ins(n);
            for (int q = 0; q < n; q++)
              ins[q] = inputs[i][q].data() + (s.func == kFuncReduceScatter ? r * cnt * es : 0);
            e = checkReduce(s.type, s.op, out, reduceRef(s.type, s.op, n, ins, cnt), cnt);
          }
        }
      }
      // Everything else in the span: poison, or (in place) the untouched input.
      if (e.empty()) {
        if (!s.inPlace) {
          if (writes) {
            e = checkPoison(buf, p.recvSpanStart, outStart, "guard before output");
            if (e.empty()) e = checkPoison(buf, outStart + outLen, p.recvSpanEnd, "guard after output");
          } else {
            e = checkPoison(buf, p.recvSpanStart, p.recvSpanEnd, "non-root output");
          }
        } else {
          uint64_t spanLen = std::max(p.inBytes, p.outBytes);
          e = checkPoison(buf, p.recvSpanStart, p.recvOff, "guard before buffer");
          if (e.empty()) e = checkPoison(buf, p.recvOff + spanLen, p.recvSpanEnd, "guard after buffer");
          if (e.empty() && s.func == kFuncReduceScatter) {
            for (int b = 0; b < n && e.empty(); b++)
              if (b != r) e = checkBytes(base + b * cnt * es, inputs[i][r].data() + b * cnt * es, cnt * es, "in-place input block");
          }
          if (e.empty() && s.func == kFuncReduce && r != s.root)
            e = checkBytes(base, inputs[i][r].data(), p.inBytes, "non-root in-place input");
        }
      }
      if (!e.empty()) {
        char head[160];
        std::snprintf(head, sizeof head, "item %zu rank %d: ", i, r);
        return head + e;
      }
    }
  }
  return "";
}

std::string Runner::runP2p(const P2pSpec& s, uint64_t seed, double timeoutSec) {
  const int n = fab_.nRanks();
  const int nCh = fab_.config().nChannels;
  const uint64_t es = dataTypeBytes(s.type);
  const uint64_t blockBytes = s.count * es;
  const uint64_t sendOff = kGuard + s.sendMisalign, recvOff = kGuard + s.recvMisalign;
  const uint64_t span = recvOff + n * blockBytes + kGuard;
  if (sendOff + n * blockBytes > arenaBytes_ || span > arenaBytes_) return "harness: test does not fit the arenas";
  std::vector<std::vector<uint8_t>> in(n), hostRecv(n, std::vector<uint8_t>(span, kPoison));
  LaunchWorks works(n, std::vector<std::vector<DevWork>>(nCh));
  std::vector<std::vector<bool>> expectFrom(n, std::vector<bool>(n, false));
  for (int r = 0; r < n; r++) {
    in[r] = makeInput(s.type, n * s.count, r, seed, false);
    std::vector<uint8_t> hostSend(sendOff + in[r].size(), 0);
    std::memcpy(&hostSend[sendOff], in[r].data(), in[r].size());
    HARNESS_CUDA(cudaSetDevice(fab_.device(r)));
    HARNESS_CUDA(cudaMemcpy(dSend_[r], hostSend.data(), hostSend.size(), cudaMemcpyHostToDevice));
    HARNESS_CUDA(cudaMemcpy(dRecv_[r], hostRecv[r].data(), span, cudaMemcpyHostToDevice));
    int first = s.pattern == 0 ? 1 : 0, last = s.pattern == 0 ? 1 : n - 1;
    if (n == 1 && s.pattern == 0) first = last = 0;
    for (int d = first; d <= last; d++) {
      int to = (r + d) % n, from = (r - d + n) % n;
      expectFrom[r][from] = true;
      for (int c = 0; c < nCh; c++) {
        ElemRange part = channelPart(s.count, nCh, c, (int)es);
        if (part.count == 0) continue;
        DevWork w{};
        w.func = kFuncSendRecv;
        w.proto = (uint8_t)proto_;
        w.dataType = (uint8_t)s.type;
        w.sendBuff = dSend_[r] + sendOff + to * blockBytes;
        w.recvBuff = dRecv_[r] + recvOff + from * blockBytes;
        w.sendPeer = to;
        w.recvPeer = from;
        w.chanOffset = part.offset;
        w.chanCount = part.count;
        w.recvOffset = part.offset;
        w.recvCount = part.count;
        w.chunkElems = proto_ == kProtoSimple ? (uint32_t)p2pChunkElems(fab_.config().stepBytes, (int)es) : 0;
        works[r][c].push_back(w);
      }
    }
  }
  std::string why;
  if (!fab_.launch(works, timeoutSec, &why)) return why;
  for (int r = 0; r < n; r++) {
    HARNESS_CUDA(cudaSetDevice(fab_.device(r)));
    HARNESS_CUDA(cudaMemcpy(hostRecv[r].data(), dRecv_[r], span, cudaMemcpyDeviceToHost));
    for (int from = 0; from < n; from++) {
      const uint8_t* got = hostRecv[r].data() + recvOff + from * blockBytes;
      std::string e = expectFrom[r][from] ? checkBytes(got, in[from].data() + r * blockBytes, blockBytes, "received block")
                                          : checkPoison(got, 0, blockBytes, "block from a rank that sent nothing");
      if (e.empty()) e = checkPoison(hostRecv[r].data(), 0, recvOff, "guard before");
      if (e.empty()) e = checkPoison(hostRecv[r].data(), recvOff + n * blockBytes, span, "guard after");
      if (!e.empty()) return "rank " + std::to_string(r) + " from " + std::to_string(from) + ": " + e;
    }
  }
  return "";
}

}  // namespace weft::harness
