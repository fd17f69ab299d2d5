#include "core/symmetric.h"

#include <cstddef>
#include <cstring>
#include <memory>

#include "core/comm_window.h"
#include "core/communicator.h"
#include "core/log.h"
#include "core/param.h"
#include "device/abi.h"
#include "runtime/gpu.h"
#include "runtime/mem_alloc.h"

namespace weft::core {
namespace {

const param::IntParam kSymmetric{"NCCL_WEFT_SYMMETRIC", 1};

// One rank's word in the agreements below. Wire format.
constexpr uint32_t kSymVoteMagic = 0x4d595357u;  // "WSYM"
struct SymVote {
  uint32_t magic = kSymVoteMagic;
  uint32_t yes = 0;
};

// Whether every rank votes yes (false too when the exchange fails or a vote is malformed).
bool everyRankAgrees(ncclComm* comm, bool yes, const char* what) {
  std::vector<SymVote> votes((size_t)comm->nRanks);
  votes[comm->rank].yes = yes ? 1 : 0;
  if (comm->bootstrap == nullptr || isError(comm->bootstrap->allGather(votes.data(), sizeof(SymVote)))) {
    WEFT_INFO(log::kReg, "rank %d: the ranks could not agree on %s: symmetric collectives stay off", comm->rank, what);
    return false;
  }
  for (int r = 0; r < comm->nRanks; ++r) {
    if (votes[r].magic != kSymVoteMagic || votes[r].yes > 1) {
      WEFT_WARN("rank %d received a malformed vote from rank %d on %s: symmetric collectives stay off", comm->rank, r,
                what);
      return false;
    }
    if (!votes[r].yes) {
      WEFT_INFO(log::kReg, "rank %d: rank %d cannot take %s: symmetric collectives stay off", comm->rank, r, what);
      return false;
    }
  }
  return true;
}

// Tells the kernels where the barrier memory is (the words after abortFlag in DevComm).
Status publishSignals(ncclComm* comm) {
  if (comm->devComm == nullptr) return ncclSuccess;  // a stand-in communicator (tests)
  struct {
    dev::DevSymSignals* base0;
    uint64_t stride;
  } words{comm->symSignals0, comm->symSignalStride};
  static_assert(offsetof(dev::DevComm, symSignalStride) == offsetof(dev::DevComm, symSignals) + 8, "adjacent");
  return runtime::deviceMemcpy(reinterpret_cast<char*>(comm->devComm) + offsetof(dev::DevComm, symSignals), &words,
                               sizeof(words));
}

}  // namespace

bool symmetricSpans(enqueue::TaskKind kind, size_t count, int typeBytes, int nRanks, size_t* sendBytes,
                    size_t* recvBytes) {
  const size_t block = count * (size_t)typeBytes;
  switch (kind) {
    case enqueue::TaskKind::kAllReduce:
      *sendBytes = *recvBytes = block;
      return true;
    case enqueue::TaskKind::kAllGather:
      *sendBytes = block;
      *recvBytes = block * (size_t)nRanks;
      return true;
    case enqueue::TaskKind::kReduceScatter:
      *sendBytes = block * (size_t)nRanks;
      *recvBytes = block;
      return true;
    default:
      return false;
  }
}

void enableSymmetric(ncclComm* comm, bool symmetricWindow) {
  if (comm->symWindow != nullptr || comm->nRanks < 2 || comm->nRanks > dev::kSymMaxRanks) return;
  if (!everyRankAgrees(comm, symmetricWindow, "a symmetric window mapped flat on every rank")) return;
  // Every rank makes its barrier memory and registers it as a window, together.
  void* memory = nullptr;
  Status local = runtime::memAlloc(&memory, sizeof(dev::DevSymSignals));
  if (!isError(local)) local = runtime::deviceMemset(memory, 0, sizeof(dev::DevSymSignals));
  std::shared_ptr<void> owned(memory, [](void* p) {
    if (p != nullptr) (void)runtime::memFree(p);
  });
  void* win = nullptr;
  if (isError(registerWindowNow(comm, memory, sizeof(dev::DevSymSignals), &win, 0, local))) {
    WEFT_INFO(log::kReg, "rank %d: no barrier memory for symmetric collectives: they stay off", comm->rank);
    return;
  }
  const std::shared_ptr<FlatWindow> flat = comm->windows->flatOf(win);
  bool ready = flat && flat->team().size == comm->nRanks;
  if (ready) {
    comm->symSignals0 = reinterpret_cast<dev::DevSymSignals*>(flat->host().lsaFlatBase);
    comm->symSignalStride = (uint64_t)flat->host().stride4G << 32;
    ready = !isError(publishSignals(comm));
  }
  if (!everyRankAgrees(comm, ready, "the symmetric collectives' barrier memory")) {
    comm->symSignals0 = nullptr;
    comm->symSignalStride = 0;
    (void)publishSignals(comm);
    (void)deregisterWindow(comm, win);
    return;
  }
  comm->windows->keep(win, std::move(owned));  // freed with the window, when the communicator goes
  comm->symWindow = win;
  WEFT_INFO(log::kReg, "rank %d: symmetric collectives on: barrier memory window %p, %llu-byte stride", comm->rank, win,
            (unsigned long long)comm->symSignalStride);
}

void markSymmetricTasks(ncclComm* comm, std::vector<enqueue::Task>* tasks) {
  static const bool enabled = kSymmetric.get() != 0;
  if (comm->symSignals0 == nullptr || !enabled) return;
  for (enqueue::Task& t : *tasks) {
    size_t sendBytes = 0, recvBytes = 0;
    t.symStride4G = 0;
    if (t.count == 0 ||
        !symmetricSpans(t.kind, t.count, dev::dataTypeBytes(t.dataType), comm->nRanks, &sendBytes, &recvBytes))
      continue;
    uintptr_t send0 = 0, recv0 = 0;
    uint32_t sendStride = 0, recvStride = 0;
    if (!comm->windows->symmetricSpan((uintptr_t)t.sendBuff, sendBytes, comm->nRanks, &send0, &sendStride) ||
        !comm->windows->symmetricSpan((uintptr_t)t.recvBuff, recvBytes, comm->nRanks, &recv0, &recvStride) ||
        sendStride != recvStride)
      continue;
    t.symSend0 = reinterpret_cast<const void*>(send0);
    t.symRecv0 = reinterpret_cast<void*>(recv0);
    t.symStride4G = sendStride;
  }
}

}  // namespace weft::core
