#include "core/config.h"

#include <strings.h>

#include <algorithm>
#include <climits>
#include <cstddef>
#include <cstring>
#include <optional>

#include "core/param.h"

namespace weft::core {
namespace {

constexpr int kUndef = NCCL_CONFIG_UNDEF_INT;

// Fields of headers newer than weft's (NCCL 2.28.9, whose ncclConfig_t ends at byte 80) that weft
// reads from a larger struct: NCCL 2.29 put graphUsageMode right after it.
static_assert(sizeof(ncclConfig_t) == 80, "the NCCL 2.28 layout");
constexpr size_t kGraphUsageModeOffset = 80;

// The caller's config: the 2.28 struct, and what weft reads beyond it.
struct UserConfig {
  ncclConfig_t base;
  int graphUsageMode = kUndef;
};

// Copies the caller's struct into a full-size one: fields the caller's header did not have, or
// that its version predates, stay at the initializer's "undefined".
Status readUserConfig(const ncclConfig_t* user, const char* function, UserConfig* out) {
  ncclConfig_t local = NCCL_CONFIG_INITIALIZER;
  out->graphUsageMode = kUndef;
  if (user == nullptr) {
    out->base = local;
    return ncclSuccess;
  }
  size_t size = user->size;
  WEFT_CHECK_ARG(size >= offsetof(ncclConfig_t, blocking),
                 "%s: config->size is %zu, too small for an ncclConfig_t; initialise the config with "
                 "NCCL_CONFIG_INITIALIZER", function, size);
  memcpy(&local, user, size < sizeof(local) ? size : sizeof(local));
  if (local.magic != kConfigMagic) {
    WEFT_WARN("%s: ncclConfig_t argument not initialized via NCCL_CONFIG_INITIALIZER (magic 0x%x)",
              function, local.magic);
    return ncclInvalidArgument;
  }
  const unsigned v = local.version;
  ncclConfig_t defaults = NCCL_CONFIG_INITIALIZER;
  if (v < NCCL_VERSION(2, 14, 0)) local.blocking = defaults.blocking;
  if (v < NCCL_VERSION(2, 17, 0)) {
    local.cgaClusterSize = defaults.cgaClusterSize;
    local.minCTAs = defaults.minCTAs;
    local.maxCTAs = defaults.maxCTAs;
    local.netName = defaults.netName;
  }
  if (v < NCCL_VERSION(2, 18, 0)) local.splitShare = defaults.splitShare;
  if (v < NCCL_VERSION(2, 25, 0)) local.trafficClass = defaults.trafficClass;
  if (v < NCCL_VERSION(2, 27, 0)) {
    local.commName = defaults.commName;
    local.collnetEnable = defaults.collnetEnable;
    local.CTAPolicy = defaults.CTAPolicy;
    local.shrinkShare = defaults.shrinkShare;
    local.nvlsCTAs = defaults.nvlsCTAs;
  }
  if (v < NCCL_VERSION(2, 28, 0)) {
    local.nChannelsPerNetPeer = defaults.nChannelsPerNetPeer;
    local.nvlinkCentricSched = defaults.nvlinkCentricSched;
  }
  if (v >= NCCL_VERSION(2, 29, 0) && size >= kGraphUsageModeOffset + sizeof(int)) {
    memcpy(&out->graphUsageMode, reinterpret_cast<const char*>(user) + kGraphUsageModeOffset, sizeof(int));
  }
  out->base = local;
  return ncclSuccess;
}

bool isBool(int v) { return v == 0 || v == 1; }

// The caller's own values must make sense; a bad one is the caller's bug (ncclInvalidArgument).
Status validateUserConfig(const UserConfig& user, const char* fn) {
  const ncclConfig_t& c = user.base;
  WEFT_CHECK_ARG(user.graphUsageMode == kUndef || (user.graphUsageMode >= 0 && user.graphUsageMode <= 2),
                 "%s: config->graphUsageMode is %d; use 0 (no graphs), 1 (graphs, not mixed with other calls) "
                 "or 2 (mixed)", fn, user.graphUsageMode);
  WEFT_CHECK_ARG(c.blocking == kUndef || isBool(c.blocking), "%s: config->blocking is %d; use 0 or 1", fn, c.blocking);
  // Sizes above the hardware limit are clamped later, as NCCL does; only negative ones are wrong.
  WEFT_CHECK_ARG(c.cgaClusterSize == kUndef || c.cgaClusterSize >= 0,
                 "%s: config->cgaClusterSize is %d; use 0 to %d", fn, c.cgaClusterSize, kMaxCgaClusterSize);
  WEFT_CHECK_ARG(c.minCTAs == kUndef || c.minCTAs > 0, "%s: config->minCTAs is %d; it must be positive", fn, c.minCTAs);
  WEFT_CHECK_ARG(c.maxCTAs == kUndef || c.maxCTAs > 0, "%s: config->maxCTAs is %d; it must be positive", fn, c.maxCTAs);
  WEFT_CHECK_ARG(c.minCTAs == kUndef || c.maxCTAs == kUndef || c.minCTAs <= c.maxCTAs,
                 "%s: config->minCTAs (%d) is larger than config->maxCTAs (%d)", fn, c.minCTAs, c.maxCTAs);
  WEFT_CHECK_ARG(c.splitShare == kUndef || isBool(c.splitShare), "%s: config->splitShare is %d; use 0 or 1", fn, c.splitShare);
  WEFT_CHECK_ARG(c.shrinkShare == kUndef || isBool(c.shrinkShare), "%s: config->shrinkShare is %d; use 0 or 1", fn, c.shrinkShare);
  WEFT_CHECK_ARG(c.collnetEnable == kUndef || isBool(c.collnetEnable), "%s: config->collnetEnable is %d; use 0 or 1", fn, c.collnetEnable);
  WEFT_CHECK_ARG(c.CTAPolicy == kUndef || (c.CTAPolicy >= 0 && c.CTAPolicy <= 3),
                 "%s: config->CTAPolicy is %d; use NCCL_CTA_POLICY_DEFAULT, _EFFICIENCY or _ZERO", fn, c.CTAPolicy);
  WEFT_CHECK_ARG(c.nvlsCTAs == kUndef || c.nvlsCTAs > 0, "%s: config->nvlsCTAs is %d; it must be positive", fn, c.nvlsCTAs);
  WEFT_CHECK_ARG(c.nChannelsPerNetPeer == kUndef || (c.nChannelsPerNetPeer > 0 && c.nChannelsPerNetPeer <= kMaxChannels),
                 "%s: config->nChannelsPerNetPeer is %d; use 1 to %d", fn, c.nChannelsPerNetPeer, kMaxChannels);
  WEFT_CHECK_ARG(c.nvlinkCentricSched == kUndef || isBool(c.nvlinkCentricSched),
                 "%s: config->nvlinkCentricSched is %d; use 0 or 1", fn, c.nvlinkCentricSched);
  return ncclSuccess;
}

// An integer environment variable, if it is set to a readable integer.
std::optional<int> envInt(const char* name) {
  if (!param::lookup(name)) return std::nullopt;
  int64_t v = param::getInt(name, kUndef);  // unparsable text was warned about and reads as kUndef
  if (v == kUndef || v < INT_MIN || v > INT_MAX) return std::nullopt;
  return (int)v;
}

// Environment variables override the caller's values (NCCL's envConfigOverride). As in NCCL, an
// out-of-range value is ignored with a note instead of failing every communicator in the job.
void applyEnvironment(UserConfig* user, std::string* netName) {
  ncclConfig_t* c = &user->base;
  // NCCL 2.29's override of graphUsageMode: 0 keeps graphs but orders them by streams only.
  if (auto v = envInt("NCCL_GRAPH_MIXING_SUPPORT")) user->graphUsageMode = *v != 0 ? 2 : 1;
  auto ignored = [](const char* name, int v, const char* why) {
    WEFT_INFO(log::kEnv, "%s=%d ignored: %s", name, v, why);
  };
  if (auto v = envInt("NCCL_COMM_BLOCKING")) {
    if (isBool(*v)) c->blocking = *v;
    else ignored("NCCL_COMM_BLOCKING", *v, "use 0 or 1");
  }
  if (auto v = envInt("NCCL_CGA_CLUSTER_SIZE")) {
    if (*v >= 0) c->cgaClusterSize = *v;  // values above the limit are clamped when resolving
    else ignored("NCCL_CGA_CLUSTER_SIZE", *v, "it must not be negative");
  }
  const struct { const char* name; int* field; } positives[] = {
      {"NCCL_MIN_CTAS", &c->minCTAs}, {"NCCL_MAX_CTAS", &c->maxCTAs},
      {"NCCL_NCHANNELS_PER_NET_PEER", &c->nChannelsPerNetPeer}};
  for (const auto& p : positives) {
    if (auto v = envInt(p.name)) {
      if (*v > 0) *p.field = *v;
      else ignored(p.name, *v, "it must be positive");
    }
  }
  if (auto v = envInt("NCCL_NVLINK_UTIL_CENTRIC_SCHED_ENABLE")) {
    if (isBool(*v)) c->nvlinkCentricSched = *v;
    else ignored("NCCL_NVLINK_UTIL_CENTRIC_SCHED_ENABLE", *v, "use 0 or 1");
  }
  // Switches: anything but 1 means off (NCCL resets invalid values to 0).
  const struct { const char* name; int* field; } switches[] = {
      {"NCCL_COMM_SPLIT_SHARE_RESOURCES", &c->splitShare}, {"NCCL_COMM_SHRINK_SHARE_RESOURCES", &c->shrinkShare},
      {"NCCL_COLLNET_ENABLE", &c->collnetEnable}};
  for (const auto& s : switches) {
    if (auto v = envInt(s.name)) *s.field = *v == 1 ? 1 : 0;
  }
  if (auto v = envInt("NCCL_NVLS_NCHANNELS")) c->nvlsCTAs = *v > 0 ? *v : kUndef;  // <= 0: automatic
  if (auto policy = param::lookup("NCCL_CTA_POLICY")) {
    int parsed = parseCtaPolicy(*policy);
    if (parsed < 0) WEFT_INFO(log::kEnv, "NCCL_CTA_POLICY='%s' is not DEFAULT, EFFICIENCY, ZERO or 0-2; ignored", policy->c_str());
    else c->CTAPolicy = parsed;
  }
  if (auto net = param::lookup("NCCL_NET")) *netName = *net;
}

void resolve(const UserConfig& user, const std::string& netName, CommConfig* out) {
  const ncclConfig_t& c = user.base;
  if (user.graphUsageMode != kUndef) out->graphUsageMode = user.graphUsageMode;
  if (c.blocking != kUndef) out->blocking = c.blocking == 1;
  if (c.cgaClusterSize != kUndef) out->cgaClusterSize = std::min(c.cgaClusterSize, kMaxCgaClusterSize);
  if (c.minCTAs != kUndef) out->minCTAs = std::min(c.minCTAs, kMaxChannels);
  if (c.maxCTAs != kUndef) out->maxCTAs = std::min(c.maxCTAs, kMaxChannels);
  if (out->minCTAs > out->maxCTAs) out->minCTAs = out->maxCTAs;
  if (!netName.empty()) out->netName = netName;
  if (c.splitShare != kUndef) out->splitShare = c.splitShare == 1;
  if (c.trafficClass != kUndef) out->trafficClass = c.trafficClass;
  if (c.commName != nullptr) out->commName = c.commName;
  if (c.collnetEnable != kUndef) out->collnetEnable = c.collnetEnable == 1;
  if (c.CTAPolicy != kUndef) out->ctaPolicy = c.CTAPolicy;
  if (c.shrinkShare != kUndef) out->shrinkShare = c.shrinkShare == 1;
  if (c.nvlsCTAs != kUndef) out->nvlsCTAs = c.nvlsCTAs;
  if (c.nChannelsPerNetPeer != kUndef) out->nChannelsPerNetPeer = std::min(c.nChannelsPerNetPeer, kMaxChannels);
  if (c.nvlinkCentricSched != kUndef) out->nvlinkCentricSched = c.nvlinkCentricSched == 1;
}

}  // namespace

int parseCtaPolicy(const std::string& text) {
  if (text.empty()) return -1;
  char* end = nullptr;
  long legacy = strtol(text.c_str(), &end, 0);
  if (*end == '\0') return legacy >= 0 && legacy <= 2 ? (int)legacy : -1;
  int policy = 0;
  size_t pos = 0;
  while (pos <= text.size()) {
    size_t bar = text.find('|', pos);
    std::string name = text.substr(pos, bar == std::string::npos ? std::string::npos : bar - pos);
    if (!strcasecmp(name.c_str(), "DEFAULT")) policy |= NCCL_CTA_POLICY_DEFAULT;
    else if (!strcasecmp(name.c_str(), "EFFICIENCY")) policy |= NCCL_CTA_POLICY_EFFICIENCY;
    else if (!strcasecmp(name.c_str(), "ZERO")) policy |= NCCL_CTA_POLICY_ZERO;
    else return -1;
    if (bar == std::string::npos) break;
    pos = bar + 1;
  }
  return policy;
}

Status parseConfig(const ncclConfig_t* user, const char* function, CommConfig* out) {
  return parseChildConfig(user, CommConfig{}, function, out);
}

Status parseChildConfig(const ncclConfig_t* user, const CommConfig& parent, const char* function,
                        CommConfig* out) {
  UserConfig c;
  WEFT_TRY(readUserConfig(user, function, &c));
  WEFT_TRY(validateUserConfig(c, function));
  std::string netName = c.base.netName ? c.base.netName : "";
  applyEnvironment(&c, &netName);
  CommConfig resolved = parent;
  resolve(c, netName, &resolved);
  *out = resolved;
  return ncclSuccess;
}

}  // namespace weft::core
