#include "core/ledger_status.h"

#include <dirent.h>
#include <signal.h>
#include <sys/mman.h>

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <chrono>
#include <cinttypes>
#include <cstdio>
#include <cstdlib>
#include <map>

#include "core/call_check.h"
#include "util/format.h"

namespace weft::core {

namespace {

RankLedgerView viewOf(const PeerLedger& page, int rank) {
  RankLedgerView v;
  v.rank = rank;
  v.pid = page.pid();
  v.alive = v.pid > 0 && !(kill((pid_t)v.pid, 0) != 0 && errno == ESRCH);
  v.collectives = page.collectives();
  v.haveLatest = v.collectives > 0 && page.recent(v.collectives, &v.latest);
  for (uint64_t i = 0; i < page.hostRanks(); ++i) {
    v.sends.push_back(page.p2pOps((int)i, P2pDirection::kSend));
    v.receives.push_back(page.p2pOps((int)i, P2pDirection::kRecv));
  }
  page.finding(&v.findingSeq, &v.finding);
  v.memory = page.memory();
  int64_t sinceMs = 0;
  v.replayChannels = page.replayChannels(&sinceMs);
  const int64_t nowMs = std::chrono::duration_cast<std::chrono::milliseconds>(
                            std::chrono::steady_clock::now().time_since_epoch()).count();  // the watchdog's clock
  v.replaySeconds = std::max<int64_t>(0, nowMs - sinceMs) / 1000.0;
  return v;
}

std::string rankText(const RankLedgerView& r) {
  char text[96];
  snprintf(text, sizeof(text), "rank %d (pid %" PRId64 "%s)", r.rank, r.pid, r.alive ? "" : ", exited");
  return text;
}

// "1 collective", "2 collectives"
std::string counted(int64_t n, const char* word) {
  return std::to_string(n) + " " + word + (n == 1 ? "" : "s");
}

}  // namespace

bool parseLedgerPageName(const std::string& name, uint64_t* commHash, int* rank) {
  if (name.size() < 5 + 16 + 2 || name.compare(0, 5, "weft-") != 0 || name[21] != '-') return false;
  for (size_t i = 5; i < 21; ++i) {
    if (!isxdigit((unsigned char)name[i]) || isupper((unsigned char)name[i])) return false;
  }
  const std::string digits = name.substr(22);
  if (digits.empty() || digits.size() > 9 || !std::all_of(digits.begin(), digits.end(), ::isdigit)) return false;
  *commHash = std::strtoull(name.substr(5, 16).c_str(), nullptr, 16);
  *rank = std::atoi(digits.c_str());
  return true;
}

std::vector<CommLedgerView> scanLedgerPages() {
  std::map<uint64_t, CommLedgerView> comms;
  DIR* dir = opendir("/dev/shm");
  if (dir == nullptr) return {};
  while (const dirent* e = readdir(dir)) {
    uint64_t hash = 0;
    int rank = -1;
    if (!parseLedgerPageName(e->d_name, &hash, &rank)) continue;
    const auto page = PeerLedger::open(hash, rank);
    if (!page) continue;  // not a page of this build's layout, or not whole yet
    CommLedgerView& c = comms[hash];
    c.commHash = hash;
    c.hostRanks = page->hostRanks();
    c.ranks.push_back(viewOf(*page, rank));
  }
  closedir(dir);
  std::vector<CommLedgerView> out;
  for (auto& [hash, c] : comms) {
    std::sort(c.ranks.begin(), c.ranks.end(), [](const auto& a, const auto& b) { return a.rank < b.rank; });
    out.push_back(std::move(c));
  }
  return out;
}

int removeExitedPages(const CommLedgerView& comm) {
  int removed = 0;
  for (const RankLedgerView& r : comm.ranks) {
    if (!r.alive && shm_unlink(OpLedger::pageName(comm.commHash, r.rank).c_str()) == 0) ++removed;
  }
  return removed;
}

std::string describeCommStatus(const CommLedgerView& comm) {
  char line[512];
  std::string text;
  snprintf(line, sizeof(line), "communicator %016" PRIx64 ": %zu of its ranks' pages on this host\n", comm.commHash,
           comm.ranks.size());
  text += line;
  uint64_t most = 0;
  const RankLedgerView* ahead = nullptr;
  for (const RankLedgerView& r : comm.ranks) {
    std::string latest = r.haveLatest ? ", the latest " + describeCall(r.latest) : "";
    if (r.replayChannels > 0) {
      char replay[128];
      snprintf(replay, sizeof(replay), "; a graph replay's kernel runs on %d channel%s, unchanged for %.0f s",
               r.replayChannels, r.replayChannels == 1 ? "" : "s", r.replaySeconds);
      latest += replay;
    }
    const LedgerMemory& m = r.memory;
    if (m.gpu > 0 || m.pinnedHost > 0 || m.sharedHost > 0) {
      latest += util::formatText("; holds GPU %.2f MiB, pinned host %.2f MiB, /dev/shm %.2f MiB",
                                 (double)m.gpu / (1 << 20), (double)m.pinnedHost / (1 << 20),
                                 (double)m.sharedHost / (1 << 20));
    }
    text += "  " + rankText(r) + ": " + counted((int64_t)r.collectives, "collective") + latest + "\n";
    if (r.collectives > most) most = r.collectives, ahead = &r;
  }
  // Collectives: the ranks behind the most advanced one have not made the calls it waits in.
  std::vector<int> behind, level;
  for (const RankLedgerView& r : comm.ranks) (r.collectives < most ? behind : level).push_back(r.rank);
  if (!behind.empty()) {
    // Built as a string: the lists of ranks have no bound a line buffer could keep.
    const std::string call = ahead->haveLatest ? " (" + describeCall(ahead->latest) + ")" : "";
    text += "  behind: " + rankListText(behind) + (behind.size() == 1 ? " has" : " have") + " not made collective #" +
            std::to_string(most) + call + ", which " + rankListText(level) + (level.size() == 1 ? " has" : " have") +
            " made\n";
  }
  // Graph replays are not calls: a rank that runs none while others wait in one never launched it.
  std::vector<int> replaying, idle;
  for (const RankLedgerView& r : comm.ranks) (r.replayChannels > 0 ? replaying : idle).push_back(r.rank);
  if (!replaying.empty() && !idle.empty()) {
    text += "  graph replays: " + rankListText(idle) + (idle.size() == 1 ? " runs" : " run") + " none while " +
            rankListText(replaying) + (replaying.size() == 1 ? " runs" : " run") +
            " one: the replay was not launched there (skipped, or stuck before it)\n";
  }
  // Sends and receives between host mates: host index i is the i-th rank of the host in rank order,
  // which the pages can tell only when every host rank's page is here.
  if (comm.ranks.size() == comm.hostRanks) {
    for (size_t i = 0; i < comm.ranks.size(); ++i) {
      for (size_t j = 0; j < comm.ranks.size(); ++j) {
        const RankLedgerView &a = comm.ranks[i], &b = comm.ranks[j];
        if (i == j || j >= a.sends.size() || i >= b.receives.size() || a.sends[j] == b.receives[i]) continue;
        snprintf(line, sizeof(line), "  point-to-point: rank %d has posted %s to rank %d, which has posted %s from it: "
                 "%s\n", a.rank, counted(a.sends[j], "send").c_str(), b.rank, counted(b.receives[i], "receive").c_str(),
                 a.sends[j] < b.receives[i] ? "a send is missing" : "a receive is missing");
        text += line;
      }
    }
  } else {
    snprintf(line, sizeof(line), "  (the pages say %" PRIu64 " ranks on this host: sends and receives are not "
             "compared with some missing)\n", comm.hostRanks);
    text += line;
  }
  for (const RankLedgerView& r : comm.ranks) {
    if (r.findingSeq == 0) continue;
    text += "  rank " + std::to_string(r.rank) + " found: " + r.finding + "\n";
  }
  if (behind.empty() && comm.ranks.size() == comm.hostRanks && text.find("point-to-point") == std::string::npos &&
      text.find("graph replays:") == std::string::npos) {
    text += "  every rank of this host has made the same calls\n";
  }
  return text;
}

}  // namespace weft::core
