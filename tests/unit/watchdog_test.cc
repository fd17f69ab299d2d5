// The peer watchdog's pieces: reading /proc/<pid>/stat, the per-communicator decisions, and real
// child processes that run, stop, continue, die unreaped (zombies) and are reaped.
#include "core/watchdog.h"

#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <string>
#include <thread>

#include <gtest/gtest.h>

using namespace weft::core;
using Event = PeerWatch::Event;

namespace {

// A /proc/<pid>/stat line with the given name, state and start time (field 22).
std::string statLine(const std::string& name, char state, unsigned long long start) {
  std::string s = "4242 (" + name + ") " + state;
  for (int field = 4; field <= 21; ++field) s += " " + std::to_string(field);
  return s + " " + std::to_string(start) + " 23 24 25";
}

// Polls a real process until it reaches `want` (the kernel applies signals asynchronously).
ProcessState waitForState(pid_t pid, uint64_t start, ProcessState want) {
  ProcessState s = probeProcess(pid, start);
  for (int i = 0; i < 400 && s != want; ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
    s = probeProcess(pid, start);
  }
  return s;
}

}  // namespace

TEST(ProcStat, FieldsAreFoundAfterTheLastParenthesis) {
  EXPECT_EQ(processStartFromStat(statLine("python3", 'S', 98765)), 98765u);
  // A command name may contain spaces and ") " itself: the fields start after the LAST ")".
  EXPECT_EQ(processStartFromStat(statLine("evil) Z 1 (x", 'R', 555)), 555u);
  EXPECT_EQ(processStateFromStat(statLine("evil) Z 1 (x", 'R', 555), 555), ProcessState::Running);
  EXPECT_EQ(processStartFromStat("garbage"), 0u);
  EXPECT_EQ(processStartFromStat("1 (short) S 2 3"), 0u);
}

TEST(ProcStat, StatesMapToRunningStoppedGone) {
  EXPECT_EQ(processStateFromStat(statLine("a", 'R', 7), 7), ProcessState::Running);
  EXPECT_EQ(processStateFromStat(statLine("a", 'S', 7), 7), ProcessState::Running);
  EXPECT_EQ(processStateFromStat(statLine("a", 'D', 7), 7), ProcessState::Running);
  EXPECT_EQ(processStateFromStat(statLine("a", 'T', 7), 7), ProcessState::Stopped);
  EXPECT_EQ(processStateFromStat(statLine("a", 't', 7), 7), ProcessState::Stopped);
  EXPECT_EQ(processStateFromStat(statLine("a", 'Z', 7), 7), ProcessState::Gone);
  EXPECT_EQ(processStateFromStat(statLine("a", 'X', 7), 7), ProcessState::Gone);
  // Same pid, another start time: the peer is gone and its pid was given to a new process.
  EXPECT_EQ(processStateFromStat(statLine("a", 'S', 8), 7), ProcessState::Gone);
  EXPECT_EQ(processStateFromStat(statLine("a", 'S', 8), 0), ProcessState::Running);  // start unknown
  // Nothing readable (hidepid, no /proc): no verdict beyond what kill() said.
  EXPECT_EQ(processStateFromStat("", 7), ProcessState::Running);
}

TEST(PeerWatch, StoppedThenContinuedIsReportedOnceEach) {
  PeerWatch w({false, true, true});
  const auto R = ProcessState::Running, S = ProcessState::Stopped;
  EXPECT_TRUE(w.update({R, R, R}, 0.0, 10).empty());
  auto e = w.update({R, S, R}, 1.0, 10);
  ASSERT_EQ(e.size(), 1u);
  EXPECT_EQ(e[0].kind, Event::Stopped);
  EXPECT_EQ(e[0].rank, 1);
  EXPECT_TRUE(w.update({R, S, R}, 5.0, 10).empty());
  e = w.update({R, R, R}, 7.5, 10);
  ASSERT_EQ(e.size(), 1u);
  EXPECT_EQ(e[0].kind, Event::Continued);
  EXPECT_DOUBLE_EQ(e[0].seconds, 6.5);
  EXPECT_FALSE(w.over());
}

TEST(PeerWatch, StoppedLongerThanTheTimeoutEndsTheWatch) {
  PeerWatch w({false, true});
  const auto R = ProcessState::Running, S = ProcessState::Stopped;
  EXPECT_EQ(w.update({R, S}, 100.0, 3).size(), 1u);
  EXPECT_TRUE(w.update({R, S}, 102.9, 3).empty());
  auto e = w.update({R, S}, 103.5, 3);
  ASSERT_EQ(e.size(), 1u);
  EXPECT_EQ(e[0].kind, Event::StoppedTooLong);
  EXPECT_DOUBLE_EQ(e[0].seconds, 3.5);
  EXPECT_TRUE(w.over());
  EXPECT_TRUE(w.update({R, ProcessState::Gone}, 104.0, 3).empty());  // one verdict only
  // Timeout 0: a stopped peer is waited for forever.
  PeerWatch forever({false, true});
  forever.update({R, S}, 0.0, 0);
  EXPECT_TRUE(forever.update({R, S}, 1e6, 0).empty());
}

TEST(PeerWatch, GoneIsReportedForWatchedRanksOnly) {
  PeerWatch w({false, true, false, true});
  const auto R = ProcessState::Running, G = ProcessState::Gone;
  EXPECT_TRUE(w.update({G, R, G, R}, 0.0, 10).empty());  // ranks 0 and 2 are not watched (this process, another host)
  auto e = w.update({R, R, R, G}, 1.0, 10);
  ASSERT_EQ(e.size(), 1u);
  EXPECT_EQ(e[0].kind, Event::Gone);
  EXPECT_EQ(e[0].rank, 3);
  EXPECT_TRUE(w.over());
}

TEST(ProcStat, RealChildRunsStopsContinuesAndDies) {
  const uint64_t myStart = processStartFromStat(readProcStat("self"));
  ASSERT_NE(myStart, 0u) << "no /proc/self/stat";
  const pid_t child = fork();
  ASSERT_GE(child, 0);
  if (child == 0) {
    for (;;) pause();
  }
  std::this_thread::sleep_for(std::chrono::milliseconds(20));
  const uint64_t start = processStartFromStat(readProcStat(std::to_string(child)));
  EXPECT_NE(start, 0u);
  EXPECT_EQ(waitForState(child, start, ProcessState::Running), ProcessState::Running);
  kill(child, SIGSTOP);
  EXPECT_EQ(waitForState(child, start, ProcessState::Stopped), ProcessState::Stopped);
  kill(child, SIGCONT);
  EXPECT_EQ(waitForState(child, start, ProcessState::Running), ProcessState::Running);
  // A start time that is not the child's: its pid now names "another" process.
  EXPECT_EQ(probeProcess(child, start + 1), ProcessState::Gone);
  // Killed but not reaped: a zombie, which kill(pid, 0) alone still calls alive.
  kill(child, SIGKILL);
  EXPECT_EQ(waitForState(child, start, ProcessState::Gone), ProcessState::Gone);
  EXPECT_EQ(kill(child, 0), 0) << "the child should still be a zombie here";
  int status = 0;
  ASSERT_EQ(waitpid(child, &status, 0), child);
  EXPECT_EQ(probeProcess(child, start), ProcessState::Gone);
}

TEST(ProgressWatch, QuietUnfinishedWorkIsReportedThenFails) {
  ProgressWatch p;
  double quiet = 0;
  EXPECT_EQ(p.update(true, 5, 0.0, 2, 4, &quiet), ProgressWatch::kNothing);   // all done
  EXPECT_EQ(p.update(false, 6, 1.0, 2, 4, &quiet), ProgressWatch::kNothing);  // unfinished: the clock starts
  EXPECT_EQ(p.update(false, 6, 2.5, 2, 4, &quiet), ProgressWatch::kNothing);
  EXPECT_EQ(p.update(false, 6, 3.0, 2, 4, &quiet), ProgressWatch::kReport);
  EXPECT_DOUBLE_EQ(quiet, 2.0);
  EXPECT_EQ(p.update(false, 6, 4.0, 2, 4, &quiet), ProgressWatch::kNothing);  // reported once
  EXPECT_EQ(p.update(false, 6, 5.0, 2, 4, &quiet), ProgressWatch::kFail);
  EXPECT_EQ(p.update(false, 6, 9.0, 2, 4, &quiet), ProgressWatch::kNothing);  // one verdict only
}

TEST(ProgressWatch, NewCallsRestartTheClockAndFinishingEndsTheEpisode) {
  ProgressWatch p;
  double quiet = 0;
  // A busy loop: the last launch is never seen finished, but calls keep coming. Nothing to say.
  for (int i = 0; i < 100; ++i) EXPECT_EQ(p.update(false, 10 + i, i * 1.0, 2, 4, &quiet), ProgressWatch::kNothing);
  EXPECT_EQ(p.update(false, 109, 102.0, 2, 4, &quiet), ProgressWatch::kReport);
  EXPECT_EQ(p.update(true, 109, 102.5, 2, 4, &quiet), ProgressWatch::kFinishedAfterReport);
  EXPECT_EQ(p.update(true, 109, 103.0, 2, 4, &quiet), ProgressWatch::kNothing);
  // Report disabled (<= 0) and no timeout (0): silent forever.
  ProgressWatch silent;
  silent.update(false, 1, 0.0, 0, 0, &quiet);
  EXPECT_EQ(silent.update(false, 1, 1e6, 0, 0, &quiet), ProgressWatch::kNothing);
}

TEST(ReplayView, StampsTellRunningKernelsAndEveryStartMovesTheToken) {
  std::vector<uint64_t> stamps(8, 0);
  const ReplayView idle = viewReplays(stamps.data(), 8);
  EXPECT_FALSE(idle.running);
  EXPECT_EQ(idle.channels, 0);
  stamps[2] = 1001, stamps[5] = 1003;  // a replay's kernel on channels 2 and 5
  const ReplayView first = viewReplays(stamps.data(), 8);
  EXPECT_TRUE(first.running);
  EXPECT_EQ(first.channels, 2);
  EXPECT_EQ(viewReplays(stamps.data(), 8).token, first.token) << "nothing moved: the same token";
  stamps[2] = 0;  // channel 2's block is done, channel 5's still runs
  const ReplayView half = viewReplays(stamps.data(), 8);
  EXPECT_NE(half.token, first.token);
  EXPECT_EQ(half.channels, 1);
  stamps[2] = 2001, stamps[5] = 2003;  // the next replay, seen between two looks
  EXPECT_NE(viewReplays(stamps.data(), 8).token, first.token);
  std::vector<uint64_t> swapped(8, 0);  // the same start times on other channels
  swapped[5] = 1001, swapped[2] = 1003;
  EXPECT_NE(viewReplays(swapped.data(), 8).token, first.token);
}

TEST(ProgressWatch, ReplaysThatFollowEachOtherAreNotAHang) {
  // A graph loop: a replay's kernel is always running when looked at, but its stamps change.
  ProgressWatch p;
  double quiet = 0;
  for (int i = 0; i < 100; ++i) EXPECT_EQ(p.update(false, 7 ^ (uint64_t)(1000 + i), i * 1.0, 2, 4, &quiet), ProgressWatch::kNothing);
  // The replay that stops moving: the same stamps look after look.
  EXPECT_EQ(p.update(false, 7 ^ 5000, 101.0, 2, 4, &quiet), ProgressWatch::kNothing);
  EXPECT_EQ(p.update(false, 7 ^ 5000, 103.0, 2, 4, &quiet), ProgressWatch::kReport);
  EXPECT_EQ(p.update(false, 7 ^ 5000, 105.0, 2, 4, &quiet), ProgressWatch::kFail);
}

TEST(PeerExit, FinishedWorkEndsQuietlyUnfinishedWorkGetsTheGraceThenFails) {
  using V = PeerExitVerdict;
  EXPECT_EQ(judgePeerExit(GpuWork::Finished, 0.0, 1.0), V::Quiet);   // the end of a job
  EXPECT_EQ(judgePeerExit(GpuWork::Finished, 5.0, 1.0), V::Quiet);   // its last kernel ended late
  EXPECT_EQ(judgePeerExit(GpuWork::Running, 0.0, 1.0), V::Wait);     // it may not need the peer any more
  EXPECT_EQ(judgePeerExit(GpuWork::Running, 0.99, 1.0), V::Wait);
  EXPECT_EQ(judgePeerExit(GpuWork::Running, 1.0, 1.0), V::Fail);     // it waits for the dead peer
  EXPECT_EQ(judgePeerExit(GpuWork::Unknown, 0.5, 1.0), V::Wait);     // a graph replay may still run
  EXPECT_EQ(judgePeerExit(GpuWork::Unknown, 1.5, 1.0), V::Fail);
  EXPECT_EQ(judgePeerExit(GpuWork::Running, 0.0, 0.0), V::Fail);     // no grace: at once, as before
}
