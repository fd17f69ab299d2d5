// The CPUs a communicator is created on, as NCCL picks them: the creating thread runs on its GPU's
// CPUs (those of the GPU's NUMA node that the thread may use) while host memory is allocated and
// first touched, so that shared-memory connection segments and pinned buffers land on the NUMA
// node next to the GPU that reads and writes them, not wherever the thread happened to run. The
// thread's own mask comes back afterwards. NCCL_IGNORE_CPU_AFFINITY=1 takes the GPU's CPUs even
// outside the thread's mask (NCCL's meaning of it).
#pragma once

#include <sched.h>

#include <string>

namespace weft::graph { struct XmlNode; }

namespace weft::core {

// Pure: parses a CPU map as sysfs and NCCL's topology files write it: 32-bit hex words separated by
// commas, most significant first ("ffff0000,0000ffff"). False when malformed or empty; CPUs past
// CPU_SETSIZE are dropped.
bool parseCpuMap(const std::string& text, cpu_set_t* out);

// Pure: the same format back (as many words as the highest CPU needs; "0" when empty), for logs.
std::string formatCpuMap(const cpu_set_t& set);

// Pure: the CPUs to create a communicator on: the GPU's within `allowed`, or the GPU's alone when
// ignoreAllowed. Empty means: leave the thread as it is.
cpu_set_t creationCpus(const cpu_set_t& gpu, const cpu_set_t& allowed, bool ignoreAllowed);

// Pure: the "affinity" of the <cpu> element of a system description above the GPU with busId;
// empty when the GPU or the attribute is missing.
std::string gpuCpuMap(const graph::XmlNode& system, const std::string& busId);

// Runs the calling thread on creationCpus(gpuMap, its mask) for this object's life (nothing when
// gpuMap is empty or unreadable, or the result is empty or already the mask), then restores it.
class ScopedCpuAffinity {
 public:
  ScopedCpuAffinity(const std::string& gpuMap, int rank);
  ~ScopedCpuAffinity();
  ScopedCpuAffinity(const ScopedCpuAffinity&) = delete;
  ScopedCpuAffinity& operator=(const ScopedCpuAffinity&) = delete;
  bool changed() const { return changed_; }

 private:
  bool changed_ = false;
  cpu_set_t saved_;
};

}  // namespace weft::core
