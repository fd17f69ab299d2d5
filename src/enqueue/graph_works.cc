#include "enqueue/graph_works.h"

#include <algorithm>
#include <utility>

namespace weft::enqueue {

GraphWorkPool::GraphWorkPool(Hooks hooks, uint32_t itemsPerBuffer)
    : hooks_(std::move(hooks)), itemsPerBuffer_(std::max<uint32_t>(itemsPerBuffer, 1)) {}

GraphWorkPool::~GraphWorkPool() {
  for (Buffer& b : buffers_) {
    hooks_.free(b.host);
    // The pool's reference and the untied ones; graphs still alive drop theirs later.
    for (uint32_t i = 0; i <= b.untied; ++i) dropHold(b.hold);
  }
}

void GraphWorkPool::dropHold(void* hold) {
  Hold* h = (Hold*)hold;
  if (h->refs.fetch_sub(1, std::memory_order_acq_rel) == 1) delete h;
}

size_t GraphWorkPool::heldCount() const {
  return (size_t)std::count_if(buffers_.begin(), buffers_.end(), [](const Buffer& b) { return !idle(b); });
}

Status GraphWorkPool::addBuffer(uint32_t capacity) {
  void* host = nullptr;
  void* devView = nullptr;
  WEFT_TRY(hooks_.alloc(sizeof(dev::DevWork) * capacity, &host, &devView));
  Buffer b;
  b.host = (dev::DevWork*)host;
  b.devView = (const dev::DevWork*)devView;
  b.capacity = capacity;
  b.hold = new Hold;
  buffers_.push_back(b);
  current_ = buffers_.size() - 1;
  return ncclSuccess;
}

Status GraphWorkPool::reserve() { return buffers_.empty() ? addBuffer(itemsPerBuffer_) : ncclSuccess; }

Status GraphWorkPool::tieTo(Buffer& b, runtime::Stream stream, unsigned long long graphId) {
  if (b.tied && b.tiedGraph == graphId) return ncclSuccess;  // this graph holds it already
  b.hold->refs.fetch_add(1, std::memory_order_relaxed);
  b.tied = true;
  b.tiedGraph = graphId;
  // Untied (no hook, or the tie failed) the reference stays, so the buffer is never handed out
  // again; the pool drops it when it goes.
  const Status s = hooks_.tie ? hooks_.tie(stream, &GraphWorkPool::dropHold, b.hold) : ncclSuccess;
  if (!hooks_.tie || isError(s)) ++b.untied;
  return s;
}

Status GraphWorkPool::take(uint32_t n, runtime::Stream stream, unsigned long long graphId, dev::DevWork** host,
                           const dev::DevWork** devView) {
  // A buffer no graph holds starts over: everything handed out of it before is dead.
  auto restartIfIdle = [](Buffer& b) {
    if (b.used != 0 && idle(b)) {
      b.used = 0;
      b.tied = false;
    }
  };
  auto fits = [n](const Buffer& b) { return b.capacity - b.used >= n; };
  bool found = false;
  if (!buffers_.empty()) {
    restartIfIdle(buffers_[current_]);
    found = fits(buffers_[current_]);
  }
  for (size_t i = 0; i < buffers_.size() && !found; ++i) {
    restartIfIdle(buffers_[i]);
    if (fits(buffers_[i])) {
      current_ = i;
      found = true;
    }
  }
  if (!found) WEFT_TRY(addBuffer(std::max(n, itemsPerBuffer_)));
  Buffer& b = buffers_[current_];
  WEFT_TRY(tieTo(b, stream, graphId));
  *host = b.host + b.used;
  *devView = b.devView + b.used;
  b.used += n;
  return ncclSuccess;
}

}  // namespace weft::enqueue
