// NVML through dlopen("libnvidia-ml.so.1"): the GPU facts topology detection needs (PCI bus id,
// compute capability, NVLinks and what is at their far end). The library loads without NVML; every
// query then reports ncclSystemError and detection estimates instead.
#pragma once

#include <string>
#include <vector>

#include "core/status.h"

namespace weft::runtime {

enum class NvLinkRemote { Gpu, NvSwitch, Cpu, Unknown };

// NVLinks of one GPU toward one remote device, counted.
struct NvmlLink {
  std::string remoteBusId;  // as NVML gives it ("00000000:07:00.0", "FFFFFFFF:FF:FF.0" in VMs)
  NvLinkRemote remote = NvLinkRemote::Unknown;
  int count = 0;
};

struct NvmlGpu {
  int index = -1;
  std::string busId;
  int ccMajor = 0, ccMinor = 0;
  std::vector<NvmlLink> links;  // active NVLinks that support P2P, grouped by remote device
};

// Loads and initialises NVML once; false when it is not there (no driver, no GPU).
bool nvmlAvailable();

[[nodiscard]] Status nvmlGpuCount(int* count);
[[nodiscard]] Status nvmlGpuByIndex(int index, NvmlGpu* out);
[[nodiscard]] Status nvmlGpuByBusId(const std::string& busId, NvmlGpu* out);

}  // namespace weft::runtime
