#include "graph/detect_sysfs.h"

#include <dirent.h>
#include <limits.h>
#include <stdlib.h>
#include <sys/stat.h>

#include <algorithm>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <sstream>

namespace weft::graph {

bool readSysfsFile(const std::string& path, std::string* out) {
  std::ifstream in(path);
  if (!in) return false;
  std::stringstream ss;
  ss << in.rdbuf();
  std::string s = ss.str();
  while (!s.empty() && (s.back() == '\n' || s.back() == ' ' || s.back() == '\t' || s.back() == '\r')) s.pop_back();
  *out = s;
  return true;
}

bool isPciAddress(const std::string& s) {
  // dddd:bb:dd.f with hex digits; the domain may be longer than 4 digits.
  size_t c1 = s.find(':');
  if (c1 == std::string::npos || c1 < 4) return false;
  if (s.size() != c1 + 8 || s[c1 + 3] != ':' || s[c1 + 6] != '.') return false;
  for (size_t i = 0; i < s.size(); i++) {
    if (i == c1 || i == c1 + 3 || i == c1 + 6) continue;
    if (!isxdigit((unsigned char)s[i])) return false;
  }
  return true;
}

namespace {

std::string realPath(const std::string& p) {
  char buf[PATH_MAX];
  if (!realpath(p.c_str(), buf)) return std::string();
  return buf;
}

bool isDir(const std::string& p) {
  struct stat st;
  return stat(p.c_str(), &st) == 0 && S_ISDIR(st.st_mode);
}

std::vector<std::string> listDir(const std::string& p) {
  std::vector<std::string> out;
  DIR* d = opendir(p.c_str());
  if (!d) return out;
  while (struct dirent* e = readdir(d)) {
    if (e->d_name[0] == '.') continue;
    out.push_back(e->d_name);
  }
  closedir(d);
  std::sort(out.begin(), out.end());
  return out;
}

std::string findUnder(const std::string& dir, const std::string& name, int depth) {
  if (depth > 12) return std::string();
  for (const std::string& e : listDir(dir)) {
    std::string p = dir + "/" + e;
    if (!isDir(p)) continue;
    if (e == name) return p;
    // Only descend through the PCI hierarchy.
    if (isPciAddress(e) || e.rfind("pci", 0) == 0) {
      std::string r = findUnder(p, name, depth + 1);
      if (!r.empty()) return r;
    }
  }
  return std::string();
}

std::string lower(std::string s) {
  for (char& c : s) c = (char)tolower((unsigned char)c);
  return s;
}

std::string parentDir(const std::string& p) {
  size_t s = p.find_last_of('/');
  return s == std::string::npos ? std::string() : p.substr(0, s);
}

}  // namespace

std::string sysfsPciDevicePath(const std::string& root, const std::string& busId) {
  std::string id = lower(busId);
  std::string link = root + "/bus/pci/devices/" + id;
  std::string p = realPath(link);
  if (!p.empty()) return p;
  std::string found = findUnder(root + "/devices", id, 0);
  return found.empty() ? std::string() : realPath(found);
}

std::vector<std::string> pciChain(const std::string& devicePath, std::string* trailing) {
  std::vector<std::string> chain;
  std::string last;
  size_t start = 0;
  while (start <= devicePath.size()) {
    size_t end = devicePath.find('/', start);
    if (end == std::string::npos) end = devicePath.size();
    std::string comp = devicePath.substr(start, end - start);
    if (!comp.empty()) {
      if (isPciAddress(comp)) chain.push_back(lower(comp));
      last = comp;
    }
    start = end + 1;
  }
  if (trailing) *trailing = (!last.empty() && !isPciAddress(last)) ? last : std::string();
  return chain;
}

namespace {

double gtsOf(const std::string& speed) {
  double v = 0;
  return sscanf(speed.c_str(), "%lf", &v) == 1 ? v : 0;
}

}  // namespace

PciAttrs readPciAttrs(const std::string& dev) {
  PciAttrs a;
  readSysfsFile(dev + "/class", &a.cls);
  readSysfsFile(dev + "/vendor", &a.vendor);
  readSysfsFile(dev + "/device", &a.device);
  readSysfsFile(dev + "/subsystem_vendor", &a.subsystemVendor);
  readSysfsFile(dev + "/subsystem_device", &a.subsystemDevice);
  std::string numa;
  if (readSysfsFile(dev + "/numa_node", &numa) && !numa.empty()) a.numaNode = atoi(numa.c_str());
  // The link runs at the slower of both ends: the device and the port above it.
  std::string devSpeed, portSpeed, devWidth, portWidth;
  bool hasDev = readSysfsFile(dev + "/max_link_speed", &devSpeed);
  bool hasPort = readSysfsFile(parentDir(dev) + "/max_link_speed", &portSpeed);
  double ds = hasDev ? gtsOf(devSpeed) : 0, ps = hasPort ? gtsOf(portSpeed) : 0;
  if (ds > 0 && (ps <= 0 || ds <= ps)) a.linkSpeed = devSpeed;
  else if (ps > 0) a.linkSpeed = portSpeed;
  bool hasDevW = readSysfsFile(dev + "/max_link_width", &devWidth);
  bool hasPortW = readSysfsFile(parentDir(dev) + "/max_link_width", &portWidth);
  int dw = hasDevW ? atoi(devWidth.c_str()) : 0, pw = hasPortW ? atoi(portWidth.c_str()) : 0;
  int w = dw > 0 && (pw <= 0 || dw <= pw) ? dw : pw;
  a.linkWidth = std::to_string(w);
  a.linkKnown = !a.linkSpeed.empty() && w > 0;
  return a;
}

std::string numaCpuMap(const std::string& root, int numaNode) {
  if (numaNode < 0) return std::string();
  std::string map;
  if (!readSysfsFile(root + "/devices/system/node/node" + std::to_string(numaNode) + "/cpumap", &map)) return "";
  return map;
}

CpuId parseCpuInfo(const std::string& text) {
  CpuId id;
  std::istringstream in(text);
  std::string line;
  bool haveFamily = false, haveModel = false;
  while (std::getline(in, line)) {
    size_t colon = line.find(':');
    if (colon == std::string::npos) continue;
    std::string key = line.substr(0, colon);
    while (!key.empty() && (key.back() == ' ' || key.back() == '\t')) key.pop_back();
    std::string value = line.substr(colon + 1);
    if (!value.empty() && value[0] == ' ') value.erase(0, 1);
    if (key == "vendor_id" && id.vendor.empty()) id.vendor = value;
    if (key == "cpu family" && !haveFamily) {
      id.family = atoi(value.c_str());
      haveFamily = true;
    }
    if (key == "model" && !haveModel) {
      id.model = atoi(value.c_str());
      haveModel = true;
    }
    if (line.empty()) break;  // the first processor is enough
  }
  return id;
}

std::string archName(const std::string& machine) {
  if (machine == "x86_64") return "x86_64";
  if (machine == "aarch64" || machine == "arm64") return "arm64";
  if (machine.rfind("ppc64", 0) == 0) return "ppc64";
  return machine;
}

std::vector<SysfsNet> listSysfsNets(const std::string& root) {
  std::vector<SysfsNet> out;
  std::string ib = root + "/class/infiniband";
  for (const std::string& dev : listDir(ib)) {
    SysfsNet n;
    n.name = dev;
    n.infiniband = true;
    n.pciPath = realPath(ib + "/" + dev + "/device");
    std::string guid;
    if (readSysfsFile(ib + "/" + dev + "/node_guid", &guid)) {
      std::string hex;
      for (char c : guid) {
        if (c != ':') hex.push_back(c);
      }
      n.guid = strtoull(hex.c_str(), nullptr, 16);
    }
    std::string rate;  // "400 Gb/sec (4X NDR)"
    if (readSysfsFile(ib + "/" + dev + "/ports/1/rate", &rate)) n.speedMbps = (int64_t)atof(rate.c_str()) * 1000;
    out.push_back(n);
  }
  std::string netDir = root + "/class/net";
  for (const std::string& ifname : listDir(netDir)) {
    if (ifname == "lo") continue;
    std::string devLink = netDir + "/" + ifname + "/device";
    std::string path = realPath(devLink);
    if (path.empty()) continue;  // virtual interface (bridge, docker, ...)
    SysfsNet n;
    n.name = ifname;
    n.pciPath = path;
    std::string speed;
    if (readSysfsFile(netDir + "/" + ifname + "/speed", &speed)) n.speedMbps = atoll(speed.c_str());
    if (n.speedMbps < 0) n.speedMbps = 0;
    n.port = 0;
    out.push_back(n);
  }
  return out;
}

}  // namespace weft::graph
