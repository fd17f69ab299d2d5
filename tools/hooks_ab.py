#!/usr/bin/env python3
"""Do weft's diagnostic hooks cost anything when switched off? (reliability matrix row 23)

Runs the same weft-perf binary, interleaved and repeated, in three configurations and prints the
median time per size of each and the ratios:
  out  a library built with -DWEFT_DIAGNOSTIC_HOOKS=OFF: the hooks compiled out
  off  the normal library with every hook switched off (NCCL_WEFT_CALL_CHECK=0,
       NCCL_WEFT_REPLAY_STAMPS=0; NCCL_WEFT_HOST_PROFILE is off by default)
  on   the normal library as shipped (call check and replay stamps on)
"off/out" near 1.00 is the row's pass; "on/out" is what the default-on checks cost.

  tools/hooks_ab.py --hooks-out-lib scratch/hooks --weft-lib scratch/pre --repeat 5 -- -t 2 -g 1 -b 8 -e 64K
  tools/hooks_ab.py ... -- -t 2 -g 1 -G 20 -b 8 -e 64K   # inside CUDA graphs (replay stamps)

Uses compare.py's runner, which proves from weft-perf's dladdr and the version banner that each run
loaded the library it should.
"""
import argparse
import os
import statistics
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import compare  # noqa: E402  (the same folder)

CONFIGS = (
    ("out", "hooks_out", {}),
    ("off", "weft", {"NCCL_WEFT_CALL_CHECK": "0", "NCCL_WEFT_REPLAY_STAMPS": "0", "NCCL_WEFT_HOST_PROFILE": "0"}),
    ("on", "weft", {}),
)


def samples(docs, key):
    """Every run's out-of-place time of one row (compare.row_key) of one configuration."""
    return [r["out_of_place"]["time_us"] for doc in docs for r in doc["results"]
            if compare.row_key(r) == key and r.get("out_of_place")]


def main(argv):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--hooks-out-lib", required=True, help="folder with the WEFT_DIAGNOSTIC_HOOKS=OFF libnccl.so.2")
    ap.add_argument("--weft-lib", required=True, help="folder with the normal libnccl.so.2")
    ap.add_argument("--perf", required=True, help="the weft-perf binary")
    ap.add_argument("--ops", default="all_reduce", help="collectives, comma separated")
    ap.add_argument("--repeat", type=int, default=5, help="runs per configuration, interleaved (default 5)")
    ap.add_argument("--timeout", type=int, default=120, help="seconds per run")
    ap.add_argument("perf_args", nargs="*", help="after --: weft-perf options (sizes, -t/-g/-p, -G, -n)")
    args = ap.parse_args(argv)
    libs = {"hooks_out": compare.check_lib_dir(args.hooks_out_lib, "--hooks-out-lib"),
            "weft": compare.check_lib_dir(args.weft_lib, "--weft-lib")}
    worst = 1.0
    for op in args.ops.split(","):
        runs = {name: [] for name, _, _ in CONFIGS}
        for rep in range(args.repeat):
            # Rotate the order each round, so drift over the run does not favour one configuration.
            for name, lib, env in CONFIGS[rep % 3:] + CONFIGS[:rep % 3]:
                runs[name].append(compare.run_perf(args.perf, libs[lib], op, args.perf_args, env, args.timeout,
                                                   name, True, False))
        merged = {name: compare.merge_runs(docs) for name, docs in runs.items()}
        print("\n%s %s (median of %d runs each; times in us)" % (op, " ".join(args.perf_args), args.repeat))
        print("%10s %9s %9s %9s %8s %8s" % ("size", "out", "off", "on", "off/out", "on/out"))
        for key in sorted(merged["out"], key=lambda k: k[4]):
            cells = [merged[name].get(key, {}).get("out_of_place") for name, _, _ in CONFIGS]
            if any(c is None for c in cells):
                continue
            t = [c["time_us"] for c in cells]
            spread = [statistics.pstdev(samples(runs[name], key)) for name, _, _ in CONFIGS]
            worst = max(worst, t[1] / t[0])
            print("%10s %9.2f %9.2f %9.2f %8.3f %8.3f   (spread %s)" % (
                compare.format_size(key[4]), t[0], t[1], t[2], t[1] / t[0], t[2] / t[0],
                "/".join("%.2f" % s for s in spread)))
    print("\nworst off/out %.3f" % worst)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
