// Time limits of the bootstrap and the rate limit for warnings about rejected connections.
#pragma once

#include <string>
#include <vector>

#include "core/param.h"

namespace weft::bootstrap {

// Deadline of every bootstrap operation (rendezvous, allgather, send, recv, barrier), in seconds;
// 0 waits forever.
constexpr param::IntParam kBootstrapTimeout{"NCCL_BOOTSTRAP_TIMEOUT", 300};

// A connection must send a complete, valid hello this soon after it is accepted; real ranks send
// it at once, so anything slower is a stranger (or a port scanner) holding a slot.
constexpr int kHelloTimeoutMs = 10000;
// At most this many connections may wait for their hello; beyond it the oldest is dropped, once
// it has waited kPendingGraceMs. A large job's ranks reach the root all at once, thousands of them
// queued before the root reads the first hello: those must get the time to be read.
constexpr size_t kMaxPendingConnections = 512;
constexpr int kPendingGraceMs = 2000;
// How long a rank keeps waiting past its own deadline for the root's verdict, which names the
// missing ranks (the root's clock starts with the first arrival, a moment later than ours).
constexpr int kRootVerdictGraceMs = 1000;
// How long a rank keeps knocking on a ncclGetUniqueId root that refuses connections. Such a root
// listened before its id existed, so a refusal means it has ended (the id was used already, or its
// process exited): the rank says so instead of retrying until NCCL_BOOTSTRAP_TIMEOUT. (A root that
// rank 0 starts, NCCL_COMM_ID, may come up late: those are retried to the deadline.)
constexpr int kEndedRootRetryMs = 2000;
// Rejected connections are warned about this many times per endpoint, then logged at INFO.
constexpr int kRejectWarnLimit = 5;

// Logs rejected connections: the first few as WARN, later ones at INFO under BOOTSTRAP, so that
// a port scan cannot flood the log.
class RejectLog {
 public:
  explicit RejectLog(std::string endpoint) : endpoint_(std::move(endpoint)) {}
  void setEndpoint(std::string endpoint) { endpoint_ = std::move(endpoint); }
  void reject(const std::string& from, const std::string& why);
  int count() const { return count_; }

 private:
  std::string endpoint_;
  int count_ = 0;
};

// "3, 5-7, 12" for a sorted list; at most maxItems items, then "and N more".
std::string formatRankList(const std::vector<int>& ranks, size_t maxItems = 16);

}  // namespace weft::bootstrap
