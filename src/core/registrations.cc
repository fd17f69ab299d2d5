#include "core/registrations.h"

#include <atomic>

namespace weft::core {
namespace {

// Handles are tokens, unique in the process and never reused: a stale handle (deregistered as
// often as it was registered) or another communicator's can never name a live registration, as a
// freed and reallocated pointer could. The tag makes them non-canonical addresses: a caller that
// dereferences one faults at once instead of reading something.
constexpr uint64_t kHandleTag = 0x7765ull << 48;  // "we"
std::atomic<uint64_t> gNextHandle{1};

}  // namespace

RegistrationTable::RegistrationTable(size_t pageBytes) : pageBytes_(pageBytes == 0 ? 4096 : pageBytes) {}

void* RegistrationTable::add(uintptr_t ptr, size_t bytes, Registration* kept) {
  const uintptr_t mask = ~(uintptr_t)(pageBytes_ - 1);
  const uintptr_t begin = ptr & mask;
  const uintptr_t end = (ptr + bytes + pageBytes_ - 1) & mask;
  std::lock_guard<std::mutex> lock(mutex_);
  size_t at = 0;
  for (; at < slots_.size() && slots_[at].begin <= begin; ++at) {
    if (slots_[at].end >= end) {
      ++slots_[at].refs;
      if (kept != nullptr) *kept = slots_[at];
      return (void*)(uintptr_t)slots_[at].handle;
    }
  }
  Registration fresh;
  fresh.begin = begin;
  fresh.end = end;
  fresh.refs = 1;
  fresh.handle = kHandleTag | gNextHandle.fetch_add(1, std::memory_order_relaxed);
  if (kept != nullptr) *kept = fresh;
  slots_.insert(slots_.begin() + (ptrdiff_t)at, fresh);
  count_.store(slots_.size(), std::memory_order_relaxed);
  return (void*)(uintptr_t)fresh.handle;
}

size_t RegistrationTable::indexOf(const void* handle) const {
  for (size_t i = 0; i < slots_.size(); ++i) {
    if (slots_[i].handle == (uint64_t)(uintptr_t)handle) return i;
  }
  return slots_.size();
}

bool RegistrationTable::remove(const void* handle, bool* released) {
  std::lock_guard<std::mutex> lock(mutex_);
  const size_t i = indexOf(handle);
  if (i == slots_.size()) return false;
  const bool last = --slots_[i].refs == 0;
  if (last) slots_.erase(slots_.begin() + (ptrdiff_t)i);
  count_.store(slots_.size(), std::memory_order_relaxed);
  if (released != nullptr) *released = last;
  return true;
}

bool RegistrationTable::findRange(uintptr_t ptr, size_t bytes, Registration* out) const {
  std::lock_guard<std::mutex> lock(mutex_);
  // Sorted by begin: candidates are the slots that begin at or before ptr; ranges may overlap.
  for (size_t i = 0; i < slots_.size() && slots_[i].begin <= ptr; ++i) {
    if (slots_[i].end >= ptr && slots_[i].end - ptr >= bytes) {
      *out = slots_[i];
      return true;
    }
  }
  return false;
}

bool RegistrationTable::find(const void* handle, Registration* out) const {
  std::lock_guard<std::mutex> lock(mutex_);
  const size_t i = indexOf(handle);
  if (i == slots_.size()) return false;
  *out = slots_[i];
  return true;
}

size_t RegistrationTable::size() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return slots_.size();
}

}  // namespace weft::core
