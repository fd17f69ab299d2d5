// Frame validation, the incremental frame reader, wire addresses, unique ids, root ranges and
// ncclGetUniqueId's argument and NCCL_COMM_ID handling.
#include <gtest/gtest.h>

#include <stdlib.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cstring>
#include <set>

#include "bootstrap/frame_reader.h"
#include "bootstrap/root.h"
#include "bootstrap/unique_id.h"
#include "bootstrap/wire.h"
#include "core/log.h"
#include "core/param.h"
#include "nccl.h"

namespace weft::bootstrap {
namespace {

using wire::FrameHeader;
using wire::FrameType;

constexpr uint64_t kKey = 0x1234567890abcdefULL;

bool valid(const FrameHeader& h, std::string* why) { return wire::validateHeader(h, kKey, why); }

TEST(WireHeader, AcceptsWellFormedFrames) {
  std::string why;
  EXPECT_TRUE(valid(wire::makeHeader(FrameType::kRootHello, kKey, 3, 0, 40, 40), &why)) << why;
  EXPECT_TRUE(valid(wire::makeHeader(FrameType::kData, kKey, 3, 7, 100 << 20, 16 << 20), &why)) << why;
  EXPECT_TRUE(valid(wire::makeHeader(FrameType::kBarrier, kKey, 3, 0, 0, 0), &why)) << why;
}

TEST(WireHeader, RejectsEachKindOfBadHeader) {
  struct Case {
    const char* name;
    FrameHeader h;
    const char* expect;
  };
  FrameHeader good = wire::makeHeader(FrameType::kData, kKey, 1, 0, 64, 64);
  std::vector<Case> cases;
  FrameHeader h = good; h.magic = 0x20544547;  // "GET "
  cases.push_back({"magic", h, "wrong magic"});
  h = good; h.version = 99;
  cases.push_back({"version", h, "version"});
  h = good; h.type = 0;
  cases.push_back({"type 0", h, "unknown frame type"});
  h = good; h.type = 200;
  cases.push_back({"type 200", h, "unknown frame type"});
  h = good; h.jobKey = kKey + 1;
  cases.push_back({"job key", h, "job key mismatch"});
  h = good; h.reserved = 1;
  cases.push_back({"reserved", h, "reserved"});
  cases.push_back({"hello too long", wire::makeHeader(FrameType::kRootHello, kKey, 0, 0, 257, 257), "exceeds the limit"});
  cases.push_back({"peer hello too long", wire::makeHeader(FrameType::kPeerHello, kKey, 0, 0, 1 << 20, 1 << 20), "exceeds the limit"});
  cases.push_back({"data frame too long", wire::makeHeader(FrameType::kData, kKey, 0, 0, 1ull << 30, (16u << 20) + 1), "exceeds the limit"});
  cases.push_back({"message too long", wire::makeHeader(FrameType::kData, kKey, 0, 0, (1ull << 32) + 1, 16), "exceeds the limit"});
  cases.push_back({"frame longer than message", wire::makeHeader(FrameType::kData, kKey, 0, 0, 10, 20), "longer than its message"});
  cases.push_back({"text frame total", wire::makeHeader(FrameType::kRootError, kKey, 0, 0, 10, 20), "differs"});
  cases.push_back({"text too long", wire::makeHeader(FrameType::kFailure, kKey, 0, 0, 4096, 4096), "exceeds the limit"});
  for (const Case& c : cases) {
    std::string why;
    EXPECT_FALSE(valid(c.h, &why)) << c.name;
    EXPECT_NE(why.find(c.expect), std::string::npos) << c.name << ": " << why;
  }
}

TEST(WireAddress, RoundTripsAndRejectsGarbage) {
  for (const char* text : {"10.0.0.4:41234", "[::1]:5000", "[fd00::2]:1"}) {
    SocketAddress a, b;
    std::string why;
    ASSERT_TRUE(SocketAddress::parse(text, &a, &why, false));
    ASSERT_TRUE(wire::decodeAddress(wire::encodeAddress(a), &b, &why)) << why;
    EXPECT_EQ(a, b) << text;
    EXPECT_EQ(b.toString(), text);
  }
  SocketAddress out;
  std::string why;
  wire::WireAddress w;
  memset(&w, 0, sizeof(w));
  w.family = 5;
  w.port = 80;
  EXPECT_FALSE(wire::decodeAddress(w, &out, &why));
  w.family = 4;
  w.port = 0;
  EXPECT_FALSE(wire::decodeAddress(w, &out, &why));
  w.port = 80;
  w.bytes[10] = 1;  // IPv4 with stray bytes
  EXPECT_FALSE(wire::decodeAddress(w, &out, &why));
}

TEST(RootRange, SplitsRanksEvenlyAndInverts) {
  for (int n : {1, 2, 3, 7, 8, 32, 100, 1000}) {
    for (int k = 1; k <= std::min(n, 9); ++k) {
      int expectLo = 0;
      for (int j = 0; j < k; ++j) {
        int lo, hi;
        wire::rootRange(n, k, j, &lo, &hi);
        EXPECT_EQ(lo, expectLo);
        EXPECT_GT(hi, lo) << "empty group";
        EXPECT_LE(hi - lo, n / k + 1);
        for (int r = lo; r < hi; ++r) ASSERT_EQ(wire::rootOfRank(n, k, r), j) << n << " " << k << " " << r;
        expectLo = hi;
      }
      EXPECT_EQ(expectLo, n);
    }
  }
}

// ---------------------------------------------------------------------------------------------
// FrameReader over a socket pair

class FrameReaderTest : public ::testing::Test {
 protected:
  void SetUp() override {
    int sv[2];
    ASSERT_EQ(socketpair(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK, 0, sv), 0);
    reader_.reset(sv[0]);
    writer_.reset(sv[1]);
  }
  void put(const void* p, size_t n) { ASSERT_EQ(write(writer_.get(), p, n), (ssize_t)n); }
  Fd reader_, writer_;
};

TEST_F(FrameReaderTest, AssemblesAFrameSentByteByByte) {
  FrameReader r(kKey);
  const char payload[] = "hello, bootstrap";
  FrameHeader h = wire::makeHeader(FrameType::kData, kKey, 2, 9, sizeof(payload), sizeof(payload));
  std::vector<char> bytes((char*)&h, (char*)&h + sizeof(h));
  bytes.insert(bytes.end(), payload, payload + sizeof(payload));
  for (size_t i = 0; i + 1 < bytes.size(); ++i) {
    put(&bytes[i], 1);
    ASSERT_EQ(r.pump(reader_.get()), FrameReader::Event::kNeedMore) << "byte " << i;
  }
  put(&bytes.back(), 1);
  ASSERT_EQ(r.pump(reader_.get()), FrameReader::Event::kFrame);
  EXPECT_EQ(r.header().tag, 9);
  EXPECT_EQ(r.header().rank, 2);
  EXPECT_STREQ(r.payload().data(), payload);
  EXPECT_EQ(r.pump(reader_.get()), FrameReader::Event::kNeedMore);
  writer_.reset();
  EXPECT_EQ(r.pump(reader_.get()), FrameReader::Event::kClosed);
  EXPECT_FALSE(r.midFrame());
}

TEST_F(FrameReaderTest, RejectsHttpAfterFourBytes) {
  FrameReader r(kKey);
  put("GET ", 4);
  EXPECT_EQ(r.pump(reader_.get()), FrameReader::Event::kInvalid);
  EXPECT_NE(r.why().find("wrong magic"), std::string::npos) << r.why();
}

TEST_F(FrameReaderTest, ReportsTruncatedFrames) {
  FrameReader r(kKey);
  FrameHeader h = wire::makeHeader(FrameType::kData, kKey, 2, 9, 100, 100);
  put(&h, sizeof(h));
  put("abc", 3);
  EXPECT_EQ(r.pump(reader_.get()), FrameReader::Event::kNeedMore);
  writer_.reset();
  EXPECT_EQ(r.pump(reader_.get()), FrameReader::Event::kClosed);
  EXPECT_TRUE(r.midFrame());
  EXPECT_NE(r.why().find("3 of 100 payload bytes"), std::string::npos) << r.why();
}

TEST_F(FrameReaderTest, RejectsOversizedAndForeignHeadersBeforeThePayload) {
  FrameReader r(kKey);
  FrameHeader h = wire::makeHeader(FrameType::kPeerHello, kKey, 0, 0, 1 << 30, 1 << 30);
  put(&h, sizeof(h));
  EXPECT_EQ(r.pump(reader_.get()), FrameReader::Event::kInvalid);
  EXPECT_LT(r.payload().capacity(), 1u << 20) << "sized a buffer from an invalid header";
  FrameReader stale(kKey);
  FrameHeader other = wire::makeHeader(FrameType::kData, kKey ^ 1, 0, 0, 4, 4);
  SetUp();
  put(&other, sizeof(other));
  EXPECT_EQ(stale.pump(reader_.get()), FrameReader::Event::kInvalid);
  EXPECT_NE(stale.why().find("job key"), std::string::npos);
}

// Random streams, half of them starting from a valid header with fields mutated: the reader must
// never hand out a frame that fails validation or whose payload exceeds its type's limit.
TEST_F(FrameReaderTest, FuzzedStreamsNeverYieldInvalidFrames) {
  uint64_t state = 0x9e3779b97f4a7c15ULL;
  auto next = [&] {
    state ^= state << 13;
    state ^= state >> 7;
    state ^= state << 17;
    return state;
  };
  int frames = 0, rejected = 0;
  for (int iter = 0; iter < 3000; ++iter) {
    SetUp();
    std::string bytes;
    if (next() % 2 == 0) {
      FrameHeader h = wire::makeHeader((FrameType)(1 + next() % 8), kKey, (int)(next() % 8), 0, 0, 0);
      h.length = (uint32_t)(next() % 300);
      h.total = next() % 4 == 0 ? next() : h.length + next() % 3;
      if (next() % 4 == 0) h.jobKey = next();
      if (next() % 8 == 0) h.magic = (uint32_t)next();
      if (next() % 8 == 0) h.version = (uint16_t)next();
      if (next() % 8 == 0) h.reserved = (uint32_t)next();
      bytes.assign((char*)&h, sizeof(h));
    }
    size_t extra = next() % 400;
    for (size_t i = 0; i < extra; ++i) bytes.push_back((char)next());
    if (!bytes.empty()) put(bytes.data(), bytes.size());
    writer_.reset();
    FrameReader r(kKey);
    for (int guard = 0; guard < 1000; ++guard) {
      FrameReader::Event e = r.pump(reader_.get());
      if (e == FrameReader::Event::kFrame) {
        std::string why;
        ASSERT_TRUE(wire::validateHeader(r.header(), kKey, &why)) << why;
        ASSERT_EQ(r.payload().size(), r.header().length);
        ASSERT_LE(r.header().length, wire::kMaxDataFrameBytes);
        ++frames;
        continue;
      }
      ASSERT_NE(e, FrameReader::Event::kNeedMore) << "a closed stream must not look like 'more to come'";
      if (e == FrameReader::Event::kInvalid) ++rejected;
      break;
    }
  }
  EXPECT_GT(frames, 0);
  EXPECT_GT(rejected, 1000);
}

// ---------------------------------------------------------------------------------------------
// Unique ids

TEST(UniqueId, RoundTripsIpv4AndIpv6) {
  for (const char* text : {"10.0.0.4:41234", "[::1]:5000"}) {
    UniqueIdInfo in;
    std::string why;
    ASSERT_TRUE(SocketAddress::parse(text, &in.root, &why, false));
    in.jobKey = 0xfeedfacecafebeefULL;
    in.rootStartedByRank = text[0] == '[';
    ncclUniqueId id;
    encodeUniqueId(in, &id);
    UniqueIdInfo out;
    ASSERT_TRUE(decodeUniqueId(id, &out, &why)) << why;
    EXPECT_EQ(out.root, in.root);
    EXPECT_EQ(out.jobKey, in.jobKey);
    EXPECT_EQ(out.rootStartedByRank, in.rootStartedByRank);
  }
}

TEST(UniqueId, RejectsZeroedForeignAndCorruptedIds) {
  UniqueIdInfo info;
  std::string why;
  ncclUniqueId id;
  memset(&id, 0, sizeof(id));
  EXPECT_FALSE(decodeUniqueId(id, &info, &why));
  EXPECT_NE(why.find("all zeros"), std::string::npos) << why;

  memset(&id, 0x5a, sizeof(id));
  EXPECT_FALSE(decodeUniqueId(id, &info, &why));
  EXPECT_NE(why.find("not made by weft"), std::string::npos) << why;

  UniqueIdInfo in;
  ASSERT_TRUE(SocketAddress::parse("10.0.0.4:41234", &in.root, &why, false));
  in.jobKey = 42;
  encodeUniqueId(in, &id);
  for (int byte : {16, 30, 100, 127}) {
    ncclUniqueId bad = id;
    bad.internal[byte] ^= 0x01;
    EXPECT_FALSE(decodeUniqueId(bad, &info, &why)) << "flipped byte " << byte;
    EXPECT_NE(why.find("corrupted"), std::string::npos) << why;
  }
}

TEST(UniqueId, JobKeysFromTextAreDeterministicAndDistinct) {
  EXPECT_EQ(jobKeyFromText("10.0.0.4:5000"), jobKeyFromText("10.0.0.4:5000"));
  EXPECT_NE(jobKeyFromText("10.0.0.4:5000"), jobKeyFromText("10.0.0.4:5001"));
  EXPECT_NE(jobKeyFromText(""), 0u);
  std::set<uint64_t> keys;
  for (int i = 0; i < 64; ++i) keys.insert(randomJobKey());
  EXPECT_EQ(keys.size(), 64u);
}

TEST(GetUniqueId, NullArgumentIsNamed) {
  EXPECT_EQ(ncclGetUniqueId(nullptr), ncclInvalidArgument);
  EXPECT_NE(std::string(ncclGetLastError(nullptr)).find("uniqueId"), std::string::npos) << ncclGetLastError(nullptr);
}

// A port nothing listens on (bound, read, then released).
uint16_t freePort() {
  Fd fd;
  SocketAddress bound;
  EXPECT_EQ(listenOn(SocketAddress::loopback(AF_INET), &fd, &bound), ncclSuccess);
  return bound.port();
}

TEST(GetUniqueId, CommIdGivesTheSameIdEverywhereAndStartsNoRoot) {
  uint16_t port = freePort();
  std::string text = "localhost:" + std::to_string(port);
  setenv("NCCL_COMM_ID", text.c_str(), 1);
  param::resetForTesting();
  ncclUniqueId a, b;
  ASSERT_EQ(ncclGetUniqueId(&a), ncclSuccess);
  ASSERT_EQ(ncclGetUniqueId(&b), ncclSuccess);
  EXPECT_EQ(memcmp(&a, &b, sizeof(a)), 0);
  UniqueIdInfo info;
  std::string why;
  ASSERT_TRUE(decodeUniqueId(a, &info, &why)) << why;
  EXPECT_TRUE(info.rootStartedByRank);
  EXPECT_EQ(info.root.port(), port);
  EXPECT_TRUE(info.root.isLoopback());
  EXPECT_EQ(info.jobKey, jobKeyFromText(info.root.toString()));
  // Nobody listens there: ncclGetUniqueId must not have started a root.
  Fd conn;
  int err = 0;
  EXPECT_EQ(connectBlocking(info.root, util::Deadline::afterMs(500), nullptr, false, &conn, &err), Io::kRefused);

  setenv("NCCL_COMM_ID", "no-port-here", 1);
  param::resetForTesting();
  EXPECT_EQ(ncclGetUniqueId(&a), ncclInvalidArgument);
  EXPECT_NE(std::string(ncclGetLastError(nullptr)).find("NCCL_COMM_ID"), std::string::npos);
  unsetenv("NCCL_COMM_ID");
  param::resetForTesting();
}

}  // namespace
}  // namespace weft::bootstrap
