#include "transport/net/net_plugin.h"

#include <dlfcn.h>
#include <strings.h>

#include <climits>
#include <cstdarg>
#include <cstdio>
#include <mutex>
#include <vector>

#include "core/log.h"
#include "core/param.h"

namespace weft::transport {
namespace {

using namespace netabi;

// The logger plugins get: their lines go through weft's log, tagged with the plugin's subsystem
// bits and the caller's file and line.
void pluginLog(LogLevel level, unsigned long flags, const char* file, int line, const char* fmt, ...) {
  log::Level l = (log::Level)level;
  if (level == kLogAbort) l = log::Level::Warn;
  if (l == log::Level::None || (l != log::Level::Warn && !log::enabled(l, flags))) return;
  char text[1024];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(text, sizeof(text), fmt, ap);
  va_end(ap);
  log::write(l, flags, file != nullptr ? file : "net plugin", line, "%s", text);
}

// The properties every version has, under the same names.
template <typename Props>
void copyProps(const Props& p, NetPluginDevice* out) {
  out->ptrSupport = p.ptrSupport;
  out->speedMbps = p.speed;
  out->latencyUs = p.latency;
  out->maxComms = p.maxComms;
  out->maxRecvs = p.maxRecvs;
  if (p.name != nullptr) out->name = p.name;
  if (p.pciPath != nullptr) out->pciPath = p.pciPath;
}

// Each call goes to the version's own table (the entries used this way have one type in all).
#define WEFT_PLUGIN_CALL(version, table, call) \
  ((version) == 8    ? static_cast<const PluginV8*>(table)->call   \
   : (version) == 9  ? static_cast<const PluginV9*>(table)->call   \
   : (version) == 10 ? static_cast<const PluginV10*>(table)->call  \
                     : static_cast<const PluginV11*>(table)->call)

std::string libraryFor(const std::string& spec, std::string* fallback) {
  if (spec.find('/') != std::string::npos || spec.find(".so") != std::string::npos) return spec;
  *fallback = spec;
  return "libnccl-net-" + spec + ".so";
}

}  // namespace

Status NetPlugin::open(const std::string& file, NetPlugin* out, std::string* why) {
  void* lib = dlopen(file.c_str(), RTLD_NOW | RTLD_LOCAL);
  if (lib == nullptr) {
    const char* err = dlerror();
    *why = "could not load " + file + ": " + (err != nullptr ? err : "unknown error");
    return ncclSystemError;
  }
  const struct {
    const char* symbol;
    int version;
  } tables[] = {{kSymbolV11, 11}, {kSymbolV10, 10}, {kSymbolV9, 9}, {kSymbolV8, 8}};
  for (const auto& t : tables) {
    if (const void* table = dlsym(lib, t.symbol)) {
      out->table_ = table;
      out->version_ = t.version;
      break;
    }
  }
  char path[PATH_MAX] = {};
  out->path_ = dlinfo(lib, RTLD_DI_ORIGIN, path) == 0 ? std::string(path) + "/" + file.substr(file.rfind('/') + 1)
                                                      : file;
  if (out->table_ == nullptr) {
    *why = out->path_ + " exports no network plugin table weft can use (ncclNetPlugin_v8 to _v11)";
    dlclose(lib);
    return ncclInvalidUsage;
  }
  const char* name = WEFT_PLUGIN_CALL(out->version_, out->table_, name);
  out->name_ = name != nullptr ? name : "(unnamed)";
  Status rc;
  switch (out->version_) {
    case 8: rc = static_cast<const PluginV8*>(out->table_)->init(pluginLog); break;
    case 9: rc = static_cast<const PluginV9*>(out->table_)->init(pluginLog); break;
    case 10: rc = static_cast<const PluginV10*>(out->table_)->init(pluginLog, nullptr); break;
    default: rc = static_cast<const PluginV11*>(out->table_)->init(pluginLog, nullptr);
  }
  if (rc == ncclSuccess) rc = WEFT_PLUGIN_CALL(out->version_, out->table_, devices)(&out->nDevices_);
  if (rc != ncclSuccess || out->nDevices_ <= 0) {
    *why = "network plugin " + out->name_ + " (" + out->path_ + ", v" + std::to_string(out->version_) + ") " +
           (rc != ncclSuccess ? "failed to initialize (error " + std::to_string((int)rc) + ")" : "has no device");
    return rc != ncclSuccess ? rc : ncclSystemError;  // the library stays loaded: a plugin may have started threads
  }
  return ncclSuccess;
}

NetPlugin* NetPlugin::instance() {
  static NetPlugin* plugin = nullptr;
  static std::once_flag once;
  std::call_once(once, [] {
    const auto spec = param::lookup("NCCL_NET_PLUGIN");
    if (spec && strcasecmp(spec->c_str(), "none") == 0) return;
    std::string fallback;
    const std::string file = spec ? libraryFor(*spec, &fallback) : "libnccl-net.so";
    auto* p = new NetPlugin();
    std::string why;
    Status rc = open(file, p, &why);
    if (rc != ncclSuccess && !fallback.empty() && p->table_ == nullptr) {
      std::string why2;
      rc = open(fallback, p, &why2);
      if (rc != ncclSuccess) why += "; " + why2;
    }
    if (rc != ncclSuccess) {
      if (spec) {
        WEFT_WARN("NCCL_NET_PLUGIN=%s: %s; peers on other hosts go through weft's socket transport", spec->c_str(),
                  why.c_str());
      } else {
        WEFT_INFO(log::kInit | log::kNet, "no network plugin (%s): weft's socket transport reaches other hosts",
                  why.c_str());
      }
      delete p;
      return;
    }
    WEFT_INFO(log::kInit | log::kNet, "network plugin %s v%d from %s: %d device(s)", p->name_.c_str(), p->version_,
              p->path_.c_str(), p->nDevices_);
    plugin = p;
  });
  return plugin;
}

Status NetPlugin::loadForTest(const std::string& path, NetPlugin** out, std::string* why) {
  auto* p = new NetPlugin();
  Status rc = open(path, p, why);
  if (rc != ncclSuccess) {
    delete p;
    return rc;
  }
  // Never freed (the library stays loaded too), but kept reachable so that LeakSanitizer does not
  // count it.
  static auto* loaded = new std::vector<NetPlugin*>();
  loaded->push_back(p);
  *out = p;
  return ncclSuccess;
}

Status NetPlugin::failed(const char* call, Status code) const {
  WEFT_WARN("network plugin %s: %s failed (error %d)", name_.c_str(), call, (int)code);
  return code;
}

Status NetPlugin::device(int dev, NetPluginDevice* out) const {
  if (dev < 0 || dev >= nDevices_) {
    WEFT_WARN("network plugin %s: device %d of %d", name_.c_str(), dev, nDevices_);
    return ncclInternalError;
  }
  *out = NetPluginDevice{};
  Status rc;
  if (version_ == 8) {
    PropertiesV8 p{};
    rc = static_cast<const PluginV8*>(table_)->getProperties(dev, &p);
    if (rc == ncclSuccess) copyProps(p, out);
  } else {
    PropertiesV11 p{};  // v9/v10 fill its first part, which has their layout
    rc = version_ == 9    ? static_cast<const PluginV9*>(table_)->getProperties(dev, &p.base)
         : version_ == 10 ? static_cast<const PluginV10*>(table_)->getProperties(dev, &p.base)
                          : static_cast<const PluginV11*>(table_)->getProperties(dev, &p);
    if (rc == ncclSuccess) copyProps(p.base, out);
    out->maxTransferBytes = p.base.maxP2pBytes;
  }
  return rc == ncclSuccess ? rc : failed("getProperties", rc);
}

Status NetPlugin::listen(int dev, void* handle, void** listenComm) const {
  Status rc = WEFT_PLUGIN_CALL(version_, table_, listen)(dev, handle, listenComm);
  return rc == ncclSuccess ? rc : failed("listen", rc);
}

Status NetPlugin::connect(int dev, void* handle, void** sendComm) const {
  DeviceHandle* noOffload = nullptr;
  Status rc;
  if (version_ >= 10) {
    CommConfig config{kTrafficClassUndefined};
    rc = version_ == 10 ? static_cast<const PluginV10*>(table_)->connect(dev, &config, handle, sendComm, &noOffload)
                        : static_cast<const PluginV11*>(table_)->connect(dev, &config, handle, sendComm, &noOffload);
  } else {
    rc = version_ == 9 ? static_cast<const PluginV9*>(table_)->connect(dev, handle, sendComm, &noOffload)
                       : static_cast<const PluginV8*>(table_)->connect(dev, handle, sendComm, &noOffload);
  }
  return rc == ncclSuccess ? rc : failed("connect", rc);
}

Status NetPlugin::accept(void* listenComm, void** recvComm) const {
  DeviceHandle* noOffload = nullptr;
  Status rc = WEFT_PLUGIN_CALL(version_, table_, accept)(listenComm, recvComm, &noOffload);
  return rc == ncclSuccess ? rc : failed("accept", rc);
}

Status NetPlugin::regMr(void* comm, void* data, size_t bytes, void** mhandle) const {
  Status rc = WEFT_PLUGIN_CALL(version_, table_, regMr)(comm, data, bytes, kPtrHost, mhandle);
  return rc == ncclSuccess ? rc : failed("regMr", rc);
}

Status NetPlugin::deregMr(void* comm, void* mhandle) const {
  Status rc = WEFT_PLUGIN_CALL(version_, table_, deregMr)(comm, mhandle);
  return rc == ncclSuccess ? rc : failed("deregMr", rc);
}

Status NetPlugin::isend(void* sendComm, void* data, size_t bytes, int tag, void* mhandle, void** request) const {
  Status rc;
  switch (version_) {
    case 8:
      if (bytes > (size_t)INT_MAX) return failed("isend (more than 2 GiB for a v8 plugin)", ncclInternalError);
      rc = static_cast<const PluginV8*>(table_)->isend(sendComm, data, (int)bytes, tag, mhandle, request);
      break;
    case 9: rc = static_cast<const PluginV9*>(table_)->isend(sendComm, data, bytes, tag, mhandle, request); break;
    case 10:
      rc = static_cast<const PluginV10*>(table_)->isend(sendComm, data, bytes, tag, mhandle, nullptr, request);
      break;
    default:
      rc = static_cast<const PluginV11*>(table_)->isend(sendComm, data, bytes, tag, mhandle, nullptr, request);
  }
  return rc == ncclSuccess ? rc : failed("isend", rc);
}

Status NetPlugin::irecv(void* recvComm, void* data, size_t bytes, int tag, void* mhandle, void** request) const {
  Status rc;
  if (version_ == 8) {
    if (bytes > (size_t)INT_MAX) return failed("irecv (more than 2 GiB for a v8 plugin)", ncclInternalError);
    int size = (int)bytes;
    rc = static_cast<const PluginV8*>(table_)->irecv(recvComm, 1, &data, &size, &tag, &mhandle, request);
  } else {
    size_t size = bytes;
    void* noProfile = nullptr;
    switch (version_) {
      case 9:
        rc = static_cast<const PluginV9*>(table_)->irecv(recvComm, 1, &data, &size, &tag, &mhandle, request);
        break;
      case 10:
        rc = static_cast<const PluginV10*>(table_)->irecv(recvComm, 1, &data, &size, &tag, &mhandle, &noProfile,
                                                           request);
        break;
      default:
        rc = static_cast<const PluginV11*>(table_)->irecv(recvComm, 1, &data, &size, &tag, &mhandle, &noProfile,
                                                           request);
    }
  }
  return rc == ncclSuccess ? rc : failed("irecv", rc);
}

Status NetPlugin::test(void* request, bool* done, size_t* bytes) const {
  int finished = 0, size = 0;
  Status rc = WEFT_PLUGIN_CALL(version_, table_, test)(request, &finished, &size);
  if (rc != ncclSuccess) return failed("test", rc);
  *done = finished != 0;
  if (*done) *bytes = size < 0 ? 0 : (size_t)size;
  return ncclSuccess;
}

void NetPlugin::closeSend(void* sendComm) const {
  const Status rc = WEFT_PLUGIN_CALL(version_, table_, closeSend)(sendComm);
  if (rc != ncclSuccess) (void)failed("closeSend", rc);
}

void NetPlugin::closeRecv(void* recvComm) const {
  const Status rc = WEFT_PLUGIN_CALL(version_, table_, closeRecv)(recvComm);
  if (rc != ncclSuccess) (void)failed("closeRecv", rc);
}

void NetPlugin::closeListen(void* listenComm) const {
  const Status rc = WEFT_PLUGIN_CALL(version_, table_, closeListen)(listenComm);
  if (rc != ncclSuccess) (void)failed("closeListen", rc);
}

bool netChoice(const std::string& netName, NetChoice* out, std::string* why) {
  *out = NetChoice{};
  if (!netName.empty() && strcasecmp(netName.c_str(), "Socket") == 0) return true;
  NetPlugin* plugin = NetPlugin::instance();
  if (netName.empty() || (plugin != nullptr && strcasecmp(netName.c_str(), plugin->name().c_str()) == 0)) {
    out->plugin = plugin;
    return true;
  }
  *why = "NCCL_NET=" + netName + " names a network weft does not have here: weft's own is Socket";
  *why += plugin != nullptr ? ", and the network plugin loaded is " + plugin->name()
                            : ", and no network plugin is loaded (NCCL_NET_PLUGIN)";
  *why += " (unset NCCL_NET, or set it to one of those)";
  return false;
}

}  // namespace weft::transport
