#include "core/registrations.h"

#include <algorithm>

namespace weft::core {

RegistrationTable::RegistrationTable(size_t pageBytes) : pageBytes_(pageBytes == 0 ? 4096 : pageBytes) {}

void* RegistrationTable::add(uintptr_t ptr, size_t bytes, Registration* kept) {
  const uintptr_t mask = ~(uintptr_t)(pageBytes_ - 1);
  const uintptr_t begin = ptr & mask;
  const uintptr_t end = (ptr + bytes + pageBytes_ - 1) & mask;
  std::lock_guard<std::mutex> lock(mutex_);
  size_t at = 0;
  for (; at < slots_.size() && slots_[at]->begin <= begin; ++at) {
    if (slots_[at]->end >= end) {
      ++slots_[at]->refs;
      if (kept != nullptr) *kept = *slots_[at];
      return slots_[at].get();
    }
  }
  auto fresh = std::make_unique<Registration>();
  fresh->begin = begin;
  fresh->end = end;
  fresh->refs = 1;
  if (kept != nullptr) *kept = *fresh;
  void* handle = fresh.get();
  slots_.insert(slots_.begin() + (ptrdiff_t)at, std::move(fresh));
  return handle;
}

size_t RegistrationTable::indexOf(const void* handle) const {
  for (size_t i = 0; i < slots_.size(); ++i) {
    if (slots_[i].get() == handle) return i;
  }
  return slots_.size();
}

bool RegistrationTable::remove(const void* handle) {
  std::lock_guard<std::mutex> lock(mutex_);
  const size_t i = indexOf(handle);
  if (i == slots_.size()) return false;
  if (--slots_[i]->refs == 0) slots_.erase(slots_.begin() + (ptrdiff_t)i);
  return true;
}

bool RegistrationTable::find(const void* handle, Registration* out) const {
  std::lock_guard<std::mutex> lock(mutex_);
  const size_t i = indexOf(handle);
  if (i == slots_.size()) return false;
  *out = *slots_[i];
  return true;
}

size_t RegistrationTable::size() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return slots_.size();
}

}  // namespace weft::core
