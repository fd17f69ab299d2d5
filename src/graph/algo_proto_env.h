// NCCL_ALGO and NCCL_PROTO as NCCL 2.24+ reads them: which algorithms and protocols each
// collective may use. Pure string handling; the tuning model applies the result.
//
// Grammar (names are case-insensitive; spaces around names are ignored):
//   setting := entry (';' entry)*
//   entry   := [function ':'] list          only the first entry may omit the function
//   list    := ['^'] name (',' name)*       '^' inverts: everything except the names
//   function: Broadcast | Reduce | AllGather | ReduceScatter | AllReduce
//   algo    : Tree | Ring | CollnetDirect | CollnetChain | NVLS | NVLSTree | PAT | Direct
//             (Direct is a weft extension: dev::kAlgoDirect, one-hop AllReduce/AllGather in a node)
//   proto   : LL | LL128 | Simple
// An entry without a function sets every function; a later "function:list" entry replaces that
// function's set. Functions that no entry names keep everything enabled, so
// "allreduce:^tree" leaves the other collectives alone. Examples:
//   "ring,collnetdirect;allreduce:tree,collnetdirect;broadcast:ring"
//   "^LL128;allreduce:LL128"     (everything but LL128, except AllReduce: only LL128)
//
// Differences from NCCL, all on input NCCL rejects or mangles: NCCL fails communicator creation
// on a bad token, weft warns and ignores that variable (as if unset); weft accepts spaces around
// names and rejects an entry with two ':' (NCCL silently drops the part after the second ':').
#pragma once

#include <cstdint>
#include <string>

#include "core/status.h"
#include "device/abi.h"

namespace weft::graph {

// The functions NCCL_ALGO/NCCL_PROTO can name: dev::kFuncBroadcast .. dev::kFuncAllReduce.
constexpr int kNumCollFuncs = 5;
constexpr uint8_t kAllAlgosMask = (1u << dev::kNumAlgos) - 1;
constexpr uint8_t kAllProtosMask = (1u << dev::kNumProtos) - 1;

// Per function (dev::Func numbering), bit a of algo[f] allows algorithm a (dev::Algo numbering)
// and bit p of proto[f] allows protocol p (dev::Proto numbering).
struct AlgoProtoMasks {
  uint8_t algo[kNumCollFuncs] = {kAllAlgosMask, kAllAlgosMask, kAllAlgosMask, kAllAlgosMask,
                                 kAllAlgosMask};
  uint8_t proto[kNumCollFuncs] = {kAllProtosMask, kAllProtosMask, kAllProtosMask, kAllProtosMask,
                                  kAllProtosMask};

  bool allows(int func, int algo, int proto) const {
    if (func < 0 || func >= kNumCollFuncs || algo < 0 || algo >= dev::kNumAlgos || proto < 0 ||
        proto >= dev::kNumProtos)
      return false;
    return ((this->algo[func] >> algo) & 1) && ((this->proto[func] >> proto) & 1);
  }
  // True when NCCL_PROTO set the function's protocols (an entry without a function, or one naming
  // it): then every protocol left in proto[f] was asked for, even one the tuner would not pick on
  // its own (TuningConstants::protoByDefault), as NCCL treats LL128.
  bool protoNamed[kNumCollFuncs] = {};
};

// NCCL's spellings, used in logs and in the tuning table.
const char* algoName(int algo);    // "Tree", "Ring", "CollNetDirect", ...; "?" when out of range
const char* protoName(int proto);  // "LL", "LL128", "Simple"
const char* collFuncName(int func);  // "Broadcast", ..., "AllReduce", "SendRecv"

// Parses one NCCL_ALGO / NCCL_PROTO value into masks[kNumCollFuncs]. Empty or blank text changes
// nothing. On bad input returns ncclInvalidUsage, leaves masks untouched and puts the reason
// in *why (no logging: the caller decides what a bad value means).
[[nodiscard]] Status parseAlgoList(const std::string& text, uint8_t masks[kNumCollFuncs],
                                   std::string* why);
[[nodiscard]] Status parseProtoList(const std::string& text, uint8_t masks[kNumCollFuncs],
                                    std::string* why, bool named[kNumCollFuncs] = nullptr);

// Both settings at once (nullptr = unset). A bad value is WARNed about, naming the token and the
// remedy, and that variable is ignored; the other one still applies.
AlgoProtoMasks parseAlgoProtoSettings(const char* algoText, const char* protoText);

// NCCL_ALGO and NCCL_PROTO from the environment or NCCL config files (weft::param).
AlgoProtoMasks algoProtoMasksFromEnv();

// "Tree,Ring" / "LL,Simple" / "none": the names of the set bits, for logs.
std::string algoMaskString(uint8_t mask);
std::string protoMaskString(uint8_t mask);

}  // namespace weft::graph
