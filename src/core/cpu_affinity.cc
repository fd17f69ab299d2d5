#include "core/cpu_affinity.h"

#include <cerrno>
#include <cstring>
#include <vector>

#include "core/log.h"
#include "core/param.h"
#include "graph/topo_types.h"
#include "graph/xml.h"

namespace weft::core {

namespace {

constexpr param::IntParam kIgnoreCpuAffinity{"NCCL_IGNORE_CPU_AFFINITY", 0};

int hexDigit(char c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  if (c >= 'A' && c <= 'F') return c - 'A' + 10;
  return -1;
}

// Whether the GPU of (canonical) busId sits below `n`.
bool holdsGpu(const graph::XmlNode& n, const std::string& busId) {
  const bool isIt = n.name == "pci" && graph::canonicalBusId(n.attrOr("busid", "")) == busId;
  if (isIt && n.child("gpu") != nullptr) return true;
  for (const graph::XmlNode& c : n.children)
    if (holdsGpu(c, busId)) return true;
  return false;
}

}  // namespace

bool parseCpuMap(const std::string& text, cpu_set_t* out) {
  CPU_ZERO(out);
  const size_t first = text.find_first_not_of(" \t\r\n");
  if (first == std::string::npos) return false;
  const std::string map = text.substr(first, text.find_last_not_of(" \t\r\n") + 1 - first);
  std::vector<std::string> words(1);
  for (char c : map) {
    if (c == ',') words.emplace_back();
    else words.back() += c;
  }
  for (size_t w = 0; w < words.size(); ++w) {
    const std::string& word = words[words.size() - 1 - w];  // the last word holds CPUs 0-31
    if (word.empty() || word.size() > 8) return false;
    uint32_t bits = 0;
    for (char c : word) {
      const int d = hexDigit(c);
      if (d < 0) return false;
      bits = bits << 4 | (uint32_t)d;
    }
    for (int b = 0; b < 32; ++b) {
      const size_t cpu = 32 * w + b;
      if ((bits >> b & 1) && cpu < CPU_SETSIZE) CPU_SET(cpu, out);
    }
  }
  return true;
}

std::string formatCpuMap(const cpu_set_t& set) {
  int highest = -1;
  for (int cpu = 0; cpu < CPU_SETSIZE; ++cpu)
    if (CPU_ISSET(cpu, &set)) highest = cpu;
  if (highest < 0) return "0";
  std::string text;
  for (int w = highest / 32; w >= 0; --w) {
    uint32_t bits = 0;
    for (int b = 0; b < 32; ++b) bits |= (uint32_t)(CPU_ISSET(32 * w + b, &set) ? 1 : 0) << b;
    char word[12];
    snprintf(word, sizeof(word), "%08x", bits);
    if (!text.empty()) text += ',';
    text += word;
  }
  return text;
}

cpu_set_t creationCpus(const cpu_set_t& gpu, const cpu_set_t& allowed, bool ignoreAllowed) {
  cpu_set_t out = gpu;
  if (!ignoreAllowed) CPU_AND(&out, &gpu, &allowed);
  return out;
}

std::string gpuCpuMap(const graph::XmlNode& system, const std::string& busId) {
  const std::string want = graph::canonicalBusId(busId);
  for (const graph::XmlNode& cpu : system.children) {
    if (cpu.name == "cpu" && holdsGpu(cpu, want)) return cpu.attrOr("affinity", "");
  }
  return "";
}

ScopedCpuAffinity::ScopedCpuAffinity(const std::string& gpuMap, int rank) {
  if (gpuMap.empty()) return;
  cpu_set_t gpu;
  if (!parseCpuMap(gpuMap, &gpu)) {
    WEFT_INFO(log::kInit, "rank %d: the GPU's CPU map '%s' is not readable; CPU affinity left as it is", rank,
              gpuMap.c_str());
    return;
  }
  if (CPU_COUNT(&gpu) == 0) {
    WEFT_INFO(log::kInit, "rank %d: the GPU's NUMA node lists no CPUs (%s); CPU affinity left as it is", rank,
              gpuMap.c_str());
    return;
  }
  if (sched_getaffinity(0, sizeof(saved_), &saved_) != 0) {
    WEFT_INFO(log::kInit, "rank %d: could not read this thread's CPU mask (%s); CPU affinity left as it is", rank,
              strerror(errno));
    return;
  }
  const cpu_set_t want = creationCpus(gpu, saved_, kIgnoreCpuAffinity.get() != 0);
  if (CPU_COUNT(&want) == 0) {
    WEFT_INFO(log::kInit, "rank %d: none of the GPU's CPUs (%s) is in this thread's mask (%s); CPU affinity left as "
              "it is (NCCL_IGNORE_CPU_AFFINITY=1 takes the GPU's anyway)", rank, gpuMap.c_str(),
              formatCpuMap(saved_).c_str());
    return;
  }
  if (CPU_EQUAL(&want, &saved_)) return;
  if (sched_setaffinity(0, sizeof(want), &want) != 0) {
    WEFT_INFO(log::kInit, "rank %d: could not set CPU affinity to %s: %s", rank, formatCpuMap(want).c_str(),
              strerror(errno));
    return;
  }
  changed_ = true;
  WEFT_INFO(log::kInit, "rank %d: CPU affinity %s (the GPU's CPUs) while host memory is set up", rank,
            formatCpuMap(want).c_str());
}

ScopedCpuAffinity::~ScopedCpuAffinity() {
  if (changed_) (void)sched_setaffinity(0, sizeof(saved_), &saved_);
}

}  // namespace weft::core
