// The sweep's case list, names, generator choice, tolerance, and the result tally.
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <sstream>

#include "sweep_host.h"

namespace sweep {

const char* collName(int coll) {
  switch (coll) {
    case kAllReduce: return "AllReduce";
    case kBroadcast: return "Broadcast";
    case kBcast: return "Bcast";
    case kReduce: return "Reduce";
    case kAllGather: return "AllGather";
    case kReduceScatter: return "ReduceScatter";
    case kAlltoAll: return "AlltoAll";
    case kGather: return "Gather";
    case kScatter: return "Scatter";
    case kSendRecvRing: return "SendRecvRing";
    case kSendRecvSelf: return "SendRecvSelf";
    case kSendRecvMany: return "SendRecvMany";
    case kChainAllReduce: return "AllReduceChain";
    default: return "?";
  }
}

const char* opName(int op) {
  switch (op) {
    case kSum: return "sum";
    case kProd: return "prod";
    case kMin: return "min";
    case kMax: return "max";
    case kAvg: return "avg";
    case kPreMulHost: return "premulsum-host";
    case kPreMulDev: return "premulsum-dev";
    default: return "-";
  }
}

bool collIsReduction(int coll) {
  return coll == kAllReduce || coll == kReduce || coll == kReduceScatter || coll == kChainAllReduce;
}

bool collHasRoot(int coll) {
  return coll == kBroadcast || coll == kBcast || coll == kReduce || coll == kGather || coll == kScatter;
}

// AlltoAll and point-to-point have no in-place form; Bcast is in-place only (handled in buildCases).
bool collHasInPlace(int coll) {
  return coll != kAlltoAll && coll != kSendRecvRing && coll != kSendRecvSelf && coll != kSendRecvMany;
}

uint64_t inCountOf(int coll, uint64_t c, int n) {
  switch (coll) {
    case kReduceScatter:
    case kScatter:
    case kAlltoAll: return c * n;
    case kSendRecvMany: return c * n * kManyMsgs;
    default: return c;
  }
}

uint64_t outCountOf(int coll, uint64_t c, int n) {
  switch (coll) {
    case kAllGather:
    case kGather:
    case kAlltoAll: return c * n;
    case kSendRecvMany: return c * n * kManyMsgs;
    default: return c;
  }
}

int genFor(int coll, int op) {
  if (!collIsReduction(coll)) return kGenBits;
  switch (op) {
    case kProd: return kGenProd;
    case kAvg: return kGenAvg;
    case kPreMulHost:
    case kPreMulDev: return kGenPreMul;
    default: return kGenSum;
  }
}

double preMulScalar(int type) { return typeInfo(type).isFloat ? 0.5 : 3.0; }

double toleranceFactor(int type, int op, int nranks) {
  const TypeInfo& t = typeInfo(type);
  if (!t.isFloat) return 0;
  if (op != kAvg && op != kPreMulHost && op != kPreMulDev) return 0;
  return 2.0 * (nranks + 2) * std::ldexp(1.0, -t.precisionBits);
}

namespace {

uint64_t mixSeed(uint64_t x) {
  x += 0x9E3779B97F4A7C15ull;
  x = (x ^ (x >> 30)) * 0xBF58476D1CE4E5B9ull;
  x = (x ^ (x >> 27)) * 0x94D049BB133111EBull;
  return x ^ (x >> 31);
}

template <typename T>
bool contains(const std::vector<T>& v, T x) {
  return std::find(v.begin(), v.end(), x) != v.end();
}

}  // namespace

std::vector<Case> buildCases(const Options& o, int nranks) {
  std::vector<int> colls = o.colls, types = o.types, ops = o.ops;
  if (colls.empty()) {
    for (int c = 0; c < kNumColls; ++c) colls.push_back(c);
  }
  if (types.empty()) {
    if (o.quick) {
      types = {ncclInt8, ncclInt32, ncclUint64, ncclFloat16, ncclFloat32, ncclBfloat16};
    } else {
      for (int t = 0; t < kNumTypes; ++t) types.push_back(t);
    }
  }
  if (ops.empty()) {
    if (o.quick) ops = {kSum, kProd, kMin, kMax, kAvg, kPreMulDev};
    else ops = {kSum, kProd, kMin, kMax, kAvg, kPreMulHost, kPreMulDev};
  }
  if (!o.fp8) {
    types.erase(std::remove_if(types.begin(), types.end(), [](int t) { return typeInfo(t).needsSm90; }), types.end());
  }
  std::vector<int> roots = {0};
  if (nranks > 1) roots.push_back(nranks - 1);

  std::vector<Case> cases;
  for (int coll : colls) {
    for (int type : types) {
      const int es = typeInfo(type).bytes;
      std::vector<uint64_t> counts = o.counts;
      if (counts.empty()) {
        if (o.quick) counts = {0, 1, 7, 1024, 1025, 65537, (1u << 20) + 1};
        else counts = {0, 1, 2, 7, 1023, 1024, 1025, 65537, (1u << 20) - 1, (1u << 20) + 1, o.largeBytes / es};
      }
      // Offsets in bytes: one element, and odd bytes for byte types (whose elements allow any address).
      std::vector<std::pair<int, int>> outOfPlaceOffsets = {{0, 0}, {es, 0}};
      std::vector<int> inPlaceOffsets = {0, es};
      if (!o.quick) outOfPlaceOffsets.push_back({0, es});
      if (es == 1 && !o.quick) {
        outOfPlaceOffsets.push_back({3, 5});
        inPlaceOffsets.push_back(5);
      }
      const std::vector<int> opList = collIsReduction(coll) ? ops : std::vector<int>{kNoOp};
      for (int op : opList) {
        for (uint64_t count : counts) {
          for (int inplace = 0; inplace < 2; ++inplace) {
            if (inplace && !collHasInPlace(coll)) continue;
            if (!inplace && coll == kBcast) continue;
            std::vector<std::pair<int, int>> offsets;
            if (inplace) {
              for (int off : inPlaceOffsets) offsets.push_back({0, off});
            } else {
              offsets = outOfPlaceOffsets;
            }
            for (const auto& off : offsets) {
              const std::vector<int> rootList = collHasRoot(coll) ? roots : std::vector<int>{0};
              for (int root : rootList) {
                Case c;
                c.coll = coll;
                c.type = type;
                c.op = op;
                c.count = count;
                c.root = root;
                c.inplace = inplace;
                c.sendOff = off.first;
                c.recvOff = off.second;
                c.seed = mixSeed(o.seed ^ mixSeed(cases.size() + 1));
                cases.push_back(c);
              }
            }
          }
        }
      }
    }
  }
  return cases;
}

std::string describe(const Case& c) {
  std::string s = std::string(collName(c.coll)) + " " + typeInfo(c.type).name + " " + opName(c.op) +
                  " count=" + std::to_string(c.count) + (c.inplace ? " in-place" : " out-of-place");
  if (collHasRoot(c.coll)) s += " root=" + std::to_string(c.root);
  s += " offsets(bytes)=" + std::to_string(c.sendOff) + "/" + std::to_string(c.recvOff);
  return s;
}

uint64_t areaBytesFor(const Case& c, int nranks) {
  const uint64_t es = typeInfo(c.type).bytes;
  const uint64_t elems = std::max(inCountOf(c.coll, c.count, nranks), outCountOf(c.coll, c.count, nranks));
  return kPad + static_cast<uint64_t>(std::max(c.sendOff, c.recvOff)) + elems * es + kGuard;
}

// --- Tally

void Tally::addCase(const Case& c, bool failed) {
  const std::string key =
      std::string(collName(c.coll)) + "|" + typeInfo(c.type).name + "|" + opName(c.op);
  auto it = index.find(key);
  if (it == index.end()) {
    it = index.emplace(key, lines.size()).first;
    lines.push_back(Line{collName(c.coll), typeInfo(c.type).name, opName(c.op), 0, 0});
  }
  Line& l = lines[it->second];
  l.cases++;
  if (failed) {
    l.failed++;
    casesFailed++;
  }
}

void Tally::addExtra(const std::string& name, int pass, const std::string& detail) {
  for (Extra& e : extras) {
    if (e.name != name) continue;
    // Several local ranks report the same test: fail wins, then pass, then skip.
    if (pass == 0 || (pass == 1 && e.pass == -1)) {
      e.pass = pass;
      e.detail = detail;
    }
    return;
  }
  extras.push_back(Extra{name, pass, detail});
}

void Tally::merge(const Tally& o) {
  for (const Line& l : o.lines) {
    const std::string key = l.coll + "|" + l.type + "|" + l.op;
    auto it = index.find(key);
    if (it == index.end()) {
      index.emplace(key, lines.size());
      lines.push_back(l);
      continue;
    }
    Line& mine = lines[it->second];
    mine.cases = std::max(mine.cases, l.cases);
    mine.failed += l.failed;
  }
  for (const Extra& e : o.extras) addExtra(e.name, e.pass, e.detail);
  casesFailed += o.casesFailed;
  ranksMerged += o.ranksMerged;
}

namespace {
std::string clean(std::string s) {
  for (char& ch : s) {
    if (ch == '\t' || ch == '\n' || ch == '\r') ch = ' ';
  }
  return s;
}
}  // namespace

std::string Tally::serialize() const {
  std::ostringstream out;
  out << "N\t" << ranksMerged << "\t" << casesFailed << "\n";
  for (const Line& l : lines) {
    out << "L\t" << l.coll << "\t" << l.type << "\t" << l.op << "\t" << l.cases << "\t" << l.failed << "\n";
  }
  for (const Extra& e : extras) out << "X\t" << clean(e.name) << "\t" << e.pass << "\t" << clean(e.detail) << "\n";
  out << "E\n";
  return out.str();
}

bool Tally::parse(const std::string& text) {
  std::istringstream in(text);
  std::string line;
  bool ended = false;
  while (std::getline(in, line)) {
    std::vector<std::string> f;
    size_t start = 0;
    while (true) {
      const size_t tab = line.find('\t', start);
      f.push_back(line.substr(start, tab == std::string::npos ? std::string::npos : tab - start));
      if (tab == std::string::npos) break;
      start = tab + 1;
    }
    if (f[0] == "N" && f.size() == 3) {
      ranksMerged += std::stoi(f[1]);
      casesFailed += std::stoull(f[2]);
    } else if (f[0] == "L" && f.size() == 6) {
      Tally one;
      one.lines.push_back(Line{f[1], f[2], f[3], std::stoull(f[4]), std::stoull(f[5])});
      const uint64_t keep = casesFailed;
      const int keepRanks = ranksMerged;
      merge(one);
      casesFailed = keep;
      ranksMerged = keepRanks;
    } else if (f[0] == "X" && f.size() == 4) {
      addExtra(f[1], std::stoi(f[2]), f[3]);
    } else if (f[0] == "E") {
      ended = true;
    }
  }
  return ended;
}

bool Tally::allPassed() const {
  for (const Line& l : lines) {
    if (l.failed) return false;
  }
  for (const Extra& e : extras) {
    if (e.pass == 0) return false;
  }
  return casesFailed == 0;
}

}  // namespace sweep
