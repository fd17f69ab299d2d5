#include "core/hang_dump.h"

#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cinttypes>
#include <cstdio>
#include <cstring>
#include <ctime>

#include "core/call_check.h"
#include "core/communicator.h"
#include "core/ledger_status.h"
#include "core/log.h"
#include "core/param.h"
#include "core/peer_info.h"

extern char** environ;

namespace weft::core {

namespace {

constexpr uint64_t kRecentCallsDumped = 8;

std::string localTime() {
  char text[64] = "";
  const time_t t = time(nullptr);
  struct tm parts {};
  if (localtime_r(&t, &parts) != nullptr) strftime(text, sizeof(text), "%Y-%m-%d %H:%M:%S %Z", &parts);
  return text;
}

std::vector<std::string> ncclSettings() {
  std::vector<std::string> out;
  for (char** e = environ; e != nullptr && *e != nullptr; ++e) {
    if (std::strncmp(*e, "NCCL_", 5) == 0) out.emplace_back(*e);
  }
  std::sort(out.begin(), out.end());
  return out;
}

HangFacts gatherFacts(ncclComm* comm, const std::string& reason) {
  HangFacts f;
  f.reason = reason;
  f.when = localTime();
  const PeerInfo& me = comm->peers[comm->rank];
  f.hostName = me.hostName;
  f.busId = me.busId;
  f.pid = getpid();
  f.rank = comm->rank;
  f.nRanks = comm->nRanks;
  f.cudaDev = comm->cudaDev;
  f.nChannels = comm->nChannels;
  f.commHash = comm->commHash;
  f.operations = comm->opCount();
  if (comm->ledger) {
    f.collectives = comm->ledger->collectives();
    if (const auto page = PeerLedger::open(comm->commHash, comm->rank)) {  // its own page, read as peers do
      const uint64_t first = f.collectives > kRecentCallsDumped ? f.collectives - kRecentCallsDumped + 1 : 1;
      for (uint64_t seq = first; seq <= f.collectives; ++seq) {
        CallSignature call;
        if (page->recent(seq, &call)) f.recentCalls.emplace_back(seq, call);
      }
    }
  }
  for (int c = 0; c < dev::kMaxChannels; ++c) {
    if (comm->replayStamps != nullptr && comm->replayStamps[c] != 0) f.replayChannels.push_back(c);
  }
  f.settings = ncclSettings();
  f.hostStatus = "(no page of this communicator on this host: no shared memory)\n";
  for (const CommLedgerView& view : scanLedgerPages()) {
    if (view.commHash == comm->commHash) f.hostStatus = describeCommStatus(view);
  }
  return f;
}

}  // namespace

std::string formatHangDump(const HangFacts& f) {
  char line[512];
  std::string text = "weft hang dump (written when NCCL_TIMEOUT ran out)\n";
  snprintf(line, sizeof(line), "when: %s\nwhere: %s, pid %" PRId64 ", CUDA device %d (%s)\n", f.when.c_str(),
           f.hostName.c_str(), f.pid, f.cudaDev, f.busId.c_str());
  text += line;
  snprintf(line, sizeof(line), "communicator %016" PRIx64 ": rank %d of %d, %d channels\n", f.commHash, f.rank,
           f.nRanks, f.nChannels);
  text += line;
  text += "reason: " + f.reason + "\n\nthis rank:\n";
  snprintf(line, sizeof(line), "  operations asked for: %" PRIu64 ", of which collectives: %" PRIu64 "\n",
           f.operations, f.collectives);
  text += line;
  for (const auto& [seq, call] : f.recentCalls) text += "  collective #" + std::to_string(seq) + ": " + describeCall(call) + "\n";
  if (f.replayChannels.empty()) {
    text += "  no kernel of a CUDA graph replay was running\n";
  } else {
    text += "  a CUDA graph replay's kernel was still running on channel" +
            std::string(f.replayChannels.size() == 1 ? "" : "s");
    // Runs of consecutive channels as "a-b": a kernel usually holds every channel of the communicator.
    const std::vector<int>& ch = f.replayChannels;
    for (size_t i = 0, j; i < ch.size(); i = j) {
      for (j = i + 1; j < ch.size() && ch[j] == ch[j - 1] + 1;) ++j;
      text += (i ? ", " : " ") + std::to_string(ch[i]) + (j - i > 1 ? "-" + std::to_string(ch[j - 1]) : "");
    }
    text += "\n";
  }
  text += "  settings:";
  if (f.settings.empty()) text += " (no NCCL_* variable set)";
  for (const std::string& s : f.settings) text += "\n    " + s;
  text += "\n\nthe ranks of this host (as weft-status prints them):\n" + f.hostStatus;
  return text;
}

std::string hangDumpPath(const std::string& dir, const HangFacts& f) {
  char name[96];
  snprintf(name, sizeof(name), "weft-hang-%016" PRIx64 "-r%d-p%" PRId64 ".txt", f.commHash, f.rank, f.pid);
  return dir + (!dir.empty() && dir.back() == '/' ? "" : "/") + name;
}

std::string writeHangDump(ncclComm* comm, const std::string& reason) {
  const std::string dir = param::getStr("NCCL_WEFT_HANG_DUMP_DIR", "/tmp");
  if (dir.empty() || dir == "none") return "";
  const HangFacts facts = gatherFacts(comm, reason);
  const std::string path = hangDumpPath(dir, facts);
  const std::string text = formatHangDump(facts);
  // O_NOFOLLOW: never through a link another user left in a shared directory.
  const int fd = open(path.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_NOFOLLOW | O_CLOEXEC, 0644);
  bool ok = fd >= 0;
  for (size_t done = 0; ok && done < text.size();) {
    const ssize_t n = write(fd, text.data() + done, text.size() - done);
    if (n < 0 && errno == EINTR) continue;
    ok = n > 0;
    done += ok ? (size_t)n : 0;
  }
  if (fd >= 0) close(fd);
  if (!ok) {
    WEFT_INFO(log::kInit, "rank %d: the hang dump %s could not be written (%s)", comm->rank, path.c_str(),
              strerror(errno));
    return "";
  }
  return path;
}

}  // namespace weft::core
