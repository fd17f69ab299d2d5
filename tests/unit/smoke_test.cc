#include <gtest/gtest.h>

#include "nccl.h"

TEST(Smoke, VersionIsNccl22809) {
  int v = 0;
  ASSERT_EQ(ncclGetVersion(&v), ncclSuccess);
  EXPECT_EQ(v, 22809);
}
