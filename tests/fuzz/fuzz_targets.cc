// Coverage-guided fuzzing (libFuzzer, with AddressSanitizer and UndefinedBehaviorSanitizer) of every
// parser that reads bytes or text from outside the process: bootstrap frames off a socket, unique
// ids, addresses (as text too), the topology records and transport rows that ranks exchange, the
// call-check pages other ranks write in /dev/shm, topology XML, the settings' mini-languages
// (NCCL_ALGO, NCCL_PROTO, NCCL_WEFT_TUNING), and the network proxy's wire structs; a live network
// proxy fed by a peer over loopback TCP is in fuzz_net_proxy.cc and fuzz_net_lines.cc. User-pains
// matrix row 16: no crash, undefined behaviour, unbounded allocation or hang; what decodes must
// encode back to the same bytes where the format allows it. tools/fuzz.sh builds one executable per
// target with clang and runs each for a while.
#include <fcntl.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "bootstrap/frame_reader.h"
#include "bootstrap/unique_id.h"
#include "bootstrap/wire.h"
#include "core/op_ledger.h"
#include "device/work_math.h"
#include "graph/algo_proto_env.h"
#include "graph/rank_record.h"
#include "graph/topo_xml.h"
#include "graph/transport_choice.h"
#include "graph/tuning_constants.h"
#include "graph/xml.h"
#include "proxy/net_wire.h"
#include "fuzz_common.h"

namespace weft::fuzz {

namespace {
constexpr uint64_t kJobKey = 0x1234567890abcdefULL;
}  // namespace

// Bootstrap frames: the input goes through a socket in pieces (the first byte picks the piece
// size); every frame the reader hands out must be valid and within its type's caps.
void frames(const uint8_t* data, size_t size) {
  if (size == 0) return;
  const size_t piece = 1 + data[0] % 61;
  int fds[2];
  if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK, 0, fds) != 0) return;
  bootstrap::FrameReader reader(kJobKey);
  bool done = false;
  for (size_t at = 1; at < size && !done; at += piece) {
    const size_t n = std::min(piece, size - at);
    if (write(fds[1], data + at, n) != (ssize_t)n) break;
    for (;;) {
      const bootstrap::FrameReader::Event e = reader.pump(fds[0]);
      if (e == bootstrap::FrameReader::Event::kFrame) {
        const bootstrap::wire::FrameHeader& h = reader.header();
        std::string why;
        require(bootstrap::wire::validateHeader(h, kJobKey, &why), "a frame handed out has a valid header");
        require(reader.payload().size() == h.length, "the payload is as long as its header says");
        require(h.length <= bootstrap::wire::kMaxDataFrameBytes, "no frame above the data cap");
        continue;
      }
      if (e != bootstrap::FrameReader::Event::kNeedMore) done = true;
      break;
    }
  }
  close(fds[0]);
  close(fds[1]);
}

// Ids: raw bytes when the first byte is odd, else the bytes XORed onto a valid id (random bytes
// almost never pass its magic and check, so the decoder's deeper checks would go unexplored).
void uniqueId(const uint8_t* data, size_t size) {
  if (size == 0) return;
  ncclUniqueId id;
  memset(&id, 0, sizeof(id));
  if (data[0] & 1) {
    memcpy(&id, data + 1, std::min(size - 1, sizeof(id)));
  } else {
    bootstrap::UniqueIdInfo base;
    base.jobKey = kJobKey;
    base.root = bootstrap::SocketAddress::loopback(data[0] & 2 ? AF_INET6 : AF_INET);
    base.root.setPort(29500);
    bootstrap::encodeUniqueId(base, &id);
    char* bytes = reinterpret_cast<char*>(&id);
    for (size_t i = 1; i < size && i - 1 < sizeof(id); ++i) bytes[i - 1] ^= (char)data[i];
  }
  bootstrap::UniqueIdInfo info;
  std::string why;
  if (!bootstrap::decodeUniqueId(id, &info, &why)) return;
  ncclUniqueId again;
  bootstrap::encodeUniqueId(info, &again);
  bootstrap::UniqueIdInfo twice;
  require(bootstrap::decodeUniqueId(again, &twice, &why), "a decoded id encodes to a valid id");
  require(twice.jobKey == info.jobKey && twice.rootStartedByRank == info.rootStartedByRank, "the id round-trips");
}

void address(const uint8_t* data, size_t size) {
  // As text (NCCL_COMM_ID, NCCL_SOCKET_IFNAME-style settings), without name lookups.
  bootstrap::SocketAddress parsed;
  std::string reason;
  if (bootstrap::SocketAddress::parse(std::string(reinterpret_cast<const char*>(data), size), &parsed, &reason,
                                      false)) {
    require(parsed.valid(), "a parsed address is an address");
  }
  bootstrap::wire::WireAddress w;
  memset(&w, 0, sizeof(w));
  memcpy(&w, data, std::min(size, sizeof(w)));
  bootstrap::SocketAddress a;
  std::string why;
  if (!bootstrap::wire::decodeAddress(w, &a, &why)) return;
  bootstrap::SocketAddress b;
  require(bootstrap::wire::decodeAddress(bootstrap::wire::encodeAddress(a), &b, &why),
          "a decoded address encodes back");
  require(a.toString() == b.toString(), "the address round-trips");
}

void rankRecord(const uint8_t* data, size_t size) {
  graph::RankRecord record;
  if (isError(graph::decodeRankRecord(data, size, &record))) return;
  const std::vector<uint8_t> again = graph::encodeRankRecord(record);
  graph::RankRecord twice;
  require(!isError(graph::decodeRankRecord(again.data(), again.size(), &twice)), "a decoded record encodes back");
  require(graph::encodeRankRecord(twice) == again, "the record round-trips");
}

void transportRow(const uint8_t* data, size_t size) {
  if (size == 0) return;
  // Ranks 0..n-1 on one host, the sender the last of them (its row holds an entry for each).
  const int nRanks = 1 + data[0] % 64;
  graph::HostGroups groups;
  groups.ranks.assign(1, {});
  for (int r = 0; r < nRanks; ++r) {
    groups.ranks[0].push_back(r);
    groups.groupOf.push_back(0);
    groups.indexOf.push_back(r);
  }
  graph::LocalRow local;
  if (isError(graph::decodeTransportRow(groups, nRanks - 1, data + 1, size - 1, &local))) return;
  require((int)local.size() == nRanks, "a row holds one entry per rank of the host");
  const graph::TransportRow row(local.begin(), local.end());
  require(graph::encodeTransportRow(groups, nRanks - 1, row) == std::vector<uint8_t>(data + 1, data + size),
          "the row round-trips");
}

void topologyXml(const uint8_t* data, size_t size) {
  const std::string text(reinterpret_cast<const char*>(data), size);
  graph::XmlNode root;
  (void)graph::parseXml(text, &root);
  graph::Topology topo;
  (void)graph::parseTopologyXml(text, &topo);
}

// Another rank's call-check page in /dev/shm: the bytes of a real page (two host ranks, some calls
// published) with the input XORed onto them, cut to a length the input picks; whatever opens
// must read back without going past the mapping.
void ledgerPage(const uint8_t* data, size_t size) {
  static const uint64_t hash = 0x5eed000000000000ULL ^ (uint64_t)getpid();
  static const std::vector<uint8_t> base = [] {
    auto real = core::OpLedger::create(hash, 1, 2);
    std::vector<uint8_t> bytes;
    if (!real) return bytes;
    core::CallSignature call;
    call.count = 77;
    real->publish(call);
    core::P2pSignature op;
    op.count = 5;
    real->publishP2p(0, core::P2pDirection::kRecv, op);
    const int fd = shm_open(core::OpLedger::pageName(hash, 1).c_str(), O_RDONLY, 0);
    const off_t length = fd >= 0 ? lseek(fd, 0, SEEK_END) : 0;
    bytes.resize(length > 0 ? (size_t)length : 0);
    if (fd >= 0 && pread(fd, bytes.data(), bytes.size(), 0) != (ssize_t)bytes.size()) bytes.clear();
    if (fd >= 0) close(fd);
    return bytes;  // the real page goes with `real`; its bytes are the base
  }();
  if (base.empty() || size < 2) return;
  std::vector<uint8_t> page = base;
  const size_t cut = (size_t)(data[0] | data[1] << 8) * 64;  // 0: the whole page
  if (cut > 0 && cut < page.size()) page.resize(cut);
  for (size_t i = 2; i < size && i - 2 < page.size(); ++i) page[i - 2] ^= data[i];
  const std::string name = core::OpLedger::pageName(hash, 1);
  const int fd = shm_open(name.c_str(), O_CREAT | O_RDWR | O_TRUNC, 0600);
  if (fd < 0) return;
  const bool written = write(fd, page.data(), page.size()) == (ssize_t)page.size();
  close(fd);
  if (written) {
    if (auto peer = core::PeerLedger::open(hash, 1)) {
      core::CallSignature call;
      core::P2pSignature op;
      for (uint64_t seq = 0; seq < 4; ++seq) {
        (void)peer->recent(seq, &call);
        for (int hostPeer = -1; hostPeer < 4; ++hostPeer) {
          (void)peer->recentP2p(hostPeer, core::P2pDirection::kSend, seq, &op);
          (void)peer->p2pOps(hostPeer, core::P2pDirection::kRecv);
        }
      }
      uint64_t findingSeq = 0;
      std::string text;
      if (peer->finding(&findingSeq, &text)) require(text.size() < 4096, "a finding's text is bounded");
      (void)peer->collectives();
      int64_t since = 0;
      const int replaying = peer->replayChannels(&since);
      require(replaying >= 0 && replaying <= (1 << 16), "a replay channel count is bounded");
    }
  }
  shm_unlink(name.c_str());
}

void settings(const uint8_t* data, size_t size) {
  const std::string text(reinterpret_cast<const char*>(data), size);
  uint8_t masks[graph::kNumCollFuncs] = {};
  bool named[graph::kNumCollFuncs] = {};
  std::string why;
  (void)graph::parseAlgoList(text, masks, &why);
  (void)graph::parseProtoList(text, masks, &why, named);
  graph::TuningConstants k;
  (void)graph::parseTuningText(text, &k, &why);
}

// The proxy's wire structs through their checks, with the checks' parameters also from the input.
// Input: a mode byte (bits 0-1 the struct, bit 2 XORed onto a valid one), four 64-bit parameters,
// the struct's bytes.
void netWire(const uint8_t* data, size_t size) {
  using namespace proxy;
  Cursor in{data, size};
  const uint8_t mode = in.take<uint8_t>();
  const uint64_t p0 = in.take<uint64_t>(), p1 = in.take<uint64_t>(), p2 = in.take<uint64_t>(),
                 p3 = in.take<uint64_t>();
  const bool xorOnto = mode & 4;
  std::string why;
  auto accepted = [&](Status s) {
    if (s == ncclSuccess) return true;
    require(s == ncclRemoteError, "a refused frame is the peer's error");
    require(why.rfind("fuzz: ", 0) == 0, "a refusal's text starts with where the frame came from");
    return false;
  };
  switch (mode & 3) {
    case 0: {
      const uint64_t job = p0;
      const int rank = (int)(p1 % 9) - 1;
      bootstrap::SocketAddress real = bootstrap::SocketAddress::loopback(p2 & 1 ? AF_INET6 : AF_INET);
      real.setPort((uint16_t)(p2 >> 1 | 1));
      const ListenerDesc good = makeListenerDesc(job, rank, real);
      bootstrap::SocketAddress got;
      require(accepted(checkListenerDesc(good, job, rank, "fuzz", &got, &why)) && got == real,
              "a made descriptor is accepted with its address");
      const ListenerDesc d = in.over(good, xorOnto);
      bootstrap::SocketAddress out = bootstrap::SocketAddress::loopback(AF_INET);
      out.setPort(7);
      const bootstrap::SocketAddress before = out;
      if (!accepted(checkListenerDesc(d, job, rank, "fuzz", &out, &why))) {
        require(out == before, "a refused descriptor leaves the address alone");
        break;
      }
      require(d.magic == kListenerMagic && d.jobKey == job && d.rank == rank, "an accepted descriptor is rank's");
      require(out.valid() && out.port() != 0, "an accepted descriptor has an address with a port");
      const bootstrap::wire::WireAddress back = bootstrap::wire::encodeAddress(out);
      require(memcmp(&back, &d.address, sizeof(back)) == 0, "the accepted address is the one on the wire");
      bool wildcard = true;
      for (uint8_t b : back.bytes) wildcard = wildcard && b == 0;
      require(!wildcard, "no wildcard address is accepted");
      break;
    }
    case 1: {
      const int nRanks = (int)(p1 % 9), receiver = (int)(p0 % 9) - 1;
      const int sender = nRanks > 0 ? (int)((p1 >> 8) % (uint64_t)nRanks) : 0;
      const int channel = (int)((p0 >> 8) % dev::kMaxChannels);
      const Hello good = makeHello(p2, sender, receiver, channel, p3);
      require(accepted(checkHello(good, p2, receiver, nRanks, "fuzz", &why)) == (nRanks > 0 && p3 != 0),
              "a made hello is accepted when it names a rank and a step size");
      const Hello h = in.over(good, xorOnto);
      if (!accepted(checkHello(h, p2, receiver, nRanks, "fuzz", &why))) break;
      require(h.magic == kHelloMagic && h.version == kNetWireVersion && h.jobKey == p2, "an accepted hello is ours");
      require(h.reserved0 == 0 && h.receiver == receiver, "an accepted hello is for us");
      require(h.llStepBytes == 0 || dev::llStepBytesValid(h.llStepBytes), "an accepted hello has a valid LL step size");
      require(h.sender >= 0 && h.sender < nRanks && h.channel >= 0 && h.channel < dev::kMaxChannels,
              "an accepted hello names a sender and channel in range");
      require(h.stepBytes != 0, "an accepted hello has a step size");
      break;
    }
    case 2: {
      // The receiver consumed `start` steps; Simple steps from `next` on; LL slots or none.
      const int channel = (int)(p0 % dev::kMaxChannels);
      const uint64_t next = p1 >> 2, start = next + 4 - std::min<uint64_t>(next + 4, p2 & 15);
      const uint64_t stepBytes = p3 >> (p3 & 63);  // all magnitudes
      const uint64_t llStepBytes = (p0 >> 8 & 1) ? dev::kLLMinStepBytes << (p0 >> 9 & 7) : 0;
      const RecvWindow w{next, start, stepBytes, llStepBytes};
      const bool free = next >= start && next < start + dev::kSteps;
      const DataHeader good = makeDataHeader(channel, next, std::min(p2 >> 8, std::min<uint64_t>(stepBytes, ~0u)));
      require(accepted(checkDataHeader(good, channel, w, "fuzz", &why)) == free,
              "a made header is accepted when its slot is free");
      const DataHeader lines = makeLinesHeader(channel, next, 0, dev::kLLLineBytes);
      require(accepted(checkDataHeader(lines, channel, w, "fuzz", &why)) == (free && llStepBytes != 0),
              "made LL lines are accepted when their slot is free, on a connection with LL");
      require(accepted(checkDataHeader(makeByeData(channel), channel, w, "fuzz", &why)),
              "a bye is accepted on its channel");
      const DataHeader h = in.over(p0 >> 12 & 1 ? lines : good, xorOnto);
      if (!accepted(checkDataHeader(h, channel, w, "fuzz", &why))) break;
      require(h.channel == channel, "an accepted header is for this channel");
      if (isBye(h) || isFail(h)) break;
      require(h.step >= start && h.step < start + dev::kSteps, "an accepted step has a free slot, not yet consumed");
      if (isLines(h)) {
        require(llStepBytes != 0 && h.bytes > 0 && h.bytes % dev::kLLLineBytes == 0 &&
                    h.offset % dev::kLLLineBytes == 0 && (uint64_t)h.offset + h.bytes <= llStepBytes,
                "accepted LL lines are whole lines within their slot");
        break;
      }
      require(h.magic == kDataMagic && h.offset == 0 && h.bytes <= stepBytes, "an accepted step fits its slot");
      require(llStepBytes != 0 ? h.step >= next : h.step == next, "an accepted Simple step comes in order");
      break;
    }
    default: {
      const int channel = (int)(p0 % dev::kMaxChannels);
      const uint64_t lastHead = p1, stepsSent = p1 + (p2 >> (p2 & 63));  // may wrap below lastHead
      const uint64_t span = stepsSent - lastHead;
      const Credit good = makeCredit(channel, lastHead + (span == UINT64_MAX ? p3 : p3 % (span + 1)));
      require(accepted(checkCredit(good, channel, lastHead, stepsSent, "fuzz", &why)) == (stepsSent >= lastHead),
              "a made credit is accepted when it is within the steps sent");
      require(accepted(checkCredit(makeByeCredit(channel), channel, lastHead, stepsSent, "fuzz", &why)),
              "a bye is accepted on its channel");
      const Credit c = in.over(good, xorOnto);
      if (!accepted(checkCredit(c, channel, lastHead, stepsSent, "fuzz", &why))) break;
      require(c.channel == channel, "an accepted credit is for this channel");
      if (isBye(c) || isFail(c)) break;
      require(c.magic == kCreditMagic && c.head >= lastHead, "an accepted credit never goes backwards");
      require(c.head <= stepsSent, "an accepted credit never passes the steps sent");
      break;
    }
  }
}

}  // namespace weft::fuzz
