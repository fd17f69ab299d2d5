// Inputs, host references and output checks for the kernel harness. Element values travel as raw
// bytes; every element type converts to double for floating checks (half, bfloat16 and fp8 through
// the CUDA headers' host conversions). Integers are checked bit-exactly against wrap-around
// arithmetic; floating results within a stated bound of a float64 reference:
//   |got - ref| <= (nRanks + 2) * u * sum_r |term_r|   (sum, PreMulSum; term = x or x*scalar)
//   |got - ref| <= (nRanks + 2) * u * |ref|            (prod)
//   exact                                              (min, max, copies)
// with u the unit roundoff of the type (2^-11 half, 2^-8 bf16, 2^-24 float, 2^-53 double,
// 2^-4 e4m3, 2^-3 e5m2). Inputs are multiples of 1/4 in [-2, 2] (exact in every type).
#pragma once

#include <cstdint>
#include <random>
#include <string>
#include <vector>

#include "device/abi.h"

namespace weft::harness {

const char* typeName(int type);
const char* opName(int op);
const char* funcName(int func);
bool isFloatType(int type);

// count elements of `type` for rank `rank` of a test identified by seed; prodFriendly keeps
// floating values away from 0 and small so products stay in range.
std::vector<uint8_t> makeInput(int type, uint64_t count, int rank, uint64_t seed, bool prodFriendly);

// The PreMulSum scalar the harness uses (1/nRanks for floats, 3 for integers), as raw bits.
uint64_t scalarBits(int type, int nRanks);

// Expected reduction of inputs[r] (each `count` elements starting at element `offset`) with
// op; for floats also the tolerance per element. Output: raw bytes (ints) or doubles (floats).
struct ReduceRef {
  std::vector<uint8_t> bytes;   // integer types: exact result
  std::vector<double> value;    // float types: reference
  std::vector<double> tol;      // float types: bound
};
ReduceRef reduceRef(int type, int op, int nRanks, const std::vector<const uint8_t*>& inputs, uint64_t count);

// Compares count elements of `got` against the reference; returns "" or the first mismatch.
std::string checkReduce(int type, int op, const uint8_t* got, const ReduceRef& ref, uint64_t count);

// Byte-exact comparison; returns "" or the first mismatch.
std::string checkBytes(const uint8_t* got, const uint8_t* want, uint64_t nBytes, const char* what);

constexpr uint8_t kPoison = 0xA5;
// Checks that [from, to) of a buffer still holds the poison pattern.
std::string checkPoison(const uint8_t* buf, uint64_t from, uint64_t to, const char* what);

}  // namespace weft::harness
