// Which network interface the bootstrap listens on: NCCL_SOCKET_IFNAME and NCCL_SOCKET_FAMILY.
//
// NCCL_SOCKET_IFNAME is a comma-separated list of interface name prefixes ("eth,ib"). A leading
// '^' turns it into a list to avoid ("^docker,lo"); a leading '=' (after the '^', if any) makes
// the names exact instead of prefixes ("=eth0", "^=docker0"). Unset, weft takes the first usable
// interface that is not loopback, docker* or virbr*, and loopback when nothing else exists.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "bootstrap/socket.h"
#include "core/status.h"

namespace weft::bootstrap {

struct Interface {
  std::string name;       // "eth0"
  SocketAddress address;  // port 0
};

class IfnameFilter {
 public:
  static IfnameFilter parse(const std::string& spec);
  bool isSet() const { return set_; }
  bool excludes() const { return exclude_; }
  bool matches(const std::string& ifname) const;  // true = the interface may be used

 private:
  bool set_ = false;
  bool exclude_ = false;
  bool exact_ = false;
  std::vector<std::string> names_;
};

// AF_INET / AF_INET6 from NCCL_SOCKET_FAMILY text ("AF_INET", "AF_INET6", also "4"/"6");
// AF_UNSPEC for empty text. Unknown text gives AF_UNSPEC and *bad = true.
int parseFamily(const std::string& text, bool* bad);

// The interfaces that are up and carry an IPv4 or a (not link-local) IPv6 address, in the order
// the kernel lists them. An interface with several addresses appears once per address.
std::vector<Interface> listInterfaces();

// The pure selection rule, testable with made-up lists. family: AF_INET, AF_INET6 or AF_UNSPEC.
std::optional<Interface> selectInterface(const std::vector<Interface>& all, const std::string& ifnameSpec, int family);

// The interface for this process, from NCCL_SOCKET_IFNAME / NCCL_SOCKET_FAMILY. When
// `nearRoot` is a loopback address and NCCL_SOCKET_IFNAME is unset, loopback is taken: a root on
// loopback means every rank is on this host. Without NCCL_SOCKET_FAMILY, an address of the root's
// family is preferred. Logs the choice (INFO) or the reason for failing
// (WARN, listing the interfaces that exist) and returns ncclSystemError.
[[nodiscard]] Status chooseInterface(const SocketAddress* nearRoot, Interface* out);

}  // namespace weft::bootstrap
