// The symmetric collectives (coll/run_symmetric.cuh: kAlgoDirect items on the Simple kernel) on
// the CPU, through the Simple kernel's body and dispatch (arch host emulation: every GPU thread an
// OS thread). The ranks' buffers and barrier memory lie in one flat range, rank r's slot 4 GiB
// after rank r - 1's, as the flat windows lay them out on a GPU (the range is reserved without
// access; only the parts used are made readable). Checks AllReduce, AllGather and ReduceScatter
// of many types and reductions on 2-4 ranks against a host reference, in place and out of place,
// several items per block, the barrier epochs kept across launches, identical bits on every rank,
// and that a rank that never comes leaves the others waiting until the abort flag.
#define WEFT_ARCH_HOST_EMULATION 1
#include "emu_dispatch.h"

#include <gtest/gtest.h>
#include <sys/mman.h>

#include <cmath>
#include <cstring>
#include <random>
#include <string>
#include <vector>

namespace weft::dev {
namespace {

using namespace emutest;

constexpr uint64_t kSlot = 1ull << 32;          // the flat stride: 4 GiB, peerStride4G = 1
constexpr uint64_t kSignalsBytes = 64 << 10;    // DevSymSignals, rounded up
constexpr uint64_t kBufferArea = 8 << 20;       // per rank, after the signals: every buffer of a test

// n slots of kSlot bytes, reserved without access; the first kSignalsBytes + kBufferArea of each
// made readable and writable (and zero).
class FlatRange {
 public:
  explicit FlatRange(int n) : n_(n) {
    void* p = mmap(nullptr, kSlot * (uint64_t)n, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
    if (p == MAP_FAILED) return;
    base_ = static_cast<char*>(p);
    for (int r = 0; r < n; r++)
      if (mprotect(slot(r), kSignalsBytes + kBufferArea, PROT_READ | PROT_WRITE) != 0) {
        munmap(base_, kSlot * (uint64_t)n_);
        base_ = nullptr;
        return;
      }
  }
  ~FlatRange() {
    if (base_) munmap(base_, kSlot * (uint64_t)n_);
  }
  bool ok() const { return base_ != nullptr; }
  char* slot(int r) const { return base_ + kSlot * (uint64_t)r; }
  DevSymSignals* signals(int r) const { return reinterpret_cast<DevSymSignals*>(slot(r)); }
  // Byte `at` of rank r's buffer area.
  char* area(int r, uint64_t at) const { return slot(r) + kSignalsBytes + at; }

 private:
  int n_;
  char* base_ = nullptr;
};
static_assert(sizeof(DevSymSignals) <= kSignalsBytes, "the signals fit their part of a slot");

struct Sym {
  int func = kFuncAllReduce;
  int type = kFloat32;
  int op = kRedSum;
  uint64_t count = 0;  // per rank block for AllGather/ReduceScatter
  bool inPlace = false;
  std::vector<uint64_t> outAt;  // per rank: the output's byte offset in its buffer area
  bool randomFloats = false;     // AllReduce: only bit equality across ranks is checked
  uint64_t outSkew = 0;          // out of place: bytes the output is moved against the input's alignment
  std::vector<std::vector<double>> inputs;  // [rank][element of the whole input]
};

uint64_t inElems(const Sym& k, int n) { return k.func == kFuncReduceScatter ? k.count * n : k.count; }
uint64_t outElems(const Sym& k, int n) { return k.func == kFuncAllGather ? k.count * n : k.count; }

std::string describe(const Sym& k) {
  const char* f = k.func == kFuncAllReduce ? "AllReduce" : k.func == kFuncAllGather ? "AllGather" : "ReduceScatter";
  return std::string(f) + " type " + std::to_string(k.type) + " op " + std::to_string(k.op) + " count " +
         std::to_string(k.count) + (k.inPlace ? " in place" : "");
}

class SymComm : public DispatchComm {
 public:
  SymComm(int n, int nCh) : DispatchComm(n, nCh, {512, 4096, (int)kSimpleMinStepBytes}), flat_(n) {
    if (flat_.ok()) setSymSignals(flat_.signals(0), kSlot);
  }
  const FlatRange& flat() const { return flat_; }

  // Lays k out at the next free bytes of every rank's area (shifted by `shift` bytes), fills the
  // inputs and poisons the outputs, and appends a part per channel to works. In place, AllGather's
  // input is block r of rank r's output and ReduceScatter's output block r of its input: those
  // offsets differ between ranks, the others are the same on every rank (symmetric windows).
  void add(Sym& k, Works& works, std::mt19937& rng, int shift = 0) {
    const int n = nRanks();
    const uint64_t es = (uint64_t)dataTypeBytes(k.type);
    auto take = [&](uint64_t bytes) {
      const uint64_t at = next_ + (uint64_t)shift;
      next_ = (at + bytes + 64 + 255) / 256 * 256;
      EXPECT_LE(next_, kBufferArea);
      return at;
    };
    const uint64_t a = take((k.func == kFuncReduceScatter ? n * k.count : outElems(k, n)) * es);
    const uint64_t b = k.inPlace ? a : take((k.func == kFuncReduceScatter ? k.count : inElems(k, n)) * es);
    k.inputs.assign(n, std::vector<double>(inElems(k, n)));
    k.outAt.assign(n, 0);
    for (int r = 0; r < n; r++) {
      uint64_t in = b, out = a;  // AllReduce, AllGather: the output first; ReduceScatter: the input
      if (k.func == kFuncReduceScatter) std::swap(in, out);
      if (k.inPlace && k.func == kFuncAllGather) in = a + (uint64_t)r * k.count * es;
      if (k.inPlace && k.func == kFuncReduceScatter) out = a + (uint64_t)r * k.count * es;
      if (!k.inPlace) out += k.outSkew;
      k.outAt[r] = out;
      std::memset(flat_.area(r, out), 0x5a, outElems(k, n) * es + 16);
      for (auto& x : k.inputs[r]) {
        if (k.randomFloats) x = std::ldexp(double(rng() % 2000001) - 1000000.0, -int(rng() % 24));
        else x = isUnsigned(k.type) ? double(rng() % 5) : double(int(rng() % 5) - 2);
      }
      for (uint64_t i = 0; i < inElems(k, n); i++) putValue(k.type, k.inputs[r][i], flat_.area(r, in) + i * es);
      for (int c = 0; c < nChannels(); c++) {
        const ElemRange part = channelPart(k.count, nChannels(), c, (int)es);
        if (part.count == 0) continue;
        DevWork w{};
        w.func = (uint8_t)k.func;
        w.algo = kAlgoDirect;
        w.redOp = (uint8_t)k.op;
        w.dataType = (uint8_t)k.type;
        w.sendBuff = flat_.area(0, in);  // team rank 0's copies
        w.recvBuff = flat_.area(0, out);
        w.count = k.count;
        w.chanOffset = part.offset;
        w.chanCount = part.count;
        w.sendPeer = w.recvPeer = -1;
        w.symSlot = (uint16_t)c;
        w.peerStride4G = 1;
        w.redOpArg = redOpArgOf(k.op, k.type, n);
        works[r][c].push_back(w);
      }
    }
  }

  // Every output element against the reference; nothing written past the output.
  std::string check(const Sym& k) const {
    const int n = nRanks();
    const uint64_t es = (uint64_t)dataTypeBytes(k.type);
    const uint64_t len = outElems(k, n);
    for (int r = 0; r < n; r++) {
      const char* out = flat_.area(r, k.outAt[r]);
      if (k.randomFloats) {
        if (std::memcmp(out, flat_.area(0, k.outAt[0]), len * es) != 0)
          return describe(k) + ": rank " + std::to_string(r) + " differs from rank 0";
        continue;
      }
      for (uint64_t i = 0; i < len; i++) {
        double want;
        if (k.func == kFuncAllGather) {
          want = k.inputs[i / k.count][i % k.count];
        } else {
          const uint64_t j = k.func == kFuncReduceScatter ? (uint64_t)r * k.count + i : i;
          want = reduceRef(k.op, k.type, k.inputs, j);
        }
        const double got = getValue(k.type, out + i * es);
        if (got != want)
          return describe(k) + " rank " + std::to_string(r) + " element " + std::to_string(i) + ": got " +
                 std::to_string(got) + " want " + std::to_string(want);
      }
      if (k.inPlace && k.func == kFuncReduceScatter) continue;  // the next block follows
      for (int b = 0; b < 16; b++)
        if ((uint8_t)out[len * es + b] != 0x5a)
          return describe(k) + " rank " + std::to_string(r) + ": byte past the output";
    }
    return "";
  }

  void reset() { next_ = 0; }

 private:
  FlatRange flat_;
  uint64_t next_ = 0;
};

const int kTypes[] = {kInt8, kUint8, kInt32, kUint32, kInt64, kUint64, kFloat16, kFloat32,
                      kFloat64, kBfloat16, kFloat8e4m3, kFloat8e5m2};

Sym sym(int func, int type, int op, uint64_t count, bool inPlace = false) {
  Sym k;
  k.func = func;
  k.type = type;
  k.op = op;
  k.count = count;
  k.inPlace = inPlace;
  return k;
}

// Lays colls out, runs them as one launch of the general Simple kernel (Kind kSpecialNone) or of
// the specialized kernel Kind (which the host must pick for these items), checks every output.
template <int Kind = kSpecialNone>
void runAndCheck(SymComm& comm, std::vector<Sym>& colls, std::mt19937& rng, const std::string& what) {
  comm.reset();
  Works works(comm.nRanks(), std::vector<std::vector<DevWork>>(comm.nChannels()));
  int i = 0;
  for (auto& k : colls) comm.add(k, works, rng, (i++ % 3) * dataTypeBytes(k.type));
  for (auto& perRank : works)
    for (auto& list : perRank) ASSERT_LE(list.size(), (size_t)kMaxWorksPerChannel);
  if constexpr (Kind == kSpecialNone) {
    ASSERT_TRUE(comm.launch<SimpleProto>(works, 120)) << "deadlock: " << what;
  } else {
    bool picked = false;
    ASSERT_TRUE((comm.launchSpecial<Kind, SimpleProto>(works, 120, &picked))) << "deadlock: " << what;
    EXPECT_TRUE(picked) << what << ": the host would run these items in another kernel";
  }
  for (auto& k : colls) ASSERT_EQ(comm.check(k), "") << what;
}

// Every type and reduction somewhere, on 2, 3 and 4 ranks, two channels, a launch per function.
void reductionCases(int func) {
  std::mt19937 rng(func * 31 + 5);
  for (int n : {2, 3, 4}) {
    SymComm comm(n, 2);
    ASSERT_TRUE(comm.flat().ok()) << "could not reserve the flat range";
    std::vector<Sym> colls;
    int i = 0;
    for (int t : kTypes)
      for (int op = 0; op < kNumRedOps; op++) {
        if (op == kRedSumPostDiv && isFloat(t)) continue;
        if ((i++ + n) % 3) continue;  // a third per rank count: together they cover all pairs
        const uint64_t count = (t + op) % 3 == 0 ? 1 : (t + op) % 3 == 1 ? 37 : 701;
        colls.push_back(sym(func, t, op, count, (t + op) % 4 == 0));
      }
    colls.push_back(sym(func, kInt32, kRedSum, 3));  // fewer elements than ranks x 16 bytes
    if (func == kFuncAllReduce) {  // each rank computes one segment, every rank stores it: same bits
      Sym random = sym(func, kFloat32, kRedSum, 515);
      random.randomFloats = true;
      colls.push_back(random);
    }
    runAndCheck(comm, colls, rng, std::to_string(n) + " ranks");
  }
}

TEST(SymmetricEmu, AllReduceEveryTypeAndReduction) { reductionCases(kFuncAllReduce); }
TEST(SymmetricEmu, ReduceScatterEveryTypeAndReduction) { reductionCases(kFuncReduceScatter); }

TEST(SymmetricEmu, AllGatherInAndOutOfPlace) {
  std::mt19937 rng(3);
  for (int n : {2, 3}) {
    SymComm comm(n, 3);
    ASSERT_TRUE(comm.flat().ok());
    std::vector<Sym> colls = {sym(kFuncAllGather, kUint8, kRedSum, 1), sym(kFuncAllGather, kUint8, kRedSum, 333, true),
                              sym(kFuncAllGather, kFloat16, kRedSum, 1001),
                              sym(kFuncAllGather, kInt64, kRedSum, 70, true)};
    runAndCheck(comm, colls, rng, std::to_string(n) + " ranks");
  }
}

// The specialized kernels (special_kernels.h kSpecialSym*): float/half/bfloat16 sums of
// AllReduce and ReduceScatter mixed in one launch, AllGather of any type, in and out of place.
// On 3+ ranks their sums fold in one pass (symFoldWide; 5 and 6 ranks: more inputs than loads in
// flight at once), or pass by pass when the output's alignment differs from the input's (skewed).
TEST(SymmetricEmu, SpecializedKernels) {
  std::mt19937 rng(11);
  for (int n : {2, 3, 4, 5, 6}) {
    SymComm comm(n, n <= 4 ? 2 : 1);
    ASSERT_TRUE(comm.flat().ok());
    const std::string ranks = std::to_string(n) + " ranks";
    std::vector<Sym> f32 = {sym(kFuncAllReduce, kFloat32, kRedSum, 701), sym(kFuncReduceScatter, kFloat32, kRedSum, 37),
                            sym(kFuncAllReduce, kFloat32, kRedSum, 3, true),
                            sym(kFuncReduceScatter, kFloat32, kRedSum, 130, true)};
    Sym random = sym(kFuncAllReduce, kFloat32, kRedSum, 515);
    random.randomFloats = true;
    f32.push_back(random);
    for (int func : {kFuncAllReduce, kFuncReduceScatter}) {
      Sym skewed = sym(func, kFloat32, kRedSum, 389);
      skewed.outSkew = 4;
      f32.push_back(skewed);
    }
    runAndCheck<kSpecialSymSumF32>(comm, f32, rng, "float sums, " + ranks);
    std::vector<Sym> f16 = {sym(kFuncAllReduce, kFloat16, kRedSum, 1),
                            sym(kFuncReduceScatter, kFloat16, kRedSum, 99, true)};
    runAndCheck<kSpecialSymSumF16>(comm, f16, rng, "half sums, " + ranks);
    std::vector<Sym> bf16 = {sym(kFuncAllReduce, kBfloat16, kRedSum, 257, true),
                             sym(kFuncReduceScatter, kBfloat16, kRedSum, 5)};
    runAndCheck<kSpecialSymSumBf16>(comm, bf16, rng, "bfloat16 sums, " + ranks);
    std::vector<Sym> gather = {sym(kFuncAllGather, kUint8, kRedSum, 333, true),
                               sym(kFuncAllGather, kFloat16, kRedSum, 41),
                               sym(kFuncAllGather, kInt64, kRedMax, 70, true)};
    runAndCheck<kSpecialSymGather>(comm, gather, rng, "AllGather, " + ranks);
  }
}

// Mixed functions in one launch, then the same again in a second launch: the epochs every block
// kept in its barrier memory carry over (two barriers per item).
TEST(SymmetricEmu, EpochsCarryAcrossItemsAndLaunches) {
  std::mt19937 rng(9);
  SymComm comm(3, 2);
  ASSERT_TRUE(comm.flat().ok());
  for (int launch = 0; launch < 2; launch++) {
    std::vector<Sym> colls = {sym(kFuncAllReduce, kFloat32, kRedSum, 4000), sym(kFuncAllGather, kInt32, kRedSum, 99),
                              sym(kFuncReduceScatter, kFloat64, kRedMax, 123, true),
                              sym(kFuncAllReduce, kUint8, kRedMin, 17, true)};
    runAndCheck(comm, colls, rng, "launch " + std::to_string(launch));
    for (int r = 0; r < 3; r++) {  // every item has a part on channel 0; some are too small for channel 1
      EXPECT_EQ(comm.flat().signals(r)->epoch[0], 8u * (launch + 1)) << "rank " << r;
      EXPECT_EQ(comm.flat().signals(r)->epoch[1], comm.flat().signals(0)->epoch[1]) << "rank " << r;
    }
  }
}

// A rank that never launches: the others wait in the first barrier until the abort flag, then leave.
TEST(SymmetricEmu, MissingRankWaitsUntilAbort) {
  std::mt19937 rng(4);
  SymComm comm(2, 1);
  ASSERT_TRUE(comm.flat().ok());
  Works works(2, std::vector<std::vector<DevWork>>(1));
  Sym k = sym(kFuncAllReduce, kFloat32, kRedSum, 64);
  comm.add(k, works, rng);
  works[1][0].clear();  // rank 1 does not come
  EXPECT_FALSE(comm.launch<SimpleProto>(works, 1.0));
}

}  // namespace
}  // namespace weft::dev
