// What each rank tells the others about itself at creation, and the checks made on the whole set.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "core/status.h"

namespace weft::core {

struct PeerInfo {
  static constexpr uint32_t kMagic = 0x70656572;  // "peer"
  uint32_t magic = kMagic;
  int32_t rank = -1;
  int32_t cudaDev = -1;
  int32_t pid = 0;
  uint64_t hostHash = 0;     // same host: same value (hostname + boot id, or NCCL_HOSTID)
  uint64_t processHash = 0;  // same process: same value (host + pid + pid namespace)
  uint64_t pidNamespace = 0;  // inode of /proc/self/ns/pid: pids compare only within one namespace
  uint64_t processStart = 0;  // start time in clock ticks after boot: tells the process from a reused pid
  char busId[32] = "";       // the GPU's PCI bus id, "0000:xx:yy.0"
  char hostName[64] = "";
};
static_assert(sizeof(PeerInfo) == 144, "PeerInfo travels between ranks as bytes");

// This host's identity: hash of the host name and boot id (NCCL_HOSTID replaces both).
uint64_t localHostHash();
uint64_t localProcessHash();
uint64_t localPidNamespace();  // 0 when /proc/self/ns/pid cannot be read
std::string localHostName();
// "rank 3 (pid 77 on node-b)": a peer as messages name it.
std::string describeRank(const PeerInfo& p);

// Checks a gathered table: every entry intact and in its place, no two ranks on one GPU (unless
// allowSharedGpu). Errors name both ranks.
[[nodiscard]] Status checkPeerTable(const std::vector<PeerInfo>& peers, bool allowSharedGpu);

// True when every rank is on the same host (the single-node data path needs it).
bool allOnOneHost(const std::vector<PeerInfo>& peers);

// True when every rank uses the same GPU of one host (only with the test-only GPU sharing).
bool allOnOneGpu(const std::vector<PeerInfo>& peers);
// Whether another rank runs on the GPU of rank `rank` (tests only: NCCL_WEFT_ALLOW_GPU_SHARING).
bool sharesGpu(const std::vector<PeerInfo>& peers, int rank);
// Whether any two ranks use one GPU (tests only, as above); the same answer on every rank.
bool anyGpuShared(const std::vector<PeerInfo>& peers);
// Another rank of this process on the GPU of rank `rank`, or -1 (tests only, as above).
int rankSharingGpuInProcess(const std::vector<PeerInfo>& peers, int rank);

}  // namespace weft::core
