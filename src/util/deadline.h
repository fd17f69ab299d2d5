// A point in time after which a blocking wait gives up. Built on steady_clock so that wall-clock
// changes (NTP, suspend) neither fire nor postpone it. A deadline of "never" exists because a
// timeout of 0 means "wait forever" in NCCL's settings.
#pragma once

#include <algorithm>
#include <chrono>
#include <cstdint>

namespace weft::util {

class Deadline {
 public:
  using Clock = std::chrono::steady_clock;

  // Waits longer than this (about 30 years) count as never: the clock's nanoseconds would overflow.
  static constexpr int64_t kFarMs = int64_t(1) << 40;

  // A deadline `ms` milliseconds from now; ms <= 0 (or past kFarMs) means never.
  static Deadline afterMs(int64_t ms) {
    Deadline d;
    d.start_ = Clock::now();
    d.never_ = ms <= 0 || ms > kFarMs;
    d.end_ = d.start_ + std::chrono::milliseconds(d.never_ ? 0 : ms);
    return d;
  }
  // A deadline `seconds` from now; seconds <= 0 means never (NCCL_*_TIMEOUT=0).
  static Deadline afterSeconds(int64_t seconds) {
    return afterMs(seconds <= 0 || seconds > kFarMs / 1000 ? 0 : seconds * 1000);
  }
  static Deadline never() { return afterMs(0); }

  bool isNever() const { return never_; }
  bool expired() const { return !never_ && Clock::now() >= end_; }

  // Milliseconds left (0 once expired); a large value for never.
  int64_t remainingMs() const {
    if (never_) return INT64_MAX / 4;
    auto left = std::chrono::duration_cast<std::chrono::milliseconds>(end_ - Clock::now()).count();
    return left > 0 ? left : 0;
  }

  // A poll() timeout: the time left, but at most sliceMs so that the caller can check an abort
  // flag regularly. Rounded up so that a wait does not spin just before the deadline.
  int pollMs(int sliceMs) const {
    if (never_) return sliceMs;
    auto left = std::chrono::duration_cast<std::chrono::microseconds>(end_ - Clock::now()).count();
    if (left <= 0) return 0;
    return (int)std::min<int64_t>(sliceMs, (left + 999) / 1000);
  }

  // Seconds since the deadline was set, for messages ("timed out after 2.0 s").
  double elapsedSeconds() const {
    return std::chrono::duration<double>(Clock::now() - start_).count();
  }

  // The earlier of two deadlines.
  static Deadline earliest(const Deadline& a, const Deadline& b) {
    if (a.never_) return b;
    if (b.never_) return a;
    return a.end_ <= b.end_ ? a : b;
  }

  // This deadline moved later by ms (a grace period); never stays never.
  Deadline extendedByMs(int64_t ms) const {
    Deadline d = *this;
    d.end_ += std::chrono::milliseconds(ms);
    return d;
  }

 private:
  Clock::time_point start_{};
  Clock::time_point end_{};
  bool never_ = true;
};

}  // namespace weft::util
