// The CPUs a communicator is created on (core/cpu_affinity.h): CPU maps read and written as sysfs
// and NCCL write them, NCCL's choice of CPUs, the GPU's map found in a system description, and a
// thread's own mask given back.
#include <gtest/gtest.h>

#include <cstdlib>
#include <thread>

#include "core/cpu_affinity.h"
#include "graph/xml.h"

namespace weft::core {
namespace {

cpu_set_t cpus(std::initializer_list<int> list) {
  cpu_set_t s;
  CPU_ZERO(&s);
  for (int c : list) CPU_SET(c, &s);
  return s;
}

bool same(const cpu_set_t& a, const cpu_set_t& b) { return CPU_EQUAL(&a, &b); }

TEST(CpuAffinity, MapsReadAsSysfsWritesThem) {
  cpu_set_t s;
  ASSERT_TRUE(parseCpuMap("0000ffff", &s));
  EXPECT_TRUE(same(s, cpus({0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15})));
  // Most significant word first: CPUs 32-35 and 0.
  ASSERT_TRUE(parseCpuMap("0000000f,00000001\n", &s));
  EXPECT_TRUE(same(s, cpus({0, 32, 33, 34, 35})));
  ASSERT_TRUE(parseCpuMap("ffff0000,00000000,00000000,00000000,ffff0000,00000000", &s));
  EXPECT_EQ(CPU_COUNT(&s), 32);
  EXPECT_TRUE(CPU_ISSET(48, &s));
  EXPECT_TRUE(CPU_ISSET(176, &s));
  EXPECT_FALSE(CPU_ISSET(47, &s));
  ASSERT_TRUE(parseCpuMap("A", &s));  // short words and upper case as NCCL's files may have them
  EXPECT_TRUE(same(s, cpus({1, 3})));
  ASSERT_TRUE(parseCpuMap(" \t00000003\r\n", &s));  // whitespace around, as files end
  EXPECT_TRUE(same(s, cpus({0, 1})));
}

TEST(CpuAffinity, MalformedMapsAreRefused) {
  cpu_set_t s;
  for (const char* bad : {"", " \n", ",", "ff,,ff", "123456789", "xyz", "0x0f", "ff,gg", "f f", "ff, ff"}) {
    EXPECT_FALSE(parseCpuMap(bad, &s)) << "'" << bad << "'";
  }
}

TEST(CpuAffinity, MapsWrittenBackRoundTrip) {
  EXPECT_EQ(formatCpuMap(cpus({})), "0");
  EXPECT_EQ(formatCpuMap(cpus({0, 1, 2, 3})), "0000000f");
  EXPECT_EQ(formatCpuMap(cpus({0, 32, 33, 34, 35})), "0000000f,00000001");
  cpu_set_t back;
  const cpu_set_t wide = cpus({5, 64, 100, 1000});
  ASSERT_TRUE(parseCpuMap(formatCpuMap(wide), &back));
  EXPECT_TRUE(same(back, wide));
}

TEST(CpuAffinity, CreationCpusAreTheGpusWithinTheThreadsMask) {
  const cpu_set_t gpu = cpus({8, 9, 10, 11});
  const cpu_set_t allowed = cpus({0, 1, 10, 11});
  cpu_set_t got = creationCpus(gpu, allowed, false);
  EXPECT_TRUE(same(got, cpus({10, 11})));
  got = creationCpus(gpu, allowed, true);  // NCCL_IGNORE_CPU_AFFINITY=1
  EXPECT_TRUE(same(got, gpu));
  got = creationCpus(gpu, cpus({0, 1}), false);  // disjoint: empty, the thread stays as it is
  EXPECT_EQ(CPU_COUNT(&got), 0);
}

TEST(CpuAffinity, TheGpusMapComesFromTheCpuAboveIt) {
  graph::XmlNode system;
  const std::string text =
      "<system version=\"1\">"
      "<cpu numaid=\"0\" affinity=\"0000ffff\"><pci busid=\"0000:17:00.0\" class=\"0x060400\">"
      "<pci busid=\"0000:18:00.0\" class=\"0x030200\"><gpu dev=\"0\"/></pci></pci>"
      "<pci busid=\"0000:19:00.0\" class=\"0x020000\"><nic/></pci></cpu>"
      "<cpu numaid=\"1\" affinity=\"ffff0000\"><pci busid=\"0000:9a:00.0\" class=\"0x030200\"><gpu dev=\"1\"/></pci>"
      "</cpu></system>";
  ASSERT_EQ(graph::parseXml(text, &system), ncclSuccess);
  EXPECT_EQ(gpuCpuMap(system, "0000:18:00.0"), "0000ffff");
  EXPECT_EQ(gpuCpuMap(system, "00000000:9A:00.0"), "ffff0000") << "bus ids of any case and domain width";
  EXPECT_EQ(gpuCpuMap(system, "0000:19:00.0"), "") << "a NIC is not a GPU";
  EXPECT_EQ(gpuCpuMap(system, "0000:55:00.0"), "");
}

// In a thread of its own: the test's other threads keep their masks.
TEST(CpuAffinity, TheThreadRunsOnTheGpusCpusAndGetsItsMaskBack) {
  std::thread([] {
    cpu_set_t before;
    ASSERT_EQ(sched_getaffinity(0, sizeof(before), &before), 0);
    if (sched_setaffinity(0, sizeof(before), &before) != 0) GTEST_SKIP() << "this sandbox refuses sched_setaffinity";
    int first = -1;
    for (int c = 0; c < CPU_SETSIZE && first < 0; ++c)
      if (CPU_ISSET(c, &before)) first = c;
    ASSERT_GE(first, 0);
    {
      ScopedCpuAffinity scope(formatCpuMap(cpus({first})), 0);
      cpu_set_t inside;
      ASSERT_EQ(sched_getaffinity(0, sizeof(inside), &inside), 0);
      EXPECT_TRUE(same(inside, cpus({first})));
      EXPECT_EQ(scope.changed(), CPU_COUNT(&before) > 1);
    }
    cpu_set_t after;
    ASSERT_EQ(sched_getaffinity(0, sizeof(after), &after), 0);
    EXPECT_TRUE(same(after, before));
    // Nothing known, nothing unreadable and nothing in the mask: the thread is left alone.
    for (const std::string& map : {std::string(), std::string("zz"), formatCpuMap(cpus({CPU_SETSIZE - 1}))}) {
      if (CPU_ISSET(CPU_SETSIZE - 1, &before)) continue;
      ScopedCpuAffinity none(map, 0);
      EXPECT_FALSE(none.changed()) << map;
      ASSERT_EQ(sched_getaffinity(0, sizeof(after), &after), 0);
      EXPECT_TRUE(same(after, before)) << map;
    }
  }).join();
}

}  // namespace
}  // namespace weft::core
