// enqueue::GraphWorkPool over fake memory and fake graphs: items a live graph holds are never
// handed out again, a buffer no graph holds is reused from its start (capture-replay-destroy loops
// stay at one buffer), holds that cannot be tied keep their buffer, and graphs may outlive the pool.
#include "enqueue/graph_works.h"

#include <gtest/gtest.h>

#include <cstdlib>
#include <map>
#include <set>
#include <utility>
#include <vector>

namespace weft::enqueue {
namespace {

// The fake "graph" is the capturing stream's value: each tie is remembered under it, and
// destroying the graph runs its releases as CUDA would.
struct FakeGraphs {
  std::set<void*> live;  // buffers allocated and not freed
  int allocs = 0;
  int ties = 0;
  bool tieFails = false;
  std::map<runtime::Stream, std::vector<std::pair<runtime::HostFn, void*>>> holds;
  // Graphs a test leaves alive go at its end, as CUDA would destroy them with the context.
  ~FakeGraphs() {
    while (!holds.empty()) destroy(holds.begin()->first);
  }

  GraphWorkPool::Hooks hooks(bool canTie = true) {
    GraphWorkPool::Hooks h;
    h.alloc = [this](size_t bytes, void** host, void** devView) -> Status {
      *host = std::malloc(bytes);
      *devView = *host;  // the "device view" is the same memory here
      live.insert(*host);
      ++allocs;
      return ncclSuccess;
    };
    h.free = [this](void* host) {
      EXPECT_EQ(live.erase(host), 1u) << "freed a buffer the fake never made, or twice";
      std::free(host);
    };
    if (canTie) {
      h.tie = [this](runtime::Stream s, runtime::HostFn release, void* arg) -> Status {
        if (tieFails) return ncclUnhandledCudaError;
        ++ties;
        holds[s].emplace_back(release, arg);
        return ncclSuccess;
      };
    }
    return h;
  }
  void destroy(runtime::Stream graph) {
    for (auto& [fn, arg] : holds[graph]) fn(arg);
    holds.erase(graph);
  }
};

runtime::Stream graph(uintptr_t n) { return (runtime::Stream)n; }

struct Taken {
  dev::DevWork* host = nullptr;
  const dev::DevWork* devView = nullptr;
};

Taken take(GraphWorkPool& pool, uint32_t n, uintptr_t g) {
  Taken t;
  EXPECT_EQ(pool.take(n, graph(g), g, &t.host, &t.devView), ncclSuccess);
  return t;
}

bool overlaps(const Taken& a, uint32_t na, const Taken& b, uint32_t nb) {
  return a.host < b.host + nb && b.host < a.host + na;
}

TEST(GraphWorkPool, ItemsOfALiveGraphAreNeverHandedOutAgain) {
  FakeGraphs f;
  GraphWorkPool pool(f.hooks(), 64);
  ASSERT_EQ(pool.reserve(), ncclSuccess);
  EXPECT_EQ(f.allocs, 1);
  const Taken a = take(pool, 40, 1);
  const Taken b = take(pool, 40, 2);  // does not fit behind a: another buffer
  EXPECT_FALSE(overlaps(a, 40, b, 40));
  EXPECT_EQ(pool.bufferCount(), 2u);
  f.destroy(graph(2));
  const Taken c = take(pool, 40, 3);  // b's buffer is free again; a's is not
  EXPECT_FALSE(overlaps(a, 40, c, 40));
  EXPECT_EQ(c.host, b.host);
  EXPECT_EQ(pool.bufferCount(), 2u);
  EXPECT_EQ(pool.heldCount(), 2u);
}

TEST(GraphWorkPool, CaptureReplayDestroyLoopsStayAtOneBuffer) {
  FakeGraphs f;
  GraphWorkPool pool(f.hooks(), 64);
  ASSERT_EQ(pool.reserve(), ncclSuccess);
  dev::DevWork* first = nullptr;
  for (uintptr_t g = 1; g <= 1000; ++g) {
    const Taken t = take(pool, 50, g);
    if (g == 1) first = t.host;
    EXPECT_EQ(t.host, first) << "capture " << g;
    f.destroy(graph(g));
  }
  EXPECT_EQ(pool.bufferCount(), 1u);
  EXPECT_EQ(pool.heldCount(), 0u);
  EXPECT_EQ(f.ties, 1000);
}

TEST(GraphWorkPool, LaunchesOfOneGraphShareOneTiePerBuffer) {
  FakeGraphs f;
  GraphWorkPool pool(f.hooks(), 64);
  const Taken a = take(pool, 20, 7);
  const Taken b = take(pool, 20, 7);
  const Taken c = take(pool, 20, 7);
  EXPECT_EQ(b.host, a.host + 20);
  EXPECT_EQ(c.host, b.host + 20);
  EXPECT_EQ(f.ties, 1);
  const Taken d = take(pool, 20, 7);  // the next buffer: one more tie
  EXPECT_EQ(f.ties, 2);
  EXPECT_EQ(pool.bufferCount(), 2u);
  f.destroy(graph(7));
  EXPECT_EQ(pool.heldCount(), 0u);
  const Taken e = take(pool, 64, 8);  // a whole idle buffer
  EXPECT_TRUE(e.host == a.host || e.host == d.host);
  EXPECT_EQ(pool.bufferCount(), 2u);
}

TEST(GraphWorkPool, LaunchesBiggerThanABufferGetOneOfTheirSize) {
  FakeGraphs f;
  GraphWorkPool pool(f.hooks(), 64);
  ASSERT_EQ(pool.reserve(), ncclSuccess);
  const Taken big = take(pool, 1000, 1);
  ASSERT_NE(big.host, nullptr);
  EXPECT_EQ(pool.bufferCount(), 2u);
  big.host[999] = dev::DevWork{};  // within the fake allocation (ASan would tell)
  f.destroy(graph(1));
  take(pool, 1000, 2);
  EXPECT_EQ(pool.bufferCount(), 2u);  // the big buffer is reused
}

TEST(GraphWorkPool, UntiedHoldsKeepTheirBuffer) {
  for (bool failing : {false, true}) {
    FakeGraphs f;
    GraphWorkPool pool(f.hooks(/*canTie=*/failing), 64);
    f.tieFails = failing;
    dev::DevWork* host = nullptr;
    const dev::DevWork* devView = nullptr;
    const Status s = pool.take(40, graph(1), 1, &host, &devView);
    EXPECT_EQ(s, failing ? ncclUnhandledCudaError : ncclSuccess);
    f.destroy(graph(1));  // nothing tied: nothing released
    EXPECT_EQ(pool.heldCount(), 1u);
    f.tieFails = false;
    // Behind the untied items (or, where the tie failed and nothing was handed out, in their
    // place), never over them once more than the buffer's rest is needed.
    const Taken t = take(pool, 40, 2);
    EXPECT_EQ(pool.bufferCount(), failing ? 1u : 2u);
    f.destroy(graph(2));
    const Taken u = take(pool, 64, 3);
    EXPECT_FALSE(overlaps(t, 40, u, 64)) << "failing tie: " << failing;
    EXPECT_EQ(pool.bufferCount(), failing ? 2u : 3u);
  }
}

TEST(GraphWorkPool, GraphsMayOutliveThePool) {
  FakeGraphs f;
  {
    GraphWorkPool pool(f.hooks(), 64);
    take(pool, 10, 1);
    take(pool, 60, 2);
  }
  EXPECT_TRUE(f.live.empty());  // the memory went with the pool
  f.destroy(graph(2));          // the holds outlive it (ASan/valgrind: no use after free, no leak)
  f.destroy(graph(1));
}

}  // namespace
}  // namespace weft::enqueue
