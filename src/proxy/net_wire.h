// Wire formats of the network proxy (NetProxy): what a rank publishes so that its peers can reach
// its proxy, the hello that opens a connection, and the two frames a connection carries.
//
// One TCP connection per (channel, sender, receiver): it carries data frames from the sending
// proxy to the receiving one (a DataHeader followed by `bytes` of payload) and credits the other
// way (the receiving GPU's consumption counter). A data frame holds a whole Simple step, or LL
// lines of one step (16-byte lines, each with its flags, that land at `offset` in the step's slot:
// a step's lines may come in several frames, and between other steps' frames). The connecting
// side opens with a Hello; the accepting side answers with the same Hello to accept it, or closes
// the connection to refuse it.
// An orderly close is announced by a frame of the usual size whose magic is kByeMagic, so that a
// peer destroying its communicator is not mistaken for one that crashed.
//
// Every frame is checked before it is used (DESIGN.md §1.5): a length read from the wire is
// bounded before any payload is received. The check functions are pure: they return the status
// and, on failure, a message for the caller's one WARN, starting with the caller's `from` text.
// Integers travel in the host's byte order (little-endian hosts only, as the bootstrap's wire).
#pragma once

#include <cstdint>
#include <string>

#include "bootstrap/socket.h"
#include "bootstrap/wire.h"
#include "core/status.h"
#include "device/abi.h"

namespace weft::proxy {

constexpr uint32_t kListenerMagic = 0x4c504e57;  // "WNPL"
constexpr uint32_t kHelloMagic = 0x48504e57;     // "WNPH"
constexpr uint32_t kDataMagic = 0x44504e57;      // "WNPD": a Simple step
constexpr uint32_t kLinesMagic = 0x54504e57;     // "WNPT": LL lines of a step
constexpr uint32_t kCreditMagic = 0x43504e57;    // "WNPC"
constexpr uint32_t kByeMagic = 0x42504e57;       // "WNPB": orderly close, in place of a data header or credit
// "WNPF": this side's transfers stopped on a failure, in place of a data header or credit; its step
// (or head) field names the rank whose connection failed first, so that a cascade names the cause.
constexpr uint32_t kFailMagic = 0x46504e57;
constexpr uint16_t kNetWireVersion = 2;

// Where a rank's proxy listens; all-gathered through the bootstrap before NetProxy::start.
struct ListenerDesc {
  uint32_t magic;
  int32_t rank;
  uint64_t jobKey;
  bootstrap::wire::WireAddress address;
};
static_assert(sizeof(ListenerDesc) == 40, "ListenerDesc is exchanged between ranks");

// First bytes on a connection, from the sending side; echoed by the receiving side to accept.
struct Hello {
  uint32_t magic;
  uint16_t version;
  uint16_t reserved0;  // zero
  uint64_t jobKey;
  int32_t sender;
  int32_t receiver;
  int32_t channel;
  uint32_t llStepBytes;  // LL slot size (0: no LL on this connection); both sides must agree
  uint64_t stepBytes;    // Simple slot size; both sides must agree
};
static_assert(sizeof(Hello) == 40, "Hello is part of the protocol");

// Precedes each payload (sender -> receiver).
struct DataHeader {
  uint32_t magic;
  int32_t channel;
  uint64_t step;
  uint32_t offset;  // where the payload goes in the step's slot: 0 for Simple, a line boundary for LL
  uint32_t bytes;   // payload bytes that follow; within the slot (stepBytes, or llStepBytes for LL)
};
static_assert(sizeof(DataHeader) == 24, "DataHeader is part of the protocol");

// The receiving GPU consumed steps [0, head) (receiver -> sender).
struct Credit {
  uint32_t magic;
  int32_t channel;
  uint64_t head;
};
static_assert(sizeof(Credit) == 16, "Credit is part of the protocol");

ListenerDesc makeListenerDesc(uint64_t jobKey, int rank, const bootstrap::SocketAddress& address);
Hello makeHello(uint64_t jobKey, int sender, int receiver, int channel, uint64_t stepBytes,
                uint64_t llStepBytes = 0);
DataHeader makeDataHeader(int channel, uint64_t step, uint64_t bytes);
DataHeader makeLinesHeader(int channel, uint64_t step, uint64_t offset, uint64_t bytes);
inline bool isLines(const DataHeader& h) { return h.magic == kLinesMagic; }
Credit makeCredit(int channel, uint64_t head);
DataHeader makeByeData(int channel);
Credit makeByeCredit(int channel);
inline bool isBye(const DataHeader& h) { return h.magic == kByeMagic; }
inline bool isBye(const Credit& c) { return c.magic == kByeMagic; }
DataHeader makeFailData(int channel, int culprit);
Credit makeFailCredit(int channel, int culprit);
inline bool isFail(const DataHeader& h) { return h.magic == kFailMagic; }
inline bool isFail(const Credit& c) { return c.magic == kFailMagic; }

// The descriptor rank `rank` published: magic, rank, job key, and a usable IPv4/IPv6 address with
// a port (not the wildcard address). *address is written on success only. Failure: ncclRemoteError.
[[nodiscard]] Status checkListenerDesc(const ListenerDesc& d, uint64_t jobKey, int rank, const char* from,
                                       bootstrap::SocketAddress* address, std::string* why);

// A hello as the accepting rank `receiver` of an nRanks communicator sees it: magic, version, job
// key, receiver, a sender and channel (< dev::kMaxChannels) in range, nonzero stepBytes, llStepBytes 0 or
// valid for LL. Whether this (channel, sender) is expected and free, and the slot sizes this rank's,
// is the caller's question. Failure: ncclRemoteError.
[[nodiscard]] Status checkHello(const Hello& h, uint64_t jobKey, int receiver, int nRanks, const char* from,
                                std::string* why);

// What a receive connection accepts next: Simple steps come in order: nextSimple (the step after
// the last one received) on a connection without LL, at or after it on one with LL (LL steps in
// between send no Simple frame); every step's slot must be free and not yet consumed
// (windowStart <= step < windowStart + dev::kSteps, windowStart being the receiving GPU's consumed count).
struct RecvWindow {
  uint64_t nextSimple;
  uint64_t windowStart;
  uint64_t stepBytes;
  uint64_t llStepBytes;  // 0: LL lines are refused
};
// A data header (or a bye or fail frame) on `channel`, as RecvWindow says: a Simple step with
// offset 0 and bytes <= stepBytes, or LL lines: whole lines, at least one, within the LL slot. A
// bye or fail frame is accepted with any step and size (the caller tests isBye / isFail).
// Failure: ncclRemoteError.
[[nodiscard]] Status checkDataHeader(const DataHeader& h, int channel, const RecvWindow& w, const char* from,
                                     std::string* why);
// The payload of an LL lines frame for `step`: every line carries the step's flag twice.
[[nodiscard]] Status checkLines(const char* lines, uint64_t bytes, uint64_t step, const char* from, std::string* why);

// A credit (or a bye or fail frame) on `channel`: head never goes backwards (lastHead) and never
// passes the steps this side has sent. Failure: ncclRemoteError.
[[nodiscard]] Status checkCredit(const Credit& c, int channel, uint64_t lastHead, uint64_t stepsSent, const char* from,
                                 std::string* why);

}  // namespace weft::proxy
