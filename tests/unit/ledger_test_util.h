// Helpers of the tests of the ledger pages (op_ledger, call_check, ledger_status).
#pragma once

#include <unistd.h>

#include <cstdint>
#include <random>

#include "core/call_check.h"
#include "nccl.h"

namespace weft::test {

// A communicator hash no other test (or test process) uses: its pages do not collide.
inline uint64_t freshCommHash() { return std::random_device{}() * 0x9e3779b97f4a7c15ULL ^ (uint64_t)getpid(); }

inline core::CallSignature allReduceCall(uint64_t count, uint8_t type = ncclFloat32, uint8_t op = ncclSum) {
  core::CallSignature c;
  c.call = core::kCallAllReduce;
  c.dataType = type;
  c.redOp = op;
  c.count = count;
  return c;
}

}  // namespace weft::test
