#include "bootstrap/interfaces.h"

#include <ifaddrs.h>
#include <net/if.h>
#include <strings.h>

#include "core/log.h"
#include "core/param.h"

namespace weft::bootstrap {

IfnameFilter IfnameFilter::parse(const std::string& spec) {
  IfnameFilter f;
  size_t pos = 0;
  if (pos < spec.size() && spec[pos] == '^') { f.exclude_ = true; ++pos; }
  if (pos < spec.size() && spec[pos] == '=') { f.exact_ = true; ++pos; }
  while (pos <= spec.size()) {
    size_t comma = spec.find(',', pos);
    std::string name = spec.substr(pos, comma == std::string::npos ? std::string::npos : comma - pos);
    if (!name.empty()) f.names_.push_back(name);
    if (comma == std::string::npos) break;
    pos = comma + 1;
  }
  f.set_ = !f.names_.empty();
  return f;
}

bool IfnameFilter::matches(const std::string& ifname) const {
  if (!set_) return true;
  bool listed = false;
  for (const std::string& n : names_) {
    if (exact_ ? ifname == n : ifname.compare(0, n.size(), n) == 0) { listed = true; break; }
  }
  return exclude_ ? !listed : listed;
}

int parseFamily(const std::string& text, bool* bad) {
  *bad = false;
  if (text.empty()) return AF_UNSPEC;
  if (!strcasecmp(text.c_str(), "AF_INET") || text == "4" || !strcasecmp(text.c_str(), "ipv4")) return AF_INET;
  if (!strcasecmp(text.c_str(), "AF_INET6") || text == "6" || !strcasecmp(text.c_str(), "ipv6")) return AF_INET6;
  *bad = true;
  return AF_UNSPEC;
}

std::vector<Interface> listInterfaces() {
  std::vector<Interface> out;
  ifaddrs* list = nullptr;
  if (getifaddrs(&list) != 0) return out;
  for (ifaddrs* ifa = list; ifa != nullptr; ifa = ifa->ifa_next) {
    if (ifa->ifa_addr == nullptr || (ifa->ifa_flags & IFF_UP) == 0) continue;
    int family = ifa->ifa_addr->sa_family;
    if (family != AF_INET && family != AF_INET6) continue;
    SocketAddress a = SocketAddress::fromSockaddr(
        ifa->ifa_addr, family == AF_INET ? sizeof(sockaddr_in) : sizeof(sockaddr_in6));
    // Link-local IPv6 needs a scope id that remote hosts cannot share; NCCL skips them too.
    if (!a.valid() || a.isLinkLocal()) continue;
    a.setPort(0);
    out.push_back(Interface{ifa->ifa_name, a});
  }
  freeifaddrs(list);
  return out;
}

namespace {

bool isDefaultAvoided(const std::string& name) {
  return name.compare(0, 6, "docker") == 0 || name.compare(0, 5, "virbr") == 0;
}

}  // namespace

std::optional<Interface> selectInterface(const std::vector<Interface>& all, const std::string& ifnameSpec, int family) {
  IfnameFilter filter = IfnameFilter::parse(ifnameSpec);
  const Interface* fallbackLoopback = nullptr;
  for (const Interface& i : all) {
    if (family != AF_UNSPEC && i.address.family() != family) continue;
    if (!filter.matches(i.name)) continue;
    // An explicit list of names is the user's choice, loopback included.
    if (filter.isSet() && !filter.excludes()) return i;
    if (!filter.isSet() && isDefaultAvoided(i.name)) continue;
    if (i.address.isLoopback()) {
      if (fallbackLoopback == nullptr) fallbackLoopback = &i;
      continue;
    }
    return i;
  }
  if (fallbackLoopback != nullptr) return *fallbackLoopback;
  return std::nullopt;
}

Status chooseInterface(const SocketAddress* nearRoot, Interface* out) {
  std::string spec = param::getStr("NCCL_SOCKET_IFNAME", "");
  std::string familyText = param::getStr("NCCL_SOCKET_FAMILY", "");
  bool bad = false;
  int family = parseFamily(familyText, &bad);
  if (bad) WEFT_WARN("NCCL_SOCKET_FAMILY='%s' is not AF_INET or AF_INET6; ignoring it", familyText.c_str());

  if (spec.empty() && nearRoot != nullptr && nearRoot->isLoopback()) {
    out->name = "lo";
    out->address = SocketAddress::loopback(nearRoot->family());
    WEFT_INFO(log::kBootstrap, "bootstrap: root is on loopback (%s); using loopback", nearRoot->toString().c_str());
    return ncclSuccess;
  }
  std::vector<Interface> all = listInterfaces();
  std::optional<Interface> pick;
  // Without NCCL_SOCKET_FAMILY, prefer the root's family: a root reachable over IPv6 suggests the
  // ranks are, too.
  if (family == AF_UNSPEC && nearRoot != nullptr && nearRoot->valid()) pick = selectInterface(all, spec, nearRoot->family());
  if (!pick) pick = selectInterface(all, spec, family);
  if (!pick) {
    std::string names;
    for (const Interface& i : all) names += (names.empty() ? "" : ", ") + i.name + " " + i.address.hostString();
    WEFT_WARN("bootstrap: no usable network interface (NCCL_SOCKET_IFNAME='%s', NCCL_SOCKET_FAMILY='%s'); "
              "interfaces found: %s. Set NCCL_SOCKET_IFNAME to one of them",
              spec.c_str(), familyText.c_str(), names.empty() ? "none" : names.c_str());
    return ncclSystemError;
  }
  *out = *pick;
  WEFT_INFO(log::kBootstrap, "bootstrap: using interface %s (%s)", out->name.c_str(), out->address.hostString().c_str());
  return ncclSuccess;
}

}  // namespace weft::bootstrap
