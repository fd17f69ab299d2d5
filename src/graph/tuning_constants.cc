#include "graph/tuning_constants.h"

#include <strings.h>

#include <cmath>
#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <sstream>
#include <vector>

#include "core/log.h"
#include "core/param.h"

namespace weft::graph {
namespace {

constexpr const char* kAlgoKeys[] = {"tree", "ring", "collnetdirect", "collnetchain", "nvls", "nvlstree", "pat",
                                     "direct"};
static_assert(sizeof(kAlgoKeys) / sizeof(kAlgoKeys[0]) == dev::kNumAlgos, "a key per algorithm");
constexpr const char* kProtoKeys[dev::kNumProtos] = {"ll", "ll128", "simple"};
constexpr const char* kFuncKeys[kNumCollFuncs] = {"broadcast", "reduce", "allgather", "reducescatter",
                                                  "allreduce"};
constexpr const char* kLinkKeys[kNumLinkTypes] = {"nvlink", "pcie", "net", "shm"};

constexpr int T = dev::kAlgoTree, R = dev::kAlgoRing, CD = dev::kAlgoCollnetDirect,
              CC = dev::kAlgoCollnetChain, NV = dev::kAlgoNvls, NT = dev::kAlgoNvlsTree, PAT = dev::kAlgoPat,
              D = dev::kAlgoDirect;
constexpr int LL = dev::kProtoLL, LL128 = dev::kProtoLL128, SIMPLE = dev::kProtoSimple;

void setRow(double row[dev::kNumProtos], double ll, double ll128, double simple) {
  row[LL] = ll;
  row[LL128] = ll128;
  row[SIMPLE] = simple;
}

// ---------------------------------------------------------------------------------------------
// The fit (tests/unit/data/tuning-fit.md has the data points and every residual).
//
// Data: NCCL 2.28.9 on 2x H200, NV18 (tests/unit/data/tuning-baseline-h200x2.txt, taken from
// /work/shared/baseline): AllReduce with NCCL_PROTO=LL/LL128/Simple and NCCL_ALGO=Tree, the CUDA
// graph sweep (GPU time of small Ring/LL AllReduce, host launch cost removed), and the default
// AllGather/ReduceScatter/Broadcast/Reduce sweeps where NCCL runs Ring/Simple. Sizes whose time
// sits on the host launch floor of the non-graph runs (13-20 us) are left out.
// Machine as the model sees it: nRanks 2, one node, 24 channels x 15 GB/s NVLink (NCCL's search).
//
// Fitted (tuning_fit.py, least squares on relative error):
//   base, bwEff, step per (algo, proto)    from the AllReduce curves
//     Ring/LL      4.28 us  0.684  0 (pinned: no pipeline cost visible)  -> 123 GB/s busbw
//     Ring/LL128   7.78 us  0.901  1.14 us                                -> 304 GB/s
//     Ring/Simple 11.59 us  0.957  0.88 us                                -> 344 GB/s
//     Tree/Simple  6.50 us  1.008 (pinned to the 363 GB/s link ceiling)  4.23 us
//     Tree/LL      bwEff 0.175 from a single point (512 KiB: 22.3 us); base = Ring/LL + 0.2
//   funcBw / funcStep per collective       from its Ring/Simple curve (base shared with AllReduce)
//     Broadcast 1.070/0.08, Reduce 1.081/0, AllGather 0.842/1.56, ReduceScatter 0.815/1.02
// Residuals over the 55 fitted points: rms 3.7 %, worst -11.4 % (Tree/Simple at 8 MiB); Ring/LL
// within 10 %, Ring/LL128 and Ring/Simple within 5 %, other collectives within 6 %.
// Not fitted (no data on this machine; NCCL 2.30.7's model values): per-hop latencies (NCCL's
// NVLink LL hop, 0.6 us, matches our 0.65 us ping-pong probe), protocol efficiencies, thread
// thresholds and counts, Tree/LL128 (NCCL's ratios to Tree/Simple and Ring/LL128), PAT, every
// PCIe and network figure. CollNet and NVLS are not modeled (weft never uses NVLink multicast).
// Latencies are GPU time: a non-graph launch adds ~4 us (one thread per GPU) to every choice alike.
// ---------------------------------------------------------------------------------------------
TuningConstants makeDefaults() {
  TuningConstants k{};
  setRow(k.baseUs[T], 4.484, 7.777, 6.499);
  setRow(k.baseUs[R], 4.284, 7.777, 11.594);
  setRow(k.baseUs[PAT], 8.0, 8.0, 8.0);  // NCCL's
  // Direct (weft's, LL only): not fitted yet. It runs in the LL kernel with the same per-line
  // costs as Ring/LL, so Ring/LL's base and bandwidth efficiency; one NVLink hop costs what a
  // Ring/LL hop does. The lead refits these from weft-perf with NCCL_ALGO=direct.
  setRow(k.baseUs[D], 4.284, 0, 5.8);
  // Direct on Simple = the symmetric collectives (weft's; NOT measured on two GPUs yet, session
  // 29 had one): the general Simple kernel's fixed cost (base.ring.simple of the calibration), a
  // hop per barrier and data phase at the one-way NVLink flag time (0.65 us probed), the link's
  // rate per channel, and a cap below Ring/Simple's ~360 GB/s, since NCCL's own symmetric
  // ReduceScatter reached only 204 GB/s busbw at 2 GiB (baseline README) against 286 for its Ring.

  // NCCL 2.30.7's per-hop latencies (src/graph/tuning.cc hwLatencies).
  setRow(k.hwUs[kLinkNvlink][T], 0.6, 1.25, 4.0);
  setRow(k.hwUs[kLinkNvlink][R], 0.6, 1.9, 3.4);
  setRow(k.hwUs[kLinkNvlink][CD], 0, 0, 3.7);
  setRow(k.hwUs[kLinkNvlink][CC], 0, 0, 2.8);
  setRow(k.hwUs[kLinkNvlink][NV], 0, 0, 25);
  setRow(k.hwUs[kLinkNvlink][NT], 0, 0, 25);
  setRow(k.hwUs[kLinkNvlink][PAT], 0, 0, 4.0);
  setRow(k.hwUs[kLinkNvlink][D], 0.6, 0, 0.65);
  setRow(k.hwUs[kLinkPcie][T], 1.0, 1.9, 4.0);
  setRow(k.hwUs[kLinkPcie][R], 1.0, 2.5, 5.7);
  setRow(k.hwUs[kLinkPcie][CD], 0, 0, 3.7);
  setRow(k.hwUs[kLinkPcie][CC], 0, 0, 2.8);
  setRow(k.hwUs[kLinkPcie][PAT], 0, 0, 4.0);
  setRow(k.hwUs[kLinkPcie][D], 1.0, 0, 5.0);  // loads across PCIe: discouraged
  setRow(k.hwUs[kLinkNet][T], 5.0, 8.5, 14);
  setRow(k.hwUs[kLinkNet][R], 2.7, 4.0, 14.0);
  setRow(k.hwUs[kLinkNet][CD], 0, 0, 31);
  setRow(k.hwUs[kLinkNet][CC], 0, 0, 30);
  setRow(k.hwUs[kLinkNet][NV], 0, 0, 18);
  setRow(k.hwUs[kLinkNet][NT], 0, 0, 20.9);
  setRow(k.hwUs[kLinkNet][PAT], 0, 0, 14);
  // Through host memory (weft's SHM transport; session 33, one H100 shared by 2 ranks, both
  // through its one PCIe link, NCCL_WEFT_SHM=2, weft-perf all_reduce -t 2 -g 1, us, no graph, so
  // ~4 us of launch in each): Direct/LL 8.4 at 8 B-512 B (P2P 8.6), 12.2 at 8 KiB, 27.2 at 32 KiB,
  // 494 at 2 MiB; Ring/LL 13.6 at 1 KiB; Ring/Simple 14-16 at 8 B-8 KiB, 19.0 at 32 KiB, 48.2 at
  // 512 KiB, 536 at 8 MiB (~16 GB/s). The protocols crossed between 8 and 32 KiB; LL's cap is the
  // rate of its mid sizes (~1.6 GB/s from 8 to 32 KiB). Direct's hop: 1.0 fits 8 B best, 2.0 puts
  // the model's crossover between 8 and 16 KiB, where a second run measured Simple 16.5 vs LL 17.7 us.
  setRow(k.hwUs[kLinkShm][T], 3.0, 0, 2.5);
  setRow(k.hwUs[kLinkShm][R], 3.0, 0, 2.5);
  setRow(k.hwUs[kLinkShm][D], 2.0, 0, 2.5);
  setRow(k.shmCapGBs, 2.0, 0, 16.0);

  // LL: 8 data bytes per 16-byte line; LL128: 120 of 128 bytes.
  setRow(k.protoEff, 0.5, 120.0 / 128.0, 1.0);

  for (auto& row : k.bwEff) setRow(row, 1.0, 1.0, 1.0);
  setRow(k.bwEff[T], 0.1749, 0.8365, 1.0083);
  setRow(k.bwEff[R], 0.6836, 0.9005, 0.9569);
  setRow(k.bwEff[PAT], 1.0, 1.0, 0.75);  // NCCL's PAT factor
  setRow(k.bwEff[D], 0.6836, 1.0, 1.0);
  k.bwCapGBs[D][SIMPLE] = 250;  // the symmetric collectives (see base.direct.simple)

  setRow(k.stepUs[T], 0.0, 1.1442, 4.2337);
  setRow(k.stepUs[R], 0.0, 1.1442, 0.8762);

  const double funcBw[kNumCollFuncs] = {1.0701, 1.0813, 0.8422, 0.8154, 1.0};
  const double funcStep[kNumCollFuncs] = {0.0815, 0.0, 1.5602, 1.0235, 1.0};
  const double channelShare[kNumCollFuncs] = {0.5, 0.5, 1.0, 1.0, 1.0};
  for (int f = 0; f < kNumCollFuncs; ++f) {
    k.funcBwEff[f] = funcBw[f];
    k.funcStepScale[f] = funcStep[f];
    k.funcChannelShare[f] = channelShare[f];
  }

  // NCCL's thread thresholds (bytes per thread; its log prints "8/8/64 | 16/8/64" for 2 ranks)
  // and maximum threads per channel.
  for (int a = 0; a < dev::kNumAlgos; ++a) {
    bool wide = a == CD || a == CC || a == NV || a == NT;
    for (int p = 0; p < dev::kNumProtos; ++p) k.threadThreshold[a][p] = wide ? 512 : (p == SIMPLE ? 64 : 8);
  }
  // Direct: a channel per 8 KiB (16 bytes x 512 threads), Ring/LL's share per channel on 2 ranks.
  k.threadThreshold[D][LL] = 16;
  k.maxThreads[LL] = 512;
  k.maxThreads[LL128] = 640;
  k.maxThreads[SIMPLE] = 512;
  // NCCL 2.28 picks LL128 on its own inside an NVLink node of Hopper GPUs (ll128Usable).
  setRow(k.protoByDefault, 1.0, 1.0, 1.0);
  return k;
}

int findKey(const std::string& s, const char* const* keys, int n) {
  for (int i = 0; i < n; ++i) {
    if (strcasecmp(s.c_str(), keys[i]) == 0) return i;
  }
  return -1;
}

std::string trim(const std::string& s) {
  size_t b = s.find_first_not_of(" \t\r\n");
  if (b == std::string::npos) return "";
  size_t e = s.find_last_not_of(" \t\r\n");
  return s.substr(b, e - b + 1);
}

std::vector<std::string> splitDots(const std::string& s) {
  std::vector<std::string> out;
  std::stringstream ss(s);
  std::string part;
  while (std::getline(ss, part, '.')) out.push_back(part);
  return out;
}

// Where `key` lives in *k: a double or an int slot. False for an unknown key.
bool locate(const std::string& key, TuningConstants* k, double** d, int** i) {
  *d = nullptr;
  *i = nullptr;
  std::vector<std::string> p = splitDots(key);
  auto algo = [&](size_t at) { return p.size() > at ? findKey(p[at], kAlgoKeys, dev::kNumAlgos) : -1; };
  auto proto = [&](size_t at) { return p.size() > at ? findKey(p[at], kProtoKeys, dev::kNumProtos) : -1; };
  auto func = [&](size_t at) { return p.size() > at ? findKey(p[at], kFuncKeys, kNumCollFuncs) : -1; };
  if (p.empty()) return false;
  const std::string& what = p[0];
  auto is = [&](const char* name, size_t parts) { return strcasecmp(what.c_str(), name) == 0 && p.size() == parts; };
  if (is("base", 3) && algo(1) >= 0 && proto(2) >= 0) *d = &k->baseUs[algo(1)][proto(2)];
  else if (is("bweff", 3) && algo(1) >= 0 && proto(2) >= 0) *d = &k->bwEff[algo(1)][proto(2)];
  else if (is("bwcap", 3) && algo(1) >= 0 && proto(2) >= 0) *d = &k->bwCapGBs[algo(1)][proto(2)];
  else if (is("step", 3) && algo(1) >= 0 && proto(2) >= 0) *d = &k->stepUs[algo(1)][proto(2)];
  else if (is("threshold", 3) && algo(1) >= 0 && proto(2) >= 0) *i = &k->threadThreshold[algo(1)][proto(2)];
  else if (is("protoeff", 2) && proto(1) >= 0) *d = &k->protoEff[proto(1)];
  else if (is("shmcap", 2) && proto(1) >= 0) *d = &k->shmCapGBs[proto(1)];
  else if (is("maxthreads", 2) && proto(1) >= 0) *i = &k->maxThreads[proto(1)];
  else if (is("default", 2) && proto(1) >= 0) *d = &k->protoByDefault[proto(1)];
  else if (is("funcbw", 2) && func(1) >= 0) *d = &k->funcBwEff[func(1)];
  else if (is("funcstep", 2) && func(1) >= 0) *d = &k->funcStepScale[func(1)];
  else if (is("channelshare", 2) && func(1) >= 0) *d = &k->funcChannelShare[func(1)];
  else if (is("hw", 4) && findKey(p[1], kLinkKeys, kNumLinkTypes) >= 0 && algo(2) >= 0 && proto(3) >= 0)
    *d = &k->hwUs[findKey(p[1], kLinkKeys, kNumLinkTypes)][algo(2)][proto(3)];
  return *d || *i;
}

// Shortest text that reads back to exactly `v`.
std::string formatDouble(double v) {
  char buf[40];
  for (int prec = 1; prec <= 17; ++prec) {
    snprintf(buf, sizeof(buf), "%.*g", prec, v);
    if (strtod(buf, nullptr) == v) break;
  }
  return buf;
}

}  // namespace

const char* linkTypeName(int link) { return link >= 0 && link < kNumLinkTypes ? kLinkKeys[link] : "?"; }

TuningConstants TuningConstants::defaults() {
  static const TuningConstants k = makeDefaults();
  return k;
}

Status parseTuningText(const std::string& text, TuningConstants* k, std::string* why) {
  TuningConstants out = *k;
  std::string normalized = text;
  for (char& c : normalized) {
    if (c == ';') c = '\n';
  }
  std::stringstream lines(normalized);
  std::string raw;
  int lineNo = 0;
  while (std::getline(lines, raw)) {
    ++lineNo;
    std::string line = trim(raw.substr(0, raw.find('#')));
    if (line.empty()) continue;
    size_t eq = line.find('=');
    std::string key = trim(line.substr(0, eq));
    if (eq == std::string::npos || key.empty()) {
      *why = "item " + std::to_string(lineNo) + " '" + line + "' is not key = value";
      return ncclInvalidUsage;
    }
    std::string value = trim(line.substr(eq + 1));
    double* d;
    int* i;
    if (!locate(key, &out, &d, &i)) {
      *why = "item " + std::to_string(lineNo) + ": unknown key '" + key + "'";
      return ncclInvalidUsage;
    }
    char* end = nullptr;
    errno = 0;
    double v = strtod(value.c_str(), &end);
    bool ok = !value.empty() && end && *end == '\0' && errno == 0 && std::isfinite(v) && v >= 0;
    if (ok && i) ok = v == std::floor(v) && v >= 1 && v <= 1 << 20;
    if (!ok) {
      *why = "item " + std::to_string(lineNo) + ": bad value '" + value + "' for " + key +
             (i ? " (expected a positive integer)" : " (expected a number >= 0)");
      return ncclInvalidUsage;
    }
    if (d) *d = v;
    else *i = (int)v;
  }
  *k = out;
  return ncclSuccess;
}

std::string formatTuningConstants(const TuningConstants& k) {
  std::string s;
  auto line = [&](const std::string& key, const std::string& v) { s += key + " = " + v + "\n"; };
  for (int a = 0; a < dev::kNumAlgos; ++a) {
    for (int p = 0; p < dev::kNumProtos; ++p) {
      std::string ap = std::string(kAlgoKeys[a]) + "." + kProtoKeys[p];
      line("base." + ap, formatDouble(k.baseUs[a][p]));
      line("bweff." + ap, formatDouble(k.bwEff[a][p]));
      line("bwcap." + ap, formatDouble(k.bwCapGBs[a][p]));
      line("step." + ap, formatDouble(k.stepUs[a][p]));
      line("threshold." + ap, std::to_string(k.threadThreshold[a][p]));
      for (int l = 0; l < kNumLinkTypes; ++l) line(std::string("hw.") + kLinkKeys[l] + "." + ap, formatDouble(k.hwUs[l][a][p]));
    }
  }
  for (int p = 0; p < dev::kNumProtos; ++p) {
    line(std::string("protoeff.") + kProtoKeys[p], formatDouble(k.protoEff[p]));
    line(std::string("shmcap.") + kProtoKeys[p], formatDouble(k.shmCapGBs[p]));
    line(std::string("maxthreads.") + kProtoKeys[p], std::to_string(k.maxThreads[p]));
    line(std::string("default.") + kProtoKeys[p], formatDouble(k.protoByDefault[p]));
  }
  for (int f = 0; f < kNumCollFuncs; ++f) {
    line(std::string("funcbw.") + kFuncKeys[f], formatDouble(k.funcBwEff[f]));
    line(std::string("funcstep.") + kFuncKeys[f], formatDouble(k.funcStepScale[f]));
    line(std::string("channelshare.") + kFuncKeys[f], formatDouble(k.funcChannelShare[f]));
  }
  return s;
}

// weft's kernels against the NCCL-fitted model (2xH200, weft-perf in CUDA graphs, tools/fit_curves.sh;
// tests/unit/data/tuning-fit.md "weft's calibration", data in tuning-weft-h200x2.txt).
// Session 9: weft's Ring/Simple (one chunk per rank part) has a smaller fixed cost than NCCL's
// (12.6 us at 16 KiB; the fit said 23.5): base.ring.simple 5.8 moves all_reduce to Ring/Simple from
// 2 MiB (2/4 MiB 0.96/0.73 -> 1.28/1.19x NCCL).
// Session 12: the LL kernel got about 2x faster at small sizes (session 11: it fits CUDA's default
// stack), so Ring/LL takes 4.9 us at 8 B (it was 9.8); one channel moves ~10 GB/s of LL payload,
// but 32 channels together only ~130 GB/s (Ring/LL) and ~80 GB/s (Direct): the caps. Measured
// winners in graphs, which these constants pick: all_reduce Direct up to 64 KiB, Ring/LL from 128
// KiB to 1 MiB (Direct 6.86/11.70 us at 128/512 KiB, Ring/LL 6.25/8.99), Ring/Simple from 2 MiB;
// AllGather, ReduceScatter, Broadcast and Reduce Ring/LL up to 512 KiB-2 MiB (AllGather's Direct
// 4.8 us against Ring/LL 3.8 at 8 B-2 KiB; Broadcast/Reduce had left Ring/LL for the general Simple
// kernel at 2-8 KiB: 5.3-5.8 us against 2.7-3.1).
// Session 16: LL128 is correct (kernel harness on one H200, forced sweeps on 2 and 4 H200s) but its
// speed on NVLink was never measured against Ring/LL and Ring/Simple, so the tuner takes it only
// where NCCL_PROTO names it (default.ll128=0) until its constants are fitted like the others.
constexpr const char* kWeftKernelCalibration =
    "base.ring.simple=5.8;"
    "base.ring.ll=3.73;bweff.ring.ll=1.0;bwcap.ring.ll=125;"
    "base.direct.ll=4.23;bweff.direct.ll=1.2;bwcap.direct.ll=80;"
    "default.ll128=0";

TuningConstants TuningConstants::weftCalibrated() {
  TuningConstants k = defaults();
  std::string why;
  if (parseTuningText(kWeftKernelCalibration, &k, &why) != ncclSuccess)  // a typo above; the unit test fails too
    WEFT_WARN("weft's tuning calibration does not parse (%s); using the NCCL-fitted constants", why.c_str());
  return k;
}

TuningConstants tuningConstantsFromEnv() {
  TuningConstants k = TuningConstants::weftCalibrated();
  std::string why;
  std::string path = param::getStr("NCCL_WEFT_TUNING_FILE", "");
  if (!path.empty()) {
    std::ifstream in(path);
    std::stringstream text;
    if (in.is_open()) text << in.rdbuf();
    if (!in.is_open() || in.bad()) {
      WEFT_WARN("Cannot read NCCL_WEFT_TUNING_FILE=%s: %s; using the built-in tuning constants",
                path.c_str(), strerror(errno));
    } else if (parseTuningText(text.str(), &k, &why) != ncclSuccess) {
      WEFT_WARN("Ignoring NCCL_WEFT_TUNING_FILE=%s: %s. Expected 'key = value' lines as written by "
                "tests/unit/data/tuning_fit.py", path.c_str(), why.c_str());
    } else {
      WEFT_INFO(log::kTuning | log::kEnv, "Tuning constants loaded from %s", path.c_str());
    }
  }
  std::string inline_ = param::getStr("NCCL_WEFT_TUNING", "");
  if (!inline_.empty() && parseTuningText(inline_, &k, &why) != ncclSuccess) {
    WEFT_WARN("Ignoring NCCL_WEFT_TUNING=\"%s\": %s. Expected 'key=value;key=value'",
              inline_.c_str(), why.c_str());
  }
  return k;
}

}  // namespace weft::graph
