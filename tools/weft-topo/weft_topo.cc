// weft-topo: what weft sees of a machine and what it would do with it.
//
//   weft-topo                         detect this machine (NVML + sysfs), print everything
//   weft-topo --xml dgx_h100.xml      the same for a topology file (no GPU needed)
//   weft-topo --xml m.xml --nodes 4   four such machines joined by their NICs
//   weft-topo --dump-xml out.xml      write the topology in NCCL's XML format ("-": stdout)
//   weft-topo --dot m.dot             write a Graphviz picture (dot -Tsvg m.dot > m.svg)
//
// Settings come from the environment as in the library (NCCL_P2P_LEVEL, NCCL_SHM_DISABLE, ...);
// the flags below override them.
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>

#include "graph/channels.h"
#include "graph/detect.h"
#include "graph/paths.h"
#include "graph/topo_options.h"
#include "graph/topo_print.h"
#include "graph/topo_xml.h"

using namespace weft::graph;
using weft::isError;

namespace {

void usage() {
  fprintf(stderr,
          "usage: weft-topo [--xml FILE] [--nodes N] [--dump-xml FILE|-] [--dot FILE] [--sysfs DIR]\n"
          "                 [--p2p-level LEVEL] [--p2p-disable] [--shm-disable] [--pxn-disable]\n"
          "                 [--net-gdr-level LEVEL] [--cross-nic 0|1|2] [--min-channels N] [--max-channels N]\n"
          "                 [--no-topology] [--no-paths] [--no-transports] [--no-search]\n"
          "Without --xml the topology of this machine is detected (needs the NVIDIA driver).\n");
}

bool writeFile(const std::string& path, const std::string& text) {
  if (path == "-") {
    fputs(text.c_str(), stdout);
    return true;
  }
  FILE* f = fopen(path.c_str(), "w");
  if (!f) {
    fprintf(stderr, "weft-topo: cannot write %s: %s\n", path.c_str(), strerror(errno));
    return false;
  }
  bool ok = fwrite(text.data(), 1, text.size(), f) == text.size();
  ok &= fclose(f) == 0;
  if (!ok) fprintf(stderr, "weft-topo: writing %s failed\n", path.c_str());
  return ok;
}

uint64_t hostHash() {
  char name[256] = "";
  gethostname(name, sizeof(name) - 1);
  uint64_t h = 0xcbf29ce484222325ULL;  // FNV-1a
  for (const char* p = name; *p; p++) h = (h ^ (uint8_t)*p) * 0x100000001b3ULL;
  return h;
}

bool detect(const std::string& sysfs, Topology* topo) {
  DetectInputs in;
  in.sysfsRoot = sysfs;
  in.hostHash = hostHash();
  if (isError(listNvmlGpus(&in.gpus)) || in.gpus.empty()) {
    fprintf(stderr, "weft-topo: no GPU found through NVML; run on a GPU machine or give --xml FILE\n");
    return false;
  }
  if (isError(collectNvmlFacts(&in))) return false;
  in.nets = sysfsNetDevices(sysfs);
  return !isError(detectTopology(in, topo));
}

}  // namespace

int main(int argc, char** argv) {
  std::string xmlPath, dumpPath, dotPath, sysfs = "/sys";
  int nodes = 1;
  bool showTopo = true, showPaths = true, showTransports = true, showSearch = true;
  TopoOptions opts = readTopoOptions();
  for (int i = 1; i < argc; i++) {
    std::string a = argv[i];
    auto next = [&](const char* what) -> std::string {
      if (i + 1 >= argc) {
        fprintf(stderr, "weft-topo: %s needs %s\n", a.c_str(), what);
        exit(2);
      }
      return argv[++i];
    };
    auto level = [&](const std::string& text) {
      PathType t;
      if (!parsePathLevel(text, &t)) {
        fprintf(stderr, "weft-topo: %s is not a path level (LOC NVL NVB C2C PIX PXB P2C PXN PHB SYS or 0-5)\n",
                text.c_str());
        exit(2);
      }
      return t;
    };
    if (a == "--xml") xmlPath = next("a file");
    else if (a == "--nodes") nodes = atoi(next("a count").c_str());
    else if (a == "--dump-xml") dumpPath = next("a file");
    else if (a == "--dot") dotPath = next("a file");
    else if (a == "--sysfs") sysfs = next("a directory");
    else if (a == "--p2p-level") opts.p2pLevel = level(next("a level"));
    else if (a == "--p2p-disable") opts.p2pLevel = PathType::Loc;
    else if (a == "--shm-disable") opts.shmDisable = true;
    else if (a == "--pxn-disable") opts.pxnDisable = true;
    else if (a == "--net-gdr-level") opts.netGdrLevel = level(next("a level"));
    else if (a == "--cross-nic") opts.crossNic = atoi(next("0, 1 or 2").c_str());
    else if (a == "--min-channels") opts.minChannels = atoi(next("a count").c_str());
    else if (a == "--max-channels") opts.maxChannels = atoi(next("a count").c_str());
    else if (a == "--no-topology") showTopo = false;
    else if (a == "--no-paths") showPaths = false;
    else if (a == "--no-transports") showTransports = false;
    else if (a == "--no-search") showSearch = false;
    else if (a == "-h" || a == "--help") {
      usage();
      return 0;
    } else {
      fprintf(stderr, "weft-topo: unknown option %s\n", a.c_str());
      usage();
      return 2;
    }
  }
  if (nodes < 1) nodes = 1;

  Topology topo;
  if (!xmlPath.empty()) {
    if (isError(loadTopologyXml(xmlPath, &topo))) {
      fprintf(stderr, "weft-topo: cannot use %s (NCCL_DEBUG=WARN shows why)\n", xmlPath.c_str());
      return 1;
    }
  } else if (!detect(sysfs, &topo)) {
    return 1;
  }
  if (nodes > 1) {
    Topology many;
    if (isError(buildTopology(replicateHosts(topo.system, nodes), &many))) return 1;
    topo = std::move(many);
  }
  if (!dumpPath.empty() && !writeFile(dumpPath, dumpTopologyXml(topo))) return 1;
  if (dumpPath == "-") return 0;

  computePaths(&topo, opts);
  if (showTopo) printf("%s\n", describeTopology(topo).c_str());
  if (showPaths) printf("%s\n", describePaths(topo).c_str());
  if (showTransports) printf("%s\n", describeTransports(topo, opts).c_str());
  if (showSearch) {
    auto t0 = std::chrono::steady_clock::now();
    ChannelPlan plan = planChannels(topo, opts);
    double ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
    printf("%s", describePlan(topo, plan).c_str());
    printf("Search time: %.2f ms\n", ms);
    printf("Algorithm/protocol per message size: the tuning model is not built yet.\n");
  }
  if (!dotPath.empty() && !writeFile(dotPath, topologyDot(topo))) return 1;
  return 0;
}
