#include "core/peer_info.h"

#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <cstring>
#include <fstream>

#include "core/param.h"

namespace weft::core {
namespace {

// FNV-1a: stable across processes and builds (std::hash is not guaranteed to be).
uint64_t hashText(const std::string& text, uint64_t h = 0xcbf29ce484222325ULL) {
  for (unsigned char c : text) {
    h ^= c;
    h *= 0x100000001b3ULL;
  }
  return h;
}

std::string readFirstLine(const char* path) {
  std::ifstream in(path);
  std::string line;
  std::getline(in, line);
  return line;
}

}  // namespace

std::string localHostName() {
  char name[256] = "";
  gethostname(name, sizeof(name) - 1);
  return name;
}

std::string describeRank(const PeerInfo& p) {
  char text[160];
  snprintf(text, sizeof(text), "rank %d (pid %d on %s)", p.rank, p.pid, p.hostName);
  return text;
}

uint64_t localHostHash() {
  std::string id = param::getStr("NCCL_HOSTID", "");
  if (id.empty()) id = localHostName() + readFirstLine("/proc/sys/kernel/random/boot_id");
  return hashText(id);
}

uint64_t localPidNamespace() {
  struct stat st {};
  return stat("/proc/self/ns/pid", &st) == 0 ? (uint64_t)st.st_ino : 0;
}

uint64_t localProcessHash() {
  const uint64_t ns = localPidNamespace();
  return hashText(std::to_string(getpid()) + ":" + (ns ? std::to_string(ns) : std::string()), localHostHash());
}

Status checkPeerTable(const std::vector<PeerInfo>& peers, bool allowSharedGpu) {
  for (size_t r = 0; r < peers.size(); ++r) {
    const PeerInfo& p = peers[r];
    // The strings came over the network: each must end inside its field before anything prints it.
    const bool stringsEnd = std::memchr(p.busId, '\0', sizeof(p.busId)) != nullptr &&
                            std::memchr(p.hostName, '\0', sizeof(p.hostName)) != nullptr;
    if (p.magic != PeerInfo::kMagic || p.rank != (int)r || !stringsEnd) {
      WEFT_WARN("communicator creation: the identity received for rank %zu is corrupt (magic 0x%x, rank %d%s); "
                "are all ranks running the same weft build?", r, p.magic, p.rank,
                stringsEnd ? "" : ", a name without its end");
      return ncclInternalError;
    }
  }
  if (allowSharedGpu) return ncclSuccess;
  for (size_t a = 0; a < peers.size(); ++a) {
    for (size_t b = a + 1; b < peers.size(); ++b) {
      if (peers[a].hostHash == peers[b].hostHash && std::string(peers[a].busId) == peers[b].busId) {
        WEFT_WARN("communicator creation: ranks %zu and %zu both use GPU %s on host %s; each rank needs its own GPU "
                  "(check CUDA_VISIBLE_DEVICES and cudaSetDevice in each rank)",
                  a, b, peers[a].busId, peers[a].hostName);
        return ncclInvalidUsage;
      }
    }
  }
  return ncclSuccess;
}

bool allOnOneHost(const std::vector<PeerInfo>& peers) {
  for (const PeerInfo& p : peers) {
    if (p.hostHash != peers[0].hostHash) return false;
  }
  return true;
}

namespace {
// Another rank on the GPU of rank `rank` (same bus id within one host, or one process), or -1.
int rankOnSameGpu(const std::vector<PeerInfo>& peers, int rank, bool sameProcess) {
  const PeerInfo& me = peers[rank];
  for (const PeerInfo& p : peers) {
    const bool near = sameProcess ? p.processHash == me.processHash : p.hostHash == me.hostHash;
    if (p.rank != rank && near && strncmp(p.busId, me.busId, sizeof(p.busId)) == 0) return p.rank;
  }
  return -1;
}
}  // namespace

bool sharesGpu(const std::vector<PeerInfo>& peers, int rank) { return rankOnSameGpu(peers, rank, false) >= 0; }

bool anyGpuShared(const std::vector<PeerInfo>& peers) {
  std::vector<std::pair<uint64_t, std::string>> gpus;
  gpus.reserve(peers.size());
  for (const PeerInfo& p : peers) gpus.emplace_back(p.hostHash, std::string(p.busId, strnlen(p.busId, sizeof(p.busId))));
  std::sort(gpus.begin(), gpus.end());
  return std::adjacent_find(gpus.begin(), gpus.end()) != gpus.end();
}

int rankSharingGpuInProcess(const std::vector<PeerInfo>& peers, int rank) { return rankOnSameGpu(peers, rank, true); }

bool allOnOneGpu(const std::vector<PeerInfo>& peers) {
  if (!allOnOneHost(peers)) return false;
  for (const PeerInfo& p : peers) {
    if (strncmp(p.busId, peers[0].busId, sizeof(p.busId)) != 0) return false;
  }
  return true;
}

}  // namespace weft::core
