#include "graph/algo_proto_env.h"

#include <strings.h>

#include <vector>

#include "core/log.h"
#include "core/param.h"

namespace weft::graph {
namespace {

// "Direct" is weft's own (dev::kAlgoDirect); NCCL rejects it.
constexpr const char* kAlgoNames[] = {"Tree", "Ring", "CollNetDirect", "CollNetChain", "NVLS", "NVLSTree", "PAT",
                                      "Direct"};
static_assert(sizeof(kAlgoNames) / sizeof(kAlgoNames[0]) == dev::kNumAlgos, "a name per algorithm");
constexpr const char* kProtoNames[dev::kNumProtos] = {"LL", "LL128", "Simple"};
constexpr const char* kFuncNames[dev::kNumFuncs] = {"Broadcast", "Reduce",    "AllGather",
                                                     "ReduceScatter", "AllReduce", "SendRecv"};

std::string trim(const std::string& s) {
  size_t b = s.find_first_not_of(" \t\r\n");
  if (b == std::string::npos) return "";
  size_t e = s.find_last_not_of(" \t\r\n");
  return s.substr(b, e - b + 1);
}

// Splits on `sep`, trimming each piece; empty pieces are kept (callers decide what they mean).
std::vector<std::string> split(const std::string& s, char sep) {
  std::vector<std::string> out;
  size_t start = 0;
  while (true) {
    size_t pos = s.find(sep, start);
    out.push_back(trim(s.substr(start, pos == std::string::npos ? std::string::npos : pos - start)));
    if (pos == std::string::npos) break;
    start = pos + 1;
  }
  return out;
}

int findName(const std::string& name, const char* const* names, int count) {
  for (int i = 0; i < count; ++i) {
    if (strcasecmp(name.c_str(), names[i]) == 0) return i;
  }
  return -1;
}

std::string joinNames(const char* const* names, int count) {
  std::string s;
  for (int i = 0; i < count; ++i) s += (i ? ", " : "") + std::string(names[i]);
  return s;
}

// One "[^]name,name" list into a mask over `count` names.
Status parseElementList(const std::string& list, const char* const* names, int count,
                        const char* what, uint8_t* mask, std::string* why) {
  std::string body = list;
  bool invert = !body.empty() && body[0] == '^';
  if (invert) body = trim(body.substr(1));
  uint8_t named = 0;
  int nNamed = 0;
  for (const std::string& elem : split(body, ',')) {
    if (elem.empty()) continue;  // "ring,,tree" and a trailing ',' are harmless, as in NCCL
    int i = findName(elem, names, count);
    if (i < 0) {
      *why = "unknown " + std::string(what) + " '" + elem + "' (known: " + joinNames(names, count) + ")";
      return ncclInvalidUsage;
    }
    named |= uint8_t(1u << i);
    ++nNamed;
  }
  if (nNamed == 0 && !invert) {
    *why = "empty " + std::string(what) + " list";
    return ncclInvalidUsage;
  }
  uint8_t all = uint8_t((1u << count) - 1);
  *mask = invert ? uint8_t(all & ~named) : named;
  return ncclSuccess;
}

// named[f] (when given) becomes true for every function an entry set; untouched on bad input.
Status parseList(const std::string& text, const char* const* names, int count, const char* what,
                 uint8_t masks[kNumCollFuncs], std::string* why, bool named[kNumCollFuncs] = nullptr) {
  uint8_t result[kNumCollFuncs];
  bool covered[kNumCollFuncs] = {};
  for (int f = 0; f < kNumCollFuncs; ++f) result[f] = masks[f];
  std::vector<std::string> entries = split(text, ';');
  bool first = true;
  for (const std::string& entry : entries) {
    if (entry.empty()) continue;  // "a;;b" and a trailing ';'
    std::vector<std::string> parts = split(entry, ':');
    if (parts.size() > 2) {
      *why = "entry '" + entry + "' has more than one ':'";
      return ncclInvalidUsage;
    }
    uint8_t mask = 0;
    if (parts.size() == 1) {
      // Without a function the list applies to all functions; only sensible first, since it
      // would otherwise overwrite the entries before it (NCCL rejects it too).
      if (!first) {
        *why = "entry '" + entry + "' needs a function prefix (only the first entry may omit it)";
        return ncclInvalidUsage;
      }
      if (Status s = parseElementList(parts[0], names, count, what, &mask, why); s != ncclSuccess) return s;
      for (int f = 0; f < kNumCollFuncs; ++f) {
        result[f] = mask;
        covered[f] = true;
      }
    } else {
      int f = findName(parts[0], kFuncNames, kNumCollFuncs);
      if (f < 0) {
        *why = "unknown function '" + parts[0] + "' (known: " + joinNames(kFuncNames, kNumCollFuncs) + ")";
        return ncclInvalidUsage;
      }
      if (Status s = parseElementList(parts[1], names, count, what, &mask, why); s != ncclSuccess) return s;
      result[f] = mask;
      covered[f] = true;
    }
    first = false;
  }
  for (int f = 0; f < kNumCollFuncs; ++f) {
    masks[f] = result[f];
    if (named && covered[f]) named[f] = true;
  }
  return ncclSuccess;
}

std::string maskString(uint8_t mask, const char* const* names, int count) {
  std::string s;
  for (int i = 0; i < count; ++i) {
    if ((mask >> i) & 1) s += (s.empty() ? "" : ",") + std::string(names[i]);
  }
  return s.empty() ? "none" : s;
}

}  // namespace

const char* algoName(int algo) { return algo >= 0 && algo < dev::kNumAlgos ? kAlgoNames[algo] : "?"; }
const char* protoName(int proto) {
  return proto >= 0 && proto < dev::kNumProtos ? kProtoNames[proto] : "?";
}
const char* collFuncName(int func) { return func >= 0 && func < dev::kNumFuncs ? kFuncNames[func] : "?"; }

Status parseAlgoList(const std::string& text, uint8_t masks[kNumCollFuncs], std::string* why) {
  return parseList(text, kAlgoNames, dev::kNumAlgos, "algorithm", masks, why);
}

Status parseProtoList(const std::string& text, uint8_t masks[kNumCollFuncs], std::string* why,
                      bool named[kNumCollFuncs]) {
  return parseList(text, kProtoNames, dev::kNumProtos, "protocol", masks, why, named);
}

AlgoProtoMasks parseAlgoProtoSettings(const char* algoText, const char* protoText) {
  AlgoProtoMasks m;
  std::string why;
  if (algoText && parseAlgoList(algoText, m.algo, &why) != ncclSuccess) {
    WEFT_WARN("Ignoring NCCL_ALGO=\"%s\": %s. Expected e.g. \"Ring,Tree\", \"^Tree\" or "
              "\"allreduce:tree;allgather:ring\"; all algorithms stay enabled.",
              algoText, why.c_str());
  }
  if (protoText && parseProtoList(protoText, m.proto, &why, m.protoNamed) != ncclSuccess) {
    WEFT_WARN("Ignoring NCCL_PROTO=\"%s\": %s. Expected e.g. \"LL,Simple\", \"^LL128\" or "
              "\"allreduce:LL128,Simple\"; all protocols stay enabled.",
              protoText, why.c_str());
  }
  return m;
}

AlgoProtoMasks algoProtoMasksFromEnv() {
  // Empty means unset, as in NCCL; getStr logs a value that is set.
  std::string algo = param::getStr("NCCL_ALGO", "");
  std::string proto = param::getStr("NCCL_PROTO", "");
  AlgoProtoMasks m = parseAlgoProtoSettings(algo.empty() ? nullptr : algo.c_str(),
                                            proto.empty() ? nullptr : proto.c_str());
  if (!algo.empty() || !proto.empty()) {
    for (int f = 0; f < kNumCollFuncs; ++f) {
      WEFT_INFO(log::kTuning | log::kEnv, "%s: algorithms %s, protocols %s allowed by NCCL_ALGO/NCCL_PROTO",
                kFuncNames[f], algoMaskString(m.algo[f]).c_str(), protoMaskString(m.proto[f]).c_str());
    }
  }
  return m;
}

std::string algoMaskString(uint8_t mask) { return maskString(mask, kAlgoNames, dev::kNumAlgos); }
std::string protoMaskString(uint8_t mask) { return maskString(mask, kProtoNames, dev::kNumProtos); }

}  // namespace weft::graph
