// Reading the PCI tree, NUMA domains and network devices from sysfs. The sysfs root is a parameter
// so that tests can point it at a fake tree (tests/unit/data/sysfs/...). Missing files are normal in
// virtual machines: readers return empty values and callers estimate.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace weft::graph {

// Contents of a sysfs attribute file without the trailing newline; false if unreadable.
bool readSysfsFile(const std::string& path, std::string* out);

// True for a "dddd:bb:dd.f" PCI address.
bool isPciAddress(const std::string& name);

// The device directory of a PCI function (realpath of <root>/bus/pci/devices/<busId>, or a search
// under <root>/devices when that link is missing). Empty when not found.
std::string sysfsPciDevicePath(const std::string& root, const std::string& busId);

// The PCI addresses on the way from the root port down to the device at `devicePath`, the device
// last ("0000:00:01.0", "0000:01:00.0", ...). Components that are not PCI addresses (the root
// complex "pci0000:00", "virtio2", ...) are left out; `trailing` gets the non-PCI last component
// when the path does not end at a PCI function (virtio network devices).
std::vector<std::string> pciChain(const std::string& devicePath, std::string* trailing = nullptr);

// PCI attributes of a device directory as NCCL's XML holds them.
struct PciAttrs {
  std::string cls, vendor, device, subsystemVendor, subsystemDevice;
  std::string linkSpeed;   // the slower of the device's and its upstream port's max_link_speed
  std::string linkWidth;   // the narrower of the two max_link_width values
  int numaNode = -1;
  bool linkKnown = false;  // false: no link files (typical in VMs)
};
PciAttrs readPciAttrs(const std::string& devicePath);

// cpumap of a NUMA node (hex mask with commas, as NCCL writes it in "affinity"); empty if unknown.
std::string numaCpuMap(const std::string& root, int numaNode);

// CPU identification from /proc/cpuinfo text: vendor_id, cpu family, model (x86 only).
struct CpuId {
  std::string vendor;
  int family = 0;
  int model = 0;
};
CpuId parseCpuInfo(const std::string& text);

// NCCL's arch name for a uname machine string: "x86_64", "arm64", "ppc64".
std::string archName(const std::string& machine);

// Network devices sysfs knows about: InfiniBand devices (<root>/class/infiniband/*), then Ethernet
// interfaces with a device link (<root>/class/net/*), for tools that run without a network plugin.
struct SysfsNet {
  std::string name;
  std::string pciPath;     // realpath of the device link
  int64_t speedMbps = 0;   // from net/<if>/speed or the IB port rate; 0 if unknown
  int port = 1;
  uint64_t guid = 0;
  bool infiniband = false;
};
std::vector<SysfsNet> listSysfsNets(const std::string& root);

}  // namespace weft::graph
