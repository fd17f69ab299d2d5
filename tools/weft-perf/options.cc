#include "options.h"

#include <getopt.h>
#include <strings.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <set>
#include <sstream>

namespace weft::perf {
namespace {

std::vector<std::string> splitList(const std::string& text) {
  std::vector<std::string> items;
  std::stringstream ss(text);
  std::string item;
  while (std::getline(ss, item, ',')) {
    if (!item.empty()) items.push_back(item);
  }
  return items;
}

bool parseInt(const char* text, int minValue, int* out) {
  errno = 0;
  char* end = nullptr;
  long v = strtol(text, &end, 0);
  if (errno != 0 || end == text || *end != '\0' || v < minValue || v > 1 << 30) return false;
  *out = (int)v;
  return true;
}

bool addCollectives(const std::string& text, Options* out, std::string* error) {
  for (const std::string& name : splitList(text)) {
    if (!strcasecmp(name.c_str(), "all")) {
      for (const CollInfo& i : allCollectives()) out->colls.push_back(i.coll);
      continue;
    }
    Coll c;
    if (!parseCollective(name, &c)) {
      *error = "unknown collective '" + name + "'";
      return false;
    }
    out->colls.push_back(c);
  }
  return true;
}

}  // namespace

bool parseSize(const std::string& text, size_t* out) {
  if (text.empty()) return false;
  errno = 0;
  char* end = nullptr;
  double v = strtod(text.c_str(), &end);
  if (errno != 0 || end == text.c_str() || v < 0) return false;
  double mult = 1;
  switch (*end) {
    case '\0': break;
    case 'k': case 'K': mult = 1024.0; ++end; break;
    case 'm': case 'M': mult = 1024.0 * 1024; ++end; break;
    case 'g': case 'G': mult = 1024.0 * 1024 * 1024; ++end; break;
    case 't': case 'T': mult = 1024.0 * 1024 * 1024 * 1024; ++end; break;
    default: return false;
  }
  if (*end == 'B' || *end == 'b') ++end;
  if (*end != '\0') return false;
  *out = (size_t)(v * mult);
  return true;
}

void printUsage(const char* argv0) {
  std::printf(
      "usage: %s [COLLECTIVE[,COLLECTIVE...]] [options]\n"
      "Benchmarks NCCL collectives through the public API of whichever libnccl.so.2 is loaded\n"
      "(LD_LIBRARY_PATH / LD_PRELOAD choose it). Output follows nccl-tests.\n\n"
      "collectives: all_reduce all_gather reduce_scatter broadcast reduce sendrecv alltoall gather\n"
      "             scatter, or all (default all_reduce); also --op NAME\n"
      "  -b, --minbytes SIZE     smallest size column (default 8; K/M/G suffixes)\n"
      "  -e, --maxbytes SIZE     largest size (default 128M)\n"
      "  -f, --stepfactor F      multiply the size by F (default 2)\n"
      "  -i, --stepbytes SIZE    add SIZE instead (with -f 1)\n"
      "  -g, --ngpus N           GPUs driven by each thread (default 1)\n"
      "  -t, --nthreads N        threads per process, one communicator set each (default 1)\n"
      "  -p, --nprocs N          processes, forked by weft-perf; the unique id travels by pipe (default 1)\n"
      "  -n, --iters N           timed iterations (default 20)\n"
      "  -w, --warmup_iters N    untimed iterations first (default 5)\n"
      "  -c, --check 0|1         verify every output element against a host reference (default 1)\n"
      "  -o, --redop OP[,OP]     sum prod max min avg, or all (default sum)\n"
      "  -d, --datatype T[,T]    int8 uint8 int32 uint32 int64 uint64 half float double bfloat16\n"
      "                          f8e4m3 f8e5m2, or all (default float)\n"
      "  -r, --root R            root of broadcast/reduce/gather/scatter (default 0)\n"
      "  -G, --cudagraph K       capture the n iterations in a CUDA graph and launch it K times\n"
      "  -R, --local_register 0|1|2  buffers from ncclMemAlloc, 1: registered with ncclCommRegister,\n"
      "                          2: with ncclCommWindowRegister (as nccl-tests)\n"
      "      --init all|rank     one thread, one process: ncclCommInitAll (default) or a group of\n"
      "                          ncclCommInitRank\n"
      "      --json FILE         also write the results as JSON\n"
      "      --timeout SEC       give up (exit 124) when the run takes longer\n"
      "  -h, --help\n"
      "Ranks: processes x threads x GPUs; rank r uses device r modulo the visible device count.\n"
      "Time: CUDA events around the timed loop on each rank, averaged over iterations and ranks.\n",
      argv0);
}

bool parseOptions(int argc, char** argv, Options* out, std::string* error) {
  Options o;
  enum { kOpt = 1000, kJson, kInit, kTimeout };
  static const option longOptions[] = {
      {"minbytes", required_argument, nullptr, 'b'},   {"maxbytes", required_argument, nullptr, 'e'},
      {"stepfactor", required_argument, nullptr, 'f'}, {"stepbytes", required_argument, nullptr, 'i'},
      {"ngpus", required_argument, nullptr, 'g'},      {"nthreads", required_argument, nullptr, 't'},
      {"nprocs", required_argument, nullptr, 'p'},     {"iters", required_argument, nullptr, 'n'},
      {"warmup_iters", required_argument, nullptr, 'w'}, {"check", required_argument, nullptr, 'c'},
      {"redop", required_argument, nullptr, 'o'},      {"datatype", required_argument, nullptr, 'd'},
      {"root", required_argument, nullptr, 'r'},       {"cudagraph", required_argument, nullptr, 'G'},
      {"local_register", required_argument, nullptr, 'R'},
      {"op", required_argument, nullptr, kOpt},        {"json", required_argument, nullptr, kJson},
      {"init", required_argument, nullptr, kInit},     {"timeout", required_argument, nullptr, kTimeout},
      {"help", no_argument, nullptr, 'h'},             {nullptr, 0, nullptr, 0}};
  optind = 0;  // 0, not 1: glibc then also resets its internal scanning state
  opterr = 0;
  int c;
  bool explicitFactor = false, explicitStep = false;
  while ((c = getopt_long(argc, argv, "-:b:e:f:i:g:t:p:n:w:c:o:d:r:G:R:h", longOptions, nullptr)) != -1) {
    const std::string arg = optarg ? optarg : "";
    bool ok = true;
    switch (c) {
      case 'b': ok = parseSize(arg, &o.minBytes); break;
      case 'e': ok = parseSize(arg, &o.maxBytes); break;
      case 'i': ok = parseSize(arg, &o.stepBytes); explicitStep = true; break;
      case 'f': {
        char* end = nullptr;
        o.stepFactor = strtod(arg.c_str(), &end);
        ok = end != arg.c_str() && *end == '\0' && o.stepFactor >= 1.0;
        explicitFactor = true;
        break;
      }
      case 'g': ok = parseInt(arg.c_str(), 1, &o.gpusPerThread); break;
      case 't': ok = parseInt(arg.c_str(), 1, &o.threads); break;
      case 'p': ok = parseInt(arg.c_str(), 1, &o.processes); break;
      case 'n': ok = parseInt(arg.c_str(), 1, &o.iters); break;
      case 'w': ok = parseInt(arg.c_str(), 0, &o.warmup); break;
      case 'c': ok = parseInt(arg.c_str(), 0, &o.check) && o.check <= 1; break;
      case 'r': ok = parseInt(arg.c_str(), 0, &o.root); break;
      case 'G': ok = parseInt(arg.c_str(), 0, &o.graphLaunches); break;
      case 'R': ok = parseInt(arg.c_str(), 0, &o.localRegister) && o.localRegister <= 2; break;
      case 'o': {
        o.ops.clear();
        for (const std::string& name : splitList(arg)) {
          if (!strcasecmp(name.c_str(), "all")) {
            o.ops = {ncclSum, ncclProd, ncclMax, ncclMin, ncclAvg};
            continue;
          }
          ncclRedOp_t op;
          if (!parseOp(name, &op)) {
            *error = "unknown reduction '" + name + "'";
            return false;
          }
          o.ops.push_back(op);
        }
        ok = !o.ops.empty();
        break;
      }
      case 'd': {
        o.types.clear();
        for (const std::string& name : splitList(arg)) {
          if (!strcasecmp(name.c_str(), "all")) {
            o.types = {ncclInt8, ncclUint8, ncclInt32, ncclUint32, ncclInt64, ncclUint64, ncclFloat16,
                       ncclFloat32, ncclFloat64, ncclBfloat16, ncclFloat8e4m3, ncclFloat8e5m2};
            continue;
          }
          ncclDataType_t t;
          if (!parseType(name, &t)) {
            *error = "unknown datatype '" + name + "'";
            return false;
          }
          o.types.push_back(t);
        }
        ok = !o.types.empty();
        break;
      }
      case 1:  // a collective name given as a plain argument ("-" in optstring keeps them in order)
      case kOpt:
        if (!addCollectives(arg, &o, error)) return false;
        break;
      case kJson: o.jsonPath = arg; ok = !arg.empty(); break;
      case kInit:
        ok = arg == "all" || arg == "rank";
        o.initAll = arg == "all";
        break;
      case kTimeout: ok = parseInt(arg.c_str(), 0, &o.timeoutSec); break;
      case 'h': o.help = true; break;
      case ':':
        *error = std::string("option ") + argv[optind - 1] + " needs a value";
        return false;
      default:
        *error = std::string("unknown option ") + argv[optind - 1];
        return false;
    }
    if (!ok) {
      *error = std::string("bad value '") + arg + "' for " + argv[optind - 1 > 0 ? optind - 1 : 0];
      return false;
    }
  }
  for (int i = optind; i < argc; ++i) {  // after "--"
    if (!addCollectives(argv[i], &o, error)) return false;
  }
  if (o.colls.empty()) o.colls.push_back(Coll::AllReduce);
  // Drop repeats but keep the order given.
  std::vector<Coll> unique;
  for (Coll c : o.colls) {
    if (std::find(unique.begin(), unique.end(), c) == unique.end()) unique.push_back(c);
  }
  o.colls = unique;
  if (explicitStep && !explicitFactor) o.stepFactor = 1.0;  // -i alone means additive steps
  if (o.minBytes > o.maxBytes) {
    *error = "-b (minbytes) is larger than -e (maxbytes)";
    return false;
  }
  if (o.stepFactor <= 1.0 && o.stepBytes == 0 && o.minBytes != o.maxBytes) {
    *error = "with -f 1, give -i STEPBYTES";
    return false;
  }
  if (o.root >= o.nranks()) {
    *error = "root " + std::to_string(o.root) + " is not a rank (" + std::to_string(o.nranks()) + " ranks)";
    return false;
  }
  *out = o;
  return true;
}

std::vector<Case> enumerateCases(const Options& opts, int ncclVersion, std::vector<std::string>* skipped) {
  std::vector<Case> cases;
  const std::vector<size_t> sizes = sizeSeries(opts.minBytes, opts.maxBytes, opts.stepFactor, opts.stepBytes);
  std::set<std::string> notes;
  for (Coll coll : opts.colls) {
    const CollInfo& ci = info(coll);
    if (ncclVersion < ci.minVersion) {
      notes.insert(std::string(ci.name) + " (needs NCCL " + std::to_string(ci.minVersion) + ")");
      continue;
    }
    for (ncclDataType_t type : opts.types) {
      if (ncclVersion < minVersion(type)) {
        notes.insert(std::string(typeName(type)) + " (needs NCCL " + std::to_string(minVersion(type)) + ")");
        continue;
      }
      std::vector<ncclRedOp_t> ops = ci.reduces ? opts.ops : std::vector<ncclRedOp_t>{ncclSum};
      for (ncclRedOp_t op : ops) {
        if (ci.reduces && ncclVersion < minVersion(op)) {
          notes.insert(std::string(opName(op)) + " (needs NCCL " + std::to_string(minVersion(op)) + ")");
          continue;
        }
        for (size_t size : sizes) cases.push_back(Case{coll, type, op, ci.rooted ? opts.root : -1, size});
      }
    }
  }
  if (skipped) skipped->assign(notes.begin(), notes.end());
  return cases;
}

size_t maxOperandBytes(const std::vector<Case>& cases, int nranks) {
  size_t most = 0;
  for (const Case& c : cases) {
    const size_t ts = typeSize(c.type);
    const CaseShape s = shapeFor(c.coll, c.size, ts, nranks);
    most = std::max(most, std::max(s.sendElems, s.recvElems) * ts);
  }
  return most;
}

}  // namespace weft::perf
