// Tests of weft-perf's pure logic, which the GPU runs depend on: sizes and counts, busbw, option
// parsing, case enumeration, and above all the check references (a wrong reference would report
// a correct library as broken, or a broken one as correct). Runs without a GPU.
#include <gtest/gtest.h>

#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_fp8.h>

#include <cmath>
#include <cstdio>
#include <fstream>
#include <sstream>
#include <string>
#include <type_traits>
#include <vector>

#include "check.h"
#include "collective.h"
#include "options.h"
#include "report.h"

namespace weft::perf {
namespace {

// --- sizes and bandwidth ---------------------------------------------------------------------

// Rows of NCCL 2.28.9's nccl-tests log on the 2xH200 machine (shared/baseline).
TEST(PerfMath, MatchesNcclTestsRows) {
  // all_gather 8388608 B, count 1048576, 37.85 us -> algbw 221.62, busbw 110.81
  CaseShape s = shapeFor(Coll::AllGather, 8388608, 4, 2);
  EXPECT_EQ(s.count, 1048576u);
  EXPECT_EQ(s.bytes, 8388608u);
  // (nccl-tests printed rounded times, so the last digit may differ)
  EXPECT_NEAR(algBw(s.bytes, 37.85), 221.62, 0.01);
  EXPECT_NEAR(algBw(s.bytes, 37.85) * busBwFactor(Coll::AllGather, 2), 110.81, 0.01);
  // sendrecv 8388608 B, count 2097152, 51.78 us -> 162.02 / 162.02
  s = shapeFor(Coll::SendRecv, 8388608, 4, 2);
  EXPECT_EQ(s.count, 2097152u);
  EXPECT_NEAR(algBw(s.bytes, 51.78), 162.00, 0.05);
  EXPECT_EQ(busBwFactor(Coll::SendRecv, 2), 1.0);
  // all_gather and alltoall 32 B with 2 ranks: count 4 (per rank / per peer)
  EXPECT_EQ(shapeFor(Coll::AllGather, 32, 4, 2).count, 4u);
  EXPECT_EQ(shapeFor(Coll::AlltoAll, 32, 4, 2).count, 4u);
  EXPECT_EQ(shapeFor(Coll::AlltoAll, 32, 4, 2).sendElems, 8u);
}

TEST(PerfMath, BusBwFactors) {
  EXPECT_DOUBLE_EQ(busBwFactor(Coll::AllReduce, 2), 1.0);
  EXPECT_DOUBLE_EQ(busBwFactor(Coll::AllReduce, 8), 1.75);
  EXPECT_DOUBLE_EQ(busBwFactor(Coll::ReduceScatter, 8), 0.875);
  EXPECT_DOUBLE_EQ(busBwFactor(Coll::AlltoAll, 4), 0.75);
  EXPECT_DOUBLE_EQ(busBwFactor(Coll::Gather, 4), 0.75);
  EXPECT_DOUBLE_EQ(busBwFactor(Coll::Scatter, 4), 0.75);
  EXPECT_DOUBLE_EQ(busBwFactor(Coll::Broadcast, 8), 1.0);
  EXPECT_DOUBLE_EQ(busBwFactor(Coll::Reduce, 8), 1.0);
  EXPECT_DOUBLE_EQ(algBw(1000000000, 1e6), 1.0) << "1e9 bytes in one second is 1 GB/s";
  EXPECT_EQ(algBw(100, 0), 0.0);
}

TEST(PerfMath, ShapesPerCollective) {
  const int n = 4;
  CaseShape s = shapeFor(Coll::AllReduce, 1000, 4, n);
  EXPECT_EQ(s.count, 250u);
  EXPECT_EQ(s.sendElems, 250u);
  EXPECT_EQ(s.recvElems, 250u);
  s = shapeFor(Coll::ReduceScatter, 1000, 4, n);  // 1000 B / (4 B * 4 ranks) = 62 per rank
  EXPECT_EQ(s.count, 62u);
  EXPECT_EQ(s.sendElems, 248u);
  EXPECT_EQ(s.recvElems, 62u);
  EXPECT_EQ(s.bytes, 992u) << "sizes round down to whole elements per rank";
  s = shapeFor(Coll::Scatter, 64, 2, n);
  EXPECT_EQ(s.count, 8u);
  EXPECT_EQ(s.sendElems, 32u);
  EXPECT_EQ(s.recvElems, 8u);
  s = shapeFor(Coll::Gather, 64, 2, n);
  EXPECT_EQ(s.sendElems, 8u);
  EXPECT_EQ(s.recvElems, 32u);
  s = shapeFor(Coll::AllGather, 4, 4, n);
  EXPECT_EQ(s.count, 0u) << "too small for one element per rank";
  EXPECT_EQ(s.bytes, 0u);
}

TEST(PerfMath, InPlaceOffsets) {
  EXPECT_EQ(inPlaceOffsets(Coll::AllGather, 10, 3).sendOffset, 30u);
  EXPECT_EQ(inPlaceOffsets(Coll::AllGather, 10, 3).recvOffset, 0u);
  EXPECT_EQ(inPlaceOffsets(Coll::Gather, 10, 2).sendOffset, 20u);
  EXPECT_EQ(inPlaceOffsets(Coll::ReduceScatter, 10, 3).recvOffset, 30u);
  EXPECT_EQ(inPlaceOffsets(Coll::ReduceScatter, 10, 3).sendOffset, 0u);
  EXPECT_EQ(inPlaceOffsets(Coll::Scatter, 7, 1).recvOffset, 7u);
  EXPECT_EQ(inPlaceOffsets(Coll::AllReduce, 10, 3).sendOffset, 0u);
  EXPECT_EQ(inPlaceOffsets(Coll::Broadcast, 10, 3).recvOffset, 0u);
}

TEST(PerfMath, SizeSeries) {
  EXPECT_EQ(sizeSeries(8, 64, 2, 0), (std::vector<size_t>{8, 16, 32, 64}));
  EXPECT_EQ(sizeSeries(8, 63, 2, 0), (std::vector<size_t>{8, 16, 32}));
  EXPECT_EQ(sizeSeries(0, 4, 2, 0), (std::vector<size_t>{0, 1, 2, 4}));
  EXPECT_EQ(sizeSeries(10, 30, 1, 10), (std::vector<size_t>{10, 20, 30}));
  EXPECT_EQ(sizeSeries(5, 5, 1, 0), (std::vector<size_t>{5}));
  EXPECT_EQ(sizeSeries(1, 3, 1.1, 0), (std::vector<size_t>{1, 2, 3})) << "factors near 1 still advance";
  EXPECT_EQ(sizeSeries(1u << 30, 8ull << 30, 4, 0).size(), 2u);
}

TEST(PerfMath, Names) {
  Coll c;
  EXPECT_TRUE(parseCollective("all_reduce", &c));
  EXPECT_EQ(c, Coll::AllReduce);
  EXPECT_TRUE(parseCollective("AllGather", &c));
  EXPECT_EQ(c, Coll::AllGather);
  EXPECT_TRUE(parseCollective("reduce_scatter_perf", &c));
  EXPECT_EQ(c, Coll::ReduceScatter);
  EXPECT_TRUE(parseCollective("alltoall", &c));
  EXPECT_EQ(c, Coll::AlltoAll);
  EXPECT_TRUE(parseCollective("reduce", &c));
  EXPECT_EQ(c, Coll::Reduce);
  EXPECT_FALSE(parseCollective("allreduce2", &c));
  ncclDataType_t t;
  EXPECT_TRUE(parseType("bf16", &t));
  EXPECT_EQ(t, ncclBfloat16);
  EXPECT_TRUE(parseType("f8e5m2", &t));
  EXPECT_EQ(t, ncclFloat8e5m2);
  EXPECT_FALSE(parseType("float128", &t));
  EXPECT_EQ(typeSize(ncclFloat8e4m3), 1u);
  EXPECT_EQ(typeSize(ncclUint64), 8u);
  EXPECT_STREQ(typeName(ncclFloat16), "half");
  ncclRedOp_t op;
  EXPECT_TRUE(parseOp("AVG", &op));
  EXPECT_EQ(op, ncclAvg);
}

// --- options ---------------------------------------------------------------------------------

bool parseArgs(std::vector<std::string> args, Options* o, std::string* error) {
  args.insert(args.begin(), "weft-perf");
  std::vector<char*> argv;
  for (std::string& a : args) argv.push_back(&a[0]);
  argv.push_back(nullptr);
  return parseOptions((int)args.size(), argv.data(), o, error);
}

TEST(PerfOptions, Defaults) {
  Options o;
  std::string err;
  ASSERT_TRUE(parseArgs({}, &o, &err)) << err;
  EXPECT_EQ(o.colls, std::vector<Coll>{Coll::AllReduce});
  EXPECT_EQ(o.nranks(), 1);
  EXPECT_EQ(o.check, 1);
  EXPECT_TRUE(o.useInitAll());
}

TEST(PerfOptions, EverythingSet) {
  Options o;
  std::string err;
  ASSERT_TRUE(parseArgs({"all_gather,broadcast", "-b", "1K", "-e", "1M", "-f", "4", "-g", "2", "-t", "3", "-p", "2",
                         "-n", "7", "-w", "1", "-c", "0", "-o", "all", "-d", "half,float", "-r", "5", "-G", "10",
                         "-R", "1", "--json", "out.json", "--init", "rank", "--timeout", "30", "--op", "sendrecv"},
                        &o, &err))
      << err;
  EXPECT_EQ(o.colls, (std::vector<Coll>{Coll::AllGather, Coll::Broadcast, Coll::SendRecv}));
  EXPECT_EQ(o.minBytes, 1024u);
  EXPECT_EQ(o.maxBytes, 1u << 20);
  EXPECT_EQ(o.stepFactor, 4.0);
  EXPECT_EQ(o.nranks(), 12);
  EXPECT_EQ(o.ranksPerProcess(), 6);
  EXPECT_EQ(o.iters, 7);
  EXPECT_EQ(o.warmup, 1);
  EXPECT_EQ(o.check, 0);
  EXPECT_EQ(o.ops.size(), 5u);
  EXPECT_EQ(o.types, (std::vector<ncclDataType_t>{ncclFloat16, ncclFloat32}));
  EXPECT_EQ(o.root, 5);
  EXPECT_EQ(o.graphLaunches, 10);
  EXPECT_EQ(o.localRegister, 1);
  EXPECT_EQ(o.jsonPath, "out.json");
  EXPECT_FALSE(o.useInitAll());
  EXPECT_EQ(o.timeoutSec, 30);
}

TEST(PerfOptions, Errors) {
  Options o;
  std::string err;
  EXPECT_FALSE(parseArgs({"all_reduce", "-r", "2", "-g", "2"}, &o, &err)) << "root must be a rank";
  EXPECT_FALSE(parseArgs({"all_reduce", "-o", "median"}, &o, &err));
  EXPECT_NE(err.find("median"), std::string::npos);
  EXPECT_FALSE(parseArgs({"allreduce_typo"}, &o, &err));
  EXPECT_FALSE(parseArgs({"-b", "1M", "-e", "1K"}, &o, &err));
  EXPECT_FALSE(parseArgs({"-c", "2"}, &o, &err));
  EXPECT_FALSE(parseArgs({"-R", "3"}, &o, &err)) << "0, 1 or 2 (windows, nccl-tests -R 2)";
  Options w;
  EXPECT_TRUE(parseArgs({"-R", "2"}, &w, &err)) << err;
  EXPECT_EQ(w.localRegister, 2);
  EXPECT_FALSE(parseArgs({"-g", "0"}, &o, &err));
  EXPECT_FALSE(parseArgs({"-b", "12Q"}, &o, &err));
  EXPECT_FALSE(parseArgs({"--bogus"}, &o, &err));
  EXPECT_FALSE(parseArgs({"-n"}, &o, &err)) << "missing value";
  EXPECT_FALSE(parseArgs({"-b", "1K", "-e", "8K", "-f", "1"}, &o, &err)) << "no way to step";
  EXPECT_TRUE(parseArgs({"-b", "1K", "-e", "8K", "-i", "1K"}, &o, &err)) << err;
  EXPECT_EQ(o.stepFactor, 1.0);
  EXPECT_EQ(o.stepBytes, 1024u);
}

TEST(PerfOptions, SizeSuffixes) {
  size_t v;
  EXPECT_TRUE(parseSize("8", &v));
  EXPECT_EQ(v, 8u);
  EXPECT_TRUE(parseSize("32M", &v));
  EXPECT_EQ(v, 32u << 20);
  EXPECT_TRUE(parseSize("8G", &v));
  EXPECT_EQ(v, 8ull << 30);
  EXPECT_TRUE(parseSize("1.5K", &v));
  EXPECT_EQ(v, 1536u);
  EXPECT_TRUE(parseSize("64KB", &v));
  EXPECT_EQ(v, 65536u);
  EXPECT_FALSE(parseSize("", &v));
  EXPECT_FALSE(parseSize("K", &v));
  EXPECT_FALSE(parseSize("-1", &v));
}

TEST(PerfOptions, CasesFollowTheLibraryVersion) {
  Options o;
  std::string err;
  ASSERT_TRUE(parseArgs({"all_reduce,alltoall", "-d", "float,f8e4m3", "-o", "sum,avg", "-b", "8", "-e", "32"}, &o, &err));
  std::vector<std::string> skipped;
  // 2.28.9: everything. all_reduce: 2 types x 2 ops x 3 sizes; alltoall: 2 types x 3 sizes.
  EXPECT_EQ(enumerateCases(o, 22809, &skipped).size(), 12u + 6u);
  EXPECT_TRUE(skipped.empty());
  // 2.23: no fp8, no alltoall.
  EXPECT_EQ(enumerateCases(o, 22300, &skipped).size(), 6u);
  EXPECT_EQ(skipped.size(), 2u);
  // 2.9: no avg either.
  EXPECT_EQ(enumerateCases(o, 20900, &skipped).size(), 3u);
  // Rooted collectives carry the root; others -1.
  ASSERT_TRUE(parseArgs({"broadcast,all_gather", "-g", "2", "-r", "1", "-b", "8", "-e", "8"}, &o, &err));
  std::vector<Case> cases = enumerateCases(o, 22809, nullptr);
  ASSERT_EQ(cases.size(), 2u);
  EXPECT_EQ(cases[0].root, 1);
  EXPECT_EQ(cases[1].root, -1);
  EXPECT_EQ(maxOperandBytes(cases, 2), 8u);
}

// --- check references --------------------------------------------------------------------------
// An independent host model of each collective's data movement, written from the API's contract,
// produces outputs; the checker must find them all correct, and must notice single corruptions.

template <typename T>
T encode(double v) {
  if constexpr (std::is_integral<T>::value) return (T)(int64_t)v;
  else if constexpr (std::is_same<T, double>::value) return v;
  else return T((float)v);
}

template <typename T>
double decode(T x) {
  if constexpr (std::is_integral<T>::value || std::is_floating_point<T>::value) return (double)x;
  else if constexpr (std::is_same<T, __half>::value) return __half2float(x);
  else if constexpr (std::is_same<T, __nv_bfloat16>::value) return __bfloat162float(x);
  else return (float)x;
}

// The element type arithmetic of a reduction: integers wrap like the GPU's, floats are exact here.
template <typename T>
double reduceModel(ncclRedOp_t op, const std::vector<double>& values) {
  if constexpr (std::is_integral<T>::value) {
    using U = typename std::make_unsigned<T>::type;
    U acc = op == ncclProd ? 1 : 0;
    T best = (T)(int64_t)values[0];
    for (double v : values) {
      const T x = (T)(int64_t)v;
      if (op == ncclSum || op == ncclAvg) acc = (U)(acc + (U)x);
      if (op == ncclProd) acc = (U)(acc * (U)x);
      if (op == ncclMax) best = x > best ? x : best;
      if (op == ncclMin) best = x < best ? x : best;
    }
    if (op == ncclMax || op == ncclMin) return (double)best;
    if (op == ncclAvg) return (double)(T)((T)acc / (T)values.size());
    return (double)(T)acc;
  } else {
    double acc = op == ncclProd ? 1 : 0, best = values[0];
    for (double v : values) {
      if (op == ncclSum || op == ncclAvg) acc += v;
      if (op == ncclProd) acc *= v;
      best = op == ncclMax ? std::max(best, v) : std::min(best, v);
    }
    if (op == ncclMax || op == ncclMin) return best;
    return op == ncclAvg ? acc / values.size() : acc;
  }
}

// outputs[r] = what rank r's receive operand must hold; empty when undefined.
template <typename T>
std::vector<std::vector<T>> modelCollective(const CheckSpec& spec, const CaseShape& shape) {
  const int n = spec.nranks;
  const InputParams params = inputParams(spec);
  std::vector<std::vector<double>> in(n);
  for (int r = 0; r < n; ++r) {
    for (size_t i = 0; i < shape.sendElems; ++i) in[r].push_back(decode(encode<T>((double)inputValue(params, r, i))));
  }
  auto reduceAcross = [&](size_t i) {
    std::vector<double> v;
    for (int r = 0; r < n; ++r) v.push_back(in[r][i]);
    return reduceModel<T>(spec.op, v);
  };
  const size_t c = shape.count;
  std::vector<std::vector<T>> out(n);
  for (int r = 0; r < n; ++r) {
    std::vector<double> o;
    switch (spec.coll) {
      case Coll::AllReduce: for (size_t i = 0; i < c; ++i) o.push_back(reduceAcross(i)); break;
      case Coll::Reduce: if (r == spec.root) for (size_t i = 0; i < c; ++i) o.push_back(reduceAcross(i)); break;
      case Coll::ReduceScatter: for (size_t i = 0; i < c; ++i) o.push_back(reduceAcross(r * c + i)); break;
      case Coll::AllGather: for (int src = 0; src < n; ++src) o.insert(o.end(), in[src].begin(), in[src].end()); break;
      case Coll::Gather:
        if (r == spec.root) for (int src = 0; src < n; ++src) o.insert(o.end(), in[src].begin(), in[src].end());
        break;
      case Coll::Broadcast: o = in[spec.root]; break;
      case Coll::Scatter: o.assign(in[spec.root].begin() + r * c, in[spec.root].begin() + (r + 1) * c); break;
      case Coll::AlltoAll:
        for (int src = 0; src < n; ++src) o.insert(o.end(), in[src].begin() + r * c, in[src].begin() + (r + 1) * c);
        break;
      case Coll::SendRecv: o = in[(r + n - 1) % n]; break;
    }
    for (double v : o) out[r].push_back(encode<T>(v));
  }
  return out;
}

template <typename T>
void expectCheckerAgrees(Coll coll, ncclDataType_t type, ncclRedOp_t op, int n, size_t size) {
  const CaseShape shape = shapeFor(coll, size, sizeof(T), n);
  const CheckSpec spec{coll, type, op, n - 1, n, shape.count};
  const auto outs = modelCollective<T>(spec, shape);
  for (int r = 0; r < n; ++r) {
    std::vector<T> got = outs[r];
    const bool defined = !got.empty();
    if (!defined) got.assign(shape.recvElems, encode<T>(-7));  // garbage where nothing is defined
    SCOPED_TRACE(std::string(info(coll).name) + " " + typeName(type) + " " + opName(op) + " n=" + std::to_string(n) +
                 " rank " + std::to_string(r));
    ASSERT_EQ(got.size(), shape.recvElems);
    EXPECT_EQ(countWrong(spec, r, got.data(), got.size()), 0);
    if (!defined || got.empty()) continue;
    // One corrupted element is one wrong element.
    std::vector<T> bad = got;
    const size_t at = bad.size() / 2;
    bad[at] = encode<T>(decode(bad[at]) >= 0 ? -8 : 8);  // far outside every tolerance
    EXPECT_EQ(countWrong(spec, r, bad.data(), bad.size()), 1);
  }
}

template <typename T>
void expectAllCollectives(ncclDataType_t type) {
  for (int n : {1, 2, 3, 4, 8}) {
    for (const CollInfo& ci : allCollectives()) {
      std::vector<ncclRedOp_t> ops = ci.reduces ? std::vector<ncclRedOp_t>{ncclSum, ncclProd, ncclMax, ncclMin, ncclAvg}
                                                : std::vector<ncclRedOp_t>{ncclSum};
      for (ncclRedOp_t op : ops) expectCheckerAgrees<T>(ci.coll, type, op, n, 96 * n * sizeof(T) + 3);
    }
  }
}

TEST(PerfCheck, Float) { expectAllCollectives<float>(ncclFloat32); }
TEST(PerfCheck, Double) { expectAllCollectives<double>(ncclFloat64); }
TEST(PerfCheck, Half) { expectAllCollectives<__half>(ncclFloat16); }
TEST(PerfCheck, Bfloat16) { expectAllCollectives<__nv_bfloat16>(ncclBfloat16); }
TEST(PerfCheck, Fp8e4m3) { expectAllCollectives<__nv_fp8_e4m3>(ncclFloat8e4m3); }
TEST(PerfCheck, Fp8e5m2) { expectAllCollectives<__nv_fp8_e5m2>(ncclFloat8e5m2); }
TEST(PerfCheck, Int8) { expectAllCollectives<int8_t>(ncclInt8); }
TEST(PerfCheck, Uint8) { expectAllCollectives<uint8_t>(ncclUint8); }
TEST(PerfCheck, Int32) { expectAllCollectives<int32_t>(ncclInt32); }
TEST(PerfCheck, Uint32) { expectAllCollectives<uint32_t>(ncclUint32); }
TEST(PerfCheck, Int64) { expectAllCollectives<int64_t>(ncclInt64); }
TEST(PerfCheck, Uint64) { expectAllCollectives<uint64_t>(ncclUint64); }

// Misplaced data must be caught: swapping two ranks' blocks of an all_gather, or receiving from the
// wrong neighbour in sendrecv.
TEST(PerfCheck, MisplacedBlocksAreWrong) {
  const int n = 4;
  CaseShape shape = shapeFor(Coll::AllGather, 4 * 64 * n, 4, n);
  CheckSpec spec{Coll::AllGather, ncclFloat32, ncclSum, 0, n, shape.count};
  std::vector<float> out = modelCollective<float>(spec, shape)[0];
  std::swap_ranges(out.begin(), out.begin() + shape.count, out.begin() + shape.count);
  EXPECT_GT(countWrong(spec, 0, out.data(), out.size()), (int64_t)shape.count);

  shape = shapeFor(Coll::SendRecv, 4 * 64, 4, n);
  spec = CheckSpec{Coll::SendRecv, ncclInt32, ncclSum, 0, n, shape.count};
  std::vector<int32_t> fromNext = modelCollective<int32_t>(spec, shape)[2];  // what rank 2 gets
  EXPECT_GT(countWrong(spec, 0, fromNext.data(), fromNext.size()), 32) << "rank 0 must receive rank 3's data";
}

// The exactness claim behind exact comparison: every expected value survives a round trip
// through the type.
TEST(PerfCheck, ExactResultsAreRepresentable) {
  auto roundTrip = [](ncclDataType_t t, double v) {
    switch (t) {
      case ncclFloat16: return decode(encode<__half>(v));
      case ncclBfloat16: return decode(encode<__nv_bfloat16>(v));
      case ncclFloat8e4m3: return decode(encode<__nv_fp8_e4m3>(v));
      case ncclFloat8e5m2: return decode(encode<__nv_fp8_e5m2>(v));
      case ncclFloat32: return decode(encode<float>(v));
      default: return v;
    }
  };
  for (ncclDataType_t t : {ncclFloat16, ncclBfloat16, ncclFloat8e4m3, ncclFloat8e5m2, ncclFloat32}) {
    for (int n : {2, 3, 4, 8}) {
      for (const CollInfo& ci : allCollectives()) {
        for (ncclRedOp_t op : {ncclSum, ncclProd, ncclMax, ncclMin}) {
          const CheckSpec spec{ci.coll, t, op, 0, n, 500};
          if (!resultIsExact(spec)) continue;
          for (size_t i = 0; i < 500; ++i) {
            double e;
            if (!expectedValue(spec, 0, i, &e)) continue;
            ASSERT_EQ(roundTrip(t, e), e) << typeName(t) << " " << ci.name << " " << opName(op) << " n=" << n;
          }
          // The inputs themselves must be exact, too.
          const InputParams p = inputParams(spec);
          for (int r = 0; r < n; ++r) {
            for (size_t i = 0; i < 500; ++i) {
              const double v = (double)inputValue(p, r, i);
              ASSERT_EQ(roundTrip(t, v), v) << typeName(t) << " input rank " << r << " index " << i;
            }
          }
        }
      }
    }
  }
}

TEST(PerfCheck, InputsDependOnRankAndIndex) {
  CheckSpec spec{Coll::AllGather, ncclFloat32, ncclSum, 0, 4, 100};
  const InputParams p = inputParams(spec);
  int differentRank = 0, differentIndex = 0;
  for (size_t i = 0; i < 100; ++i) {
    differentRank += inputValue(p, 0, i) != inputValue(p, 1, i);
    differentIndex += inputValue(p, 0, i) != inputValue(p, 0, i + 1);
  }
  EXPECT_GT(differentRank, 90);
  EXPECT_GT(differentIndex, 90);
  // avg inputs: the rank terms cancel, so the mean is the base value on every index.
  spec = CheckSpec{Coll::AllReduce, ncclInt32, ncclAvg, 0, 5, 100};
  const InputParams a = inputParams(spec);
  for (size_t i = 0; i < 100; ++i) {
    int64_t sum = 0;
    for (int r = 0; r < 5; ++r) sum += inputValue(a, r, i);
    EXPECT_EQ(sum % 5, 0);
  }
}

// --- report ------------------------------------------------------------------------------------

TEST(PerfReport, RowsFooterAndJson) {
  Options o;
  std::string err;
  const std::string json = testing::TempDir() + "weft_perf_test.json";
  ASSERT_TRUE(parseArgs({"all_gather", "-g", "2", "-b", "8M", "-e", "8M", "--json", json}, &o, &err));
  const std::vector<Case> cases = enumerateCases(o, 22809, nullptr);
  ASSERT_EQ(cases.size(), 1u);
  FILE* out = tmpfile();
  ASSERT_NE(out, nullptr);
  Printer printer(o, cases, LibraryInfo{"/x/libnccl.so.2", 22809}, out);
  printer.printHeader({});
  PartialResult r;
  r.ranks = 2;
  r.ran[0] = r.ran[1] = 1;
  r.sumTimeUs[0] = 2 * 37.85;
  r.maxTimeUs[0] = 38.0;
  r.sumTimeUs[1] = 2 * 35.45;
  r.wrong[0] = 0;
  r.wrong[1] = 3;
  ASSERT_TRUE(printer.submit(0, r));
  EXPECT_EQ(printer.finish(), 1) << "wrong elements make the run fail";
  rewind(out);
  std::string text;
  char buf[4096];
  size_t got;
  while ((got = fread(buf, 1, sizeof(buf), out)) > 0) text.append(buf, got);
  fclose(out);
  EXPECT_NE(text.find("/x/libnccl.so.2"), std::string::npos);
  EXPECT_NE(text.find("     8388608       1048576     float    none      -1     37.85   221.63   110.81"),
            std::string::npos) << text;
  EXPECT_NE(text.find("Out of bounds values : 3 FAILED"), std::string::npos) << text;
  std::ifstream in(json);
  std::stringstream js;
  js << in.rdbuf();
  EXPECT_NE(js.str().find("\"collective\": \"all_gather\""), std::string::npos) << js.str();
  EXPECT_NE(js.str().find("\"busbw\": 110.814"), std::string::npos) << js.str();
  EXPECT_NE(js.str().find("\"wrong\": 3"), std::string::npos) << js.str();
  EXPECT_NE(js.str().find("\"path\": \"/x/libnccl.so.2\""), std::string::npos) << js.str();
  std::remove(json.c_str());
}

TEST(PerfReport, CombineAcrossProcesses) {
  PartialResult a, b, total;
  a.ranks = 1; a.ran[0] = 1; a.sumTimeUs[0] = 10; a.maxTimeUs[0] = 10; a.wrong[0] = 0; a.wrong[1] = -1;
  b.ranks = 2; b.ran[0] = 1; b.sumTimeUs[0] = 30; b.maxTimeUs[0] = 16; b.wrong[0] = 2; b.wrong[1] = -1;
  combine(&total, a);
  combine(&total, b);
  EXPECT_EQ(total.ranks, 3);
  EXPECT_EQ(total.sumTimeUs[0], 40);
  EXPECT_EQ(total.maxTimeUs[0], 16);
  EXPECT_EQ(total.wrong[0], 2);
  EXPECT_EQ(total.wrong[1], -1);
  EXPECT_EQ(total.ran[0], 1);
  EXPECT_EQ(total.ran[1], 0);
  EXPECT_EQ(formatTime(12.345), "12.35");
  EXPECT_EQ(formatTime(12345.6), "12345.6");
  EXPECT_EQ(formatTime(2e6), "2000000");
}

}  // namespace
}  // namespace weft::perf
