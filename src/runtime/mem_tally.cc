#include "runtime/mem_tally.h"

#include <cstdio>
#include <mutex>
#include <unordered_map>

#include "core/log.h"

namespace weft::runtime {
namespace {

struct Charge {
  std::shared_ptr<MemTally> tally;
  MemPlace place;
  MemUse use;
  int64_t bytes;
};

// Every counted allocation still out, by the pointer handed out. Never destroyed: releases run
// from static destructors and deferred callbacks.
struct Charges {
  std::mutex mu;
  std::unordered_map<const void*, Charge> byKey;
};

Charges& charges() {
  static Charges* c = new Charges();
  return *c;
}

struct Current {
  std::shared_ptr<MemTally> tally;
  MemUse use = MemUse::kState;
};
thread_local Current current;
// Scopes with a growth log open on this thread: only the outermost one logs (a window registered
// inside another's registration, as the symmetric barrier memory is, would say the same twice).
thread_local int growthScopes = 0;

}  // namespace

std::string memSizeText(int64_t bytes) {
  char text[48];
  if (bytes < 1024 && bytes > -1024) snprintf(text, sizeof(text), "%lld B", (long long)bytes);
  else if (bytes < (1 << 20) && bytes > -(1 << 20)) snprintf(text, sizeof(text), "%.1f KiB", (double)bytes / 1024);
  else snprintf(text, sizeof(text), "%.2f MiB", (double)bytes / (1 << 20));
  return text;
}

namespace {

const char* placeName(MemPlace place) {
  switch (place) {
    case MemPlace::kGpu: return "GPU";
    case MemPlace::kPinned: return "pinned host";
    default: return "/dev/shm";
  }
}

}  // namespace

const char* memUseName(MemUse use) {
  switch (use) {
    case MemUse::kState: return "state";
    case MemUse::kConnections: return "connections";
    case MemUse::kGraphs: return "graphs";
    case MemUse::kWindows: return "windows";
    default: return "?";
  }
}

int64_t MemTally::bytes(MemPlace place, MemUse use) const {
  return bytes_[(int)place][(int)use].load(std::memory_order_relaxed);
}

int64_t MemTally::bytes(MemPlace place) const {
  int64_t n = 0;
  for (int u = 0; u < (int)MemUse::kCount; ++u) n += bytes(place, (MemUse)u);
  return n;
}

void MemTally::add(MemPlace place, MemUse use, int64_t delta) {
  bytes_[(int)place][(int)use].fetch_add(delta, std::memory_order_relaxed);
  const int64_t now = bytes(place);
  std::atomic<int64_t>& peak = peak_[(int)place];
  for (int64_t seen = peak.load(std::memory_order_relaxed); now > seen;) {
    if (peak.compare_exchange_weak(seen, now, std::memory_order_relaxed)) break;
  }
}

std::string MemTally::text() const {
  std::string out;
  for (int p = 0; p < (int)MemPlace::kCount; ++p) {
    out += std::string(p == 0 ? "" : ", ") + placeName((MemPlace)p) + " " + memSizeText(bytes((MemPlace)p));
    std::string uses;
    for (int u = 0; u < (int)MemUse::kCount; ++u) {
      const int64_t b = bytes((MemPlace)p, (MemUse)u);
      if (b != 0) uses += std::string(uses.empty() ? "" : ", ") + memUseName((MemUse)u) + " " + memSizeText(b);
    }
    if (!uses.empty()) out += " (" + uses + ")";
  }
  return out;
}

MemTallyScope::MemTallyScope(std::shared_ptr<MemTally> tally, MemUse use, std::string growthLog)
    : growthLog_(std::move(growthLog)) {
  if (!growthLog_.empty()) {
    nested_ = growthScopes++ > 0;
    for (int p = 0; p < (int)MemPlace::kCount && tally; ++p) startBytes_[p] = tally->bytes((MemPlace)p);
  }
  enter(std::move(tally), use);
}

MemTallyScope::MemTallyScope(MemUse use) { enter(current.tally, use); }

void MemTallyScope::enter(std::shared_ptr<MemTally> tally, MemUse use) {
  savedTally_ = std::move(current.tally);
  savedUse_ = current.use;
  current.tally = std::move(tally);
  current.use = use;
}

MemTallyScope::~MemTallyScope() {
  if (!growthLog_.empty()) --growthScopes;
  if (current.tally && !growthLog_.empty() && !nested_) {
    std::string grew;
    for (int p = 0; p < (int)MemPlace::kCount; ++p) {
      const int64_t delta = current.tally->bytes((MemPlace)p) - startBytes_[p];
      if (delta > 0) grew += std::string(grew.empty() ? "" : ", ") + placeName((MemPlace)p) + " +" + memSizeText(delta);
    }
    if (!grew.empty()) {
      WEFT_INFO(log::kInit | log::kAlloc, "%s: %s; the communicator now holds %s", growthLog_.c_str(), grew.c_str(),
                current.tally->text().c_str());
    }
  }
  current.tally = std::move(savedTally_);
  current.use = savedUse_;
}

void tallyAllocation(const void* key, MemPlace place, size_t bytes) {
  if (!current.tally || key == nullptr || bytes == 0) return;
  Charge charge{current.tally, place, current.use, (int64_t)bytes};
  charge.tally->add(place, charge.use, charge.bytes);
  Charges& c = charges();
  std::lock_guard<std::mutex> lock(c.mu);
  auto [it, fresh] = c.byKey.emplace(key, charge);
  if (!fresh) {
    // The allocator reused an address whose release went uncounted: the old charge is stale.
    it->second.tally->add(it->second.place, it->second.use, -it->second.bytes);
    it->second = std::move(charge);
  }
}

void tallyRelease(const void* key) {
  if (key == nullptr) return;
  Charge charge;
  {
    Charges& c = charges();
    std::lock_guard<std::mutex> lock(c.mu);
    auto it = c.byKey.find(key);
    if (it == c.byKey.end()) return;
    charge = std::move(it->second);
    c.byKey.erase(it);
  }
  charge.tally->add(charge.place, charge.use, -charge.bytes);
}

}  // namespace weft::runtime
