// The network plugin ABI (NCCL's ext-net interface, versions 8 to 11): the C tables a plugin
// library (libnccl-net.so, libnccl-net-<name>.so) exports as the symbols ncclNetPlugin_v8 ...
// ncclNetPlugin_v11. Field order and types are the contract with binaries built against NCCL's
// headers, so nothing here may move; weft reads them through transport/net/net_plugin.h only.
//
// What weft uses: a plugin's receiver listens (a handle of at most kHandleBytes, which the sender
// gets through weft's bootstrap), the sender connects and the receiver accepts (both non-blocking:
// called again until the comm is non-null), memory is registered per comm, and each isend is
// matched in order by one irecv of the same tag, completion being polled with test.
// Plain C layout: the test plugin (tests/unit/net_plugin) includes this header too.
#pragma once

#include <cstddef>
#include <cstdint>

#include "nccl.h"

namespace weft::netabi {

constexpr size_t kHandleBytes = 128;  // NCCL_NET_HANDLE_MAXSIZE
constexpr int kPtrHost = 0x1;         // NCCL_PTR_HOST: memory the plugin may send from / receive into
constexpr int kPtrCuda = 0x2;
constexpr int kPtrDmaBuf = 0x4;
constexpr int kMaxRequests = 8;  // requests in flight per comm that every version allows (v8: 8; later: 32)

// The logger a plugin gets at init (ncclDebugLogger_t) and its levels and subsystem bits.
enum LogLevel : int { kLogNone = 0, kLogVersion = 1, kLogWarn = 2, kLogInfo = 3, kLogAbort = 4, kLogTrace = 5 };
typedef void (*Logger)(LogLevel level, unsigned long flags, const char* file, int line, const char* fmt, ...);
// v10 and later: a profiler callback at init (weft passes none).
typedef ncclResult_t (*ProfilerCallback)(void** eHandle, int type, void* pHandle, int64_t pluginId, void* extData);

enum DeviceType : int { kDeviceHost = 0, kDeviceUnpack = 1 };  // ncclNetDeviceType: weft asks for host only

// A device offload handle (ncclNetDeviceHandle_v8..v11): weft always passes null, i.e. no offload.
struct DeviceHandle {
  DeviceType type;
  int version;
  void* handle;
  size_t size;
  int needsProxyProgress;
};

constexpr int kMaxDevsPerVirtualNic = 4;
struct VirtualDeviceProps {  // v9 and later
  int ndevs;
  int devs[kMaxDevsPerVirtualNic];
};

struct CommConfig {  // v10 and later, at connect
  int trafficClass;  // -1: the plugin's default
};
constexpr int kTrafficClassUndefined = -1;

struct PropertiesV8 {
  char* name;
  char* pciPath;
  uint64_t guid;
  int ptrSupport;  // kPtr* bits
  int regIsGlobal;
  int speed;  // Mbit/s
  int port;
  float latency;  // microseconds
  int maxComms;
  int maxRecvs;  // receives an irecv may group
  DeviceType netDeviceType;
  int netDeviceVersion;
};

struct PropertiesV9 {  // v10 has the same layout
  char* name;
  char* pciPath;
  uint64_t guid;
  int ptrSupport;
  int regIsGlobal;
  int forceFlush;  // receives into GPU memory need iflush
  int speed;
  int port;
  float latency;
  int maxComms;
  int maxRecvs;
  DeviceType netDeviceType;
  int netDeviceVersion;
  VirtualDeviceProps vProps;
  size_t maxP2pBytes;   // largest single transfer
  size_t maxCollBytes;
};
using PropertiesV10 = PropertiesV9;

struct PropertiesV11 {
  PropertiesV9 base;  // the v9/v10 fields, in the same places
  uint64_t fabricId;
};

struct NetPath {  // v11 getNetPath
  int loc;
};

// The function tables. Common to every version: name first, then init, devices, getProperties,
// listen, connect, accept, regMr, regMrDmaBuf, deregMr, isend, irecv, iflush, test, closeSend,
// closeRecv, closeListen, getDeviceMr, irecvConsumed (then makeVDevice from v9, getNetPath in v11).
// v8 and v9 differ in the properties and in the size type of isend/irecv (int, then size_t).
template <typename Props, typename Size>
struct PluginV8Shape {
  const char* name;
  ncclResult_t (*init)(Logger log);
  ncclResult_t (*devices)(int* ndev);
  ncclResult_t (*getProperties)(int dev, Props* props);
  ncclResult_t (*listen)(int dev, void* handle, void** listenComm);
  ncclResult_t (*connect)(int dev, void* handle, void** sendComm, DeviceHandle** sendDevComm);
  ncclResult_t (*accept)(void* listenComm, void** recvComm, DeviceHandle** recvDevComm);
  ncclResult_t (*regMr)(void* comm, void* data, size_t size, int type, void** mhandle);
  ncclResult_t (*regMrDmaBuf)(void* comm, void* data, size_t size, int type, uint64_t offset, int fd, void** mhandle);
  ncclResult_t (*deregMr)(void* comm, void* mhandle);
  ncclResult_t (*isend)(void* sendComm, void* data, Size size, int tag, void* mhandle, void** request);
  ncclResult_t (*irecv)(void* recvComm, int n, void** data, Size* sizes, int* tags, void** mhandles, void** request);
  ncclResult_t (*iflush)(void* recvComm, int n, void** data, int* sizes, void** mhandles, void** request);
  ncclResult_t (*test)(void* request, int* done, int* sizes);
  ncclResult_t (*closeSend)(void* sendComm);
  ncclResult_t (*closeRecv)(void* recvComm);
  ncclResult_t (*closeListen)(void* listenComm);
  ncclResult_t (*getDeviceMr)(void* comm, void* mhandle, void** dptrMhandle);
  ncclResult_t (*irecvConsumed)(void* recvComm, int n, void* request);
};
using PluginV8 = PluginV8Shape<PropertiesV8, int>;
struct PluginV9 : PluginV8Shape<PropertiesV9, size_t> {
  ncclResult_t (*makeVDevice)(int* d, VirtualDeviceProps* props);
};

// v10: init takes a profiler callback, connect a CommConfig, isend/irecv a profiler handle each.
// v11 (Props differs) appends getNetPath.
template <typename Props>
struct PluginV10Shape {
  const char* name;
  ncclResult_t (*init)(Logger log, ProfilerCallback prof);
  ncclResult_t (*devices)(int* ndev);
  ncclResult_t (*getProperties)(int dev, Props* props);
  ncclResult_t (*listen)(int dev, void* handle, void** listenComm);
  ncclResult_t (*connect)(int dev, CommConfig* config, void* handle, void** sendComm, DeviceHandle** sendDevComm);
  ncclResult_t (*accept)(void* listenComm, void** recvComm, DeviceHandle** recvDevComm);
  ncclResult_t (*regMr)(void* comm, void* data, size_t size, int type, void** mhandle);
  ncclResult_t (*regMrDmaBuf)(void* comm, void* data, size_t size, int type, uint64_t offset, int fd, void** mhandle);
  ncclResult_t (*deregMr)(void* comm, void* mhandle);
  ncclResult_t (*isend)(void* sendComm, void* data, size_t size, int tag, void* mhandle, void* phandle,
                        void** request);
  ncclResult_t (*irecv)(void* recvComm, int n, void** data, size_t* sizes, int* tags, void** mhandles,
                        void** phandles, void** request);
  ncclResult_t (*iflush)(void* recvComm, int n, void** data, int* sizes, void** mhandles, void** request);
  ncclResult_t (*test)(void* request, int* done, int* sizes);
  ncclResult_t (*closeSend)(void* sendComm);
  ncclResult_t (*closeRecv)(void* recvComm);
  ncclResult_t (*closeListen)(void* listenComm);
  ncclResult_t (*getDeviceMr)(void* comm, void* mhandle, void** dptrMhandle);
  ncclResult_t (*irecvConsumed)(void* recvComm, int n, void* request);
  ncclResult_t (*makeVDevice)(int* d, VirtualDeviceProps* props);
};
using PluginV10 = PluginV10Shape<PropertiesV10>;
struct PluginV11 : PluginV10Shape<PropertiesV11> {
  ncclResult_t (*getNetPath)(uint64_t fabricId0, uint64_t fabricId1, NetPath* path);
};

// The exported symbol names, newest first (the order weft tries them in).
constexpr const char* kSymbolV11 = "ncclNetPlugin_v11";
constexpr const char* kSymbolV10 = "ncclNetPlugin_v10";
constexpr const char* kSymbolV9 = "ncclNetPlugin_v9";
constexpr const char* kSymbolV8 = "ncclNetPlugin_v8";

#if defined(__x86_64__) || defined(__aarch64__)
static_assert(sizeof(DeviceHandle) == 32, "ncclNetDeviceHandle layout");
static_assert(sizeof(PropertiesV8) == 64 && offsetof(PropertiesV8, netDeviceVersion) == 56, "v8 properties");
static_assert(offsetof(PropertiesV9, vProps) == 64 && offsetof(PropertiesV9, maxP2pBytes) == 88 &&
                  sizeof(PropertiesV9) == 104, "v9/v10 properties");
static_assert(offsetof(PropertiesV11, fabricId) == 104, "v11 properties");
static_assert(sizeof(PluginV8) == 19 * sizeof(void*) && sizeof(PluginV9) == 20 * sizeof(void*) &&
                  sizeof(PluginV10) == 20 * sizeof(void*) && sizeof(PluginV11) == 21 * sizeof(void*),
              "plugin tables are pointer arrays");
#endif

}  // namespace weft::netabi
