// A network plugin (NCCL's ext-net ABI, net_plugin_abi.h) loaded into this process, behind one
// C++ face whatever its version (8 to 11), for the plugin proxy (proxy/plugin_proxy.h).
//
// Which library (NCCL_NET_PLUGIN, as NCCL reads it): unset -> libnccl-net.so if the loader finds
// one; "none" -> no plugin; a path or a file name ending in .so -> that library; another name X ->
// libnccl-net-X.so, then X. The newest table the library exports is used. The plugin is loaded and
// initialized once per process, at the first communicator that has a peer on another host, and
// stays loaded (plugins keep global state, and NCCL never unloads one either).
// A plugin that fails to load or to initialize, or has no device, leaves weft on its socket
// transport, with a WARN when it was named in NCCL_NET_PLUGIN and an INFO line otherwise; a
// communicator whose NCCL_NET names the plugin's network then fails instead (netChoice).
#pragma once

#include <cstddef>
#include <string>

#include "core/status.h"
#include "transport/net/net_plugin_abi.h"

namespace weft::transport {

struct NetPluginDevice {
  std::string name;     // "mlx5_0", for logs
  std::string pciPath;  // empty when the plugin gives none
  int ptrSupport = 0;   // netabi::kPtr* bits
  int speedMbps = 0;
  float latencyUs = 0;
  int maxComms = 0;
  int maxRecvs = 1;
  size_t maxTransferBytes = 0;  // 0: no limit given (v8)
};

class NetPlugin {
 public:
  // The process's plugin, loaded on the first call; null when there is none (see above).
  static NetPlugin* instance();
  // For tests: loads the library at `path` as instance() would (not shared, never unloaded);
  // *why says what failed.
  [[nodiscard]] static Status loadForTest(const std::string& path, NetPlugin** out, std::string* why);

  const std::string& name() const { return name_; }     // the table's name, e.g. "IB"
  const std::string& library() const { return path_; }  // as dlopen found it
  int version() const { return version_; }
  int devices() const { return nDevices_; }
  // The device a rank on GPU `cudaDev` uses: GPUs spread over the devices in turn.
  int deviceFor(int cudaDev) const { return cudaDev >= 0 ? cudaDev % nDevices_ : 0; }
  [[nodiscard]] Status device(int dev, NetPluginDevice* out) const;

  // The calls, with NCCL's meanings; sizes are checked against what the version can carry. A
  // failing call returns the plugin's code after a WARN naming the call and the plugin.
  [[nodiscard]] Status listen(int dev, void* handle, void** listenComm) const;
  [[nodiscard]] Status connect(int dev, void* handle, void** sendComm) const;  // *sendComm null: call again
  [[nodiscard]] Status accept(void* listenComm, void** recvComm) const;        // *recvComm null: call again
  [[nodiscard]] Status regMr(void* comm, void* data, size_t bytes, void** mhandle) const;  // host memory
  [[nodiscard]] Status deregMr(void* comm, void* mhandle) const;
  // *request null: the plugin cannot take it now; try again later.
  [[nodiscard]] Status isend(void* sendComm, void* data, size_t bytes, int tag, void* mhandle, void** request) const;
  [[nodiscard]] Status irecv(void* recvComm, void* data, size_t bytes, int tag, void* mhandle, void** request) const;
  // *done set once complete (the request is then gone); *bytes: what moved.
  [[nodiscard]] Status test(void* request, bool* done, size_t* bytes) const;
  // Close calls log a failure and carry on: they run on the way out.
  void closeSend(void* sendComm) const;
  void closeRecv(void* recvComm) const;
  void closeListen(void* listenComm) const;

 private:
  NetPlugin() = default;
  // dlopen + newest table + init + devices; *why on failure.
  [[nodiscard]] static Status open(const std::string& file, NetPlugin* out, std::string* why);
  [[nodiscard]] Status failed(const char* call, Status code) const;

  std::string name_, path_;
  int version_ = 0;
  int nDevices_ = 0;
  const void* table_ = nullptr;  // a netabi::PluginV<version_>
};

// What a communicator with peers on other hosts uses, by NCCL_NET (or ncclConfig_t.netName):
// unset -> the plugin when one is loaded, else the socket transport; "Socket" -> the socket
// transport; the plugin's name (any case) -> the plugin. Anything else, or a name that needs a plugin
// that did not load, is refused with *why saying what to change.
struct NetChoice {
  NetPlugin* plugin = nullptr;  // null: weft's socket transport
};
[[nodiscard]] bool netChoice(const std::string& netName, NetChoice* out, std::string* why);

}  // namespace weft::transport
