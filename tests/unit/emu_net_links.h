// Every link of an emulated communicator (emu_launch.h) rerouted through network proxies over
// loopback TCP, as between hosts (transport/net/net_connections.h): the sender's kernel writes its
// Simple and LL slots and its tail into image memory of its own and finds its credits and step
// sizes in its head line; the receiver's proxy fills its slots (Simple steps and their tail, LL
// lines by their flags), and its kernel's head goes to an image line. LL runs where the links
// have LL buffers; LL128 does not cross hosts. With a network plugin (transport/net/net_plugin.h),
// plugin proxies (proxy/plugin_proxy.h) carry the links instead, each receiver's listen info handed
// to its sender as the bootstrap would.
#pragma once

#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <functional>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "emu_launch.h"
#include "proxy/net_proxy.h"
#include "proxy/plugin_proxy.h"

namespace weft::dev::emutest {

// The test plugin at WEFT_NET_PLUGIN_DIR/file, loaded once per process (the library stays loaded).
inline const transport::NetPlugin* testPlugin(const std::string& file) {
  transport::NetPlugin* plugin = nullptr;
  std::string why;
  EXPECT_EQ(transport::NetPlugin::loadForTest(std::string(WEFT_NET_PLUGIN_DIR) + "/" + file, &plugin, &why),
            ncclSuccess) << why;
  return plugin;
}

class ProxiedLinks {
 public:
  ProxiedLinks(EmuRingComm& comm, std::function<void(int rank)> onFailure,
               const transport::NetPlugin* plugin = nullptr)
      : comm_(comm), proxies_(comm.nRanks()), pluginProxies_(comm.nRanks()) {
    const int n = comm.nRanks();
    std::vector<proxy::ListenerDesc> descs(n);
    for (int r = 0; r < n; r++) {
      proxy::NetProxyConfig cfg;
      cfg.jobKey = 0x5eedf00d;
      cfg.rank = r;
      cfg.nRanks = n;
      for (int p = 0; p < n; p++) cfg.peerNames.push_back("emulated rank " + std::to_string(p));
      cfg.abortRequested = &abort_;
      cfg.onFailure = [onFailure, r](ncclResult_t) { onFailure(r); };
      cfg.setupTimeoutSec = 20;
      if (plugin != nullptr) {
        EXPECT_EQ(proxy::PluginProxy::create(cfg, plugin, 0, &pluginProxies_[r]), ncclSuccess);
        continue;
      }
      EXPECT_EQ(proxy::NetProxy::listen(cfg, bootstrap::SocketAddress::loopback(AF_INET), &proxies_[r]), ncclSuccess);
      descs[r] = proxies_[r]->desc();
    }
    std::vector<std::vector<proxy::NetSendSide>> sends(n);
    std::vector<std::vector<proxy::NetRecvSide>> recvs(n);
    for (int c = 0; c < comm.nChannels(); c++)
      for (int s = 0; s < n; s++)
        for (int r = 0; r < n; r++) {
          if (s == r) continue;
          ConnInfo& snd = comm.devPeer(s, c, r).send;
          ConnInfo& rcv = comm.devPeer(r, c, s).recv;
          const uint64_t stepBytes = (uint64_t)snd.stepBytes[kProtoSimple];
          const uint64_t llStepBytes = snd.buffs[kProtoLL] != nullptr ? (uint64_t)snd.stepBytes[kProtoLL] : 0;
          slots_.emplace_back(size_t(kSteps) * (stepBytes + llStepBytes));  // zeroed, as LL needs
          lines_.emplace_back(3 * kCounterLineWords);  // sender's image tail, its head line, receiver's image head
          uint64_t* line = lines_.back().data();
          snd.buffs[kProtoSimple] = slots_.back().get();
          if (llStepBytes != 0) snd.buffs[kProtoLL] = slots_.back().get() + kSteps * stepBytes;
          snd.buffs[kProtoLL128] = nullptr;
          snd.tail = line;
          snd.head = line + kCounterLineWords;
          rcv.head = line + 2 * kCounterLineWords;
          proxy::NetSendSide send{c, r, snd.tail, snd.head + kStepSizeWord, snd.buffs[kProtoSimple], snd.head,
                                  stepBytes};
          send.llSlots = snd.buffs[kProtoLL];
          send.llStepBytes = llStepBytes;
          sends[s].push_back(send);
          proxy::NetRecvSide recv{c, s, rcv.buffs[kProtoSimple], rcv.tail, rcv.head, stepBytes};
          recv.llSlots = rcv.buffs[kProtoLL];
          recv.llStepBytes = llStepBytes;
          recvs[r].push_back(recv);
        }
    std::vector<std::thread> starts;
    std::vector<Status> started(n, ncclInternalError);
    std::vector<std::vector<proxy::PluginConnectInfo>> listened(n), infos(n);  // outlive the threads
    if (plugin != nullptr) {
      for (int r = 0; r < n; r++) EXPECT_EQ(pluginProxies_[r]->listen(recvs[r], &listened[r]), ncclSuccess);
      for (int s = 0; s < n; s++)
        for (const proxy::NetSendSide& send : sends[s])
          for (const proxy::PluginConnectInfo& info : listened[send.peer])
            if (info.sender == s && info.channel == send.channel) infos[s].push_back(info);
      for (int r = 0; r < n; r++)
        starts.emplace_back([&, r] { started[r] = pluginProxies_[r]->start(sends[r], infos[r]); });
    }
    for (int r = 0; r < n && plugin == nullptr; r++)
      starts.emplace_back([&, r] { started[r] = proxies_[r]->start(sends[r], recvs[r], descs); });
    for (auto& t : starts) t.join();
    for (int r = 0; r < n; r++) EXPECT_EQ(started[r], ncclSuccess) << "rank " << r;
  }
  ~ProxiedLinks() {  // the proxies go first: their threads read the slots
    abort_.store(true);
    proxies_.clear();
    pluginProxies_.clear();
  }

  // Credits travel after the kernels end: wait until every sender has them all (up to 10 s).
  // tailExact: as EmuRingComm::checkLinks (only Simple steps move the tail).
  bool settle(bool tailExact = true) {
    for (auto until = std::chrono::steady_clock::now() + std::chrono::seconds(10); comm_.checkLinks(tailExact) != "";) {
      if (std::chrono::steady_clock::now() > until) return false;
      std::this_thread::sleep_for(std::chrono::milliseconds(1));
    }
    return true;
  }
  uint64_t stepsReceived() const {
    uint64_t t = 0;
    for (const auto& p : proxies_) t += p ? p->stepsReceived() : 0;
    for (const auto& p : pluginProxies_) t += p ? p->stepsReceived() : 0;
    return t;
  }
  uint64_t linesReceived() const {
    uint64_t t = 0;
    for (const auto& p : proxies_) t += p ? p->linesReceived() : 0;
    for (const auto& p : pluginProxies_) t += p ? p->linesReceived() : 0;
    return t;
  }

 private:
  EmuRingComm& comm_;
  std::atomic<bool> abort_{false};
  std::vector<std::unique_ptr<proxy::NetProxy>> proxies_;  // one of the two
  std::vector<std::unique_ptr<proxy::PluginProxy>> pluginProxies_;
  std::vector<AlignedBytes> slots_;
  std::vector<std::vector<uint64_t>> lines_;
};

}  // namespace weft::dev::emutest
