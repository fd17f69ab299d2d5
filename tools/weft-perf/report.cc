#include "report.h"

#include <algorithm>
#include <cinttypes>
#include <cmath>

namespace weft::perf {
namespace {

std::string jsonString(const std::string& s) {
  std::string out = "\"";
  for (char ch : s) {
    if (ch == '"' || ch == '\\') {
      out += '\\';
      out += ch;
    } else if ((unsigned char)ch < 0x20) {
      char buf[8];
      snprintf(buf, sizeof(buf), "\\u%04x", (unsigned char)ch);
      out += buf;
    } else {
      out += ch;
    }
  }
  return out + "\"";
}

std::string jsonNumber(double v) {
  if (!std::isfinite(v)) return "null";
  char buf[64];
  snprintf(buf, sizeof(buf), "%.6g", v);
  return buf;
}

std::string formatFactor(double f) {
  char buf[32];
  snprintf(buf, sizeof(buf), "%g", f);
  return buf;
}

}  // namespace

void combine(PartialResult* into, const PartialResult& from) {
  for (int p = 0; p < 2; ++p) {
    into->sumTimeUs[p] += from.sumTimeUs[p];
    into->maxTimeUs[p] = std::max(into->maxTimeUs[p], from.maxTimeUs[p]);
    if (into->wrong[p] < 0 || from.wrong[p] < 0) into->wrong[p] = -1;
    else into->wrong[p] += from.wrong[p];
    into->ran[p] = into->ranks == 0 ? from.ran[p] : (into->ran[p] && from.ran[p]);
  }
  into->ranks += from.ranks;
}

std::string formatTime(double us) {
  char buf[32];
  if (us >= 1e6) snprintf(buf, sizeof(buf), "%.0f", us);
  else if (us >= 1e4) snprintf(buf, sizeof(buf), "%.1f", us);
  else snprintf(buf, sizeof(buf), "%.2f", us);
  return buf;
}

Printer::Printer(const Options& opts, const std::vector<Case>& cases, LibraryInfo lib, FILE* out)
    : opts_(opts), cases_(cases), lib_(std::move(lib)), out_(out) {}

void Printer::printHeader(const std::vector<std::string>& skipped) {
  fprintf(out_, "# weft-perf (nccl-tests style)  header nccl.h %d  library %s  ncclGetVersion %d\n",
          NCCL_VERSION_CODE, lib_.path.c_str(), lib_.version);
  fprintf(out_, "# nranks %d = %d process(es) x %d thread(s) x %d GPU(s)  init %s\n", opts_.nranks(),
          opts_.processes, opts_.threads, opts_.gpusPerThread,
          opts_.useInitAll() ? "ncclCommInitAll" : "ncclCommInitRank");
  fprintf(out_, "# minBytes %zu maxBytes %zu step %s  warmup iters %d iters %d graph launches %d check %d\n",
          opts_.minBytes, opts_.maxBytes,
          opts_.stepFactor > 1 ? (formatFactor(opts_.stepFactor) + "(factor)").c_str()
                               : (std::to_string(opts_.stepBytes) + "(bytes)").c_str(),
          opts_.warmup, opts_.iters, opts_.graphLaunches, opts_.check);
  fprintf(out_, "# time: CUDA events around the timed loop of each rank; the average over ranks is shown\n");
  for (const std::string& s : skipped) fprintf(out_, "# skipped: %s\n", s.c_str());
  fflush(out_);
}

void Printer::printTableHeader(Coll coll) {
  fprintf(out_, "#\n# Collective: %s\n", info(coll).name);
  fprintf(out_, "#%73s%40s\n", "out-of-place", "in-place");
  fprintf(out_, "#%11s  %12s  %8s  %6s  %6s  %8s  %7s  %7s  %6s  %8s  %7s  %7s  %6s\n", "size", "count", "type",
          "redop", "root", "time", "algbw", "busbw", "#wrong", "time", "algbw", "busbw", "#wrong");
  fprintf(out_, "#%11s  %12s  %8s  %6s  %6s  %8s  %7s  %7s  %6s  %8s  %7s  %7s  %6s\n", "(B)", "(elements)", "", "",
          "", "(us)", "(GB/s)", "(GB/s)", "", "(us)", "(GB/s)", "(GB/s)", "");
}

bool Printer::submit(size_t caseIndex, const PartialResult& result) {
  if (caseIndex >= cases_.size()) return false;
  const Case& c = cases_[caseIndex];
  if (!haveColl_ || c.coll != lastColl_) {
    printTableHeader(c.coll);
    haveColl_ = true;
    lastColl_ = c.coll;
  }
  const int n = opts_.nranks();
  const CaseShape shape = shapeFor(c.coll, c.size, typeSize(c.type), n);
  const CollInfo& ci = info(c.coll);
  fprintf(out_, "%12zu  %12zu  %8s  %6s  %6d", shape.bytes, shape.count, typeName(c.type),
          ci.reduces ? opName(c.op) : "none", c.root);
  for (int p = 0; p < 2; ++p) {
    if (!result.ran[p] || result.ranks == 0) {
      fprintf(out_, "  %8s  %7s  %7s  %6s", "N/A", "N/A", "N/A", "N/A");
      continue;
    }
    const double t = result.sumTimeUs[p] / result.ranks;
    const double alg = algBw(shape.bytes, t);
    const std::string wrong = result.wrong[p] < 0 ? "N/A" : std::to_string(result.wrong[p]);
    fprintf(out_, "  %8s  %7.2f  %7.2f  %6s", formatTime(t).c_str(), alg, alg * busBwFactor(c.coll, n),
            wrong.c_str());
  }
  fprintf(out_, "\n");
  fflush(out_);
  rows_.push_back(Row{caseIndex, result});
  return true;
}

int Printer::finish() {
  double busSum = 0;
  int busCount = 0;
  int64_t wrong = 0;
  bool checked = false;
  for (const Row& row : rows_) {
    const Case& c = cases_[row.caseIndex];
    const CaseShape shape = shapeFor(c.coll, c.size, typeSize(c.type), opts_.nranks());
    for (int p = 0; p < 2; ++p) {
      if (!row.result.ran[p] || row.result.ranks == 0) continue;
      busSum += algBw(shape.bytes, row.result.sumTimeUs[p] / row.result.ranks) * busBwFactor(c.coll, opts_.nranks());
      ++busCount;
      if (row.result.wrong[p] >= 0) {
        wrong += row.result.wrong[p];
        checked = true;
      }
    }
  }
  fprintf(out_, "# Out of bounds values : %" PRId64 " %s\n", wrong, !checked ? "(not checked)" : wrong ? "FAILED" : "OK");
  fprintf(out_, "# Avg bus bandwidth    : %g\n#\n", busCount ? busSum / busCount : 0.0);
  fflush(out_);
  int rc = wrong > 0 ? 1 : 0;
  if (!opts_.jsonPath.empty() && !writeJson()) {
    fprintf(stderr, "weft-perf: cannot write %s\n", opts_.jsonPath.c_str());
    rc = 1;
  }
  return rc;
}

bool Printer::writeJson() const {
  FILE* f = fopen(opts_.jsonPath.c_str(), "w");
  if (f == nullptr) return false;
  const int n = opts_.nranks();
  fprintf(f, "{\n  \"tool\": \"weft-perf\",\n  \"header_version\": %d,\n", NCCL_VERSION_CODE);
  fprintf(f, "  \"library\": {\"path\": %s, \"nccl_version\": %d},\n", jsonString(lib_.path).c_str(), lib_.version);
  fprintf(f,
          "  \"config\": {\"nranks\": %d, \"processes\": %d, \"threads\": %d, \"gpus_per_thread\": %d, "
          "\"iters\": %d, \"warmup\": %d, \"graph_launches\": %d, \"check\": %d, \"init\": %s},\n",
          n, opts_.processes, opts_.threads, opts_.gpusPerThread, opts_.iters, opts_.warmup, opts_.graphLaunches,
          opts_.check, jsonString(opts_.useInitAll() ? "ncclCommInitAll" : "ncclCommInitRank").c_str());
  fprintf(f, "  \"results\": [");
  for (size_t i = 0; i < rows_.size(); ++i) {
    const Case& c = cases_[rows_[i].caseIndex];
    const PartialResult& r = rows_[i].result;
    const CaseShape shape = shapeFor(c.coll, c.size, typeSize(c.type), n);
    const CollInfo& ci = info(c.coll);
    fprintf(f, "%s\n    {\"collective\": %s, \"size\": %zu, \"count\": %zu, \"type\": %s, \"redop\": %s, \"root\": %d",
            i ? "," : "", jsonString(ci.name).c_str(), shape.bytes, shape.count, jsonString(typeName(c.type)).c_str(),
            jsonString(ci.reduces ? opName(c.op) : "none").c_str(), c.root);
    const char* keys[2] = {"out_of_place", "in_place"};
    for (int p = 0; p < 2; ++p) {
      if (!r.ran[p] || r.ranks == 0) {
        fprintf(f, ", \"%s\": null", keys[p]);
        continue;
      }
      const double t = r.sumTimeUs[p] / r.ranks;
      const double alg = algBw(shape.bytes, t);
      fprintf(f, ", \"%s\": {\"time_us\": %s, \"time_us_max\": %s, \"algbw\": %s, \"busbw\": %s, \"wrong\": %s}",
              keys[p], jsonNumber(t).c_str(), jsonNumber(r.maxTimeUs[p]).c_str(), jsonNumber(alg).c_str(),
              jsonNumber(alg * busBwFactor(c.coll, n)).c_str(),
              r.wrong[p] < 0 ? "null" : std::to_string(r.wrong[p]).c_str());
    }
    fprintf(f, "}");
  }
  fprintf(f, "\n  ]\n}\n");
  return fclose(f) == 0;
}

}  // namespace weft::perf
