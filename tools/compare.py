#!/usr/bin/env python3
"""Side-by-side benchmark: the same weft-perf binary against NVIDIA NCCL and against weft.

Runs weft-perf once with LD_LIBRARY_PATH pointing at another libnccl.so.2 (e.g. PyTorch's
nvidia/nccl/lib) and once at weft's build directory, for each collective, and prints per size:
NCCL time, weft time, NCCL busbw, weft busbw and the ratio weft/NCCL (busbw, i.e. NCCL time /
weft time). It proves which library each run really loaded: weft-perf reports the path of the
libnccl it resolved (dladdr), and with NCCL_DEBUG=VERSION the banner must say "weft" for weft
and must not for NCCL. Results go to a JSON file as well.

  tools/compare.py --nccl-lib auto --ops all_reduce,all_gather -b 8 -e 1G -g 2
  tools/compare.py --nccl-lib /path/site-packages/nvidia/nccl/lib -p 2 -b 1M -e 8G -f 4 --json out.json

Options after "--" go to weft-perf unchanged. Standard library only.
"""
import argparse
import importlib.util
import json
import math
import os
import re
import shlex
import statistics
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(HERE)
LIB_NAME = "libnccl.so.2"
PLACEMENTS = ("out_of_place", "in_place")


class CompareError(Exception):
    pass


def find_pip_nccl():
    """The lib folder of the nvidia-nccl wheel (what PyTorch loads), without importing torch."""
    try:
        spec = importlib.util.find_spec("nvidia.nccl")
    except (ImportError, ValueError):
        spec = None
    if spec is None or not spec.submodule_search_locations:
        raise CompareError("--nccl-lib auto: the nvidia.nccl package (nvidia-nccl-cu*) is not installed "
                           "for %s; give the folder of libnccl.so.2 instead" % sys.executable)
    for location in spec.submodule_search_locations:
        candidate = os.path.join(location, "lib")
        if os.path.exists(os.path.join(candidate, LIB_NAME)):
            return candidate
    raise CompareError("nvidia.nccl found but it has no lib/%s" % LIB_NAME)


def check_lib_dir(path, what):
    if not os.path.exists(os.path.join(path, LIB_NAME)):
        raise CompareError("%s: no %s in %s" % (what, LIB_NAME, path))
    return os.path.realpath(path)


def banner_lines(text):
    """Lines with the version banner NCCL_DEBUG=VERSION prints ("NCCL version 2.28.9+cuda13.0 ...")."""
    return [line.strip() for line in text.splitlines() if re.search(r"NCCL version \d", line)]


def verify_library(label, lib_dir, doc, output, expect_weft):
    """Raises unless the run loaded the library from lib_dir, and the banner agrees."""
    loaded = doc.get("library", {}).get("path", "")
    real = os.path.realpath(loaded) if loaded else ""
    if not real or os.path.dirname(real) != os.path.realpath(lib_dir):
        raise CompareError("%s run loaded %r, not the library in %s (is LD_PRELOAD set, or an RPATH in the way?)"
                           % (label, loaded, lib_dir))
    banners = banner_lines(output)
    # weft's banner is "NCCL version 2.28.9+cuda13.0 (weft X.Y.Z, ...)"; the host name in front
    # of the line could contain "weft" too, so only the text after the version counts.
    says_weft = any(re.search(r"NCCL version \S+ \(weft ", b) for b in banners)
    if expect_weft and banners and not says_weft:
        raise CompareError("%s run: version banner does not mention weft: %s" % (label, banners[0]))
    if not expect_weft and says_weft:
        raise CompareError("%s run: the banner says weft, but this run should use NCCL" % label)
    return {"path": real, "banner": banners[0] if banners else None, "nccl_version": doc["library"].get("nccl_version")}


def run_perf(perf, lib_dir, op, perf_args, env_extra, timeout, label, expect_weft, verbose):
    env = dict(os.environ)
    if env.pop("LD_PRELOAD", None):
        print("note: LD_PRELOAD removed for the %s run" % label, file=sys.stderr)
    old = env.get("LD_LIBRARY_PATH")
    env["LD_LIBRARY_PATH"] = lib_dir + (":" + old if old else "")
    env.setdefault("NCCL_DEBUG", "VERSION")
    env.setdefault("NCCL_NVLS_ENABLE", "0")  # NVLink multicast stays off on the shared machines
    env.update(env_extra)
    with tempfile.TemporaryDirectory(prefix="weft-compare-") as tmp:
        json_path = os.path.join(tmp, "result.json")
        cmd = [perf, op] + perf_args + ["--json", json_path]
        if verbose:
            print("+ LD_LIBRARY_PATH=%s %s" % (lib_dir, " ".join(shlex.quote(c) for c in cmd)), file=sys.stderr)
        try:
            proc = subprocess.run(cmd, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                                  universal_newlines=True, timeout=timeout)
        except subprocess.TimeoutExpired as e:
            raise CompareError("%s run of %s timed out after %s s" % (label, op, timeout)) from e
        output = proc.stdout
        if verbose:
            sys.stderr.write(output)
        if proc.returncode != 0 or not os.path.exists(json_path):
            tail = "\n".join(output.splitlines()[-15:])
            raise CompareError("%s run of %s failed (exit %d):\n%s" % (label, op, proc.returncode, tail))
        with open(json_path) as f:
            doc = json.load(f)
    doc["verified"] = verify_library(label, lib_dir, doc, output, expect_weft)
    return doc


def row_key(r):
    return (r["collective"], r["type"], r["redop"], r["root"], r["size"])


def merge_runs(runs):
    """{key: {placement: {"time_us": median, "busbw": median, "wrong": max}}} over repeated runs."""
    samples = {}
    for doc in runs:
        for r in doc["results"]:
            for p in PLACEMENTS:
                if r.get(p) is None:
                    continue
                s = samples.setdefault(row_key(r), {}).setdefault(p, {"time_us": [], "busbw": [], "wrong": []})
                s["time_us"].append(r[p]["time_us"])
                s["busbw"].append(r[p]["busbw"])
                s["wrong"].append(r[p]["wrong"])
    merged = {}
    for key, by_place in samples.items():
        merged[key] = {}
        for p, s in by_place.items():
            wrongs = [w for w in s["wrong"] if w is not None]
            merged[key][p] = {"time_us": statistics.median(s["time_us"]), "busbw": statistics.median(s["busbw"]),
                              "wrong": max(wrongs) if wrongs else None, "samples": len(s["time_us"])}
    return merged


def compare_rows(nccl, weft):
    """Rows present in both runs, with ratio = weft busbw / NCCL busbw (= NCCL time / weft time)."""
    rows = []
    for key in sorted(set(nccl) & set(weft), key=lambda k: (k[0], k[1], k[2], k[3], k[4])):
        for p in PLACEMENTS:
            a, b = nccl[key].get(p), weft[key].get(p)
            if a is None or b is None:
                continue
            ratio = a["time_us"] / b["time_us"] if b["time_us"] > 0 else None
            rows.append({"collective": key[0], "type": key[1], "redop": key[2], "root": key[3], "size": key[4],
                         "placement": p, "nccl_time_us": a["time_us"], "weft_time_us": b["time_us"],
                         "nccl_busbw": a["busbw"], "weft_busbw": b["busbw"], "ratio": ratio,
                         "nccl_wrong": a["wrong"], "weft_wrong": b["wrong"]})
    return rows


def geomean(values):
    values = [v for v in values if v and v > 0]
    return math.exp(sum(math.log(v) for v in values) / len(values)) if values else None


def format_size(n):
    for unit, scale in (("G", 1 << 30), ("M", 1 << 20), ("K", 1 << 10)):
        if n >= scale and n % scale == 0:
            return "%d%s" % (n // scale, unit)
    return str(n)


def print_table(rows, placements, out=None):
    out = out or sys.stdout
    groups = {}
    for r in rows:
        if r["placement"] in placements:
            groups.setdefault((r["collective"], r["type"], r["redop"], r["root"], r["placement"]), []).append(r)
    for (coll, typ, redop, root, place), items in groups.items():
        title = "%s  %s  %s%s  (%s)" % (coll, typ, redop, "" if root < 0 else "  root %d" % root,
                                       place.replace("_", "-"))
        print("\n" + title, file=out)
        print("%10s %11s %11s %11s %11s %8s  %s" % ("size", "NCCL us", "weft us", "NCCL GB/s", "weft GB/s",
                                                  "ratio", "check"), file=out)
        for r in items:
            wrong = [w for w in (r["nccl_wrong"], r["weft_wrong"]) if w]
            check = "WRONG nccl=%s weft=%s" % (r["nccl_wrong"], r["weft_wrong"]) if wrong else ""
            ratio = "%8.3f" % r["ratio"] if r["ratio"] is not None else "%8s" % "-"
            print("%10s %11.2f %11.2f %11.2f %11.2f %s  %s" % (format_size(r["size"]), r["nccl_time_us"],
                                                               r["weft_time_us"], r["nccl_busbw"], r["weft_busbw"],
                                                               ratio, check), file=out)
        g = geomean([r["ratio"] for r in items])
        worst = min((r["ratio"] for r in items if r["ratio"]), default=None)
        if g is not None:
            print("%10s geometric mean ratio %.3f, worst %.3f" % ("", g, worst), file=out)


def parse_args(argv):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--nccl-lib", help="folder with the reference libnccl.so.2, or 'auto' for the nvidia-nccl wheel")
    ap.add_argument("--weft-lib", default=os.path.join(REPO, "build"), help="folder with weft's libnccl.so.2")
    ap.add_argument("--perf", help="weft-perf binary (default: <weft-lib>/tools/weft-perf)")
    ap.add_argument("--ops", default="all_reduce", help="collectives, comma separated (default all_reduce)")
    for flag, default in (("-b", "8"), ("-e", "128M"), ("-f", "2"), ("-g", "1"), ("-t", "1"), ("-p", "1"),
                          ("-n", "20"), ("-w", "5"), ("-G", "0"), ("-d", "float"), ("-o", "sum"), ("-c", "1"),
                          ("-r", "0")):
        ap.add_argument(flag, default=default, help="weft-perf %s (default %s)" % (flag, default))
    ap.add_argument("--repeat", type=int, default=1, help="runs per library, alternating; medians are compared")
    ap.add_argument("--inplace", action="store_true", help="also print the in-place tables")
    ap.add_argument("--env", action="append", default=[], metavar="KEY=VALUE", help="extra environment for both runs")
    ap.add_argument("--timeout", type=int, default=1800, help="seconds per weft-perf run (default 1800)")
    ap.add_argument("--json", default="compare.json", help="where to save everything (default compare.json)")
    ap.add_argument("-v", "--verbose", action="store_true", help="show commands and weft-perf output")
    ap.add_argument("--self-test", action="store_true", help="run compare.py's own tests and exit")
    ap.add_argument("extra", nargs="*", help="after --: more weft-perf options")
    args = ap.parse_args(argv)
    if not args.self_test and not args.nccl_lib:
        ap.error("--nccl-lib is required (a folder with libnccl.so.2, or 'auto')")
    return args


def main(argv=None):
    args = parse_args(sys.argv[1:] if argv is None else argv)
    if args.self_test:
        return self_test()
    try:
        nccl_dir = check_lib_dir(find_pip_nccl() if args.nccl_lib == "auto" else args.nccl_lib, "--nccl-lib")
        weft_dir = check_lib_dir(args.weft_lib, "--weft-lib")
        if nccl_dir == weft_dir:
            raise CompareError("--nccl-lib and --weft-lib are the same folder")
        perf = args.perf or os.path.join(weft_dir, "tools", "weft-perf")
        if not os.access(perf, os.X_OK):
            raise CompareError("weft-perf not found at %s (build it, or give --perf)" % perf)
    except CompareError as e:
        print("compare.py: %s" % e, file=sys.stderr)
        return 2
    env_extra = {}
    for item in args.env:
        key, _, value = item.partition("=")
        env_extra[key] = value
    perf_args = []
    for flag in ("b", "e", "f", "g", "t", "p", "n", "w", "G", "d", "o", "c", "r"):
        perf_args += ["-" + flag, str(getattr(args, flag))]
    perf_args += ["--timeout", str(args.timeout)] + args.extra

    report = {"config": {"nccl_lib": nccl_dir, "weft_lib": weft_dir, "perf": perf, "perf_args": perf_args,
                         "env": env_extra, "repeat": args.repeat},
              "collectives": {}}
    failures = 0
    all_rows = []
    for op in [o for o in args.ops.split(",") if o]:
        runs = {"nccl": [], "weft": []}
        try:
            for _ in range(args.repeat):
                runs["nccl"].append(run_perf(perf, nccl_dir, op, perf_args, env_extra, args.timeout, "NCCL",
                                             False, args.verbose))
                runs["weft"].append(run_perf(perf, weft_dir, op, perf_args, env_extra, args.timeout, "weft",
                                             True, args.verbose))
        except CompareError as e:
            print("compare.py: %s" % e, file=sys.stderr)
            failures += 1
            report["collectives"][op] = {"error": str(e), "runs": runs}
            continue
        rows = compare_rows(merge_runs(runs["nccl"]), merge_runs(runs["weft"]))
        all_rows += rows
        first = {lib: runs[lib][0]["verified"] for lib in runs}
        print("\n== %s: NCCL %s (%s) vs weft %s (%s)" % (op, first["nccl"]["path"], first["nccl"]["banner"] or "no banner",
                                                       first["weft"]["path"], first["weft"]["banner"] or "no banner"))
        print_table(rows, PLACEMENTS if args.inplace else ("out_of_place",))
        failures += sum(1 for r in rows if r["nccl_wrong"] or r["weft_wrong"])
        report["collectives"][op] = {"rows": rows, "runs": runs,
                                     "geomean_ratio": geomean([r["ratio"] for r in rows
                                                               if r["placement"] == "out_of_place"])}
    overall = geomean([r["ratio"] for r in all_rows if r["placement"] == "out_of_place"])
    report["geomean_ratio"] = overall
    if overall is not None:
        print("\noverall geometric mean ratio (weft/NCCL busbw, out-of-place): %.3f" % overall)
    with open(args.json, "w") as f:
        json.dump(report, f, indent=1)
    print("saved %s" % args.json)
    return 1 if failures else 0


# --- self test: compare.py's logic, and its plumbing through a fake weft-perf ---------------------

FAKE_PERF = r'''#!/usr/bin/env python3
import json, os, sys
args = sys.argv[1:]
lib_dir = os.environ["LD_LIBRARY_PATH"].split(":")[0]
is_weft = os.path.basename(lib_dir) == "weft"
if os.environ.get("NCCL_DEBUG") == "VERSION":
    print("host:1:1 [0] NCCL INFO NCCL version 2.28.9+cuda13.0" + (" (weft 0.1.0, CUDA 13.0)" if is_weft else ""))
t = 10.0 if is_weft else 12.0
doc = {"library": {"path": os.path.join(lib_dir, "libnccl.so.2"), "nccl_version": 22809},
       "results": [{"collective": args[0], "size": s, "count": s // 4, "type": "float", "redop": "sum", "root": -1,
                    "out_of_place": {"time_us": t, "busbw": s / t / 1e3, "wrong": 0},
                    "in_place": {"time_us": t, "busbw": s / t / 1e3, "wrong": 0}} for s in (1024, 4096)]}
json.dump(doc, open(args[args.index("--json") + 1], "w"))
'''


def self_test():
    import io
    import unittest

    class Tests(unittest.TestCase):
        def test_ratio_is_nccl_time_over_weft_time(self):
            def doc(t):
                return {"results": [{"collective": "all_reduce", "type": "float", "redop": "sum", "root": -1,
                                     "size": 8, "out_of_place": {"time_us": t, "busbw": 8 / t, "wrong": 0},
                                     "in_place": None}]}
            rows = compare_rows(merge_runs([doc(20.0)]), merge_runs([doc(10.0)]))
            self.assertEqual(len(rows), 1)
            self.assertAlmostEqual(rows[0]["ratio"], 2.0)

        def test_median_over_repeats(self):
            docs = [{"results": [{"collective": "c", "type": "t", "redop": "r", "root": 0, "size": 1,
                                  "out_of_place": {"time_us": t, "busbw": 1.0, "wrong": w}}]}
                    for t, w in ((5.0, 0), (100.0, 0), (7.0, 2))]
            m = merge_runs(docs)[("c", "t", "r", 0, 1)]["out_of_place"]
            self.assertEqual(m["time_us"], 7.0)
            self.assertEqual(m["wrong"], 2)
            self.assertEqual(m["samples"], 3)

        def test_verify_library(self):
            with tempfile.TemporaryDirectory() as d:
                doc = {"library": {"path": os.path.join(d, "libnccl.so.2"), "nccl_version": 22809}}
                v = verify_library("weft", d, doc, "x NCCL version 2.28.9+cuda13.0 (weft 0.1.0)\n", True)
                self.assertIn("weft", v["banner"])
                with self.assertRaises(CompareError):
                    verify_library("weft", d, doc, "NCCL version 2.28.9+cuda13.0\n", True)
                with self.assertRaises(CompareError):
                    verify_library("NCCL", d, doc, "NCCL version 2.28.9 (weft 0.1.0)\n", False)
                # A host called "weft-gpu1" running NVIDIA NCCL is not weft.
                verify_library("NCCL", d, doc, "weft-gpu1:1:1 [0] NCCL INFO NCCL version 2.28.9+cuda13.0\n", False)
                with self.assertRaises(CompareError):
                    verify_library("NCCL", "/somewhere/else", doc, "", False)
                verify_library("NCCL", d, doc, "", False)  # no banner: the path alone decides

        def test_geomean_and_sizes(self):
            self.assertAlmostEqual(geomean([1.0, 4.0]), 2.0)
            self.assertIsNone(geomean([None, 0]))
            self.assertEqual(format_size(8 << 30), "8G")
            self.assertEqual(format_size(1536), "1536")

        def test_end_to_end_with_fake_perf(self):
            with tempfile.TemporaryDirectory() as d:
                for name in ("nccl", "weft"):
                    os.makedirs(os.path.join(d, name))
                    open(os.path.join(d, name, LIB_NAME), "w").close()
                perf = os.path.join(d, "fake-perf")
                with open(perf, "w") as f:
                    f.write(FAKE_PERF)
                os.chmod(perf, 0o755)
                out_json = os.path.join(d, "out.json")
                saved, sys.stdout = sys.stdout, io.StringIO()
                try:
                    rc = main(["--nccl-lib", os.path.join(d, "nccl"), "--weft-lib", os.path.join(d, "weft"),
                               "--perf", perf, "--ops", "all_reduce,all_gather", "--repeat", "2",
                               "--json", out_json])
                    text = sys.stdout.getvalue()
                finally:
                    sys.stdout = saved
                self.assertEqual(rc, 0, text)
                self.assertIn("1.200", text)  # 12 us / 10 us
                with open(out_json) as f:
                    report = json.load(f)
                self.assertAlmostEqual(report["geomean_ratio"], 1.2)
                self.assertEqual(len(report["collectives"]["all_gather"]["rows"]), 4)
                # Swapped folders: the library check must refuse.
                saved, sys.stdout = sys.stdout, io.StringIO()
                saved_err, sys.stderr = sys.stderr, io.StringIO()
                try:
                    rc = main(["--nccl-lib", os.path.join(d, "weft"), "--weft-lib", os.path.join(d, "nccl"),
                               "--perf", perf, "--json", out_json])
                    err = sys.stderr.getvalue()
                finally:
                    sys.stdout, sys.stderr = saved, saved_err
                self.assertEqual(rc, 1)
                self.assertIn("banner", err)

    result = unittest.TextTestRunner(verbosity=2).run(unittest.defaultTestLoader.loadTestsFromTestCase(Tests))
    return 0 if result.wasSuccessful() else 1


if __name__ == "__main__":
    sys.exit(main())
