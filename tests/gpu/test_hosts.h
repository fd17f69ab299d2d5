// WEFT_TEST_HOSTS=H: the ranks of a GPU test pretend to be on H hosts (consecutive ranks together)
// by setting NCCL_HOSTID, which weft and NCCL read at their first call, so that the pairs between
// "hosts" go through the network transport on one machine. Call it in each rank's process before
// its first NCCL call.
#pragma once

#include <cstdlib>
#include <string>

inline void poseAsHostOfTest(int rank, int nranks) {
  const char* hosts = std::getenv("WEFT_TEST_HOSTS");
  const int h = hosts != nullptr ? std::atoi(hosts) : 0;
  if (h <= 1 || nranks <= 0) return;
  setenv("NCCL_HOSTID", ("test-host-" + std::to_string(rank * h / nranks)).c_str(), 1);
}
