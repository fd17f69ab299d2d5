// LoopNetPlugin: the test network plugin (net_plugin/loop_net_plugin.cc) loaded with dlopen, the way
// a third-party plugin is, and checked against the contract weft's plugin loader and proxy rely on:
// exported tables per library, properties, non-blocking set-up, ordered messages, the in-flight
// limit, receive mismatches, peer loss and injected send failures, through the v8, v9 and v10 tables.
#include <arpa/inet.h>
#include <dlfcn.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <chrono>
#include <cstdarg>
#include <cstring>
#include <deque>
#include <mutex>
#include <string>
#include <thread>
#include <type_traits>
#include <vector>

#include "transport/net/net_plugin_abi.h"

namespace weft::netabi {
namespace {

using Clock = std::chrono::steady_clock;
constexpr ncclResult_t kTimedOut = ncclInProgress;  // what the wait helpers return past their deadline

void* openPlugin(const char* name) {
  std::string path = std::string(WEFT_NET_PLUGIN_DIR) + "/libnccl-net-" + name + ".so";
  void* lib = dlopen(path.c_str(), RTLD_NOW | RTLD_LOCAL);  // never closed: a failed test may leave comms
  EXPECT_NE(lib, nullptr) << path << ": " << dlerror();
  return lib;
}

template <typename Table>
Table* tableOf(const char* library, const char* symbol) {
  void* lib = openPlugin(library);
  return lib == nullptr ? nullptr : static_cast<Table*>(dlsym(lib, symbol));
}

// The plugin's log, captured.
std::mutex gLogMutex;
std::vector<std::string> gWarnings;
std::vector<std::string> gInfos;

void captureLog(LogLevel level, unsigned long, const char*, int, const char* fmt, ...) {
  char text[1024];
  va_list args;
  va_start(args, fmt);
  vsnprintf(text, sizeof(text), fmt, args);
  va_end(args);
  std::lock_guard<std::mutex> lock(gLogMutex);
  if (level == kLogWarn) gWarnings.push_back(text);
  if (level == kLogInfo) gInfos.push_back(text);
}

bool logged(const std::vector<std::string>& lines, const std::string& needle) {
  std::lock_guard<std::mutex> lock(gLogMutex);
  for (const std::string& line : lines) {
    if (line.find(needle) != std::string::npos) return true;
  }
  return false;
}
bool warned(const std::string& needle) { return logged(gWarnings, needle); }

void clearLogs() {
  std::lock_guard<std::mutex> lock(gLogMutex);
  gWarnings.clear();
  gInfos.clear();
}

const char* const kPluginEnv[] = {"WEFT_LOOP_NET_DEVICES", "WEFT_LOOP_NET_INIT_FAIL", "WEFT_LOOP_NET_FAIL_AFTER_SENDS",
                                  "WEFT_LOOP_NET_ADDR"};

// One call shape over the three table versions (sizes int or size_t, the v10 extra arguments).
template <typename Table>
struct Api {
  Table* t;

  ncclResult_t init() {
    if constexpr (std::is_same_v<Table, PluginV10>) {
      return t->init(captureLog, nullptr);
    } else {
      return t->init(captureLog);
    }
  }
  ncclResult_t connect(void* handle, void** sendComm, DeviceHandle** devHandle = nullptr) {
    if constexpr (std::is_same_v<Table, PluginV10>) {
      CommConfig config{kTrafficClassUndefined};
      return t->connect(0, &config, handle, sendComm, devHandle);
    } else {
      return t->connect(0, handle, sendComm, devHandle);
    }
  }
  ncclResult_t isend(void* comm, void* data, size_t size, int tag, void* mh, void** req) {
    if constexpr (std::is_same_v<Table, PluginV10>) {
      return t->isend(comm, data, size, tag, mh, nullptr, req);
    } else if constexpr (std::is_same_v<Table, PluginV9>) {
      return t->isend(comm, data, size, tag, mh, req);
    } else {
      return t->isend(comm, data, static_cast<int>(size), tag, mh, req);
    }
  }
  ncclResult_t irecv(void* comm, void* data, size_t size, int tag, void* mh, void** req, int n = 1) {
    void* datas[2] = {data, data};
    int tags[2] = {tag, tag};
    void* mhs[2] = {mh, mh};
    if constexpr (std::is_same_v<Table, PluginV8>) {
      int sizes[2] = {static_cast<int>(size), static_cast<int>(size)};
      return t->irecv(comm, n, datas, sizes, tags, mhs, req);
    } else if constexpr (std::is_same_v<Table, PluginV9>) {
      size_t sizes[2] = {size, size};
      return t->irecv(comm, n, datas, sizes, tags, mhs, req);
    } else {
      size_t sizes[2] = {size, size};
      void* phandles[2] = {nullptr, nullptr};
      return t->irecv(comm, n, datas, sizes, tags, mhs, phandles, req);
    }
  }
  // Tests one request until done, an error or the deadline; *size gets the reported byte count.
  ncclResult_t wait(void* req, int* size = nullptr, int timeoutMs = 5000) {
    const auto deadline = Clock::now() + std::chrono::milliseconds(timeoutMs);
    while (Clock::now() < deadline) {
      int done = 0;
      ncclResult_t result = t->test(req, &done, size);
      if (result != ncclSuccess || done) return result;
    }
    return kTimedOut;
  }
};

struct Pair {
  void* listen = nullptr;
  void* send = nullptr;
  void* recv = nullptr;
};

// Alternates connect and accept in this thread: both must make progress without blocking.
template <typename Table>
::testing::AssertionResult connectOn(Api<Table> api, void* listenComm, void* handle, Pair* pair,
                                     DeviceHandle** devHandle = nullptr) {
  const auto deadline = Clock::now() + std::chrono::seconds(5);
  while (pair->send == nullptr || pair->recv == nullptr) {
    if (Clock::now() > deadline) return ::testing::AssertionFailure() << "connect/accept past 5 s";
    if (pair->send == nullptr) {
      ncclResult_t result = api.connect(handle, &pair->send, devHandle);
      if (result != ncclSuccess) return ::testing::AssertionFailure() << "connect: " << result;
    }
    if (pair->recv == nullptr) {
      ncclResult_t result = api.t->accept(listenComm, &pair->recv, devHandle);
      if (result != ncclSuccess) return ::testing::AssertionFailure() << "accept: " << result;
    }
  }
  return ::testing::AssertionSuccess();
}

template <typename Table>
::testing::AssertionResult connectPair(Api<Table> api, Pair* pair) {
  unsigned char handle[kHandleBytes];
  ncclResult_t result = api.t->listen(0, handle, &pair->listen);
  if (result != ncclSuccess) return ::testing::AssertionFailure() << "listen: " << result;
  return connectOn(api, pair->listen, handle, pair);
}

template <typename Table>
void closePair(Api<Table> api, Pair* pair) {
  EXPECT_EQ(api.t->closeSend(pair->send), ncclSuccess);
  EXPECT_EQ(api.t->closeRecv(pair->recv), ncclSuccess);
  EXPECT_EQ(api.t->closeListen(pair->listen), ncclSuccess);
  *pair = Pair{};
}

class LoopNetPlugin : public ::testing::Test {
 protected:
  void SetUp() override {
    for (const char* name : kPluginEnv) unsetenv(name);
    clearLogs();
    v10_.t = tableOf<PluginV10>("weftloop", kSymbolV10);
    v9_.t = tableOf<PluginV9>("weftloop", kSymbolV9);
    v8_.t = tableOf<PluginV8>("weftloop8", kSymbolV8);
    ASSERT_TRUE(v10_.t != nullptr && v9_.t != nullptr && v8_.t != nullptr);
    ASSERT_EQ(v10_.init(), ncclSuccess);
    ASSERT_EQ(v8_.init(), ncclSuccess);
  }
  // The plugins read their environment at init: put both back to the defaults for the next test.
  void TearDown() override {
    for (const char* name : kPluginEnv) unsetenv(name);
    if (v10_.t != nullptr) {
      EXPECT_EQ(v10_.init(), ncclSuccess);
    }
    if (v8_.t != nullptr) {
      EXPECT_EQ(v8_.init(), ncclSuccess);
    }
  }

  Api<PluginV10> v10_{nullptr};
  Api<PluginV9> v9_{nullptr};
  Api<PluginV8> v8_{nullptr};
};

TEST_F(LoopNetPlugin, EachLibraryExportsItsTablesOnly) {
  void* loop = openPlugin("weftloop");
  void* loop8 = openPlugin("weftloop8");
  void* empty = openPlugin("weftempty");
  ASSERT_TRUE(loop != nullptr && loop8 != nullptr && empty != nullptr);
  for (const char* symbol : {kSymbolV10, kSymbolV9, kSymbolV8}) {
    ASSERT_NE(dlsym(loop, symbol), nullptr) << symbol;
    EXPECT_STREQ(*static_cast<const char* const*>(dlsym(loop, symbol)), "weftloop") << symbol;
  }
  EXPECT_EQ(dlsym(loop, kSymbolV11), nullptr);
  ASSERT_NE(dlsym(loop8, kSymbolV8), nullptr);
  EXPECT_STREQ(static_cast<PluginV8*>(dlsym(loop8, kSymbolV8))->name, "weftloop8");
  for (const char* symbol : {kSymbolV11, kSymbolV10, kSymbolV9}) EXPECT_EQ(dlsym(loop8, symbol), nullptr) << symbol;
  for (const char* symbol : {kSymbolV11, kSymbolV10, kSymbolV9, kSymbolV8}) {
    EXPECT_EQ(dlsym(empty, symbol), nullptr) << symbol;
  }
  auto marker = reinterpret_cast<int (*)()>(dlsym(empty, "weft_empty_net_plugin_marker"));
  ASSERT_NE(marker, nullptr);
  EXPECT_EQ(marker(), 42);
}

TEST_F(LoopNetPlugin, InitLogsTheDeviceCountAndRereadsTheEnvironment) {
  EXPECT_TRUE(logged(gInfos, "weftloop: 1 device(s)"));
  EXPECT_TRUE(logged(gInfos, "weftloop8: 1 device(s)"));
  EXPECT_EQ(v10_.init(), ncclSuccess) << "init twice";
  EXPECT_EQ(v10_.t->init(nullptr, nullptr), ncclSuccess) << "no logger: logs nothing";
  int ndev = -1;
  ASSERT_EQ(v10_.t->devices(&ndev), ncclSuccess);
  EXPECT_EQ(ndev, 1);

  setenv("WEFT_LOOP_NET_DEVICES", "3", 1);
  ASSERT_EQ(v10_.init(), ncclSuccess);
  EXPECT_TRUE(logged(gInfos, "weftloop: 3 device(s)"));
  ASSERT_EQ(v10_.t->devices(&ndev), ncclSuccess);
  EXPECT_EQ(ndev, 3);
  PropertiesV10 props{};
  ASSERT_EQ(v10_.t->getProperties(2, &props), ncclSuccess);
  EXPECT_EQ(props.guid, 2u);
  EXPECT_EQ(props.vProps.devs[0], 2);
  EXPECT_EQ(v10_.t->getProperties(3, &props), ncclInvalidArgument);
  unsigned char handle[kHandleBytes];
  void* listenComm = nullptr;
  EXPECT_EQ(v10_.t->listen(3, handle, &listenComm), ncclInvalidArgument);

  setenv("WEFT_LOOP_NET_DEVICES", "0", 1);
  ASSERT_EQ(v10_.init(), ncclSuccess);
  ASSERT_EQ(v10_.t->devices(&ndev), ncclSuccess);
  EXPECT_EQ(ndev, 0);
  EXPECT_EQ(v10_.t->getProperties(0, &props), ncclInvalidArgument);

  setenv("WEFT_LOOP_NET_DEVICES", "two", 1);
  EXPECT_EQ(v10_.init(), ncclInvalidArgument);
  unsetenv("WEFT_LOOP_NET_DEVICES");

  setenv("WEFT_LOOP_NET_INIT_FAIL", "1", 1);
  EXPECT_EQ(v10_.init(), ncclSystemError);
  EXPECT_EQ(v8_.init(), ncclSystemError);
  EXPECT_TRUE(warned("WEFT_LOOP_NET_INIT_FAIL"));
}

// The fields every properties version has, as the plugin promises them.
template <typename Props>
void expectCommonProps(const Props& props) {
  EXPECT_STREQ(props.name, "weftloop");
  EXPECT_EQ(props.pciPath, nullptr);
  EXPECT_EQ(props.guid, 0u);
  EXPECT_EQ(props.ptrSupport, kPtrHost);
  EXPECT_EQ(props.regIsGlobal, 0);
  EXPECT_EQ(props.speed, 10000);
  EXPECT_EQ(props.port, 1);
  EXPECT_EQ(props.latency, 0.0f);
  EXPECT_EQ(props.maxComms, 65536);
  EXPECT_EQ(props.maxRecvs, 1);
  EXPECT_EQ(props.netDeviceType, kDeviceHost);
  EXPECT_EQ(props.netDeviceVersion, 0);
}

TEST_F(LoopNetPlugin, PropertiesAreHostOnlySockets) {
  PropertiesV10 props;
  memset(&props, 0x5a, sizeof(props));
  ASSERT_EQ(v10_.t->getProperties(0, &props), ncclSuccess);
  expectCommonProps(props);
  EXPECT_EQ(props.forceFlush, 0);
  EXPECT_EQ(props.vProps.ndevs, 1);
  EXPECT_EQ(props.vProps.devs[0], 0);
  EXPECT_EQ(props.maxP2pBytes, size_t(1) << 30);
  EXPECT_EQ(props.maxCollBytes, size_t(1) << 30);
  EXPECT_EQ(v10_.t->getProperties(1, &props), ncclInvalidArgument);
  EXPECT_EQ(v10_.t->getProperties(-1, &props), ncclInvalidArgument);

  PropertiesV9 props9{};
  ASSERT_EQ(v9_.t->getProperties(0, &props9), ncclSuccess);
  EXPECT_EQ(props9.maxP2pBytes, size_t(1) << 30);

  PropertiesV8 props8;
  memset(&props8, 0x5a, sizeof(props8));
  ASSERT_EQ(v8_.t->getProperties(0, &props8), ncclSuccess);
  expectCommonProps(props8);
  EXPECT_EQ(v8_.t->getProperties(1, &props8), ncclInvalidArgument);
}

TEST_F(LoopNetPlugin, ConnectAndAcceptNeverBlockInOneThread) {
  unsigned char handle[kHandleBytes];
  void* listenComm = nullptr;
  ASSERT_EQ(v10_.t->listen(0, handle, &listenComm), ncclSuccess);
  void* recvComm = reinterpret_cast<void*>(0x1);
  ASSERT_EQ(v10_.t->accept(listenComm, &recvComm, nullptr), ncclSuccess);
  EXPECT_EQ(recvComm, nullptr) << "nobody connected yet";
  void* sendComm = reinterpret_cast<void*>(0x1);
  ASSERT_EQ(v10_.connect(handle, &sendComm), ncclSuccess);
  EXPECT_EQ(sendComm, nullptr) << "the first connect call only starts the connection";

  // The device handle is left alone (no offload).
  DeviceHandle offload{};
  DeviceHandle* offloadPtr = &offload;
  Pair first;
  first.listen = listenComm;
  ASSERT_TRUE(connectOn(v10_, listenComm, handle, &first, &offloadPtr));
  EXPECT_EQ(offloadPtr, &offload);

  // A second connection through the same handle is the listener's next accept.
  Pair second;
  ASSERT_TRUE(connectOn(v10_, listenComm, handle, &second));
  EXPECT_NE(second.send, first.send);

  // Each sender reaches its own receiver.
  std::vector<char> out = {'a', 'b'}, in = {0, 0};
  void *outMh, *inMh1, *inMh2, *sendMh2, *req;
  ASSERT_EQ(v10_.t->regMr(second.send, out.data(), 2, kPtrHost, &sendMh2), ncclSuccess);
  ASSERT_EQ(v10_.t->regMr(first.send, out.data(), 2, kPtrHost, &outMh), ncclSuccess);
  ASSERT_EQ(v10_.t->regMr(first.recv, in.data(), 1, kPtrHost, &inMh1), ncclSuccess);
  ASSERT_EQ(v10_.t->regMr(second.recv, in.data() + 1, 1, kPtrHost, &inMh2), ncclSuccess);
  ASSERT_EQ(v10_.isend(second.send, out.data() + 1, 1, 2, sendMh2, &req), ncclSuccess);
  ASSERT_EQ(v10_.wait(req), ncclSuccess);
  ASSERT_EQ(v10_.isend(first.send, out.data(), 1, 1, outMh, &req), ncclSuccess);
  ASSERT_EQ(v10_.wait(req), ncclSuccess);
  ASSERT_EQ(v10_.irecv(first.recv, in.data(), 1, 1, inMh1, &req), ncclSuccess);
  ASSERT_EQ(v10_.wait(req), ncclSuccess);
  ASSERT_EQ(v10_.irecv(second.recv, in.data() + 1, 1, 2, inMh2, &req), ncclSuccess);
  ASSERT_EQ(v10_.wait(req), ncclSuccess);
  EXPECT_EQ(in, out);
  const std::vector<std::pair<void*, void*>> registrations = {
      {first.send, outMh}, {second.send, sendMh2}, {first.recv, inMh1}, {second.recv, inMh2}};
  for (auto [comm, mh] : registrations) EXPECT_EQ(v10_.t->deregMr(comm, mh), ncclSuccess);
  closePair(v10_, &first);
  second.listen = nullptr;
  closePair(v10_, &second);
}

TEST_F(LoopNetPlugin, AcceptDropsPeersWithoutTheHello) {
  unsigned char handle[kHandleBytes];
  void* listenComm = nullptr;
  ASSERT_EQ(v10_.t->listen(0, handle, &listenComm), ncclSuccess);
  // The handle's documented layout: address at bytes 8-11, port at 12-13, both in network order.
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  memcpy(&addr.sin_addr.s_addr, handle + 8, 4);
  memcpy(&addr.sin_port, handle + 12, 2);
  auto rawPeer = [&](const char* hello) {
    int fd = socket(AF_INET, SOCK_STREAM, 0);
    EXPECT_EQ(connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)), 0);
    if (hello != nullptr) {
      EXPECT_EQ(send(fd, hello, 8, MSG_NOSIGNAL), 8);
    }
    return fd;
  };
  int foreign = rawPeer("NOTHELLO");
  int silent = rawPeer(nullptr);
  close(silent);
  void* recvComm = nullptr;
  const auto until = Clock::now() + std::chrono::milliseconds(300);
  while (Clock::now() < until) {
    ASSERT_EQ(v10_.t->accept(listenComm, &recvComm, nullptr), ncclSuccess);
    ASSERT_EQ(recvComm, nullptr);
  }
  EXPECT_TRUE(warned("wrong hello"));
  EXPECT_TRUE(warned("closed before its hello"));
  Pair pair;
  pair.listen = listenComm;
  EXPECT_TRUE(connectOn(v10_, listenComm, handle, &pair)) << "the listener still takes real peers";
  close(foreign);
  closePair(v10_, &pair);
}

TEST_F(LoopNetPlugin, ConnectRejectsForeignHandlesAndReportsRefusal) {
  unsigned char handle[kHandleBytes] = {};
  void* sendComm = nullptr;
  EXPECT_EQ(v10_.connect(handle, &sendComm), ncclInvalidArgument);

  void* listenComm = nullptr;
  ASSERT_EQ(v10_.t->listen(0, handle, &listenComm), ncclSuccess);
  ASSERT_EQ(v10_.t->closeListen(listenComm), ncclSuccess);  // nobody listens on that port any more
  ncclResult_t result = ncclSuccess;
  const auto deadline = Clock::now() + std::chrono::seconds(2);
  while (result == ncclSuccess && sendComm == nullptr && Clock::now() < deadline) {
    result = v8_.connect(handle, &sendComm);  // handles are plain bytes: any table version takes them
  }
  EXPECT_EQ(result, ncclSystemError);
  EXPECT_EQ(sendComm, nullptr);
  EXPECT_TRUE(warned("connect to 127.0.0.1:"));
}

// Sizes 0 to 1 MiB through one pair, 8 in flight each way (the 9th post gets no request), checked in
// order, byte for byte, and with the receive buffers' slack left untouched.
template <typename Table>
void exchangeOrderedMessages(Api<Table> api) {
  Pair pair;
  ASSERT_TRUE(connectPair(api, &pair));
  const std::vector<size_t> sizes = {0, 1, 3, 4096, 65537, size_t(1) << 20, 17, 0};
  constexpr size_t kSlack = 8;
  std::vector<size_t> offsets;
  size_t total = 0;
  for (size_t size : sizes) {
    offsets.push_back(total);
    total += size + kSlack;
  }
  std::vector<unsigned char> out(total), in(total, 0xee);
  for (size_t i = 0; i < total; ++i) out[i] = static_cast<unsigned char>(i * 131 + i / 251);
  void *outMh, *inMh;
  ASSERT_EQ(api.t->regMr(pair.send, out.data(), total, kPtrHost, &outMh), ncclSuccess);
  ASSERT_EQ(api.t->regMr(pair.recv, in.data(), total, kPtrHost, &inMh), ncclSuccess);

  std::vector<void*> sends(sizes.size()), recvs(sizes.size());
  for (size_t i = 0; i < sizes.size(); ++i) {
    const int tag = 100 + static_cast<int>(i);
    ASSERT_EQ(api.isend(pair.send, out.data() + offsets[i], sizes[i], tag, outMh, &sends[i]), ncclSuccess);
    ASSERT_EQ(api.irecv(pair.recv, in.data() + offsets[i], sizes[i] + kSlack, tag, inMh, &recvs[i]), ncclSuccess);
    ASSERT_NE(sends[i], nullptr);
    ASSERT_NE(recvs[i], nullptr);
  }
  void* ninth = reinterpret_cast<void*>(0x1);
  ASSERT_EQ(api.isend(pair.send, out.data(), 1, 1, outMh, &ninth), ncclSuccess);
  EXPECT_EQ(ninth, nullptr) << "a 9th send in flight";
  ninth = reinterpret_cast<void*>(0x1);
  ASSERT_EQ(api.irecv(pair.recv, in.data(), 1, 1, inMh, &ninth), ncclSuccess);
  EXPECT_EQ(ninth, nullptr) << "a 9th receive in flight";

  // Test the receives from the last one backwards: test() moves the whole queue, not just its request.
  std::vector<int> sentSizes(sizes.size(), -1), gotSizes(sizes.size(), -1);
  size_t remaining = 2 * sizes.size();
  const auto deadline = Clock::now() + std::chrono::seconds(5);
  while (remaining > 0 && Clock::now() < deadline) {
    for (size_t k = 0; k < sizes.size(); ++k) {
      const size_t i = sizes.size() - 1 - k;
      int done = 0;
      if (sends[i] != nullptr) {
        ASSERT_EQ(api.t->test(sends[i], &done, &sentSizes[i]), ncclSuccess);
        if (done) sends[i] = nullptr, --remaining;
      }
      if (recvs[i] != nullptr) {
        ASSERT_EQ(api.t->test(recvs[i], &done, &gotSizes[i]), ncclSuccess);
        if (done) recvs[i] = nullptr, --remaining;
      }
    }
  }
  ASSERT_EQ(remaining, 0u) << "messages still in flight after 5 s";
  for (size_t i = 0; i < sizes.size(); ++i) {
    EXPECT_EQ(sentSizes[i], static_cast<int>(sizes[i])) << i;
    EXPECT_EQ(gotSizes[i], static_cast<int>(sizes[i])) << i;
    EXPECT_EQ(memcmp(in.data() + offsets[i], out.data() + offsets[i], sizes[i]), 0) << "message " << i;
    for (size_t s = 0; s < kSlack; ++s) ASSERT_EQ(in[offsets[i] + sizes[i] + s], 0xee) << "slack of " << i;
  }

  // With the slots free again, the next message goes through.
  void *send9, *recv9;
  ASSERT_EQ(api.isend(pair.send, out.data() + 5, 9, 9, outMh, &send9), ncclSuccess);
  ASSERT_EQ(api.irecv(pair.recv, in.data(), 9, 9, inMh, &recv9), ncclSuccess);
  ASSERT_TRUE(send9 != nullptr && recv9 != nullptr);
  int got = -1;
  EXPECT_EQ(api.wait(send9), ncclSuccess);
  EXPECT_EQ(api.wait(recv9, &got), ncclSuccess);
  EXPECT_EQ(got, 9);
  EXPECT_EQ(memcmp(in.data(), out.data() + 5, 9), 0);
  EXPECT_EQ(api.t->deregMr(pair.send, outMh), ncclSuccess);
  EXPECT_EQ(api.t->deregMr(pair.recv, inMh), ncclSuccess);
  closePair(api, &pair);
}

TEST_F(LoopNetPlugin, OrderedMessagesThroughTheV10Table) { exchangeOrderedMessages(v10_); }
TEST_F(LoopNetPlugin, OrderedMessagesThroughTheV9Table) { exchangeOrderedMessages(v9_); }
TEST_F(LoopNetPlugin, OrderedMessagesThroughTheV8OnlyLibrary) { exchangeOrderedMessages(v8_); }

template <typename Table>
void expectReceiveFails(Api<Table> api, int sendTag, size_t sendSize, int recvTag, size_t recvSize,
                        const std::string& warning) {
  Pair pair;
  ASSERT_TRUE(connectPair(api, &pair));
  std::vector<char> out(sendSize, 'x'), in(recvSize + 1);
  void *outMh, *inMh, *sendReq, *recvReq;
  ASSERT_EQ(api.t->regMr(pair.send, out.data(), out.size(), kPtrHost, &outMh), ncclSuccess);
  ASSERT_EQ(api.t->regMr(pair.recv, in.data(), in.size(), kPtrHost, &inMh), ncclSuccess);
  ASSERT_EQ(api.isend(pair.send, out.data(), sendSize, sendTag, outMh, &sendReq), ncclSuccess);
  ASSERT_EQ(api.irecv(pair.recv, in.data(), recvSize, recvTag, inMh, &recvReq), ncclSuccess);
  EXPECT_EQ(api.wait(sendReq), ncclSuccess);
  EXPECT_EQ(api.wait(recvReq), ncclSystemError);
  EXPECT_TRUE(warned(warning)) << warning;
  int done = 1;
  EXPECT_EQ(api.t->test(recvReq, &done, nullptr), ncclSystemError) << "the failure is sticky";
  EXPECT_EQ(done, 0);
  void* next = nullptr;
  EXPECT_EQ(api.irecv(pair.recv, in.data(), 1, recvTag, inMh, &next), ncclSystemError) << "for the comm too";
  EXPECT_EQ(api.t->deregMr(pair.send, outMh), ncclSuccess);
  EXPECT_EQ(api.t->deregMr(pair.recv, inMh), ncclSuccess);
  closePair(api, &pair);  // frees the failed receive
}

TEST_F(LoopNetPlugin, TagMismatchFailsTheReceive) {
  expectReceiveFails(v10_, 5, 16, 6, 16, "message tag 5 does not match the posted receive's tag 6");
  expectReceiveFails(v8_, 7, 16, 8, 16, "message tag 7 does not match the posted receive's tag 8");
}

TEST_F(LoopNetPlugin, OversizeMessageFailsTheReceive) {
  expectReceiveFails(v10_, 3, 100, 3, 50, "message of 100 bytes is larger than the posted receive of 50 bytes");
  expectReceiveFails(v8_, 3, 1, 3, 0, "message of 1 bytes is larger than the posted receive of 0 bytes");
}

TEST_F(LoopNetPlugin, RegistrationRangesAndTheStubs) {
  Pair pair;
  ASSERT_TRUE(connectPair(v10_, &pair));
  std::vector<char> buffer(256);
  void* mh = reinterpret_cast<void*>(0x1);
  EXPECT_EQ(v10_.t->regMr(pair.send, buffer.data(), buffer.size(), kPtrCuda, &mh), ncclInvalidArgument);
  EXPECT_EQ(mh, nullptr);
  EXPECT_TRUE(warned("regMr: memory type 2"));
  void *sendMh, *recvMh, *req = nullptr;
  ASSERT_EQ(v10_.t->regMr(pair.send, buffer.data() + 16, 128, kPtrHost, &sendMh), ncclSuccess);
  ASSERT_EQ(v10_.t->regMr(pair.recv, buffer.data() + 16, 128, kPtrHost, &recvMh), ncclSuccess);
  EXPECT_EQ(v10_.isend(pair.send, buffer.data() + 15, 8, 0, sendMh, &req), ncclInvalidArgument) << "starts before";
  EXPECT_EQ(v10_.isend(pair.send, buffer.data() + 100, 45, 0, sendMh, &req), ncclInvalidArgument) << "ends after";
  EXPECT_EQ(v10_.irecv(pair.recv, buffer.data() + 140, 8, 0, recvMh, &req), ncclInvalidArgument);
  EXPECT_EQ(v10_.irecv(pair.recv, buffer.data() + 16, 8, 0, sendMh, &req), ncclInvalidArgument) << "other comm";
  EXPECT_EQ(v10_.irecv(pair.recv, buffer.data() + 16, 8, 0, recvMh, &req, 2), ncclInvalidArgument) << "n = 2";
  EXPECT_EQ(v10_.isend(pair.recv, buffer.data() + 16, 8, 0, recvMh, &req), ncclInvalidArgument) << "wrong side";
  EXPECT_EQ(req, nullptr);
  EXPECT_TRUE(warned("outside the registered"));
  // The exact edges are fine: the whole registration, and an empty message at its end.
  int got = -1;
  ASSERT_EQ(v10_.isend(pair.send, buffer.data() + 16, 128, 0, sendMh, &req), ncclSuccess);
  EXPECT_EQ(v10_.wait(req), ncclSuccess);
  ASSERT_EQ(v10_.irecv(pair.recv, buffer.data() + 16, 128, 0, recvMh, &req), ncclSuccess);
  EXPECT_EQ(v10_.wait(req, &got), ncclSuccess);
  EXPECT_EQ(got, 128);
  ASSERT_EQ(v10_.isend(pair.send, buffer.data() + 144, 0, 0, sendMh, &req), ncclSuccess);
  EXPECT_EQ(v10_.wait(req), ncclSuccess);
  ASSERT_EQ(v10_.irecv(pair.recv, buffer.data() + 144, 0, 0, recvMh, &req), ncclSuccess);
  EXPECT_EQ(v10_.wait(req, &got), ncclSuccess);
  EXPECT_EQ(got, 0);

  void* dmaMh = nullptr;
  EXPECT_EQ(v10_.t->regMrDmaBuf(pair.recv, buffer.data(), 64, kPtrHost, 0, -1, &dmaMh), ncclInvalidUsage);
  void* data[1] = {buffer.data() + 16};
  int sizes[1] = {8};
  void* mhs[1] = {recvMh};
  req = reinterpret_cast<void*>(0x1);
  EXPECT_EQ(v10_.t->iflush(pair.recv, 1, data, sizes, mhs, &req), ncclSuccess);
  EXPECT_EQ(req, nullptr);
  void* dptr = reinterpret_cast<void*>(0x1);
  EXPECT_EQ(v10_.t->getDeviceMr(pair.recv, recvMh, &dptr), ncclSuccess);
  EXPECT_EQ(dptr, nullptr);
  EXPECT_EQ(v10_.t->irecvConsumed(pair.recv, 1, nullptr), ncclSuccess);
  int vdev = -1;
  VirtualDeviceProps vprops{1, {0}};
  EXPECT_EQ(v10_.t->makeVDevice(&vdev, &vprops), ncclInvalidUsage);
  EXPECT_EQ(v9_.t->makeVDevice(&vdev, &vprops), ncclInvalidUsage);
  EXPECT_EQ(v10_.t->closeSend(nullptr), ncclSuccess);
  EXPECT_EQ(v10_.t->closeRecv(nullptr), ncclSuccess);
  EXPECT_EQ(v10_.t->closeListen(nullptr), ncclSuccess);
  EXPECT_EQ(v10_.t->deregMr(pair.send, sendMh), ncclSuccess);
  EXPECT_EQ(v10_.t->deregMr(pair.recv, recvMh), ncclSuccess);
  closePair(v10_, &pair);

  // v8 sizes are int: a negative one is refused.
  ASSERT_TRUE(connectPair(v8_, &pair));
  ASSERT_EQ(v8_.t->regMr(pair.send, buffer.data(), 64, kPtrHost, &sendMh), ncclSuccess);
  EXPECT_EQ(v8_.t->isend(pair.send, buffer.data(), -1, 0, sendMh, &req), ncclInvalidArgument);
  int negative[1] = {-1};
  int tags[1] = {0};
  void* datas[1] = {buffer.data()};
  EXPECT_EQ(v8_.t->irecv(pair.recv, 1, datas, negative, tags, &sendMh, &req), ncclInvalidArgument);
  EXPECT_EQ(v8_.t->deregMr(pair.send, sendMh), ncclSuccess);
  closePair(v8_, &pair);
}

TEST_F(LoopNetPlugin, ReceiverSeesThePeerCloseWithinASecond) {
  Pair pair;
  ASSERT_TRUE(connectPair(v10_, &pair));
  std::vector<char> out(4096, 'o'), in(4096);
  void *outMh, *inMh, *sendReq, *recvReq;
  ASSERT_EQ(v10_.t->regMr(pair.send, out.data(), out.size(), kPtrHost, &outMh), ncclSuccess);
  ASSERT_EQ(v10_.t->regMr(pair.recv, in.data(), in.size(), kPtrHost, &inMh), ncclSuccess);
  // A send is done once its bytes are in the socket: no receive posted yet.
  ASSERT_EQ(v10_.isend(pair.send, out.data(), out.size(), 1, outMh, &sendReq), ncclSuccess);
  ASSERT_EQ(v10_.wait(sendReq), ncclSuccess);
  ASSERT_EQ(v10_.irecv(pair.recv, in.data(), in.size(), 1, inMh, &recvReq), ncclSuccess);
  ASSERT_EQ(v10_.wait(recvReq), ncclSuccess);
  ASSERT_EQ(v10_.irecv(pair.recv, in.data(), in.size(), 1, inMh, &recvReq), ncclSuccess);
  int done = 1;
  ASSERT_EQ(v10_.t->test(recvReq, &done, nullptr), ncclSuccess);
  EXPECT_EQ(done, 0);
  EXPECT_EQ(v10_.t->deregMr(pair.send, outMh), ncclSuccess);
  ASSERT_EQ(v10_.t->closeSend(pair.send), ncclSuccess);
  const auto closedAt = Clock::now();
  EXPECT_EQ(v10_.wait(recvReq, nullptr, 1000), ncclRemoteError);
  EXPECT_LT(Clock::now() - closedAt, std::chrono::seconds(1));
  EXPECT_TRUE(warned("the peer closed the connection"));
  EXPECT_EQ(v10_.t->deregMr(pair.recv, inMh), ncclSuccess);
  pair.send = nullptr;
  closePair(v10_, &pair);  // frees the failed receive
}

TEST_F(LoopNetPlugin, SenderSeesThePeerCloseWithinASecond) {
  Pair pair;
  ASSERT_TRUE(connectPair(v8_, &pair));
  std::vector<char> out(size_t(32) << 20, 's');  // far more than loopback socket buffers hold
  void *outMh, *sendReq;
  ASSERT_EQ(v8_.t->regMr(pair.send, out.data(), out.size(), kPtrHost, &outMh), ncclSuccess);
  ASSERT_EQ(v8_.isend(pair.send, out.data(), out.size(), 1, outMh, &sendReq), ncclSuccess);
  int done = 1;
  ASSERT_EQ(v8_.t->test(sendReq, &done, nullptr), ncclSuccess);
  EXPECT_EQ(done, 0);
  ASSERT_EQ(v8_.t->closeRecv(pair.recv), ncclSuccess);
  const auto closedAt = Clock::now();
  EXPECT_EQ(v8_.wait(sendReq, nullptr, 1000), ncclRemoteError);
  EXPECT_LT(Clock::now() - closedAt, std::chrono::seconds(1));
  EXPECT_TRUE(warned("the peer"));
  EXPECT_EQ(v8_.t->deregMr(pair.send, outMh), ncclSuccess);
  pair.recv = nullptr;
  closePair(v8_, &pair);
}

TEST_F(LoopNetPlugin, InjectedSendFailuresAfterN) {
  setenv("WEFT_LOOP_NET_FAIL_AFTER_SENDS", "2", 1);
  ASSERT_EQ(v10_.init(), ncclSuccess) << "init re-reads the environment and restarts the count";
  Pair pair;
  ASSERT_TRUE(connectPair(v10_, &pair));
  std::vector<char> out(64, 'i'), in(64);
  void *outMh, *inMh;
  ASSERT_EQ(v10_.t->regMr(pair.send, out.data(), out.size(), kPtrHost, &outMh), ncclSuccess);
  ASSERT_EQ(v10_.t->regMr(pair.recv, in.data(), in.size(), kPtrHost, &inMh), ncclSuccess);
  void* sends[3];
  for (void*& req : sends) ASSERT_EQ(v10_.isend(pair.send, out.data(), 64, 0, outMh, &req), ncclSuccess);
  for (int i = 0; i < 2; ++i) {
    void* recvReq;
    ASSERT_EQ(v10_.irecv(pair.recv, in.data(), 64, 0, inMh, &recvReq), ncclSuccess);
    EXPECT_EQ(v10_.wait(sends[i]), ncclSuccess) << "send " << i + 1;
    EXPECT_EQ(v10_.wait(recvReq), ncclSuccess) << "receive " << i + 1;
  }
  EXPECT_EQ(v10_.wait(sends[2]), ncclSystemError) << "send 3";
  EXPECT_TRUE(warned("isend #3 fails: injected by WEFT_LOOP_NET_FAIL_AFTER_SENDS=2"));
  void* fourth;
  ASSERT_EQ(v10_.isend(pair.send, out.data(), 64, 0, outMh, &fourth), ncclSuccess);
  EXPECT_EQ(v10_.wait(fourth), ncclSystemError) << "send 4";
  EXPECT_EQ(v10_.t->deregMr(pair.send, outMh), ncclSuccess);
  EXPECT_EQ(v10_.t->deregMr(pair.recv, inMh), ncclSuccess);
  closePair(v10_, &pair);

  unsetenv("WEFT_LOOP_NET_FAIL_AFTER_SENDS");
  ASSERT_EQ(v10_.init(), ncclSuccess);
  ASSERT_TRUE(connectPair(v10_, &pair));
  ASSERT_EQ(v10_.t->regMr(pair.send, out.data(), out.size(), kPtrHost, &outMh), ncclSuccess);
  void* req;
  ASSERT_EQ(v10_.isend(pair.send, out.data(), 64, 0, outMh, &req), ncclSuccess);
  EXPECT_EQ(v10_.wait(req), ncclSuccess) << "no failures once the variable is gone";
  EXPECT_EQ(v10_.t->deregMr(pair.send, outMh), ncclSuccess);
  closePair(v10_, &pair);
}

// Pairs driven from their own sender and receiver threads while the main thread sets up another pair:
// the plugin's shared state (the pending-connect table) must hold up.
TEST_F(LoopNetPlugin, PairsOnSeparateThreads) {
  constexpr int kPairs = 3;
  constexpr int kMessages = 300;
  constexpr size_t kSlotBytes = 64 << 10;
  std::vector<Pair> pairs(kPairs);
  for (Pair& pair : pairs) ASSERT_TRUE(connectPair(v10_, &pair));
  auto messageSize = [](int m) { return static_cast<size_t>((m * 7919) % kSlotBytes); };
  auto messageByte = [](int pairIndex, int m, size_t i) { return static_cast<char>(pairIndex * 31 + m * 7 + i); };

  std::vector<std::string> failures(2 * kPairs);
  auto run = [&](int pairIndex, bool sender) {
    Pair& pair = pairs[pairIndex];
    void* comm = sender ? pair.send : pair.recv;
    std::string& failure = failures[2 * pairIndex + (sender ? 0 : 1)];
    std::vector<char> slots(kMaxRequests * kSlotBytes);
    void* mh;
    if (v10_.t->regMr(comm, slots.data(), slots.size(), kPtrHost, &mh) != ncclSuccess) {
      failure = "regMr";
      return;
    }
    std::deque<std::pair<int, void*>> inFlight;  // completion is in order, so slot = message % 8
    int posted = 0;
    const auto deadline = Clock::now() + std::chrono::seconds(10);
    while ((posted < kMessages || !inFlight.empty()) && failure.empty() && Clock::now() < deadline) {
      if (posted < kMessages && inFlight.size() < kMaxRequests) {  // its slot is free once 8 back is done
        char* slot = slots.data() + (posted % kMaxRequests) * kSlotBytes;
        const size_t size = messageSize(posted);
        void* req = nullptr;
        if (sender) for (size_t i = 0; i < size; ++i) slot[i] = messageByte(pairIndex, posted, i);
        ncclResult_t result = sender ? v10_.isend(comm, slot, size, posted, mh, &req)
                                     : v10_.irecv(comm, slot, kSlotBytes, posted, mh, &req);
        if (result != ncclSuccess) failure = "post " + std::to_string(posted);
        if (req != nullptr) inFlight.emplace_back(posted++, req);
      }
      if (inFlight.empty()) continue;
      auto [m, req] = inFlight.front();
      int done = 0, size = -1;
      if (v10_.t->test(req, &done, &size) != ncclSuccess) failure = "test " + std::to_string(m);
      if (!done) continue;
      inFlight.pop_front();
      if (size != static_cast<int>(messageSize(m))) failure = "size of " + std::to_string(m);
      const char* slot = slots.data() + (m % kMaxRequests) * kSlotBytes;
      for (size_t i = 0; !sender && i < messageSize(m); ++i) {
        if (slot[i] != messageByte(pairIndex, m, i)) {
          failure = "byte " + std::to_string(i) + " of " + std::to_string(m);
          break;
        }
      }
    }
    if (failure.empty() && posted < kMessages) failure = "timed out";
    v10_.t->deregMr(comm, mh);
  };
  std::vector<std::thread> threads;
  for (int p = 0; p < kPairs; ++p) {
    threads.emplace_back(run, p, true);
    threads.emplace_back(run, p, false);
  }
  Pair extra;
  EXPECT_TRUE(connectPair(v10_, &extra));
  for (std::thread& thread : threads) thread.join();
  for (size_t i = 0; i < failures.size(); ++i) EXPECT_EQ(failures[i], "") << "thread " << i;
  closePair(v10_, &extra);
  for (Pair& pair : pairs) closePair(v10_, &pair);
}

}  // namespace
}  // namespace weft::netabi
