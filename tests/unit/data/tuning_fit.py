#!/usr/bin/env python3
"""Fits weft's tuning constants to measured collective times and prints a tuning file.

    tuning_fit.py DATA [--tuning-file OUT] [--residuals]

DATA has the format of tests/unit/data/tuning-baseline-h200x2.txt: "config KEY VALUE" lines that
describe the machine, "fix KEY VALUE" lines that pin a constant, and measurement lines
"func algo proto bytes us fit|check source". The output is a file for NCCL_WEFT_TUNING_FILE
(keys as in src/graph/tuning_constants.cc); --residuals prints a markdown table.

Refit after GPU runs: measure weft (tools/weft-perf or nccl-tests against weft) with a forced
NCCL_ALGO/NCCL_PROTO per curve, put the points into a DATA file, run this script, point
NCCL_WEFT_TUNING_FILE at the result. Pure Python 3, no packages.

The model (same equations as src/graph/tuning.cc, single node):
  t = base[a][p] + hops * hw[link][a][p] + s / b + pipe(s)
  b = bwPerChannel * protoEff[p] * bwEff[a][p] * funcBw[f]       bytes/us of one channel
  s = bytes * busFactor(f, a, n) / c, c = clamp(bytes / (threshold * maxThreads), 1, maxChannels)
  pipe(s) = 2 sqrt(s * alpha / b) while the best chunk sqrt(s * alpha * b) fits one step,
            else s * alpha / step + step / b;   alpha = stepUs[a][p] * funcStep[f]
  b is at most bwcap[a][p] / c: "fix bwcap.ring.ll 125" lines set such caps (GB/s of payload on
  all channels together); they are not fitted.
What is fitted: base, bwEff and stepUs per (algo, proto) from AllReduce curves; funcBw and
funcStep per collective from its Ring/Simple curve, with base shared. Direct (weft's one-hop
LL algorithms; algo "direct", proto "ll" for one-shot and AllGather, "ll-twoshot" for two-shot
AllReduce), when the data has such lines: base and bwEff of Direct/LL, with its own model
  t = base + hops * hw + sent / c / b,  sent = bytes x (n-1) one-shot, 2(n-1)/n two-shot (2 hops),
  (n-1)/n AllGather;  c = clamp(bytes / (16 x 512), 1, maxChannels). The rest (per-hop
latencies, protocol efficiencies, thresholds, thread counts) is NCCL's model, not fitted.
"""
import math
import sys

ALGOS = ["tree", "ring", "collnetdirect", "collnetchain", "nvls", "nvlstree", "pat", "direct"]
PROTOS = ["ll", "ll128", "simple"]
FUNCS = ["broadcast", "reduce", "allgather", "reducescatter", "allreduce"]
LINKS = ["nvlink", "pcie", "net"]

# NCCL's per-hop latencies (us), src/graph/tuning.cc of NCCL 2.30.7 (not fitted here).
HW = {
    "nvlink": {"tree": (0.6, 1.25, 4.0), "ring": (0.6, 1.9, 3.4), "direct": (0.6, 0, 0)},
    "pcie": {"tree": (1.0, 1.9, 4.0), "ring": (1.0, 2.5, 5.7), "direct": (1.0, 0, 0)},
    "net": {"tree": (5.0, 8.5, 14.0), "ring": (2.7, 4.0, 14.0)},
}
PROTO_EFF = {"ll": 0.5, "ll128": 120.0 / 128.0, "simple": 1.0}
THRESHOLD = {"ll": 8, "ll128": 8, "simple": 64}  # bytes per thread; Ring/LL multiplies by nRanks
MAX_THREADS = {"ll": 512, "ll128": 640, "simple": 512}
STEP_BYTES = {"ll": 32768, "ll128": 576000, "simple": 524288}  # payload of one step


def bus_factor(func, algo, n):
    if algo == "tree":
        return 1.0 if n <= 2 else 2.0
    if func == "allreduce":
        return 2.0 * (n - 1) / n
    if func in ("allgather", "reducescatter"):
        return (n - 1) / n
    return 1.0


def hops(func, algo, n):
    return 2 * (n - 1) if func == "allreduce" else n - 1


def pipe(s, alpha, b, step):
    if alpha <= 0 or s <= 0:
        return 0.0
    if math.sqrt(s * alpha * b) <= step:
        return 2.0 * math.sqrt(s * alpha / b)
    return s * alpha / step + step / b


def capped(k, algo, proto, b, c):
    """One channel's bandwidth when c channels share the pair's cap (bwcap, GB/s; 0 or absent: none)."""
    cap = k.get(f"bwcap.{algo}.{proto}", 0.0) * 1e3
    return min(b, cap / c) if cap > 0 else b


DIRECT_THRESHOLD = 16  # bytes per thread of a Direct/LL channel (tuning_constants.cc)


def predict_direct(cfg, k, func, proto, nbytes):
    n = cfg["nranks"]
    c = min(max(nbytes / (DIRECT_THRESHOLD * MAX_THREADS["ll"]), 1.0), cfg["maxchannels"])
    b = capped(k, "direct", "ll", cfg["bwperchannel"] * 1e3 * PROTO_EFF["ll"] * k["bweff.direct.ll"], c)
    if func == "allgather":
        nhops, sent = 1, nbytes * (n - 1) / n
    elif proto == "ll-twoshot":
        nhops, sent = 2, nbytes * 2.0 * (n - 1) / n
    else:
        nhops, sent = 1, nbytes * (n - 1)
    return k["base.direct.ll"] + nhops * HW[cfg["link"]]["direct"][0] + sent / c / b


def predict(cfg, k, func, algo, proto, nbytes):
    if algo == "direct":
        return predict_direct(cfg, k, func, proto, nbytes)
    n = cfg["nranks"]
    thr = THRESHOLD[proto] * (n if (algo == "ring" and proto == "ll") else 1)
    c = min(max(nbytes / (thr * MAX_THREADS[proto]), 1.0), cfg["maxchannels"])
    b = cfg["bwperchannel"] * 1e3 * PROTO_EFF[proto] * k[f"bweff.{algo}.{proto}"] * k[f"funcbw.{func}"]
    b = capped(k, algo, proto, b, c)
    s = nbytes * bus_factor(func, algo, n) / c
    alpha = k[f"step.{algo}.{proto}"] * k[f"funcstep.{func}"]
    lat = k[f"base.{algo}.{proto}"] + hops(func, algo, n) * HW[cfg["link"]][algo][PROTOS.index(proto)]
    return lat + s / b + pipe(s, alpha, b, STEP_BYTES[proto])


def nelder_mead(f, x0, iters=3000):
    n = len(x0)
    pts = [list(x0)] + [[x0[j] + (0.3 if j == i else 0.0) for j in range(n)] for i in range(n)]
    vals = [f(p) for p in pts]
    for _ in range(iters):
        order = sorted(range(n + 1), key=lambda i: vals[i])
        pts, vals = [pts[i] for i in order], [vals[i] for i in order]
        if vals[-1] - vals[0] < 1e-14:
            break
        c = [sum(p[j] for p in pts[:-1]) / n for j in range(n)]
        xr = [2 * c[j] - pts[-1][j] for j in range(n)]
        fr = f(xr)
        if fr < vals[0]:
            xe = [3 * c[j] - 2 * pts[-1][j] for j in range(n)]
            fe = f(xe)
            pts[-1], vals[-1] = (xe, fe) if fe < fr else (xr, fr)
        elif fr < vals[-2]:
            pts[-1], vals[-1] = xr, fr
        else:
            xc = [(c[j] + pts[-1][j]) / 2 for j in range(n)]
            fc = f(xc)
            if fc < vals[-1]:
                pts[-1], vals[-1] = xc, fc
            else:
                pts = [pts[0]] + [[(pts[0][j] + p[j]) / 2 for j in range(n)] for p in pts[1:]]
                vals = [vals[0]] + [f(p) for p in pts[1:]]
    i = min(range(n + 1), key=lambda i: vals[i])
    return pts[i]


def fit_group(cfg, k, fixed, points, keys):
    """Fits `keys` (those not fixed) to `points` by least squares on the relative error.
    Rates and step costs are fitted in log space so they stay positive."""
    free = [key for key in keys if key not in fixed]
    if not free:
        return
    def unpack(x):
        for key, v in zip(free, x):
            k[key] = v if key.startswith("base.") else math.exp(v)
    def cost(x):
        unpack(x)
        return sum((predict(cfg, k, *p[:4]) / p[4] - 1.0) ** 2 for p in points)
    x0 = [k[key] if key.startswith("base.") else math.log(max(k[key], 1e-6)) for key in free]
    for _ in range(4):  # restarts: the pipeline term makes the surface kinked
        x0 = nelder_mead(cost, x0)
    unpack(x0)


def load(path):
    cfg, fixed, points = {}, {}, []
    for line in open(path):
        f = line.split("#")[0].split()
        if not f:
            continue
        if f[0] == "config":
            cfg[f[1]] = f[2] if f[1] == "link" else float(f[2])
        elif f[0] == "fix":
            fixed[f[1]] = float(f[2])
        else:
            points.append((f[0], f[1], f[2], int(f[3]), float(f[4]), f[5], f[6] if len(f) > 6 else ""))
    cfg["nranks"] = int(cfg["nranks"])
    return cfg, fixed, points


def main():
    if len(sys.argv) < 2:
        sys.exit(__doc__)
    cfg, fixed, points = load(sys.argv[1])
    k = {}
    for a in ALGOS:
        for p in PROTOS:
            k[f"base.{a}.{p}"], k[f"bweff.{a}.{p}"], k[f"step.{a}.{p}"] = 10.0, 0.8, 0.5
    for f in FUNCS:
        k[f"funcbw.{f}"], k[f"funcstep.{f}"] = 1.0, 1.0
    k.update(fixed)
    fitpts = [p for p in points if p[5] == "fit"]
    group = lambda f, a, pr: [p for p in fitpts if p[:3] == (f, a, pr)]
    # AllReduce curves define the per-(algo, proto) constants.
    for a, p in [("ring", "ll"), ("ring", "ll128"), ("ring", "simple"), ("tree", "simple")]:
        fit_group(cfg, k, fixed, group("allreduce", a, p), [f"base.{a}.{p}", f"bweff.{a}.{p}", f"step.{a}.{p}"])
    # Tree/LL: one usable point, so only its bandwidth is fitted; its latency is Ring/LL's plus
    # NCCL's difference (6.8 vs 6.6 us) and it has no pipeline term (as Ring/LL).
    if "base.tree.ll" not in fixed:
        k["base.tree.ll"] = k["base.ring.ll"] + 0.2
    if "step.tree.ll" not in fixed:
        k["step.tree.ll"] = k["step.ring.ll"]
    fit_group(cfg, k, fixed, group("allreduce", "tree", "ll"), ["bweff.tree.ll"])
    # Tree/LL128: not measured (NCCL never picks it on this machine). NCCL's model: same base as
    # Ring/LL128, 7/9 of Tree/Simple's bus bandwidth on one node.
    for key, v in [("base.tree.ll128", k["base.ring.ll128"]), ("step.tree.ll128", k["step.ring.ll128"]),
                   ("bweff.tree.ll128", k["bweff.tree.simple"] * (7.0 / 9.0) / PROTO_EFF["ll128"])]:
        if key not in fixed:
            k[key] = v
    # Other collectives: their Ring/Simple curve sets their bandwidth and step-cost multipliers.
    for f in FUNCS:
        if f != "allreduce":
            fit_group(cfg, k, fixed, group(f, "ring", "simple"), [f"funcbw.{f}", f"funcstep.{f}"])
    # Direct: every direct line (one-shot, two-shot, AllGather) shares base and bwEff.
    direct = [p for p in fitpts if p[1] == "direct"]
    if direct:
        fit_group(cfg, k, fixed, direct, ["base.direct.ll", "bweff.direct.ll"])

    out = ["# weft tuning constants fitted by tests/unit/data/tuning_fit.py from " + sys.argv[1]]
    for a in ["tree", "ring"]:
        for p in PROTOS:
            out += [f"base.{a}.{p} = {k[f'base.{a}.{p}']:.3f}", f"bweff.{a}.{p} = {k[f'bweff.{a}.{p}']:.4f}",
                    f"step.{a}.{p} = {k[f'step.{a}.{p}']:.4f}"]
    for f in FUNCS:
        out += [f"funcbw.{f} = {k[f'funcbw.{f}']:.4f}", f"funcstep.{f} = {k[f'funcstep.{f}']:.4f}"]
    if direct:
        out += [f"base.direct.ll = {k['base.direct.ll']:.3f}", f"bweff.direct.ll = {k['bweff.direct.ll']:.4f}"]
    text = "\n".join(out) + "\n"
    if "--tuning-file" in sys.argv:
        open(sys.argv[sys.argv.index("--tuning-file") + 1], "w").write(text)
    else:
        print(text)
    if "--residuals" in sys.argv:
        print("| func | algo | proto | bytes | measured us | model us | residual | use |")
        print("| --- | --- | --- | --- | --- | --- | --- | --- |")
        errs = []
        for p in points:
            m = predict(cfg, k, *p[:4])
            e = m / p[4] - 1.0
            if p[5] == "fit":
                errs.append(e)
            print(f"| {p[0]} | {p[1]} | {p[2]} | {p[3]} | {p[4]:.2f} | {m:.2f} | {100 * e:+.1f}% | {p[5]} |")
        rms = math.sqrt(sum(e * e for e in errs) / len(errs))
        print(f"\nfitted points: {len(errs)}, rms {100 * rms:.1f}%, max |residual| {100 * max(map(abs, errs)):.1f}%")


if __name__ == "__main__":
    main()
