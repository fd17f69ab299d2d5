// A mock of the protocol primitives for the CPU tests of the device algorithms (ring_algo_test.cc,
// tree_algo_test.cc): connections of kSteps slots carry int64 slices cut exactly as the Simple
// protocol cuts them, and a slice moves only when its input is there AND its output slot is free
// (as the device's sync warp waits). Reduction is a sum; MockFn adds stand-ins of a pre-op
// (PreMulSum) and a post-op (SumPostDiv). Errors (a deadlock, slices cut differently at the two
// ends of a connection, a connection the runner did not give) are recorded in MockFabric::error.
#pragma once

#include "device/work_math.h"

#include <algorithm>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <mutex>
#include <string>
#include <vector>

namespace weft::dev::mock {

// All connections of a simulated communicator: link(channel, src, dst) holds the sent slices.
struct MockFabric {
  MockFabric(int n, int nCh) : n(n), links(size_t(n) * n * nCh) {}
  std::deque<std::vector<int64_t>>& link(int ch, int src, int dst) { return links[(size_t(ch) * n + src) * n + dst]; }
  bool allConsumed() const {
    for (const auto& q : links)
      if (!q.empty()) return false;
    return true;
  }
  void fail(const std::string& e) {  // with m held
    if (error.empty()) error = e;
    dead = true;
    cv.notify_all();
  }

  int n;
  std::mutex m;
  std::condition_variable cv;
  std::vector<std::deque<std::vector<int64_t>>> links;
  bool dead = false;
  std::string error;
  // Only a hang guard: generous, CI machines are loaded.
  std::chrono::steady_clock::time_point deadline = std::chrono::steady_clock::now() + std::chrono::seconds(120);
};

struct MockFn {
  bool pre = false;   // PreMulSum-like: own input * 3
  bool post = false;  // SumPostDiv-like: final value + 1000
};

// The primitive interface of proto/simple.cuh. recvPeer/sendPeer < 0: no such connection.
class MockPrims {
 public:
  MockPrims(MockFabric* f, int ch, int rank, int recvPeer, int sendPeer, const int64_t* in, int64_t* out,
            uint64_t chunkElems, uint64_t stepBytes, MockFn fn)
      : f_(f), ch_(ch), rank_(rank), recvPeer_(recvPeer), sendPeer_(sendPeer), in_(in), out_(out), fn_(fn),
        slice_((int64_t)simpleSliceElems(chunkElems, stepBytes, sizeof(int64_t))) {}

  void send(int64_t i, int64_t n) { op(true, false, true, false, false, i, 0, n); }
  void recv(int64_t o, int64_t n) { op(false, true, false, true, false, 0, o, n); }
  void recvReduceSend(int64_t i, int64_t n) { op(true, true, true, false, false, i, 0, n); }
  void recvReduceCopy(int64_t i, int64_t o, int64_t n) { op(false, true, true, true, true, i, o, n); }
  void recvReduceCopySend(int64_t i, int64_t o, int64_t n) { op(true, true, true, true, true, i, o, n); }
  void recvCopySend(int64_t o, int64_t n) { op(true, true, false, true, false, 0, o, n); }
  void copySend(int64_t i, int64_t o, int64_t n) { op(true, false, true, true, false, i, o, n); }
  void localCopy(int64_t i, int64_t o, int64_t n) {
    for (int64_t e = 0; e < n; e++) out_[o + e] = post(pre(in_[i + e]));
  }

 private:
  int64_t pre(int64_t v) const { return fn_.pre ? v * 3 : v; }
  int64_t post(int64_t v) const { return fn_.post ? v + 1000 : v; }

  void op(bool doSend, bool doRecv, bool srcIn, bool dstOut, bool isFinal, int64_t inOff, int64_t outOff, int64_t n) {
    if ((doSend && sendPeer_ < 0) || (doRecv && recvPeer_ < 0)) {
      std::lock_guard<std::mutex> lk(f_->m);
      f_->fail("rank " + std::to_string(rank_) + " uses a connection the runner did not give it");
      return;
    }
    for (int64_t done = 0; done < n; done += slice_) {
      int64_t len = std::min(slice_, n - done);
      std::unique_lock<std::mutex> lk(f_->m);
      auto* rq = doRecv ? &f_->link(ch_, recvPeer_, rank_) : nullptr;
      auto* sq = doSend ? &f_->link(ch_, rank_, sendPeer_) : nullptr;
      auto ready = [&] { return f_->dead || ((!rq || !rq->empty()) && (!sq || sq->size() < size_t(kSteps))); };
      if (!f_->cv.wait_until(lk, f_->deadline, ready)) f_->fail("deadlock (rank " + std::to_string(rank_) + ")");
      if (f_->dead) return;
      std::vector<int64_t> data(len);
      if (rq) {
        if ((int64_t)rq->front().size() != len) {
          f_->fail("slice size mismatch at rank " + std::to_string(rank_) + ": got " +
                   std::to_string(rq->front().size()) + " expected " + std::to_string(len));
          return;
        }
        data = rq->front();
        rq->pop_front();
      }
      for (int64_t e = 0; e < len; e++) {
        int64_t v = rq ? data[e] : 0;
        if (srcIn) v = rq ? v + pre(in_[inOff + done + e]) : pre(in_[inOff + done + e]);
        if (isFinal) v = post(v);
        data[e] = v;
        if (dstOut) out_[outOff + done + e] = v;
      }
      if (sq) sq->push_back(std::move(data));
      f_->cv.notify_all();
    }
  }

  MockFabric* f_;
  int ch_, rank_, recvPeer_, sendPeer_;
  const int64_t* in_;
  int64_t* out_;
  MockFn fn_;
  int64_t slice_;
};

}  // namespace weft::dev::mock
