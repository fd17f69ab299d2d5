#include "collective.h"

#include <strings.h>

#include <algorithm>

namespace weft::perf {

const std::vector<CollInfo>& allCollectives() {
  static const std::vector<CollInfo> table = {
      {Coll::AllReduce, "all_reduce", true, false, true, 0},
      {Coll::AllGather, "all_gather", false, false, true, 0},
      {Coll::ReduceScatter, "reduce_scatter", true, false, true, 0},
      {Coll::Broadcast, "broadcast", false, true, true, 0},
      {Coll::Reduce, "reduce", true, true, true, 0},
      {Coll::SendRecv, "sendrecv", false, false, false, NCCL_VERSION(2, 7, 0)},
      {Coll::AlltoAll, "alltoall", false, false, false, NCCL_VERSION(2, 28, 3)},
      {Coll::Gather, "gather", false, true, true, NCCL_VERSION(2, 28, 3)},
      {Coll::Scatter, "scatter", false, true, true, NCCL_VERSION(2, 28, 3)},
  };
  return table;
}

const CollInfo& info(Coll c) {
  for (const CollInfo& i : allCollectives()) {
    if (i.coll == c) return i;
  }
  return allCollectives()[0];  // unreachable: every enumerator is in the table
}

bool parseCollective(const std::string& text, Coll* out) {
  std::string bare;
  for (char ch : text) {
    if (ch != '_' && ch != '-') bare += ch;
  }
  if (bare.size() > 4 && !strcasecmp(bare.c_str() + bare.size() - 4, "perf")) bare.resize(bare.size() - 4);
  for (const CollInfo& i : allCollectives()) {
    std::string name;
    for (const char* p = i.name; *p; ++p) {
      if (*p != '_') name += *p;
    }
    if (!strcasecmp(bare.c_str(), name.c_str())) {
      *out = i.coll;
      return true;
    }
  }
  return false;
}

CaseShape shapeFor(Coll c, size_t size, size_t typeSize, int nranks) {
  CaseShape s;
  const size_t n = (size_t)nranks;
  switch (c) {
    case Coll::AllReduce:
    case Coll::Broadcast:
    case Coll::Reduce:
    case Coll::SendRecv:
      s.count = size / typeSize;
      s.sendElems = s.recvElems = s.count;
      s.bytes = s.count * typeSize;
      break;
    case Coll::AllGather:
    case Coll::Gather:
      s.count = size / (typeSize * n);
      s.sendElems = s.count;
      s.recvElems = s.count * n;
      s.bytes = s.count * n * typeSize;
      break;
    case Coll::ReduceScatter:
    case Coll::Scatter:
      s.count = size / (typeSize * n);
      s.sendElems = s.count * n;
      s.recvElems = s.count;
      s.bytes = s.count * n * typeSize;
      break;
    case Coll::AlltoAll:
      s.count = size / (typeSize * n);
      s.sendElems = s.recvElems = s.count * n;
      s.bytes = s.count * n * typeSize;
      break;
  }
  return s;
}

double busBwFactor(Coll c, int nranks) {
  const double n = nranks;
  switch (c) {
    case Coll::AllReduce:
      return 2.0 * (n - 1) / n;
    case Coll::AllGather:
    case Coll::ReduceScatter:
    case Coll::AlltoAll:
    case Coll::Gather:
    case Coll::Scatter:
      return (n - 1) / n;
    case Coll::Broadcast:
    case Coll::Reduce:
    case Coll::SendRecv:
      return 1.0;
  }
  return 1.0;
}

InPlaceOffsets inPlaceOffsets(Coll c, size_t count, int rank) {
  InPlaceOffsets o;
  switch (c) {
    case Coll::AllGather:
    case Coll::Gather:
      o.sendOffset = (size_t)rank * count;  // this rank's slot of the gathered array
      break;
    case Coll::ReduceScatter:
    case Coll::Scatter:
      o.recvOffset = (size_t)rank * count;  // this rank's slice of the full array
      break;
    default:
      break;
  }
  return o;
}

std::vector<size_t> sizeSeries(size_t minBytes, size_t maxBytes, double factor, size_t step) {
  std::vector<size_t> sizes;
  constexpr size_t kMaxSizes = 100000;
  size_t size = minBytes;
  while (size <= maxBytes && sizes.size() < kMaxSizes) {
    sizes.push_back(size);
    size_t next;
    if (factor > 1.0) next = size == 0 ? 1 : (size_t)((double)size * factor);
    else if (step > 0) next = size + step;
    else break;
    if (next <= size) next = size + 1;  // factors close to 1 must still make progress
    size = next;
  }
  return sizes;
}

namespace {
struct TypeEntry { ncclDataType_t type; const char* name; size_t size; const char* aliases[3]; };
constexpr TypeEntry kTypes[] = {
    {ncclInt8, "int8", 1, {"char", nullptr, nullptr}},
    {ncclUint8, "uint8", 1, {nullptr, nullptr, nullptr}},
    {ncclInt32, "int32", 4, {"int", nullptr, nullptr}},
    {ncclUint32, "uint32", 4, {nullptr, nullptr, nullptr}},
    {ncclInt64, "int64", 8, {nullptr, nullptr, nullptr}},
    {ncclUint64, "uint64", 8, {nullptr, nullptr, nullptr}},
    {ncclFloat16, "half", 2, {"float16", "fp16", nullptr}},
    {ncclFloat32, "float", 4, {"float32", "fp32", nullptr}},
    {ncclFloat64, "double", 8, {"float64", "fp64", nullptr}},
    {ncclBfloat16, "bfloat16", 2, {"bf16", nullptr, nullptr}},
    {ncclFloat8e4m3, "f8e4m3", 1, {"fp8e4m3", "e4m3", nullptr}},
    {ncclFloat8e5m2, "f8e5m2", 1, {"fp8e5m2", "e5m2", nullptr}},
};
struct OpEntry { ncclRedOp_t op; const char* name; };
constexpr OpEntry kOps[] = {{ncclSum, "sum"}, {ncclProd, "prod"}, {ncclMax, "max"}, {ncclMin, "min"}, {ncclAvg, "avg"}};
}  // namespace

const char* typeName(ncclDataType_t t) {
  for (const TypeEntry& e : kTypes) {
    if (e.type == t) return e.name;
  }
  return "?";
}

size_t typeSize(ncclDataType_t t) {
  for (const TypeEntry& e : kTypes) {
    if (e.type == t) return e.size;
  }
  return 0;
}

bool parseType(const std::string& text, ncclDataType_t* out) {
  for (const TypeEntry& e : kTypes) {
    bool match = !strcasecmp(text.c_str(), e.name);
    for (const char* alias : e.aliases) match = match || (alias && !strcasecmp(text.c_str(), alias));
    if (match) {
      *out = e.type;
      return true;
    }
  }
  return false;
}

const char* opName(ncclRedOp_t op) {
  for (const OpEntry& e : kOps) {
    if (e.op == op) return e.name;
  }
  return "?";
}

bool parseOp(const std::string& text, ncclRedOp_t* out) {
  for (const OpEntry& e : kOps) {
    if (!strcasecmp(text.c_str(), e.name)) {
      *out = e.op;
      return true;
    }
  }
  return false;
}

bool isFloatType(ncclDataType_t t) {
  return t == ncclFloat16 || t == ncclFloat32 || t == ncclFloat64 || t == ncclBfloat16 || t == ncclFloat8e4m3 ||
         t == ncclFloat8e5m2;
}

bool isUnsignedType(ncclDataType_t t) { return t == ncclUint8 || t == ncclUint32 || t == ncclUint64; }

int minVersion(ncclDataType_t t) {
  if (t == ncclBfloat16) return NCCL_VERSION(2, 10, 0);
  if (t == ncclFloat8e4m3 || t == ncclFloat8e5m2) return NCCL_VERSION(2, 24, 0);
  return 0;
}

int minVersion(ncclRedOp_t op) { return op == ncclAvg ? NCCL_VERSION(2, 10, 0) : 0; }

}  // namespace weft::perf
