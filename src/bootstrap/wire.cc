#include "bootstrap/wire.h"

#include <arpa/inet.h>

#include <cstdio>
#include <cstring>

namespace weft::bootstrap::wire {

const char* frameTypeName(uint16_t type) {
  switch ((FrameType)type) {
    case FrameType::kRootHello: return "root hello";
    case FrameType::kRootReply: return "root reply";
    case FrameType::kRootError: return "root error";
    case FrameType::kPeerHello: return "peer hello";
    case FrameType::kData: return "data";
    case FrameType::kAllGather: return "allgather";
    case FrameType::kBarrier: return "barrier";
    case FrameType::kFailure: return "failure notice";
  }
  return "unknown";
}

FrameHeader makeHeader(FrameType type, uint64_t jobKey, int rank, int tag, uint64_t total, uint32_t length) {
  FrameHeader h;
  memset(&h, 0, sizeof(h));
  h.magic = kFrameMagic;
  h.version = kVersion;
  h.type = (uint16_t)type;
  h.jobKey = jobKey;
  h.rank = rank;
  h.tag = tag;
  h.total = total;
  h.length = length;
  return h;
}

bool magicPrefixOk(const void* bytes, size_t n) {
  uint32_t magic = kFrameMagic;
  return memcmp(bytes, &magic, n < 4 ? n : 4) == 0;
}

namespace {

uint32_t maxFrameBytes(uint16_t type) {
  switch ((FrameType)type) {
    case FrameType::kRootHello:
    case FrameType::kRootReply:
    case FrameType::kPeerHello:
      return kMaxHelloBytes;
    case FrameType::kRootError:
    case FrameType::kFailure:
      return kMaxTextBytes;
    default:
      return kMaxDataFrameBytes;
  }
}

std::string format(const char* fmt, unsigned long long a, unsigned long long b = 0) {
  char buf[160];
  snprintf(buf, sizeof(buf), fmt, a, b);
  return buf;
}

}  // namespace

bool validateHeader(const FrameHeader& h, uint64_t jobKey, std::string* why) {
  if (h.magic != kFrameMagic) {
    *why = format("wrong magic 0x%08llx (not a weft bootstrap peer)", h.magic);
    return false;
  }
  if (h.version != kVersion) {
    *why = format("wire version %llu, this library speaks %llu (all ranks must run the same weft)", h.version, kVersion);
    return false;
  }
  if (h.type < (uint16_t)FrameType::kRootHello || h.type > (uint16_t)FrameType::kFailure) {
    *why = format("unknown frame type %llu", h.type);
    return false;
  }
  if (h.jobKey != jobKey) {
    *why = format("job key mismatch (0x%016llx, expected 0x%016llx): a stale or foreign job", h.jobKey, jobKey);
    return false;
  }
  if (h.reserved != 0) {
    *why = "reserved header field is not zero";
    return false;
  }
  if (h.length > maxFrameBytes(h.type)) {
    *why = std::string(frameTypeName(h.type)) + format(" frame of %llu bytes exceeds the limit of %llu", h.length, maxFrameBytes(h.type));
    return false;
  }
  if (isDataType(h.type)) {
    if (h.total > kMaxMessageBytes) {
      *why = format("message of %llu bytes exceeds the limit of %llu", h.total, kMaxMessageBytes);
      return false;
    }
    if (h.length > h.total) {
      *why = format("frame of %llu bytes is longer than its message (%llu bytes)", h.length, h.total);
      return false;
    }
  } else if (h.total != h.length) {
    *why = format("frame total %llu differs from its length %llu", h.total, h.length);
    return false;
  }
  return true;
}

WireAddress encodeAddress(const SocketAddress& a) {
  WireAddress w;
  memset(&w, 0, sizeof(w));
  if (a.family() == AF_INET) {
    const auto* s4 = reinterpret_cast<const sockaddr_in*>(a.sockaddrPtr());
    w.family = 4;
    w.port = a.port();
    memcpy(w.bytes, &s4->sin_addr, 4);
  } else if (a.family() == AF_INET6) {
    const auto* s6 = reinterpret_cast<const sockaddr_in6*>(a.sockaddrPtr());
    w.family = 6;
    w.port = a.port();
    w.scopeId = s6->sin6_scope_id;
    memcpy(w.bytes, &s6->sin6_addr, 16);
  }
  return w;
}

bool decodeAddress(const WireAddress& w, SocketAddress* out, std::string* why) {
  if (w.port == 0) {
    *why = "address without a port";
    return false;
  }
  if (w.family == 4) {
    for (int i = 4; i < 16; ++i) {
      if (w.bytes[i] != 0 || w.scopeId != 0) { *why = "IPv4 address with stray bytes"; return false; }
    }
    sockaddr_in s4;
    memset(&s4, 0, sizeof(s4));
    s4.sin_family = AF_INET;
    s4.sin_port = htons(w.port);
    memcpy(&s4.sin_addr, w.bytes, 4);
    *out = SocketAddress::fromSockaddr(reinterpret_cast<sockaddr*>(&s4), sizeof(s4));
    return true;
  }
  if (w.family == 6) {
    sockaddr_in6 s6;
    memset(&s6, 0, sizeof(s6));
    s6.sin6_family = AF_INET6;
    s6.sin6_port = htons(w.port);
    s6.sin6_scope_id = w.scopeId;
    memcpy(&s6.sin6_addr, w.bytes, 16);
    *out = SocketAddress::fromSockaddr(reinterpret_cast<sockaddr*>(&s6), sizeof(s6));
    return true;
  }
  *why = "address family " + std::to_string(w.family) + " is neither IPv4 nor IPv6";
  return false;
}

void rootRange(int nRanks, int nRoots, int root, int* lo, int* hi) {
  *lo = (int)((int64_t)root * nRanks / nRoots);
  *hi = (int)((int64_t)(root + 1) * nRanks / nRoots);
}

int rootOfRank(int nRanks, int nRoots, int rank) {
  // Inverse of rootRange: the largest j with lo(j) <= rank.
  int j = (int)(((int64_t)rank * nRoots + nRoots - 1) / nRanks);
  int lo, hi;
  while (j > 0) {
    rootRange(nRanks, nRoots, j, &lo, &hi);
    if (lo <= rank) break;
    --j;
  }
  while (j + 1 < nRoots) {
    rootRange(nRanks, nRoots, j + 1, &lo, &hi);
    if (lo > rank) break;
    ++j;
  }
  return j;
}

}  // namespace weft::bootstrap::wire
