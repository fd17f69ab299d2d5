// Runs collectives and SendRecv patterns through the kernel on a Fabric, the way the host planner
// will build them (channelPart/recommendedChunkElems from work_math.h), and checks every output
// element and the guard bytes around every output.
#pragma once

#include <string>
#include <vector>

#include "harness_fabric.h"

namespace weft::harness {

struct CollSpec {
  int func = dev::kFuncAllReduce;
  int type = dev::kFloat32;
  int op = dev::kRedSum;
  uint64_t count = 0;   // per-rank block for AllGather/ReduceScatter
  int root = 0;
  bool inPlace = false;
  uint32_t sendMisalign = 0;  // bytes added to the send buffer address
  uint32_t recvMisalign = 0;  // bytes added to the receive buffer address
  bool scalarOnDevice = false;
  uint64_t chunkElems = ~0ull;  // ~0: recommendedChunkElems; otherwise used as is (0 = largest)
};

struct P2pSpec {
  int pattern = 0;  // 0: ring shift (send to rank+1), 1: all-to-all in rounds (self included)
  int type = dev::kFloat32;
  uint64_t count = 0;  // elements per peer
  uint32_t sendMisalign = 0;
  uint32_t recvMisalign = 0;
};

class Runner {
 public:
  Runner(Fabric& fabric, size_t arenaBytes);
  ~Runner();
  // Runs the collectives in one launch (each channel runs its items in the given order) and
  // checks them; returns "" or what failed.
  std::string runColls(const std::vector<CollSpec>& specs, uint64_t seed, double timeoutSec = 60);
  std::string runP2p(const P2pSpec& spec, uint64_t seed, double timeoutSec = 60);
  // Protocol of the work items built from now on (DevWork.proto; chunkElems 0 for LL/LL128 unless
  // a spec sets one, as the planner does).
  void setProto(int proto) { proto_ = proto; }
  int proto() const { return proto_; }
  // Device buffers of rank r for bandwidth runs.
  char* sendArena(int r) const { return dSend_[r]; }
  char* recvArena(int r) const { return dRecv_[r]; }
  size_t arenaBytes() const { return arenaBytes_; }

  // The work items of a collective for every rank (also used by the bandwidth mode).
  void buildCollWorks(const CollSpec& s, const std::vector<char*>& sendBuf, const std::vector<char*>& recvBuf,
                      LaunchWorks* works) const;

 private:
  Fabric& fab_;
  size_t arenaBytes_;
  std::vector<char*> dSend_, dRecv_;
  std::vector<char*> dScalar_;
  int proto_ = dev::kProtoSimple;
};

}  // namespace weft::harness
