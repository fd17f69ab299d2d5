// The SHM transport's shared-memory segments (transport/shm/shm_segment.h) on real /dev/shm, with
// a real second process: the bytes are shared, the names go away, descriptors from the network
// are checked before anything is opened, and a /dev/shm too small is an error at creation that
// says what to do (not a SIGBUS later).
#include "transport/shm/shm_segment.h"

#include <gtest/gtest.h>
#include <sys/statvfs.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstring>
#include <string>

#include "core/log.h"

namespace weft::transport::shm {
namespace {

bool nameExists(const ShmSegment& seg) { return access(("/dev/shm" + seg.name()).c_str(), F_OK) == 0; }

std::string tagOfTest() { return "test-" + std::to_string(getpid()); }

TEST(ShmSegment, AnotherProcessSeesTheBytesAndWritesBack) {
  ShmSegment seg;
  ASSERT_EQ(ShmSegment::create(tagOfTest(), 1 << 20, &seg), ncclSuccess) << log::lastErrorOfThread();
  auto* bytes = static_cast<unsigned char*>(seg.ptr());
  for (size_t i = 0; i < seg.bytes(); i++) ASSERT_EQ(bytes[i], 0) << "not zero-filled at " << i;
  for (size_t i = 0; i < seg.bytes(); i++) bytes[i] = (unsigned char)(i * 7 + 1);
  const ShmDesc d = seg.desc();
  ASSERT_EQ(checkShmDesc(d, "test"), ncclSuccess);
  pid_t child = fork();
  ASSERT_GE(child, 0);
  if (child == 0) {
    ShmSegment peer;
    if (ShmSegment::open(d, "rank 0", &peer) != ncclSuccess) _exit(2);
    auto* p = static_cast<unsigned char*>(peer.ptr());
    for (size_t i = 0; i < peer.bytes(); i++)
      if (p[i] != (unsigned char)(i * 7 + 1)) _exit(3);
    p[12345] = 0xab;  // seen by the parent through its own mapping
    _exit(0);
  }
  int status = 0;
  ASSERT_EQ(waitpid(child, &status, 0), child);
  ASSERT_TRUE(WIFEXITED(status));
  EXPECT_EQ(WEXITSTATUS(status), 0) << "2: could not open, 3: other bytes";
  EXPECT_EQ(bytes[12345], 0xab);
}

TEST(ShmSegment, NamesGoAwayButMappingsStay) {
  ShmSegment seg;
  ASSERT_EQ(ShmSegment::create(tagOfTest(), 8192, &seg), ncclSuccess);
  EXPECT_TRUE(nameExists(seg));
  ShmSegment peer;
  ASSERT_EQ(ShmSegment::open(seg.desc(), "rank 1", &peer), ncclSuccess);
  const ShmDesc d = seg.desc();
  seg.unlinkName();
  EXPECT_FALSE(nameExists(seg));
  static_cast<char*>(peer.ptr())[100] = 'x';
  EXPECT_EQ(static_cast<char*>(seg.ptr())[100], 'x') << "the mappings outlive the name";
  log::clearLastError();
  ShmSegment late;
  EXPECT_EQ(ShmSegment::open(d, "rank 1", &late), ncclSystemError);
  EXPECT_NE(std::string(log::lastErrorOfThread()).find(d.name), std::string::npos) << log::lastErrorOfThread();
  EXPECT_FALSE(late.valid());

  // Destruction removes a name not yet removed; a peer's mapping never removes it.
  std::string name;
  {
    ShmSegment other;
    ASSERT_EQ(ShmSegment::create(tagOfTest(), 4096, &other), ncclSuccess);
    name = other.name();
    ShmSegment opened;
    ASSERT_EQ(ShmSegment::open(other.desc(), "rank 2", &opened), ncclSuccess);
    opened.reset();
    EXPECT_EQ(access(("/dev/shm" + name).c_str(), F_OK), 0);
  }
  EXPECT_NE(access(("/dev/shm" + name).c_str(), F_OK), 0);
}

// A segment made for one peer (a point-to-point-only connection's): the peer removes the name once mapped;
// both mappings stay, and the creator's own removal later is harmless.
TEST(ShmSegment, TheOnlyOpenerRemovesTheName) {
  ShmSegment seg;
  ASSERT_EQ(ShmSegment::create(tagOfTest(), 4096, &seg), ncclSuccess);
  ShmSegment peer;
  ASSERT_EQ(ShmSegment::open(seg.desc(), "rank 3", &peer), ncclSuccess);
  peer.unlinkAsOnlyOpener();
  EXPECT_FALSE(nameExists(seg));
  static_cast<char*>(seg.ptr())[7] = 'y';
  EXPECT_EQ(static_cast<char*>(peer.ptr())[7], 'y');
  seg.unlinkName();
  seg.reset();
  peer.reset();
  EXPECT_FALSE(seg.valid());
}

TEST(ShmSegment, DescriptorsFromPeersAreCheckedFirst) {
  ShmSegment seg;
  ASSERT_EQ(ShmSegment::create("weird/../tag name", 4096, &seg), ncclSuccess);
  EXPECT_EQ(seg.name().find('/', 1), std::string::npos) << "the tag's slashes are replaced: " << seg.name();
  const ShmDesc good = seg.desc();
  auto refused = [&](ShmDesc d, const char* what) {
    log::clearLastError();
    ShmSegment out;
    EXPECT_EQ(ShmSegment::open(d, "rank 3", &out), ncclRemoteError) << what;
    EXPECT_FALSE(out.valid()) << what;
    EXPECT_NE(std::string(log::lastErrorOfThread()).find("rank 3"), std::string::npos) << what;
  };
  ShmDesc d = good;
  d.magic ^= 1;
  refused(d, "magic");
  d = good;
  d.bytes = 0;
  refused(d, "size 0");
  d = good;
  d.bytes += 4096;
  refused(d, "size other than the segment's");
  d = good;
  memset(d.name, 'a', sizeof(d.name));  // no terminating NUL
  d.name[0] = '/';
  refused(d, "unterminated name");
  d = good;
  snprintf(d.name, sizeof(d.name), "/../../etc/passwd");
  refused(d, "path");
  d = good;
  snprintf(d.name, sizeof(d.name), "weft-no-slash");
  refused(d, "no leading slash");
  d = good;
  snprintf(d.name, sizeof(d.name), "/weft-");
  refused(d, "empty name");
  snprintf(d.name, sizeof(d.name), "/other-segment");
  refused(d, "a name weft does not make");
}

TEST(ShmSegment, TooLittleSharedMemoryIsAnErrorThatSaysWhatToDo) {
  struct statvfs s;
  ASSERT_EQ(statvfs("/dev/shm", &s), 0);
  // More than the whole file system holds: tmpfs refuses it at once, without touching memory.
  const uint64_t tooMuch = (uint64_t)s.f_blocks * s.f_frsize + (1ull << 30);
  log::clearLastError();
  ShmSegment seg;
  EXPECT_EQ(ShmSegment::create(tagOfTest(), (size_t)tooMuch, &seg), ncclSystemError);
  EXPECT_FALSE(seg.valid());
  const std::string text = log::lastErrorOfThread();
  EXPECT_NE(text.find("--shm-size"), std::string::npos) << text;
  EXPECT_NE(text.find("NCCL_SHM_DISABLE"), std::string::npos) << text;
  // Nothing left behind under our tag.
  const std::string prefix = "/dev/shm/weft-" + tagOfTest();
  const std::string listing = "ls " + prefix + "* 2>/dev/null | wc -l";
  FILE* f = popen(listing.c_str(), "r");
  ASSERT_NE(f, nullptr);
  int left = -1;
  EXPECT_EQ(fscanf(f, "%d", &left), 1);
  pclose(f);
  EXPECT_EQ(left, 0);
}

}  // namespace
}  // namespace weft::transport::shm
