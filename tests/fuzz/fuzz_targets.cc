// Coverage-guided fuzzing (libFuzzer, with AddressSanitizer and UndefinedBehaviorSanitizer) of every
// parser that reads bytes or text from outside the process: bootstrap frames off a socket, unique
// ids, addresses (as text too), the topology records and transport rows that ranks exchange, the
// call-check pages other ranks write in /dev/shm, topology XML, and the settings' mini-languages
// (NCCL_ALGO, NCCL_PROTO, NCCL_WEFT_TUNING). User-pains matrix row 16: no crash, undefined
// behaviour, unbounded allocation or hang; what decodes must encode back to the same bytes where
// the format allows it. One executable per target (WEFT_FUZZ_TARGET names it); tools/fuzz.sh builds
// them with clang and runs each for a while.
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
#include "graph/algo_proto_env.h"
#include "graph/rank_record.h"
#include "graph/topo_xml.h"
#include "graph/transport_choice.h"
#include "graph/tuning_constants.h"
#include "graph/xml.h"

namespace {

using namespace weft;

// A broken promise of a parser: abort, so that libFuzzer keeps the input.
void require(bool ok, const char* what) {
  if (!ok) {
    fprintf(stderr, "fuzz invariant broken: %s\n", what);
    abort();
  }
}

constexpr uint64_t kJobKey = 0x1234567890abcdefULL;

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
  const int nRanks = 1 + data[0] % 64;
  graph::TransportRow row;
  if (isError(graph::decodeTransportRow(data + 1, size - 1, nRanks, &row))) return;
  require((int)row.size() == nRanks, "a row holds one entry per rank");
  require(graph::encodeTransportRow(row) == std::vector<uint8_t>(data + 1, data + size), "the row round-trips");
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

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  WEFT_FUZZ_TARGET(data, size);
  return 0;
}
