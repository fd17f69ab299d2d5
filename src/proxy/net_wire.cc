#include "proxy/net_wire.h"

#include <cstdarg>
#include <cstdio>
#include <cstring>

#include "device/work_math.h"

namespace weft::proxy {

namespace {

// Sets *why to "<from>: <formatted text>" and returns ncclRemoteError: everything checked here
// came from another rank.
Status refuse(std::string* why, const char* from, const char* fmt, ...) __attribute__((format(printf, 3, 4)));
Status refuse(std::string* why, const char* from, const char* fmt, ...) {
  char text[512];
  va_list args;
  va_start(args, fmt);
  vsnprintf(text, sizeof(text), fmt, args);
  va_end(args);
  *why = std::string(from != nullptr ? from : "?") + ": " + text;
  return ncclRemoteError;
}

using ull = unsigned long long;
constexpr uint64_t kSteps = dev::kSteps;

}  // namespace

ListenerDesc makeListenerDesc(uint64_t jobKey, int rank, const bootstrap::SocketAddress& address) {
  ListenerDesc d;
  memset(&d, 0, sizeof(d));
  d.magic = kListenerMagic;
  d.rank = rank;
  d.jobKey = jobKey;
  d.address = bootstrap::wire::encodeAddress(address);
  return d;
}

Hello makeHello(uint64_t jobKey, int sender, int receiver, int channel, uint64_t stepBytes, uint64_t llStepBytes) {
  Hello h;
  memset(&h, 0, sizeof(h));
  h.magic = kHelloMagic;
  h.version = kNetWireVersion;
  h.jobKey = jobKey;
  h.sender = sender;
  h.receiver = receiver;
  h.channel = channel;
  h.stepBytes = stepBytes;
  h.llStepBytes = (uint32_t)llStepBytes;
  return h;
}

DataHeader makeDataHeader(int channel, uint64_t step, uint64_t bytes) {
  return DataHeader{kDataMagic, channel, step, 0, (uint32_t)bytes};
}

DataHeader makeLinesHeader(int channel, uint64_t step, uint64_t offset, uint64_t bytes) {
  return DataHeader{kLinesMagic, channel, step, (uint32_t)offset, (uint32_t)bytes};
}

Credit makeCredit(int channel, uint64_t head) { return Credit{kCreditMagic, channel, head}; }

DataHeader makeByeData(int channel) { return DataHeader{kByeMagic, channel, 0, 0, 0}; }

Credit makeByeCredit(int channel) { return Credit{kByeMagic, channel, 0}; }

DataHeader makeFailData(int channel, int culprit) {
  return DataHeader{kFailMagic, channel, (uint64_t)culprit, 0, 0};
}

Credit makeFailCredit(int channel, int culprit) { return Credit{kFailMagic, channel, (uint64_t)culprit}; }

Status checkListenerDesc(const ListenerDesc& d, uint64_t jobKey, int rank, const char* from,
                         bootstrap::SocketAddress* address, std::string* why) {
  if (d.magic != kListenerMagic) {
    return refuse(why, from, "proxy listener descriptor has wrong magic 0x%08x (not from a weft net proxy)", d.magic);
  }
  if (d.jobKey != jobKey) {
    return refuse(why, from, "proxy listener descriptor has job key 0x%016llx, expected 0x%016llx (a foreign job)",
                  (ull)d.jobKey, (ull)jobKey);
  }
  if (d.rank != rank) {
    return refuse(why, from, "proxy listener descriptor says rank %d where rank %d's was expected", d.rank, rank);
  }
  std::string bad;
  bootstrap::SocketAddress a;
  if (!bootstrap::wire::decodeAddress(d.address, &a, &bad)) {
    return refuse(why, from, "proxy listener descriptor holds an unusable address: %s", bad.c_str());
  }
  bool unspecified = true;
  for (uint8_t b : d.address.bytes) unspecified = unspecified && b == 0;
  if (unspecified) {
    return refuse(why, from, "proxy listener descriptor holds the wildcard address %s, which reaches no host: the "
                  "proxy must listen on a concrete interface address", a.toString().c_str());
  }
  *address = a;
  return ncclSuccess;
}

Status checkHello(const Hello& h, uint64_t jobKey, int receiver, int nRanks, const char* from, std::string* why) {
  if (h.magic != kHelloMagic) {
    return refuse(why, from, "hello has wrong magic 0x%08x (not a weft net proxy)", h.magic);
  }
  if (h.version != kNetWireVersion) {
    return refuse(why, from, "hello speaks net proxy wire version %u, this rank %u (all ranks must run the same weft)",
                  h.version, kNetWireVersion);
  }
  if (h.jobKey != jobKey) {
    return refuse(why, from, "hello has job key 0x%016llx, expected 0x%016llx (a stale or foreign job)",
                  (ull)h.jobKey, (ull)jobKey);
  }
  if (h.reserved0 != 0) return refuse(why, from, "hello has a nonzero reserved field");
  if (h.receiver != receiver) {
    return refuse(why, from, "hello is addressed to rank %d, but this is rank %d", h.receiver, receiver);
  }
  if (h.sender < 0 || h.sender >= nRanks) {
    return refuse(why, from, "hello names sender rank %d, outside 0..%d", h.sender, nRanks - 1);
  }
  if (h.channel < 0 || h.channel >= dev::kMaxChannels) {
    return refuse(why, from, "hello names channel %d, outside 0..%d", h.channel, dev::kMaxChannels - 1);
  }
  if (h.stepBytes == 0) return refuse(why, from, "hello announces a step size of 0 bytes");
  if (h.llStepBytes != 0 && !dev::llStepBytesValid(h.llStepBytes)) {
    return refuse(why, from, "hello announces an LL step size of %u bytes, which no rank uses", h.llStepBytes);
  }
  return ncclSuccess;
}

Status checkDataHeader(const DataHeader& h, int channel, const RecvWindow& w, const char* from, std::string* why) {
  if (h.magic != kDataMagic && h.magic != kLinesMagic && h.magic != kByeMagic && h.magic != kFailMagic) {
    return refuse(why, from, "data header has wrong magic 0x%08x (the stream lost its framing or is not weft's)",
                  h.magic);
  }
  if (h.channel != channel) {
    return refuse(why, from, "data header is for channel %d on this channel's connection", h.channel);
  }
  if (h.magic == kByeMagic || h.magic == kFailMagic) return ncclSuccess;
  const bool lines = h.magic == kLinesMagic;
  if (!lines && w.llStepBytes == 0 && h.step != w.nextSimple) {
    return refuse(why, from, "data header carries step %llu, expected step %llu", (ull)h.step, (ull)w.nextSimple);
  }
  if (!lines && h.step < w.nextSimple) {
    return refuse(why, from, "data header carries step %llu, but step %llu has arrived already", (ull)h.step,
                  (ull)(w.nextSimple - 1));
  }
  if (h.step < w.windowStart) {
    return refuse(why, from, "%s for step %llu arrived after the receiver consumed that step", lines ? "LL lines" :
                  "data", (ull)h.step);
  }
  if (h.step >= w.windowStart + kSteps) {
    return refuse(why, from, "step %llu arrived before its slot was freed (the receiver consumed %llu steps): "
                  "the sender ignored the credits", (ull)h.step, (ull)w.windowStart);
  }
  if (!lines) {
    if (h.offset != 0 || h.bytes > w.stepBytes) {
      return refuse(why, from, "data header announces %u bytes at offset %u for step %llu, beyond the %llu-byte slot",
                    h.bytes, h.offset, (ull)h.step, (ull)w.stepBytes);
    }
    return ncclSuccess;
  }
  if (w.llStepBytes == 0) return refuse(why, from, "LL lines arrived on a connection without LL slots");
  if (h.bytes == 0 || h.bytes % dev::kLLLineBytes != 0 || h.offset % dev::kLLLineBytes != 0 ||
      (uint64_t)h.offset + h.bytes > w.llStepBytes) {
    return refuse(why, from, "LL lines header announces %u bytes at offset %u for step %llu: not whole %u-byte "
                  "lines within the %llu-byte slot", h.bytes, h.offset, (ull)h.step, dev::kLLLineBytes,
                  (ull)w.llStepBytes);
  }
  return ncclSuccess;
}

Status checkLines(const char* lines, uint64_t bytes, uint64_t step, const char* from, std::string* why) {
  const uint32_t flag = dev::llFlag(step);
  for (uint64_t at = 0; at + dev::kLLLineBytes <= bytes; at += dev::kLLLineBytes) {
    uint32_t w[4];
    memcpy(w, lines + at, sizeof(w));
    if (w[1] != flag || w[3] != flag) {
      return refuse(why, from, "LL line %llu of step %llu carries flags 0x%08x/0x%08x, expected 0x%08x",
                    (ull)(at / dev::kLLLineBytes), (ull)step, w[1], w[3], flag);
    }
  }
  return ncclSuccess;
}

Status checkCredit(const Credit& c, int channel, uint64_t lastHead, uint64_t stepsSent, const char* from,
                   std::string* why) {
  if (c.magic != kCreditMagic && c.magic != kByeMagic && c.magic != kFailMagic) {
    return refuse(why, from, "credit has wrong magic 0x%08x (the stream lost its framing or is not weft's)", c.magic);
  }
  if (c.channel != channel) {
    return refuse(why, from, "credit is for channel %d on this channel's connection", c.channel);
  }
  if (c.magic == kByeMagic || c.magic == kFailMagic) return ncclSuccess;
  if (c.head < lastHead) {
    return refuse(why, from, "credit goes backwards from %llu to %llu", (ull)lastHead, (ull)c.head);
  }
  if (c.head > stepsSent) {
    return refuse(why, from, "credit says %llu steps were consumed, but only %llu were sent", (ull)c.head,
                  (ull)stepsSent);
  }
  return ncclSuccess;
}

}  // namespace weft::proxy
