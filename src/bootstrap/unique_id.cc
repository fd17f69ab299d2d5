#include "bootstrap/unique_id.h"

#include <sys/random.h>
#include <unistd.h>

#include <chrono>
#include <cstring>
#include <memory>

#include "bootstrap/interfaces.h"
#include "bootstrap/root.h"
#include "bootstrap/wire.h"
#include "core/log.h"
#include "core/param.h"

namespace weft::bootstrap {
namespace {

constexpr uint64_t kIdMagic = 0x31444955'74666577ULL;  // "weftUID1" as bytes
constexpr uint16_t kIdVersion = 1;
constexpr uint16_t kFlagRootStartedByRank = 1;

struct IdLayout {
  uint64_t magic;
  uint16_t version;
  uint16_t flags;
  uint32_t checksum;
  uint64_t jobKey;
  wire::WireAddress root;
};
static_assert(sizeof(IdLayout) == 48 && sizeof(IdLayout) <= NCCL_UNIQUE_ID_BYTES, "unique id layout");

uint32_t fnv1a32(const unsigned char* p, size_t n) {
  uint32_t h = 2166136261u;
  for (size_t i = 0; i < n; ++i) h = (h ^ p[i]) * 16777619u;
  return h;
}

uint32_t checksumOf(const ncclUniqueId& id) {
  ncclUniqueId copy = id;
  memset(copy.internal + offsetof(IdLayout, checksum), 0, sizeof(uint32_t));
  return fnv1a32(reinterpret_cast<const unsigned char*>(copy.internal), sizeof(copy.internal));
}

}  // namespace

void encodeUniqueId(const UniqueIdInfo& info, ncclUniqueId* out) {
  memset(out, 0, sizeof(*out));
  IdLayout l;
  memset(&l, 0, sizeof(l));
  l.magic = kIdMagic;
  l.version = kIdVersion;
  l.flags = info.rootStartedByRank ? kFlagRootStartedByRank : 0;
  l.jobKey = info.jobKey;
  l.root = wire::encodeAddress(info.root);
  memcpy(out->internal, &l, sizeof(l));
  l.checksum = checksumOf(*out);
  memcpy(out->internal, &l, sizeof(l));
}

bool decodeUniqueId(const ncclUniqueId& id, UniqueIdInfo* info, std::string* why) {
  bool allZero = true;
  for (char c : id.internal) allZero = allZero && c == 0;
  if (allZero) {
    *why = "the unique id is all zeros: this rank did not receive the id created by ncclGetUniqueId";
    return false;
  }
  IdLayout l;
  memcpy(&l, id.internal, sizeof(l));
  if (l.magic != kIdMagic) {
    *why = "the unique id was not made by weft's ncclGetUniqueId (wrong magic); every rank must use the same NCCL library";
    return false;
  }
  if (l.version != kIdVersion) {
    *why = "the unique id has layout version " + std::to_string(l.version) + ", this library reads version " +
           std::to_string(kIdVersion) + "; every rank must use the same weft build";
    return false;
  }
  if (checksumOf(id) != l.checksum) {
    *why = "the unique id is corrupted (checksum mismatch); pass the 128 bytes unchanged to every rank";
    return false;
  }
  if ((l.flags & ~kFlagRootStartedByRank) != 0 || l.jobKey == 0) {
    *why = "the unique id has unknown flags or no job key";
    return false;
  }
  std::string addrWhy;
  if (!wire::decodeAddress(l.root, &info->root, &addrWhy)) {
    *why = "the unique id holds a bad root address: " + addrWhy;
    return false;
  }
  info->jobKey = l.jobKey;
  info->rootStartedByRank = (l.flags & kFlagRootStartedByRank) != 0;
  return true;
}

uint64_t jobKeyFromText(const std::string& text) {
  // FNV-1a 64 followed by a finalizer (splitmix64) so that similar texts give unrelated keys.
  uint64_t h = 1469598103934665603ULL;
  for (unsigned char c : text) h = (h ^ c) * 1099511628211ULL;
  h ^= h >> 30;
  h *= 0xbf58476d1ce4e5b9ULL;
  h ^= h >> 27;
  h *= 0x94d049bb133111ebULL;
  h ^= h >> 31;
  return h != 0 ? h : 1;
}

uint64_t randomJobKey() {
  uint64_t key = 0;
  ssize_t n;
  do {
    n = getrandom(&key, sizeof(key), 0);
  } while (n < 0 && errno == EINTR);
  if (n != (ssize_t)sizeof(key)) {
    // No entropy source: mix time and pid. Weaker, but the key guards against cross-talk, not attackers.
    auto now = std::chrono::high_resolution_clock::now().time_since_epoch().count();
    key = jobKeyFromText(std::to_string(now) + ":" + std::to_string(getpid()));
  }
  return key != 0 ? key : 1;
}

Status createUniqueId(ncclUniqueId* out) {
  std::string commId = param::getStr("NCCL_COMM_ID", "");
  if (!commId.empty()) {
    UniqueIdInfo info;
    std::string why;
    if (!SocketAddress::parse(commId, &info.root, &why)) {
      WEFT_WARN("NCCL_COMM_ID='%s' is not a usable address (%s); expected host:port or [ipv6]:port",
                commId.c_str(), why.c_str());
      return ncclInvalidArgument;
    }
    // Derived from the canonical form, so "localhost:5000" and "127.0.0.1:5000" agree.
    info.jobKey = jobKeyFromText(info.root.toString());
    info.rootStartedByRank = true;
    encodeUniqueId(info, out);
    WEFT_INFO(log::kBootstrap, "bootstrap: unique id from NCCL_COMM_ID=%s (the root starts with rank 0)",
              info.root.toString().c_str());
    return ncclSuccess;
  }
  return createRootId(out);
}

Status createRootId(ncclUniqueId* out, const SocketAddress* near) {
  Interface itf;
  WEFT_TRY(chooseInterface(near, &itf));
  UniqueIdInfo info;
  info.jobKey = randomJobKey();
  std::unique_ptr<Root> root;
  WEFT_TRY(Root::create(itf.address, info.jobKey, &root));
  info.root = root->address();
  encodeUniqueId(info, out);
  WEFT_INFO(log::kBootstrap, "bootstrap: root listening on %s (interface %s)", info.root.toString().c_str(),
            itf.name.c_str());
  Root::launchDetached(std::move(root));
  return ncclSuccess;
}

}  // namespace weft::bootstrap
