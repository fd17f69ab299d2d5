// Topology import and export in NCCL's XML schema: <system> / <cpu> / <pci> / <gpu> / <nvlink> /
// <c2c> / <nic> / <net>, with NCCL's attribute names (busid, class, link_speed, link_width, dev, sm,
// rank, gdr, numaid, affinity, arch, vendor, familyid, modelid, host_hash, speed, port, guid, ...).
// Unknown elements and attributes are kept, so loading and dumping again loses nothing.
#pragma once

#include <string>

#include "core/status.h"
#include "graph/topology.h"

namespace weft::graph {

// Reads a topology file (NCCL_TOPO_FILE). Unreadable files and malformed XML are errors that name
// the file; description problems are errors that name the element.
[[nodiscard]] Status loadTopologyXml(const std::string& path, Topology* out);

// The same from text in memory.
[[nodiscard]] Status parseTopologyXml(const std::string& text, Topology* out);

// The description as NCCL writes it (NCCL_TOPO_DUMP_FILE).
std::string dumpTopologyXml(const Topology& topo);

// Writes dumpTopologyXml() to a file.
[[nodiscard]] Status writeTopologyXmlFile(const Topology& topo, const std::string& path);

// Merges the description `from` into `into`, as when several ranks of one host each describe what
// they see: elements are matched by identity (a <cpu> by host_hash and numaid, a <pci> by bus id,
// a <net> by name, an <nvlink> by target), attributes already in `into` win, missing attributes are
// added and unmatched elements appended.
void fuseSystemXml(XmlNode* into, const XmlNode& from);

// A description of `nHosts` identical machines made from a one-machine description: copy i gets host
// hash (original + i) and ranks shifted by i times the machine's rank count. For simulating clusters
// (tests, weft-topo --nodes).
XmlNode replicateHosts(const XmlNode& system, int nHosts);

}  // namespace weft::graph
