#include "bootstrap/limits.h"

#include "core/log.h"

namespace weft::bootstrap {

void RejectLog::reject(const std::string& from, const std::string& why) {
  ++count_;
  if (count_ <= kRejectWarnLimit) {
    WEFT_WARN("bootstrap: %s rejected a connection from %s: %s%s", endpoint_.c_str(), from.c_str(), why.c_str(),
              count_ == kRejectWarnLimit ? " (further rejections are logged at INFO level, subsystem BOOTSTRAP)" : "");
  } else {
    WEFT_INFO(log::kBootstrap, "bootstrap: %s rejected a connection from %s: %s", endpoint_.c_str(), from.c_str(),
              why.c_str());
  }
}

std::string formatRankList(const std::vector<int>& ranks, size_t maxItems) {
  std::string out;
  size_t items = 0, i = 0;
  while (i < ranks.size() && items < maxItems) {
    size_t j = i;
    while (j + 1 < ranks.size() && ranks[j + 1] == ranks[j] + 1) ++j;
    if (!out.empty()) out += ", ";
    out += std::to_string(ranks[i]);
    if (j > i) out += "-" + std::to_string(ranks[j]);
    ++items;
    i = j + 1;
  }
  if (i < ranks.size()) out += " and " + std::to_string(ranks.size() - i) + " more";
  return out;
}

}  // namespace weft::bootstrap
