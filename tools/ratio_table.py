#!/usr/bin/env python3
# Prints NCCL busbw and weft/NCCL ratios per op and size from a weft-perf log with "### label"
# blocks (one named nccl), as written by tools/gpu_batch.sh:
#   python3 tools/ratio_table.py exp.log [--ops op1,op2,...]
import re
import sys

args = sys.argv[1:]
ops = ["broadcast", "reduce", "sendrecv", "alltoall", "all_reduce", "all_gather", "reduce_scatter"]
if "--ops" in args:
    ops = args[args.index("--ops") + 1].split(",")
blocks, cur = {}, None
for line in open(args[0]):
    if line.startswith("###"):
        cur = line[4:].strip()
        blocks[cur] = []
        continue
    m = re.match(r"\s+(\d+)\s+\d+\s+\S+\s+\S+\s+-?\d+\s+([\d.]+)\s+([\d.]+)\s+([\d.]+)", line)
    if m and cur:
        blocks[cur].append((int(m.group(1)), float(m.group(4))))
ref = blocks.get("nccl", [])
per = len(ref) // len(ops) if ops and ref else 0
for i, op in enumerate(ops):
    rows = []
    for k, v in blocks.items():
        if k == "nccl":
            continue
        for (size, bw), (_, nbw) in zip(v[i * per:(i + 1) * per], ref[i * per:(i + 1) * per]):
            rows.append("%s %.1f/%.1f=%.2f" % (size, bw, nbw, bw / nbw if nbw else 0))
    print("%-15s %s" % (op, "  ".join(rows)))
