// ncclConfig_t as NCCL reads it: the caller's struct may come from an older or newer header, so
// only `size` bytes are read, fields newer than the caller's `version` get defaults, and
// environment variables (NCCL_COMM_BLOCKING, NCCL_MAX_CTAS, ...) override what the caller set.
#pragma once

#include <string>

#include "core/status.h"

namespace weft::core {

constexpr int kMaxChannels = 64;
constexpr int kMaxCgaClusterSize = 8;  // the portable thread-block cluster limit
constexpr unsigned kConfigMagic = 0xcafebeef;

// The resolved options of one communicator; every field has a definite value.
struct CommConfig {
  bool blocking = true;
  int cgaClusterSize = 4;
  int minCTAs = 1;
  int maxCTAs = kMaxChannels;
  std::string netName;
  bool splitShare = false;
  int trafficClass = NCCL_CONFIG_UNDEF_INT;  // undefined: the network's own default
  std::string commName;
  bool collnetEnable = false;
  int ctaPolicy = NCCL_CTA_POLICY_DEFAULT;
  bool shrinkShare = false;
  int nvlsCTAs = NCCL_CONFIG_UNDEF_INT;      // undefined: automatic
  int nChannelsPerNetPeer = NCCL_CONFIG_UNDEF_INT;
  bool nvlinkCentricSched = false;
  // NCCL 2.29's graphUsageMode (read from callers built against 2.29+ headers; NCCL_GRAPH_MIXING_SUPPORT
  // overrides it): 2 orders captured calls against the communicator's other calls on any stream
  // (event nodes in the graphs), 0 and 1 leave that to the streams.
  int graphUsageMode = 2;
};

// Reads a caller's config (NULL = all defaults), validates it and applies the environment.
// `function` names the entry point in error messages.
[[nodiscard]] Status parseConfig(const ncclConfig_t* user, const char* function, CommConfig* out);

// The same, but fields the caller left undefined are taken from `parent` (ncclCommSplit/Shrink).
[[nodiscard]] Status parseChildConfig(const ncclConfig_t* user, const CommConfig& parent,
                                      const char* function, CommConfig* out);

// NCCL_CTA_POLICY syntax: DEFAULT, EFFICIENCY, ZERO joined by '|', or a legacy integer.
// Returns -1 for text it cannot read.
int parseCtaPolicy(const std::string& text);

}  // namespace weft::core
