// File-descriptor passing between real processes (fork) with real fds (memfd), checked by content;
// strangers, other jobs and garbage are dropped without leaks; dead and silent peers fail in time.
#include "transport/p2p/fd_passing.h"

#include <dirent.h>
#include <fcntl.h>
#include <gtest/gtest.h>
#include <poll.h>
#include <sys/mman.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstddef>
#include <cstring>
#include <functional>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "core/log.h"

namespace weft::transport::p2p {
namespace {

using namespace std::chrono_literals;

uint64_t freshJobKey() {
  static std::mt19937_64 rng(std::random_device{}() ^ (uint64_t)getpid());
  return rng();
}

Clock::time_point in(std::chrono::milliseconds d) { return Clock::now() + d; }

util::UniqueFd memfdWith(const std::string& text) {
  util::UniqueFd fd(memfd_create("weft-fd-test", MFD_CLOEXEC));
  if (fd.valid() && write(fd.get(), text.data(), text.size()) != (ssize_t)text.size()) fd.reset();
  return fd;
}

std::string readAll(int fd, size_t offset = 0) {
  char buf[256];
  ssize_t n = pread(fd, buf, sizeof(buf), (off_t)offset);
  return n > 0 ? std::string(buf, (size_t)n) : std::string();
}

int openFdCount() {
  int n = 0;
  if (DIR* d = opendir("/proc/self/fd")) {
    while (readdir(d) != nullptr) ++n;
    closedir(d);
  }
  return n;
}

// A one-byte signal over a pipe, with a timeout: the processes' only other channel.
struct Signal {
  int fds[2] = {-1, -1};
  Signal() { EXPECT_EQ(pipe2(fds, O_CLOEXEC), 0); }
  ~Signal() {
    for (int fd : fds) if (fd >= 0) close(fd);
  }
  void post() { (void)!write(fds[1], "x", 1); }
  bool wait(int ms = 10000) {
    pollfd p{fds[0], POLLIN, 0};
    char c;
    return poll(&p, 1, ms) == 1 && read(fds[0], &c, 1) == 1;
  }
};

// Runs `body` in a child process; its return value is the exit code.
pid_t forkChild(const std::function<int()>& body) {
  pid_t pid = fork();
  if (pid == 0) _exit(body());
  return pid;
}

int waitChild(pid_t pid) {
  int status = 0;
  if (waitpid(pid, &status, 0) != pid) return -1;
  return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
}

// Waits until the newest warning of the process (the endpoint thread warns) contains `text`.
bool warnedSoon(const std::string& text) {
  for (int i = 0; i < 200; ++i) {
    if (std::string(log::lastErrorOfProcess()).find(text) != std::string::npos) return true;
    std::this_thread::sleep_for(10ms);
  }
  return false;
}

TEST(FdPassing, AddressesAreDistinctPerJobAndRank) {
  FdAddress a = fdAddressOf(0x1234, 0, "");
  EXPECT_TRUE(a.abstract);
  EXPECT_EQ(a.describe(), "@weft-fd-0000000000001234-0");
  EXPECT_NE(fdAddressOf(0x1234, 1, "").name, a.name);
  EXPECT_NE(fdAddressOf(0x1235, 0, "").name, a.name);
  FdAddress p = fdAddressOf(0x1234, 3, "/tmp/x");
  EXPECT_FALSE(p.abstract);
  EXPECT_EQ(p.name, "/tmp/x/weft-fd-0000000000001234-3.sock");
}

// A process out of file descriptors cannot accept a peer's connection, which then stays queued and
// keeps the listener readable: the endpoint's thread must pause between tries, not spin a core.
TEST(FdPassing, AnEndpointOutOfDescriptorsDoesNotSpin) {
  pid_t child = forkChild([]() -> int {
    std::unique_ptr<FdEndpoint> ep;
    if (FdEndpoint::create(freshJobKey(), 0, "", &ep) != ncclSuccess) return 10;
    util::UniqueFd client(socket(AF_UNIX, SOCK_SEQPACKET | SOCK_NONBLOCK | SOCK_CLOEXEC, 0));
    if (!client.valid()) return 11;
    // Use up every descriptor below a low limit (the connect below needs none in this process).
    rlimit low{64, 64};
    if (setrlimit(RLIMIT_NOFILE, &low) != 0) return 12;
    std::vector<util::UniqueFd> filler;
    for (int i = 0; i < 64; ++i) {
      util::UniqueFd f(open("/dev/null", O_RDONLY | O_CLOEXEC));
      if (!f.valid()) break;
      filler.push_back(std::move(f));
    }
    sockaddr_un sa{};
    sa.sun_family = AF_UNIX;
    const FdAddress& a = ep->address();
    std::memcpy(sa.sun_path + (a.abstract ? 1 : 0), a.name.data(), a.name.size());
    const socklen_t len = (socklen_t)(offsetof(sockaddr_un, sun_path) + 1 + a.name.size());
    if (connect(client.get(), reinterpret_cast<const sockaddr*>(&sa), len) != 0) return 13;
    rusage before{}, after{};
    getrusage(RUSAGE_SELF, &before);
    std::this_thread::sleep_for(1000ms);
    getrusage(RUSAGE_SELF, &after);
    auto seconds = [](const timeval& t) { return (double)t.tv_sec + (double)t.tv_usec * 1e-6; };
    const double cpu = seconds(after.ru_utime) + seconds(after.ru_stime) - seconds(before.ru_utime) -
                       seconds(before.ru_stime);
    filler.clear();  // a descriptor is free again: the endpoint can close down normally
    return cpu < 0.3 ? 0 : 20;
  });
  ASSERT_GT(child, 0);
  EXPECT_EQ(waitChild(child), 0) << "20: the endpoint's thread spun (CPU time per second of waiting)";
}

TEST(FdPassing, ChildToParentAcrossProcesses) {
  const uint64_t key = freshJobKey();
  Signal parentReady, parentDone;
  pid_t child = forkChild([&]() -> int {
    if (!parentReady.wait()) return 10;
    std::unique_ptr<FdEndpoint> ep;
    if (FdEndpoint::create(key, 1, "", &ep) != ncclSuccess) return 11;
    util::UniqueFd a = memfdWith("payload seven"), b = memfdWith("payload eight");
    if (!a.valid() || !b.valid()) return 12;
    // Out of order on purpose: the receiver asks for 7 first.
    if (ep->sendFd(0, b.get(), 8, in(5000ms), nullptr) != ncclSuccess) return 13;
    if (ep->sendFd(0, a.get(), 7, in(5000ms), nullptr) != ncclSuccess) return 14;
    if (!parentDone.wait()) return 15;
    // The parent wrote into the fd it received: same file, not a copy.
    return readAll(a.get(), 100) == "ack from parent" ? 0 : 16;
  });
  ASSERT_GT(child, 0);
  std::unique_ptr<FdEndpoint> ep;
  ASSERT_EQ(FdEndpoint::create(key, 0, "", &ep), ncclSuccess);
  parentReady.post();
  util::UniqueFd seven, eight;
  ASSERT_EQ(ep->recvFd(1, 7, in(10000ms), nullptr, &seven), ncclSuccess);
  ASSERT_EQ(ep->recvFd(1, 8, in(10000ms), nullptr, &eight), ncclSuccess);
  EXPECT_EQ(readAll(seven.get()), "payload seven");
  EXPECT_EQ(readAll(eight.get()), "payload eight");
  EXPECT_EQ(pwrite(seven.get(), "ack from parent", 15, 100), 15);
  EXPECT_EQ(ep->heldCount(), 0u);
  parentDone.post();
  EXPECT_EQ(waitChild(child), 0);
}

TEST(FdPassing, BothDirectionsManyFds) {
  const uint64_t key = freshJobKey();
  constexpr int kCount = 40;
  Signal parentReady, childReady;
  pid_t child = forkChild([&]() -> int {
    std::unique_ptr<FdEndpoint> ep;
    if (FdEndpoint::create(key, 1, "", &ep) != ncclSuccess) return 10;
    childReady.post();
    if (!parentReady.wait()) return 11;
    for (int i = 0; i < kCount; ++i) {
      util::UniqueFd f = memfdWith("from child " + std::to_string(i));
      if (ep->sendFd(0, f.get(), (uint64_t)i, in(5000ms), nullptr) != ncclSuccess) return 12;
    }
    for (int i = kCount - 1; i >= 0; --i) {  // the parent sent in increasing order
      util::UniqueFd f;
      if (ep->recvFd(0, 1000 + i, in(10000ms), nullptr, &f) != ncclSuccess) return 13;
      if (readAll(f.get()) != "from parent " + std::to_string(i)) return 14;
    }
    return 0;
  });
  ASSERT_GT(child, 0);
  std::unique_ptr<FdEndpoint> ep;
  ASSERT_EQ(FdEndpoint::create(key, 0, "", &ep), ncclSuccess);
  ASSERT_TRUE(childReady.wait());
  parentReady.post();
  for (int i = 0; i < kCount; ++i) {
    util::UniqueFd f = memfdWith("from parent " + std::to_string(i));
    ASSERT_EQ(ep->sendFd(1, f.get(), 1000 + i, in(5000ms), nullptr), ncclSuccess);
  }
  for (int i = kCount - 1; i >= 0; --i) {
    util::UniqueFd f;
    ASSERT_EQ(ep->recvFd(1, (uint64_t)i, in(10000ms), nullptr, &f), ncclSuccess) << i;
    EXPECT_EQ(readAll(f.get()), "from child " + std::to_string(i));
  }
  EXPECT_EQ(waitChild(child), 0);
}

// A connection to an abstract-name endpoint that sends nothing (blocking connect: it waits while
// the endpoint's backlog is full). Invalid on failure.
util::UniqueFd connectTo(const FdAddress& to) {
  util::UniqueFd s(socket(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0));
  sockaddr_un sa{};
  sa.sun_family = AF_UNIX;
  std::memcpy(sa.sun_path + 1, to.name.data(), to.name.size());
  socklen_t len = (socklen_t)(offsetof(sockaddr_un, sun_path) + 1 + to.name.size());
  if (s.valid() && connect(s.get(), reinterpret_cast<sockaddr*>(&sa), len) != 0) s.reset();
  return s;
}

// Sends raw bytes (and optionally an fd) to an endpoint, as a stranger would.
void sendRaw(const FdAddress& to, const void* data, size_t bytes, int fd = -1) {
  util::UniqueFd conn = connectTo(to);
  ASSERT_TRUE(conn.valid()) << strerror(errno);
  const int s = conn.get();
  iovec iov{const_cast<void*>(data), bytes};
  msghdr msg{};
  msg.msg_iov = &iov;
  msg.msg_iovlen = 1;
  alignas(cmsghdr) char control[CMSG_SPACE(sizeof(int))] = {};
  if (fd >= 0) {
    msg.msg_control = control;
    msg.msg_controllen = sizeof(control);
    cmsghdr* c = CMSG_FIRSTHDR(&msg);
    c->cmsg_level = SOL_SOCKET;
    c->cmsg_type = SCM_RIGHTS;
    c->cmsg_len = CMSG_LEN(sizeof(int));
    std::memcpy(CMSG_DATA(c), &fd, sizeof(int));
  }
  EXPECT_EQ(sendmsg(s, &msg, MSG_NOSIGNAL), (ssize_t)bytes);
}

TEST(FdPassing, StrangersAndGarbageAreDroppedWithoutLeaks) {
  const uint64_t key = freshJobKey();
  const int fdsBefore = openFdCount();
  {
    std::unique_ptr<FdEndpoint> receiver, sender, otherJob;
    ASSERT_EQ(FdEndpoint::create(key, 0, "", &receiver), ncclSuccess);
    ASSERT_EQ(FdEndpoint::create(key, 1, "", &sender), ncclSuccess);
    ASSERT_EQ(FdEndpoint::create(key ^ 0xff, 1, "", &otherJob), ncclSuccess);
    const FdAddress& at = receiver->address();

    const char garbage[] = "GET / HTTP/1.1\r\n\r\n";
    sendRaw(at, garbage, sizeof(garbage));
    EXPECT_TRUE(warnedSoon("shorter than a frame")) << log::lastErrorOfProcess();

    unsigned char frameSized[40];
    std::memset(frameSized, 0xab, sizeof(frameSized));
    util::UniqueFd carried = memfdWith("must be closed by the receiver");
    sendRaw(at, frameSized, sizeof(frameSized), carried.get());
    EXPECT_TRUE(warnedSoon("not a weft fd frame")) << log::lastErrorOfProcess();

    // A well-formed frame of another job, for exactly the (rank, tag) the test waits for below.
    util::UniqueFd impostor = memfdWith("impostor");
    ASSERT_EQ(otherJob->sendFdTo(at, 0, impostor.get(), 5, in(2000ms), nullptr), ncclSuccess);
    EXPECT_TRUE(warnedSoon("another job")) << log::lastErrorOfProcess();
    EXPECT_EQ(receiver->heldCount(), 0u);

    util::UniqueFd got;
    EXPECT_EQ(receiver->recvFd(1, 5, in(300ms), nullptr, &got), ncclRemoteError) << "the impostor was delivered";
    EXPECT_FALSE(got.valid());

    // A connection that stays silent holds up nobody else.
    util::UniqueFd silent = connectTo(at);
    ASSERT_TRUE(silent.valid()) << strerror(errno);

    util::UniqueFd real = memfdWith("the real one");
    ASSERT_EQ(sender->sendFd(0, real.get(), 5, in(2000ms), nullptr), ncclSuccess);
    ASSERT_EQ(receiver->recvFd(1, 5, in(2000ms), nullptr, &got), ncclSuccess);
    EXPECT_EQ(readAll(got.get()), "the real one");
  }
  // Every fd the strangers attached was closed, as were the endpoints' own.
  EXPECT_EQ(openFdCount(), fdsBefore);
}

// More silent connections than an endpoint keeps (256): the oldest silent ones are dropped with a
// warning, while fds passed in between, each on a connection of its own, all arrive and no
// descriptor leaks. (A frame that comes on a connection accepted just before a crowd is read
// before the crowd can push it out; that race is not staged here.)
TEST(FdPassing, ACrowdOfSilentConnectionsCostsOnlySilentOnes) {
  const uint64_t key = freshJobKey();
  const int fdsBefore = openFdCount();
  {
    std::unique_ptr<FdEndpoint> receiver, sender;
    ASSERT_EQ(FdEndpoint::create(key, 0, "", &receiver), ncclSuccess);
    ASSERT_EQ(FdEndpoint::create(key, 1, "", &sender), ncclSuccess);
    std::vector<util::UniqueFd> crowd;
    for (int i = 0; i < 320; ++i) {
      crowd.push_back(connectTo(receiver->address()));
      ASSERT_TRUE(crowd.back().valid()) << "connection " << i << ": " << strerror(errno);
      if (i % 40 != 39) continue;
      const std::string text = "fd " + std::to_string(i);
      util::UniqueFd mine = memfdWith(text), got;
      ASSERT_EQ(sender->sendFd(0, mine.get(), (uint64_t)i, in(2000ms), nullptr), ncclSuccess);
      ASSERT_EQ(receiver->recvFd(1, (uint64_t)i, in(5000ms), nullptr, &got), ncclSuccess) << text;
      EXPECT_EQ(readAll(got.get()), text);
    }
    EXPECT_TRUE(warnedSoon("dropping the oldest")) << log::lastErrorOfProcess();
  }
  EXPECT_EQ(openFdCount(), fdsBefore);
}

// Small messages (registration sharing): payload, an fd or none, arrival order, taken by tag.
TEST(FdPassing, SmallMessagesArriveInOrderAndAreTakenByTag) {
  const uint64_t key = freshJobKey();
  const int fdsBefore = openFdCount();
  {
    std::unique_ptr<FdEndpoint> receiver, sender;
    ASSERT_EQ(FdEndpoint::create(key, 0, "", &receiver), ncclSuccess);
    ASSERT_EQ(FdEndpoint::create(key, 1, "", &sender), ncclSuccess);
    constexpr uint64_t kA = 0x41ull << 56, kB = 0x42ull << 56, kMask = 0xffull << 56;
    util::UniqueFd carried = memfdWith("with the second message");
    ASSERT_EQ(sender->sendMessage(0, kA | 1, "one", 4, -1, in(2000ms), nullptr), ncclSuccess);
    ASSERT_EQ(sender->sendMessage(0, kB, "two", 4, carried.get(), in(2000ms), nullptr), ncclSuccess);
    ASSERT_EQ(sender->sendMessage(0, kA | 2, "three", 6, -1, in(2000ms), nullptr), ncclSuccess);
    for (int i = 0; i < 200 && receiver->messagesReceived() < 3; ++i) std::this_thread::sleep_for(10ms);
    ASSERT_EQ(receiver->messagesReceived(), 3u);
    std::vector<FdEndpoint::Message> a = receiver->takeMessages(kMask, kA);
    ASSERT_EQ(a.size(), 2u);
    EXPECT_STREQ(a[0].payload.data(), "one");
    EXPECT_EQ(a[0].tag, kA | 1);
    EXPECT_EQ(a[0].fromRank, 1);
    EXPECT_FALSE(a[0].fd.valid());
    EXPECT_STREQ(a[1].payload.data(), "three");
    std::vector<FdEndpoint::Message> b = receiver->takeMessages(kMask, kB);
    ASSERT_EQ(b.size(), 1u);
    ASSERT_TRUE(b[0].fd.valid());
    EXPECT_EQ(readAll(b[0].fd.get()), "with the second message");
    EXPECT_TRUE(receiver->takeMessages(0, 0).empty()) << "each message is taken once";
    EXPECT_EQ(receiver->heldCount(), 0u) << "messages are not fds waiting for recvFd";

    EXPECT_EQ(sender->sendMessage(0, kA, "x", 0, -1, in(100ms), nullptr), ncclInvalidArgument);
    std::vector<char> big(FdEndpoint::kMaxMessageBytes + 1, 'x');
    EXPECT_EQ(sender->sendMessage(0, kA, big.data(), big.size(), -1, in(100ms), nullptr), ncclInvalidArgument);

    // A frame that announces more payload than came, and one that announces too much.
    struct {
      uint64_t magic, jobKey;
      uint32_t length;
      int32_t rank, pid;
      uint32_t payloadBytes;
      uint64_t tag;
      char payload[8];
    } raw{0x3150644674666557ull, key, 40, 1, 1, 100, kA, "short"};
    sendRaw(receiver->address(), &raw, sizeof(raw));
    EXPECT_TRUE(warnedSoon("the frame announces 140")) << log::lastErrorOfProcess();
    raw.payloadBytes = 1 << 20;
    sendRaw(receiver->address(), &raw, sizeof(raw));
    EXPECT_TRUE(warnedSoon("wrong size")) << log::lastErrorOfProcess();
    EXPECT_TRUE(receiver->takeMessages(0, 0).empty());
  }
  EXPECT_EQ(openFdCount(), fdsBefore);
}

TEST(FdPassing, DeadPeerIsReportedBeforeTheDeadline) {
  const uint64_t key = freshJobKey();
  Signal childUp, childGo;
  pid_t child = forkChild([&]() -> int {
    std::unique_ptr<FdEndpoint> ep;
    if (FdEndpoint::create(key, 1, "", &ep) != ncclSuccess) return 10;
    childUp.post();
    childGo.wait();
    _exit(0);  // dies without sending what the parent waits for
  });
  ASSERT_GT(child, 0);
  std::unique_ptr<FdEndpoint> ep;
  ASSERT_EQ(FdEndpoint::create(key, 0, "", &ep), ncclSuccess);
  ASSERT_TRUE(childUp.wait());
  childGo.post();
  util::UniqueFd fd;
  auto start = Clock::now();
  EXPECT_EQ(ep->recvFd(1, 42, in(20000ms), nullptr, &fd), ncclRemoteError);
  EXPECT_LT(Clock::now() - start, 5s) << "detected by probing, long before the 20 s deadline";
  std::string msg = log::lastErrorOfThread();
  EXPECT_NE(msg.find("rank 1 exited"), std::string::npos) << msg;
  EXPECT_EQ(waitChild(child), 0);

  // Sending to it now fails at once, naming it.
  util::UniqueFd f = memfdWith("x");
  start = Clock::now();
  EXPECT_EQ(ep->sendFd(1, f.get(), 1, in(20000ms), nullptr), ncclRemoteError);
  EXPECT_LT(Clock::now() - start, 1s);
  msg = log::lastErrorOfThread();
  EXPECT_NE(msg.find("rank 1"), std::string::npos) << msg;
  EXPECT_NE(msg.find("nothing listens"), std::string::npos) << msg;
}

TEST(FdPassing, FdSentJustBeforeDeathIsStillDelivered) {
  const uint64_t key = freshJobKey();
  Signal parentReady;
  pid_t child = forkChild([&]() -> int {
    if (!parentReady.wait()) return 10;
    std::unique_ptr<FdEndpoint> ep;
    if (FdEndpoint::create(key, 1, "", &ep) != ncclSuccess) return 11;
    util::UniqueFd f = memfdWith("last words");
    return ep->sendFd(0, f.get(), 9, in(5000ms), nullptr) == ncclSuccess ? 0 : 12;
  });
  ASSERT_GT(child, 0);
  std::unique_ptr<FdEndpoint> ep;
  ASSERT_EQ(FdEndpoint::create(key, 0, "", &ep), ncclSuccess);
  parentReady.post();
  EXPECT_EQ(waitChild(child), 0);  // gone before the parent even asks
  util::UniqueFd fd;
  ASSERT_EQ(ep->recvFd(1, 9, in(5000ms), nullptr, &fd), ncclSuccess);
  EXPECT_EQ(readAll(fd.get()), "last words");
}

TEST(FdPassing, SilentLivePeerTimesOut) {
  const uint64_t key = freshJobKey();
  std::unique_ptr<FdEndpoint> a, b;
  ASSERT_EQ(FdEndpoint::create(key, 0, "", &a), ncclSuccess);
  ASSERT_EQ(FdEndpoint::create(key, 1, "", &b), ncclSuccess);
  util::UniqueFd fd;
  auto start = Clock::now();
  EXPECT_EQ(a->recvFd(1, 3, in(700ms), nullptr, &fd), ncclRemoteError);
  auto took = Clock::now() - start;
  EXPECT_GE(took, 700ms);
  EXPECT_LT(took, 3s);
  std::string msg = log::lastErrorOfThread();
  EXPECT_NE(msg.find("timed out"), std::string::npos) << msg;
  EXPECT_NE(msg.find("from rank 1"), std::string::npos) << msg;
}

TEST(FdPassing, AbortInterruptsAWait) {
  const uint64_t key = freshJobKey();
  std::unique_ptr<FdEndpoint> a, b;
  ASSERT_EQ(FdEndpoint::create(key, 0, "", &a), ncclSuccess);
  ASSERT_EQ(FdEndpoint::create(key, 1, "", &b), ncclSuccess);
  std::atomic<bool> abort{false};
  std::thread aborter([&] {
    std::this_thread::sleep_for(200ms);
    abort.store(true);
  });
  util::UniqueFd fd;
  auto start = Clock::now();
  EXPECT_EQ(a->recvFd(1, 3, in(20000ms), &abort, &fd), ncclInternalError);
  EXPECT_LT(Clock::now() - start, 2s);
  aborter.join();
  EXPECT_NE(std::string(log::lastErrorOfThread()).find("aborted"), std::string::npos);
}

TEST(FdPassing, ConcurrentReceiversGetTheirOwnFds) {
  const uint64_t key = freshJobKey();
  std::unique_ptr<FdEndpoint> a, b;
  ASSERT_EQ(FdEndpoint::create(key, 0, "", &a), ncclSuccess);
  ASSERT_EQ(FdEndpoint::create(key, 1, "", &b), ncclSuccess);
  std::string got[4];
  std::thread waiters[4];
  for (int i = 0; i < 4; ++i) {
    waiters[i] = std::thread([&, i] {
      util::UniqueFd fd;
      if (a->recvFd(1, 100 + i, in(5000ms), nullptr, &fd) == ncclSuccess) got[i] = readAll(fd.get());
    });
  }
  for (int i = 3; i >= 0; --i) {
    util::UniqueFd f = memfdWith("for waiter " + std::to_string(i));
    EXPECT_EQ(b->sendFd(0, f.get(), 100 + i, in(2000ms), nullptr), ncclSuccess);
  }
  for (int i = 0; i < 4; ++i) {
    waiters[i].join();
    EXPECT_EQ(got[i], "for waiter " + std::to_string(i));
  }
}

TEST(FdPassing, DuplicateRankIsRefused) {
  const uint64_t key = freshJobKey();
  std::unique_ptr<FdEndpoint> a, again;
  ASSERT_EQ(FdEndpoint::create(key, 0, "", &a), ncclSuccess);
  EXPECT_EQ(FdEndpoint::create(key, 0, "", &again), ncclInvalidUsage);
  EXPECT_NE(std::string(log::lastErrorOfThread()).find("also claims rank 0"), std::string::npos);
}

TEST(FdPassing, SocketFilesArePrivateAndCleanedUp) {
  char dirTemplate[] = "/tmp/weft-fd-test-XXXXXX";
  ASSERT_NE(mkdtemp(dirTemplate), nullptr);
  const std::string dir = dirTemplate;
  const uint64_t key = freshJobKey();
  const std::string path0 = fdAddressOf(key, 0, dir).name;
  {
    // A socket file left behind by a crashed process must not block a new endpoint.
    int stale = socket(AF_UNIX, SOCK_SEQPACKET, 0);
    sockaddr_un sa{};
    sa.sun_family = AF_UNIX;
    snprintf(sa.sun_path, sizeof(sa.sun_path), "%s", path0.c_str());
    ASSERT_EQ(bind(stale, reinterpret_cast<sockaddr*>(&sa), sizeof(sa)), 0);
    close(stale);  // file stays; nobody listens

    std::unique_ptr<FdEndpoint> a, b, dup;
    ASSERT_EQ(FdEndpoint::create(key, 0, dir, &a), ncclSuccess);
    ASSERT_EQ(FdEndpoint::create(key, 1, dir, &b), ncclSuccess);
    struct stat st{};
    ASSERT_EQ(stat(path0.c_str(), &st), 0);
    EXPECT_TRUE(S_ISSOCK(st.st_mode));
    EXPECT_EQ(st.st_mode & 0777, 0600u);
    EXPECT_EQ(FdEndpoint::create(key, 0, dir, &dup), ncclInvalidUsage) << "a live endpoint is never replaced";

    util::UniqueFd f = memfdWith("via a socket file");
    ASSERT_EQ(b->sendFd(0, f.get(), 1, in(2000ms), nullptr), ncclSuccess);
    util::UniqueFd got;
    ASSERT_EQ(a->recvFd(1, 1, in(2000ms), nullptr, &got), ncclSuccess);
    EXPECT_EQ(readAll(got.get()), "via a socket file");
  }
  struct stat st{};
  EXPECT_NE(stat(path0.c_str(), &st), 0) << "removed by the destructor";
  EXPECT_EQ(rmdir(dir.c_str()), 0) << "nothing else left in the directory";
}

TEST(FdPassing, OverlongSocketDirIsAClearError) {
  std::unique_ptr<FdEndpoint> ep;
  EXPECT_EQ(FdEndpoint::create(1, 0, "/tmp/" + std::string(120, 'd'), &ep), ncclInvalidArgument);
  EXPECT_NE(std::string(log::lastErrorOfThread()).find("too long"), std::string::npos);
}

}  // namespace
}  // namespace weft::transport::p2p
