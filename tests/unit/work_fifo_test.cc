#include "enqueue/work_fifo.h"

#include <gtest/gtest.h>

#include <deque>

using weft::enqueue::WorkFifo;

TEST(WorkFifo, ReservesUntilFullThenWaitsForConsumption) {
  WorkFifo fifo(8);
  uint32_t first = 0;
  ASSERT_TRUE(fifo.reserve(5, &first));
  EXPECT_EQ(first, 0u);
  ASSERT_TRUE(fifo.reserve(3, &first));
  EXPECT_EQ(first, 5u);
  EXPECT_FALSE(fifo.reserve(1, &first));  // full
  EXPECT_TRUE(fifo.observeConsumed(5));
  EXPECT_EQ(fifo.freeSlots(), 5u);
  ASSERT_TRUE(fifo.reserve(5, &first));
  EXPECT_EQ(first, 8u);
  EXPECT_EQ(fifo.slot(first), 0u);
}

TEST(WorkFifo, IgnoresStaleAndImpossibleReports) {
  WorkFifo fifo(16);
  uint32_t first;
  ASSERT_TRUE(fifo.reserve(10, &first));
  EXPECT_TRUE(fifo.observeConsumed(6));
  EXPECT_FALSE(fifo.observeConsumed(4));   // older than known
  EXPECT_FALSE(fifo.observeConsumed(11));  // beyond what was produced
  EXPECT_EQ(fifo.consumed(), 6u);
}

// Drives many reserve/consume rounds across the 2^32 wrap and checks slots never overlap with
// items still in flight.
TEST(WorkFifo, StaysConsistentAcrossCounterWrap) {
  const uint32_t start = 0xFFFFFF00u;
  WorkFifo fifo(64, start);
  std::deque<std::pair<uint32_t, uint32_t>> inFlight;  // (first, n)
  uint32_t expectedNext = start;
  for (int round = 0; round < 2000; ++round) {
    uint32_t n = 1 + (uint32_t)(round * 7 % 23);
    uint32_t first;
    while (!fifo.reserve(n, &first)) {
      ASSERT_FALSE(inFlight.empty()) << "FIFO full with nothing in flight";
      auto [f, k] = inFlight.front();
      inFlight.pop_front();
      ASSERT_TRUE(fifo.observeConsumed(f + k));
    }
    EXPECT_EQ(first, expectedNext);
    expectedNext += n;
    // No slot of the new reservation may belong to an item still in flight.
    for (auto [f, k] : inFlight) {
      for (uint32_t i = 0; i < k; ++i) {
        for (uint32_t j = 0; j < n; ++j) ASSERT_NE(fifo.slot(f + i), fifo.slot(first + j));
      }
    }
    inFlight.emplace_back(first, n);
    ASSERT_LE(fifo.inFlight(), fifo.capacity());
  }
  EXPECT_LT(fifo.produced(), start) << "the test should have crossed the wrap";
}
