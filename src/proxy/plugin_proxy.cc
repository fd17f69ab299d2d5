#include "proxy/plugin_proxy.h"

#include <poll.h>
#include <sched.h>
#include <sys/eventfd.h>
#include <unistd.h>

#include <chrono>
#include <cstdint>
#include <cstdarg>
#include <cstdio>
#include <cstring>

#include "core/log.h"
#include "device/abi.h"
#include "device/work_math.h"
#include "proxy/net_proxy_internal.h"

namespace weft::proxy {

using detail::kLine;
using detail::kSteps;
using detail::loadAcquire;
using detail::storeRelease;
using ull = detail::ull;
using Clock = std::chrono::steady_clock;

namespace {

// As the socket proxy (net_proxy.cc): spin while anything moved in the last kIdleSlow, then look
// every kSlowPollMs (wake() ends the wait at once).
constexpr std::chrono::milliseconds kIdleSlow{50};
constexpr int kSlowPollMs = 1;
// A destroyed proxy keeps sending what its kernels published while the plugin takes it, up to
// kDrainLimit, and gives up once nothing moved for kDrainStall; byes and fail notices get kNoticeWait.
constexpr std::chrono::seconds kDrainLimit{10};
constexpr std::chrono::milliseconds kDrainStall{1000};
constexpr std::chrono::milliseconds kByeWait{2000}, kFailNoticeWait{200};

// The message kinds, told apart by size (plugin_proxy.h): Simple steps are padded to kPad.
constexpr uint64_t kPad = 16;
struct LinesTrailer {  // after an LL step's lines
  uint32_t magic;      // kLinesMagic
  uint32_t step;       // low 32 bits
};
static_assert(sizeof(LinesTrailer) == 8, "an LL message is 8 bytes past a multiple of 16");
struct Notice {     // a message of its own
  uint32_t magic;   // kByeMagic or kFailMagic
  uint32_t step;    // low 32 bits of the step it took
  int32_t culprit;  // fail: the rank whose connection failed first
};
static_assert(sizeof(Notice) == 12, "a notice is 12 bytes");

uint64_t padded(uint64_t bytes) { return (bytes + kPad - 1) / kPad * kPad; }

}  // namespace

// One connection this rank sends on: steps [done, posted) are with the plugin, one request each.
struct PluginProxy::SendConn {
  NetSendSide side;
  std::string what;
  char handle[netabi::kHandleBytes] = {};  // the receiver's, which connect() may use as scratch
  void* comm = nullptr;
  void* slotsMr = nullptr;
  void* stagingMr = nullptr;
  // LL messages, kSteps of llStepBytes + kPad, then one notice.
  std::vector<char> staging;
  void* request[kSteps] = {};
  bool complete[kSteps] = {};
  uint64_t posted = 0, done = 0;
  uint64_t lineStep[kSteps] = {}, linesSeen[kSteps] = {};  // LL: flagged lines found so far, by slot
  void* noticeRequest = nullptr;
  bool noticeSent = false;
  char* notice() { return staging.data() + kSteps * (side.llStepBytes + kPad); }
};

// One connection this rank receives on: receives of steps [done, posted) are posted.
struct PluginProxy::RecvConn {
  NetRecvSide side;
  std::string what;
  void* listenComm = nullptr;
  void* comm = nullptr;
  void* slotsMr = nullptr;
  void* request[kSteps] = {};
  bool complete[kSteps] = {};
  size_t bytes[kSteps] = {};
  uint64_t posted = 0, done = 0;
  uint64_t received = 0;  // the tail published: 1 + the last Simple step in
  bool peerGone = false;  // a bye came: nothing more will
};

Status checkPluginConnectInfo(const PluginConnectInfo& info, const NetSendSide& side, uint64_t jobKey, int me,
                              const char* from, std::string* why) {
  char text[512];
  if (info.magic != kPluginInfoMagic || info.jobKey != jobKey || info.reserved != 0) {
    snprintf(text, sizeof(text), "%s: its network plugin connection info is not one of this communicator's (magic "
             "0x%x, job key %llx)", from, info.magic, (ull)info.jobKey);
  } else if (info.receiver != side.peer || info.sender != me || info.channel != side.channel) {
    snprintf(text, sizeof(text), "%s: its network plugin connection info is for channel %d, rank %d -> %d; this rank "
             "expects channel %d, rank %d -> %d", from, info.channel, info.sender, info.receiver, side.channel, me,
             side.peer);
  } else if (info.stepBytes != side.stepBytes || info.llStepBytes != side.llStepBytes) {
    snprintf(text, sizeof(text), "%s: its connection slots differ from this rank's (Simple %llu vs %llu bytes, LL %u "
             "vs %llu): are NCCL_BUFFSIZE / NCCL_LL_BUFFSIZE the same on every rank?", from, (ull)info.stepBytes,
             (ull)side.stepBytes, info.llStepBytes, (ull)side.llStepBytes);
  } else {
    return ncclSuccess;
  }
  *why = text;
  return ncclRemoteError;
}

PluginProxy::PluginProxy(const NetProxyConfig& cfg, const transport::NetPlugin* plugin, int device)
    : cfg_(cfg), plugin_(plugin), device_(device) {}

Status PluginProxy::create(const NetProxyConfig& cfg, const transport::NetPlugin* plugin, int device,
                           std::unique_ptr<PluginProxy>* out) {
  if (plugin == nullptr || device < 0 || device >= plugin->devices() || cfg.rank < 0 || cfg.rank >= cfg.nRanks) {
    WEFT_WARN("plugin proxy: rank %d of %d, device %d: not a valid setup", cfg.rank, cfg.nRanks, device);
    return ncclInternalError;
  }
  std::unique_ptr<PluginProxy> proxy(new PluginProxy(cfg, plugin, device));
  proxy->wakeFd_.reset(eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC));
  if (!proxy->wakeFd_.valid()) {
    WEFT_WARN("plugin proxy (rank %d): eventfd() failed: %s", cfg.rank, strerror(errno));
    return ncclSystemError;
  }
  *out = std::move(proxy);
  return ncclSuccess;
}

PluginProxy::~PluginProxy() {
  stop_.store(true, std::memory_order_release);
  if (thread_.joinable()) thread_.join();
  if (orderly_) sendNotices(kByeMagic, cfg_.rank);
  closeAll(/*incomingToo=*/true);
}

std::string PluginProxy::peerName(int peer) const {
  return peer >= 0 && (size_t)peer < cfg_.peerNames.size() && !cfg_.peerNames[peer].empty()
             ? cfg_.peerNames[peer] : "rank " + std::to_string(peer);
}

std::string PluginProxy::describe(int channel, bool send, int peer) const {
  return "net proxy (rank " + std::to_string(cfg_.rank) + ", plugin " + plugin_->name() + "), channel " +
         std::to_string(channel) + (send ? ", sending to peer " : ", receiving from peer ") + peerName(peer);
}

// ---------------------------------------------------------------------------------------------
// Setup

Status PluginProxy::listen(const std::vector<NetRecvSide>& recvs, std::vector<PluginConnectInfo>* infos) {
  std::vector<std::unique_ptr<RecvConn>> made;
  infos->clear();
  for (const NetRecvSide& side : recvs) {
    if (side.slots == nullptr || side.tail == nullptr || side.gpuHead == nullptr || side.stepBytes == 0 ||
        side.stepBytes % kPad != 0 || (side.llStepBytes != 0 && side.stepBytes < side.llStepBytes + kPad)) {
      WEFT_WARN("plugin proxy (rank %d): receive side (channel %d, peer %d) is not usable: Simple slots of %llu "
                "bytes must hold an LL step of %llu and its trailer", cfg_.rank, side.channel, side.peer,
                (ull)side.stepBytes, (ull)side.llStepBytes);
      return ncclInternalError;
    }
    auto c = std::make_unique<RecvConn>();
    c->side = side;
    c->what = describe(side.channel, false, side.peer);
    PluginConnectInfo info{};
    info.magic = kPluginInfoMagic;
    info.receiver = cfg_.rank;
    info.sender = side.peer;
    info.channel = side.channel;
    info.jobKey = cfg_.jobKey;
    info.stepBytes = side.stepBytes;
    info.llStepBytes = (uint32_t)side.llStepBytes;
    WEFT_TRY(plugin_->listen(device_, info.handle, &c->listenComm));
    infos->push_back(info);
    made.push_back(std::move(c));
  }
  if (!started_) {
    for (auto& c : made) recvs_.push_back(std::move(c));
    return ncclSuccess;
  }
  if (failed_.load()) return ncclRemoteError;
  std::lock_guard<std::mutex> lock(mutex_);
  for (auto& c : made) incomingRecvs_.push_back(std::move(c));
  incoming_.store(true, std::memory_order_release);
  wake();
  return ncclSuccess;
}

Status PluginProxy::makeSends(const std::vector<NetSendSide>& sends, const std::vector<PluginConnectInfo>& infos,
                              std::vector<std::unique_ptr<SendConn>>* out) const {
  if (sends.size() != infos.size()) return ncclInternalError;
  for (size_t i = 0; i < sends.size(); ++i) {
    const NetSendSide& side = sends[i];
    auto c = std::make_unique<SendConn>();
    c->side = side;
    c->what = describe(side.channel, true, side.peer);
    std::string why;
    if (checkPluginConnectInfo(infos[i], side, cfg_.jobKey, cfg_.rank, c->what.c_str(), &why) != ncclSuccess) {
      WEFT_WARN("%s", why.c_str());
      return ncclRemoteError;
    }
    memcpy(c->handle, infos[i].handle, sizeof(c->handle));
    c->staging.assign(kSteps * (side.llStepBytes + kPad) + kPad, 0);
    out->push_back(std::move(c));
  }
  return ncclSuccess;
}

Status PluginProxy::registerSend(SendConn& c) const {
  WEFT_TRY(plugin_->regMr(c.comm, const_cast<char*>(c.side.slots), kSteps * c.side.stepBytes, &c.slotsMr));
  return plugin_->regMr(c.comm, c.staging.data(), c.staging.size(), &c.stagingMr);
}

Status PluginProxy::registerRecv(RecvConn& c) const {
  plugin_->closeListen(c.listenComm);  // one connection per listener
  c.listenComm = nullptr;
  return plugin_->regMr(c.comm, c.side.slots, kSteps * c.side.stepBytes, &c.slotsMr);
}

Status PluginProxy::connectAll(const std::vector<SendConn*>& sends, const std::vector<RecvConn*>& recvs) {
  const auto deadline = cfg_.setupTimeoutSec > 0 ? Clock::now() + std::chrono::seconds(cfg_.setupTimeoutSec)
                                                 : Clock::time_point::max();
  for (;;) {
    size_t missing = 0;
    for (SendConn* c : sends) {
      if (c->comm != nullptr) continue;
      WEFT_TRY(plugin_->connect(device_, c->handle, &c->comm));
      if (c->comm != nullptr) WEFT_TRY(registerSend(*c));
      else ++missing;
    }
    for (RecvConn* c : recvs) {
      if (c->comm != nullptr) continue;
      WEFT_TRY(plugin_->accept(c->listenComm, &c->comm));
      if (c->comm != nullptr) WEFT_TRY(registerRecv(*c));
      else ++missing;
    }
    if (missing == 0) return ncclSuccess;
    if (bootstrap::aborted(cfg_.abortRequested)) return ncclInternalError;
    if (Clock::now() > deadline) {
      std::string list;
      for (SendConn* c : sends) if (c->comm == nullptr) list += "; " + c->what;
      for (RecvConn* c : recvs) if (c->comm == nullptr) list += "; " + c->what;
      WEFT_WARN("plugin proxy (rank %d): %zu network connection(s) not made within %lld s (NCCL_BOOTSTRAP_TIMEOUT)%s",
                cfg_.rank, missing, (long long)cfg_.setupTimeoutSec, list.c_str());
      return ncclRemoteError;
    }
    usleep(100);
  }
}

Status PluginProxy::start(const std::vector<NetSendSide>& sends, const std::vector<PluginConnectInfo>& infos) {
  if (started_) return ncclInternalError;
  WEFT_TRY(makeSends(sends, infos, &sends_));
  std::vector<SendConn*> s;
  std::vector<RecvConn*> r;
  for (auto& c : sends_) s.push_back(c.get());
  for (auto& c : recvs_) r.push_back(c.get());
  WEFT_TRY(connectAll(s, r));
  started_ = true;
  thread_ = std::thread([this] { run(); });
  return ncclSuccess;
}

Status PluginProxy::addSends(const std::vector<NetSendSide>& sends, const std::vector<PluginConnectInfo>& infos) {
  if (!started_ || failed_.load() || stop_.load()) {
    WEFT_WARN("plugin proxy (rank %d): connections added after the proxy %s", cfg_.rank,
              failed_.load() ? "failed" : "stopped");
    return failed_.load() ? ncclRemoteError : ncclInternalError;
  }
  std::vector<std::unique_ptr<SendConn>> made;
  WEFT_TRY(makeSends(sends, infos, &made));
  std::vector<SendConn*> s;
  for (auto& c : made) s.push_back(c.get());
  Status rc = connectAll(s, {});
  if (rc != ncclSuccess) {
    for (auto& c : made) closeSend(*c);
    return rc;
  }
  std::lock_guard<std::mutex> lock(mutex_);
  for (auto& c : made) incomingSends_.push_back(std::move(c));
  incoming_.store(true, std::memory_order_release);
  wake();
  return ncclSuccess;
}

void PluginProxy::adoptIncoming() {
  std::lock_guard<std::mutex> lock(mutex_);
  for (auto& c : incomingSends_) sends_.push_back(std::move(c));
  for (auto& c : incomingRecvs_) recvs_.push_back(std::move(c));
  incomingSends_.clear();
  incomingRecvs_.clear();
  incoming_.store(false, std::memory_order_relaxed);
}

// ---------------------------------------------------------------------------------------------
// Progress

void PluginProxy::wake() {
  if (!sleeping_.load(std::memory_order_relaxed)) return;
  const uint64_t one = 1;
  (void)!::write(wakeFd_.get(), &one, sizeof(one));
}

void PluginProxy::run() {
  auto lastMoved = Clock::now();
  Clock::time_point drainUntil{};
  for (;;) {
    if (incoming_.load(std::memory_order_acquire)) adoptIncoming();
    if (stop_.load(std::memory_order_acquire)) {
      // Destroyed in order: what this rank's kernels published still goes out (they finished
      // believing it sent), within kDrainLimit; the destructor then sends the byes.
      const auto now = Clock::now();
      if (drainUntil == Clock::time_point{}) drainUntil = now + kDrainLimit;
      if (flushed()) {
        orderly_ = true;
        return;
      }
      if (now > drainUntil || now - lastMoved > kDrainStall) {
        WEFT_WARN("net proxy (rank %d, plugin %s): destroyed with steps its kernels published still unsent; those "
                  "peers will see their connections fail", cfg_.rank, plugin_->name().c_str());
        return;
      }
    }
    if (bootstrap::aborted(cfg_.abortRequested)) {
      WEFT_INFO(log::kNet, "net proxy (rank %d): abort requested; the progress thread stops", cfg_.rank);
      return;
    }
    bool moved = false;
    for (size_t i = 0; i < sends_.size(); ++i) {
      if (!progressSend(*sends_[i], &moved)) return;
    }
    for (size_t i = 0; i < recvs_.size(); ++i) {
      if (!progressRecv(*recvs_[i], &moved)) return;
    }
    if (moved) {
      lastMoved = Clock::now();
    } else if (Clock::now() - lastMoved > kIdleSlow) {
      sleeping_.store(true, std::memory_order_relaxed);
      pollfd p{wakeFd_.get(), POLLIN, 0};
      if (::poll(&p, 1, kSlowPollMs) > 0) {
        uint64_t count = 0;
        (void)!::read(wakeFd_.get(), &count, sizeof(count));
        lastMoved = Clock::now();  // a launch is on its way
      }
      sleeping_.store(false, std::memory_order_relaxed);
    } else {
      sched_yield();
    }
  }
}

bool PluginProxy::progressSend(SendConn& c, bool* moved) {
  if (c.posted > c.done && !completeSends(c, moved)) return false;
  return postReady(c, moved);
}

// An LL step is ready once every line its size word counts carries the step's flag.
bool PluginProxy::llReady(SendConn& c, uint64_t step, uint64_t bytes) {
  const size_t i = step % kSteps;
  const uint64_t lines = (bytes + dev::kLLLineDataBytes - 1) / dev::kLLLineDataBytes;
  const char* slot = c.side.llSlots + i * c.side.llStepBytes;
  if (c.lineStep[i] != step) {
    c.lineStep[i] = step;
    c.linesSeen[i] = 0;
  }
  c.linesSeen[i] = detail::flaggedRunEnd(slot, c.linesSeen[i], lines, dev::llFlag(step));
  return c.linesSeen[i] == lines;
}

// Posts the steps the GPU has published, in order, each as one message.
bool PluginProxy::postReady(SendConn& c, bool* moved) {
  const uint64_t tail = loadAcquire(c.side.gpuTail);
  if (tail > c.done + kSteps) {
    return fail(ncclInternalError, cfg_.rank, "%s: the GPU published step %llu while only %llu were sent (the slot "
                "was not free)", c.what.c_str(), (ull)(tail - 1), (ull)c.done);
  }
  while (c.posted < c.done + kSteps) {
    const uint64_t s = c.posted;
    const size_t i = s % kSteps;
    // An LL word may be rewritten for step s + kSteps meanwhile: a plain 8-byte load, either value naming a step.
    const uint64_t word = __atomic_load_n(&c.side.stepSizes[i], __ATOMIC_RELAXED);
    if (!dev::stepSizeWordIsFor(word, s)) return true;  // not published yet
    const uint64_t bytes = dev::stepSizeWordBytes(word);
    char* data;
    uint64_t size;
    void* mr;
    if (!dev::stepSizeWordIsLL(word)) {
      if (tail <= s) return true;  // the size is out, the tail not yet
      if (bytes > c.side.stepBytes) {
        return fail(ncclInternalError, cfg_.rank, "%s: step %llu has %llu bytes, more than the %llu-byte slot",
                    c.what.c_str(), (ull)s, (ull)bytes, (ull)c.side.stepBytes);
      }
      data = const_cast<char*>(c.side.slots) + i * c.side.stepBytes;
      size = padded(bytes);
      mr = c.slotsMr;
    } else {
      if (c.side.llStepBytes == 0 || bytes == 0 || 2 * bytes > c.side.llStepBytes) {
        return fail(ncclInternalError, cfg_.rank, "%s: LL step %llu of %llu bytes on a connection with %llu-byte LL "
                    "slots", c.what.c_str(), (ull)s, (ull)bytes, (ull)c.side.llStepBytes);
      }
      if (!llReady(c, s, bytes)) return true;
      const uint64_t lineBytes = c.linesSeen[i] * kLine;
      data = c.staging.data() + i * (c.side.llStepBytes + kPad);
      memcpy(data, c.side.llSlots + i * c.side.llStepBytes, lineBytes);
      const LinesTrailer trailer{kLinesMagic, (uint32_t)s};
      memcpy(data + lineBytes, &trailer, sizeof(trailer));
      size = lineBytes + sizeof(trailer);
      mr = c.stagingMr;
      if (dev::llWipeAfter(s)) detail::wipeLLSlot(c.side.llSlots + i * c.side.llStepBytes, c.side.llStepBytes, s);
    }
    void* request = nullptr;
    if (plugin_->isend(c.comm, data, size, c.side.channel, mr, &request) != ncclSuccess) {
      return fail(ncclSystemError, c.side.peer, "%s: the network plugin refused to send step %llu (%llu bytes)",
                  c.what.c_str(), (ull)s, (ull)size);
    }
    if (request == nullptr) return true;  // the plugin is busy: again later
    c.request[i] = request;
    c.complete[i] = false;
    c.posted++;
    *moved = true;
  }
  return true;
}

bool PluginProxy::completeSends(SendConn& c, bool* moved) {
  uint64_t failedStep = UINT64_MAX;
  for (uint64_t s = c.done; s < c.posted; ++s) {
    const size_t i = s % kSteps;
    if (c.complete[i]) continue;
    bool done = false;
    size_t bytes = 0;
    if (plugin_->test(c.request[i], &done, &bytes) != ncclSuccess) {
      failedStep = s;
      break;
    }
    if (!done) break;
    c.request[i] = nullptr;
    c.complete[i] = true;
  }
  const uint64_t before = c.done;
  while (c.done < c.posted && c.complete[c.done % kSteps]) {
    c.complete[c.done % kSteps] = false;
    c.done++;
  }
  if (c.done != before) {
    storeRelease(c.side.head, c.done);  // the GPU may rewrite those slots
    stepsSent_.fetch_add(c.done - before, std::memory_order_release);
    *moved = true;
  }
  if (failedStep != UINT64_MAX) {  // after the head: what did go out is the GPU's again
    return fail(ncclRemoteError, c.side.peer, "%s: sending step %llu failed in the network plugin (see its message "
                "above); the peer probably exited or aborted - check its log", c.what.c_str(), (ull)failedStep);
  }
  return true;
}

bool PluginProxy::progressRecv(RecvConn& c, bool* moved) {
  if (c.comm == nullptr) {  // made on first use: its sender connects when it has the info
    if (plugin_->accept(c.listenComm, &c.comm) != ncclSuccess) {
      return fail(ncclSystemError, c.side.peer, "%s: accepting the connection failed", c.what.c_str());
    }
    if (c.comm == nullptr) return true;
    if (registerRecv(c) != ncclSuccess) {
      return fail(ncclSystemError, cfg_.rank, "%s: registering the receive slots failed", c.what.c_str());
    }
    *moved = true;
  }
  if (c.peerGone) return true;
  // Post the receives whose slots the GPU has freed.
  const uint64_t head = loadAcquire(c.side.gpuHead);
  if (head > c.done) {
    return fail(ncclInternalError, cfg_.rank, "%s: the GPU consumed step %llu before it arrived", c.what.c_str(),
                (ull)(head - 1));
  }
  while (c.posted < head + kSteps) {
    const size_t i = c.posted % kSteps;
    void* request = nullptr;
    if (plugin_->irecv(c.comm, c.side.slots + i * c.side.stepBytes, c.side.stepBytes, c.side.channel, c.slotsMr,
                       &request) != ncclSuccess) {
      return fail(ncclSystemError, cfg_.rank, "%s: the network plugin refused a receive", c.what.c_str());
    }
    if (request == nullptr) break;
    c.request[i] = request;
    c.complete[i] = false;
    c.posted++;
  }
  uint64_t failedStep = UINT64_MAX;
  for (uint64_t s = c.done; s < c.posted; ++s) {
    const size_t i = s % kSteps;
    if (c.complete[i]) continue;
    bool done = false;
    if (plugin_->test(c.request[i], &done, &c.bytes[i]) != ncclSuccess) {
      failedStep = s;
      break;
    }
    if (!done) break;
    c.request[i] = nullptr;
    c.complete[i] = true;
  }
  while (c.done < c.posted && c.complete[c.done % kSteps] && !c.peerGone) {
    const uint64_t s = c.done;
    c.complete[s % kSteps] = false;
    c.done++;
    if (!deliver(c, s, c.bytes[s % kSteps])) return false;
    *moved = true;
  }
  if (failedStep != UINT64_MAX && !c.peerGone) {  // after what did arrive: the GPU may still finish with it
    return fail(ncclRemoteError, c.side.peer, "%s: receiving step %llu failed in the network plugin (see its message "
                "above); the peer probably exited or aborted - check its log", c.what.c_str(), (ull)failedStep);
  }
  return true;
}

// Step s's message is in its Simple slot; its size says what it is (plugin_proxy.h).
bool PluginProxy::deliver(RecvConn& c, uint64_t s, size_t bytes) {
  char* data = c.side.slots + (s % kSteps) * c.side.stepBytes;
  if (bytes % kPad == 0) {
    c.received = s + 1;
    storeRelease(c.side.tail, c.received);
    stepsReceived_.fetch_add(1, std::memory_order_release);
    return true;
  }
  if (bytes == sizeof(Notice)) {
    Notice n;
    memcpy(&n, data, sizeof(n));
    if (n.magic == kByeMagic) {
      c.peerGone = true;  // its later receives stay posted until this rank closes; nothing else comes
      WEFT_INFO(log::kNet, "%s: the peer closed its side in order", c.what.c_str());
      return true;
    }
    if (n.magic == kFailMagic) {
      const bool other = n.culprit >= 0 && n.culprit < cfg_.nRanks && n.culprit != c.side.peer;
      if (!other) {
        return fail(ncclRemoteError, c.side.peer, "%s: the peer stopped its network transfers on a failure of its "
                    "own - check its log", c.what.c_str());
      }
      // As the socket proxy words it: the rank whose connection failed first is the one to name.
      return fail(ncclRemoteError, n.culprit, "%s: the peer stopped its network transfers after its connection with "
                  "peer %s failed; that rank probably exited or aborted - check its log", c.what.c_str(),
                  peerName(n.culprit).c_str());
    }
  }
  if (bytes % kPad == sizeof(LinesTrailer) && c.side.llStepBytes != 0 && bytes > kPad &&
      bytes - sizeof(LinesTrailer) <= c.side.llStepBytes) {
    const uint64_t lineBytes = bytes - sizeof(LinesTrailer);
    LinesTrailer t;
    memcpy(&t, data + lineBytes, sizeof(t));
    std::string why;
    if (t.magic != kLinesMagic || t.step != (uint32_t)s) {
      return fail(ncclRemoteError, c.side.peer, "%s: LL step %llu came with a trailer for step %u (magic 0x%x)",
                  c.what.c_str(), (ull)s, t.step, t.magic);
    }
    if (checkLines(data, lineBytes, s, c.what.c_str(), &why) != ncclSuccess) {
      return fail(ncclRemoteError, c.side.peer, "%s", why.c_str());
    }
    detail::storeLines(c.side.llSlots + (s % kSteps) * c.side.llStepBytes, data, lineBytes);
    linesReceived_.fetch_add(lineBytes / kLine, std::memory_order_release);
    return true;
  }
  return fail(ncclRemoteError, c.side.peer, "%s: a message of %zu bytes for step %llu is no step, LL lines or notice "
              "this connection carries (Simple %llu, LL %llu bytes)", c.what.c_str(), bytes, (ull)s,
              (ull)c.side.stepBytes, (ull)c.side.llStepBytes);
}

// Every step the kernels published has been sent, and the plugin is done with it.
bool PluginProxy::flushed() const {
  for (const auto& c : sends_) {
    if (c->posted != c->done) return false;
    const uint64_t tail = loadAcquire(c->side.gpuTail);
    const uint64_t word = __atomic_load_n(&c->side.stepSizes[c->posted % kSteps], __ATOMIC_RELAXED);
    if (tail > c->posted || dev::stepSizeWordIsFor(word, c->posted)) return false;
  }
  return true;
}

// The notice goes as the next message of each send connection; waited for a short while only.
void PluginProxy::sendNotices(uint32_t magic, int culprit) {
  const auto until = Clock::now() + (magic == kByeMagic ? kByeWait : kFailNoticeWait);
  for (;;) {
    bool pending = false;
    for (auto& c : sends_) {
      if (c->comm == nullptr || c->noticeSent) continue;
      if (c->noticeRequest == nullptr) {
        const Notice n{magic, (uint32_t)c->posted, culprit};
        memcpy(c->notice(), &n, sizeof(n));
        if (plugin_->isend(c->comm, c->notice(), sizeof(n), c->side.channel, c->stagingMr, &c->noticeRequest) !=
            ncclSuccess) {
          c->noticeSent = true;  // this connection is broken: nothing to tell through it
          continue;
        }
      }
      bool done = false;
      size_t bytes = 0;
      if (c->noticeRequest != nullptr && plugin_->test(c->noticeRequest, &done, &bytes) != ncclSuccess) done = true;
      if (done) {
        c->noticeRequest = nullptr;
        c->noticeSent = true;
      } else {
        pending = true;
      }
    }
    if (!pending || Clock::now() > until) return;
    sched_yield();
  }
}

bool PluginProxy::fail(Status code, int culprit, const char* fmt, ...) {
  va_list args;
  va_start(args, fmt);
  detail::warnStop(fmt, args);
  va_end(args);
  failed_.store(true);
  if (cfg_.onFailure) cfg_.onFailure(code);  // first: the notices' own plugin errors WARN as well
  sendNotices(kFailMagic, culprit);
  closeAll(/*incomingToo=*/false);  // the peers notice (the communicator's threads own the incoming lists)
  return false;
}

// Requests still in flight go with their comms (the plugin frees them at close).
void PluginProxy::closeSend(SendConn& c) const {
  if (c.slotsMr != nullptr) (void)plugin_->deregMr(c.comm, c.slotsMr);
  if (c.stagingMr != nullptr) (void)plugin_->deregMr(c.comm, c.stagingMr);
  if (c.comm != nullptr) plugin_->closeSend(c.comm);
  c.comm = c.slotsMr = c.stagingMr = nullptr;
}

void PluginProxy::closeAll(bool incomingToo) {
  for (auto& c : sends_) closeSend(*c);
  for (auto& c : recvs_) {
    if (c->slotsMr != nullptr) (void)plugin_->deregMr(c->comm, c->slotsMr);
    if (c->comm != nullptr) plugin_->closeRecv(c->comm);
    if (c->listenComm != nullptr) plugin_->closeListen(c->listenComm);
    c->comm = c->slotsMr = c->listenComm = nullptr;
  }
  if (!incomingToo) return;
  for (auto& c : incomingRecvs_) {
    if (c->listenComm != nullptr) plugin_->closeListen(c->listenComm);
    c->listenComm = nullptr;
  }
  for (auto& c : incomingSends_) closeSend(*c);
}

}  // namespace weft::proxy
