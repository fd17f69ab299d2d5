// Helpers of the NetProxy tests (net_proxy_test.cc, net_proxy_first_use_test.cc): NetProxy instances
// as ranks in one process over loopback TCP, threads and plain host memory standing in for the GPUs,
// raw sockets playing peers that misbehave.
#pragma once

#include <gtest/gtest.h>
#include <poll.h>
#include <sched.h>

#include <atomic>
#include <chrono>
#include <cstring>
#include <functional>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "bootstrap/socket.h"
#include "core/log.h"
#include "device/abi.h"
#include "proxy/net_proxy.h"
#include "proxy/net_wire.h"

namespace weft::proxy::net_test {

using bootstrap::Fd;
using bootstrap::Io;
using bootstrap::SocketAddress;
using Clock = std::chrono::steady_clock;

constexpr int kSteps = dev::kSteps;
constexpr uint64_t kJob = 0x5eed0000cafe1234ull;
constexpr char kCanary = (char)0xEE;

inline uint64_t loadAcq(const volatile uint64_t* p) { return __atomic_load_n(p, __ATOMIC_ACQUIRE); }
inline void storeRel(volatile uint64_t* p, uint64_t v) { __atomic_store_n(p, v, __ATOMIC_RELEASE); }

inline double secondsSince(Clock::time_point t) { return std::chrono::duration<double>(Clock::now() - t).count(); }

inline bool waitUntil(const std::function<bool()>& cond, int ms) {
  auto end = Clock::now() + std::chrono::milliseconds(ms);
  while (!cond()) {
    if (Clock::now() > end) return false;
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  return true;
}

// ---------------------------------------------------------------------------------------------
// Host memory standing in for the GPUs

// Step sizes cycle through 0, the full slot and pseudo-random sizes in between.
inline uint64_t stepSize(uint64_t s, uint64_t stepBytes, uint32_t seed) {
  if (s % 7 == 0) return 0;
  if (s % 7 == 1) return stepBytes;
  uint64_t x = (s + 1) * 0x9e3779b97f4a7c15ull ^ seed;
  return (x >> 17) % (stepBytes + 1);
}
inline char byteAt(uint64_t s, uint64_t i, uint32_t seed) { return (char)(s * 131 + i * 7 + seed); }

struct SendMem {
  explicit SendMem(uint64_t bytes) : stepBytes(bytes), slots(kSteps * bytes) {}
  NetSendSide side(int channel, int peer) {
    NetSendSide s;
    s.channel = channel;
    s.peer = peer;
    s.gpuTail = &tail;
    s.stepSizes = sizes;
    s.slots = slots.data();
    s.head = &head;
    s.stepBytes = stepBytes;
    return s;
  }
  uint64_t stepBytes;
  std::vector<char> slots;
  uint64_t tail = 0;
  uint64_t sizes[kSteps] = {};
  uint64_t head = 0;
};

// Slots with guard zones either side, to see that the proxy never writes outside them.
struct RecvMem {
  static constexpr size_t kGuard = 4096;
  explicit RecvMem(uint64_t bytes) : stepBytes(bytes), buf(kGuard * 2 + kSteps * bytes, kCanary) {}
  char* slots() { return buf.data() + kGuard; }
  NetRecvSide side(int channel, int peer) {
    NetRecvSide r;
    r.channel = channel;
    r.peer = peer;
    r.slots = slots();
    r.tail = &tail;
    r.gpuHead = &head;
    r.stepBytes = stepBytes;
    return r;
  }
  bool untouchedOutside(size_t firstSlot) const {  // canary everywhere outside slots [0, firstSlot)
    for (size_t i = kGuard + firstSlot * stepBytes; i < buf.size(); ++i) {
      if (buf[i] != kCanary) return false;
    }
    for (size_t i = 0; i < kGuard; ++i) {
      if (buf[i] != kCanary) return false;
    }
    return true;
  }
  uint64_t stepBytes;
  std::vector<char> buf;
  uint64_t tail = 0;
  uint64_t head = 0;
};

// The sending kernel: writes steps [from, from + steps) within the credit window.
inline std::string runSenderGpu(SendMem& m, uint64_t steps, uint32_t seed, uint64_t from = 0) {
  auto end = Clock::now() + std::chrono::seconds(6);
  for (uint64_t s = from; s < from + steps; ++s) {
    while (loadAcq(&m.head) + kSteps <= s) {
      if (Clock::now() > end) return "sender stuck at step " + std::to_string(s);
      sched_yield();
    }
    uint64_t n = stepSize(s, m.stepBytes, seed);
    char* slot = m.slots.data() + (s % kSteps) * m.stepBytes;
    for (uint64_t i = 0; i < n; ++i) slot[i] = byteAt(s, i, seed);
    __atomic_store_n(&m.sizes[s % kSteps], dev::stepSizeWord(s, n), __ATOMIC_RELAXED);  // the GPU's relaxed store
    storeRel(&m.tail, s + 1);
  }
  return "";
}

// The receiving kernel: checks each step's bytes (and that the rest of the slot is untouched, but
// for the bytes up to a multiple of `pad`, which a plugin proxy sends too), refills the slot with
// the canary and releases it.
inline std::string runReceiverGpu(RecvMem& m, uint64_t steps, uint32_t seed, uint64_t from = 0, uint64_t pad = 1) {
  auto end = Clock::now() + std::chrono::seconds(6);
  for (uint64_t s = from; s < from + steps; ++s) {
    while (loadAcq(&m.tail) <= s) {
      if (Clock::now() > end) return "receiver stuck at step " + std::to_string(s);
      sched_yield();
    }
    uint64_t n = stepSize(s, m.stepBytes, seed);
    char* slot = m.slots() + (s % kSteps) * m.stepBytes;
    for (uint64_t i = 0; i < m.stepBytes; ++i) {
      if (i >= n && i < (n + pad - 1) / pad * pad) continue;
      char want = i < n ? byteAt(s, i, seed) : kCanary;
      if (slot[i] != want) return "step " + std::to_string(s) + " byte " + std::to_string(i) + " is wrong";
    }
    memset(slot, kCanary, m.stepBytes);
    storeRel(&m.head, s + 1);
  }
  if (loadAcq(&m.tail) != from + steps) return "tail ran past the last step";
  return m.untouchedOutside(kSteps) ? "" : "guard bytes were overwritten";
}

// ---------------------------------------------------------------------------------------------
// Ranks

struct Rank {
  Rank(int rank, int nRanks, int64_t timeoutSec = 5, int family = AF_INET) {
    cfg.jobKey = kJob;
    cfg.rank = rank;
    cfg.nRanks = nRanks;
    for (int r = 0; r < nRanks; ++r) {
      std::string n = std::to_string(r);
      cfg.peerNames.push_back("rank " + n + " (pid 7" + n + " on node-" + n + ")");
    }
    cfg.abortRequested = &abort;
    cfg.onFailure = [this](ncclResult_t code) {
      lastCode = code;
      lastError = log::lastErrorOfThread();  // the proxy's WARN, as the communicator keeps it
      failures++;
    };
    cfg.setupTimeoutSec = timeoutSec;
    listened = NetProxy::listen(cfg, SocketAddress::loopback(family), &proxy);
    if (family == AF_INET) EXPECT_EQ(listened, ncclSuccess);
  }
  NetProxyConfig cfg;
  std::atomic<bool> abort{false};
  std::atomic<int> failures{0};
  std::atomic<int> lastCode{ncclSuccess};
  std::string lastError;  // written before failures is incremented
  Status listened = ncclInternalError;
  std::unique_ptr<NetProxy> proxy;
  std::vector<NetSendSide> sends;
  std::vector<NetRecvSide> recvs;
};

using Ranks = std::vector<std::unique_ptr<Rank>>;

inline Ranks makeRanks(int n, int64_t timeoutSec = 5, int family = AF_INET) {
  Ranks ranks;
  for (int r = 0; r < n; ++r) ranks.push_back(std::make_unique<Rank>(r, n, timeoutSec, family));
  return ranks;
}

inline std::vector<ListenerDesc> descs(const Ranks& ranks) {
  std::vector<ListenerDesc> d;
  for (const auto& r : ranks) d.push_back(r->proxy->desc());
  return d;
}

// start() is collective: every rank calls it at once.
inline std::vector<Status> startAll(const Ranks& ranks) {
  std::vector<ListenerDesc> d = descs(ranks);
  std::vector<Status> result(ranks.size(), ncclInternalError);
  std::vector<std::thread> threads;
  for (size_t i = 0; i < ranks.size(); ++i) {
    threads.emplace_back([&, i] { result[i] = ranks[i]->proxy->start(ranks[i]->sends, ranks[i]->recvs, d); });
  }
  for (auto& t : threads) t.join();
  return result;
}

// One connection: its memories on both ends and the seed of its byte pattern. RankList: a vector
// of pointers to ranks with `sends` and `recvs` (socket or plugin proxies).
struct Link {
  template <typename RankList>
  Link(RankList& ranks, int from, int to, int channel, uint64_t stepBytes)
      : send(stepBytes), recv(stepBytes), seed((uint32_t)(from * 1000 + to * 100 + channel)) {
    ranks[from]->sends.push_back(send.side(channel, to));
    ranks[to]->recvs.push_back(recv.side(channel, from));
  }
  SendMem send;
  RecvMem recv;
  uint32_t seed;
};

// Runs both GPUs of every link for steps [from, from + steps); returns the first problem. pad: as
// runReceiverGpu's.
inline std::string runLinks(std::vector<std::unique_ptr<Link>>& links, uint64_t steps, uint64_t from = 0,
                            uint64_t pad = 1) {
  std::vector<std::string> errors(links.size() * 2);
  std::vector<std::thread> threads;
  for (size_t i = 0; i < links.size(); ++i) {
    Link& l = *links[i];
    threads.emplace_back([&, i] { errors[2 * i] = runSenderGpu(l.send, steps, l.seed, from); });
    threads.emplace_back([&, i] { errors[2 * i + 1] = runReceiverGpu(l.recv, steps, l.seed, from, pad); });
  }
  for (auto& t : threads) t.join();
  for (size_t i = 0; i < errors.size(); ++i) {
    if (!errors[i].empty()) return "link " + std::to_string(i / 2) + ": " + errors[i];
  }
  return "";
}

inline void expectNoFailures(const Ranks& ranks) {
  for (const auto& r : ranks) EXPECT_EQ(r->failures.load(), 0) << "rank " << r->cfg.rank;
}

// ---------------------------------------------------------------------------------------------
// Raw peers

inline Fd connectRaw(const ListenerDesc& d) {
  SocketAddress a;
  std::string why;
  EXPECT_EQ(checkListenerDesc(d, d.jobKey, d.rank, "raw", &a, &why), ncclSuccess) << why;
  Fd fd;
  int err = 0;
  EXPECT_EQ(bootstrap::connectBlocking(a, util::Deadline::afterSeconds(5), nullptr, false, &fd, &err), Io::kOk);
  return fd;
}

inline Fd acceptRaw(int listenFd) {
  Fd fd;
  SocketAddress from;
  auto end = Clock::now() + std::chrono::seconds(5);
  while (bootstrap::acceptOne(listenFd, &fd, &from) != 0 && Clock::now() < end) {
    pollfd p{listenFd, POLLIN, 0};
    ::poll(&p, 1, 50);
  }
  return fd;
}

inline Io writeRaw(int fd, const void* p, size_t n) {
  int err = 0;
  return bootstrap::sendAll(fd, p, n, util::Deadline::afterSeconds(5), nullptr, &err);
}

inline Io readRaw(int fd, void* p, size_t n, int ms = 5000) {
  int err = 0;
  return bootstrap::recvAll(fd, p, n, util::Deadline::afterMs(ms), nullptr, &err);
}

// A raw listener standing in for rank `rank`'s proxy.
struct RawListener {
  explicit RawListener(int rank) {
    SocketAddress bound;
    EXPECT_EQ(bootstrap::listenOn(SocketAddress::loopback(AF_INET), &fd, &bound), ncclSuccess);
    desc = makeListenerDesc(kJob, rank, bound);
  }
  Fd fd;
  ListenerDesc desc;
};

}  // namespace weft::proxy::net_test
