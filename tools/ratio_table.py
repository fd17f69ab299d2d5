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
variants = [k for k in blocks if k != "nccl"]
for i, op in enumerate(ops):
    for k in variants:  # one line per weft variant, labelled when there are several
        rows = []
        for (size, bw), (_, nbw) in zip(blocks[k][i * per:(i + 1) * per], ref[i * per:(i + 1) * per]):
            rows.append("%s %.1f/%.1f=%.2f" % (size, bw, nbw, bw / nbw if nbw else 0))
        label = op if len(variants) == 1 else "%s %s" % (op, k)
        print("%-22s %s" % (label, "  ".join(rows)))
