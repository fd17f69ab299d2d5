// Tasks for the planner tests (planner_test.cc, planner_tuning_test.cc): fake buffers, never read.
#pragma once

#include <cstdint>

#include "enqueue/planner.h"
#include "enqueue/task.h"

namespace weft::test {

// A communicator of nRanks ranks with nChannels ring channels, point-to-point connections on the
// first p2pChannels of them, and the tuning model's view of the 2xH200 NVLink machine (15 GB/s
// per channel, sm_90).
inline enqueue::PlanShape uniformShape(int rank, int nRanks, int nChannels, int p2pChannels) {
  enqueue::PlanShape s;
  s.rank = rank;
  s.nRanks = nRanks;
  s.nChannels = nChannels;
  s.tuning.nRanks = nRanks;
  s.tuning.intraLink = graph::kLinkNvlink;
  s.tuning.intraBwPerChannel = 15.0;
  s.tuning.maxChannels = nChannels;
  s.tuning.minSm = 90;
  s.sendChannels.assign(nRanks, {});
  s.recvChannels.assign(nRanks, {});
  for (int p = 0; p < nRanks; ++p) {
    for (int c = 0; c < p2pChannels; ++c) {
      s.sendChannels[p].push_back(c);
      s.recvChannels[p].push_back(c);
    }
  }
  return s;
}

inline enqueue::Task collTask(enqueue::TaskKind kind, size_t count, dev::DataType type) {
  enqueue::Task t{kind};
  t.count = count;
  t.dataType = type;
  t.sendBuff = (const void*)0x1000;
  t.recvBuff = (void*)0x2000;
  return t;
}

// A send to / receive from `peer` of `bytes` bytes; buffers differ per peer.
inline enqueue::Task p2pTask(enqueue::TaskKind kind, int peer, size_t bytes) {
  enqueue::Task t{kind};
  t.peer = peer;
  t.count = bytes;
  t.dataType = dev::kUint8;
  if (kind == enqueue::TaskKind::kSend) t.sendBuff = reinterpret_cast<const void*>(uintptr_t(0x10000 + peer));
  else t.recvBuff = reinterpret_cast<void*>(uintptr_t(0x20000 + peer));
  return t;
}

}  // namespace weft::test
