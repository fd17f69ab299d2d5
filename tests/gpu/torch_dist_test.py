#!/usr/bin/env python3
"""PyTorch torch.distributed (backend "nccl") on a given libnccl.so.2, checked result by result.

Launcher (default): starts WORLD processes (one per GPU) with env:// rendezvous on 127.0.0.1 and, with
--lib, LD_PRELOAD=<that libnccl.so.2> so that torch's own NCCL is never used. It runs the children
twice by default: "eager" (init_process_group(device_id=...): communicators made at once, new groups
made by ncclCommSplit, PyTorch picks non-blocking communicators and polls ncclCommGetAsyncError) and
"lazy" (no device_id: communicators made at the first collective with ncclCommInitRankConfig).

Each child checks: all_reduce (sum float32, sum bfloat16, max int64, avg float32), broadcast, reduce,
all_gather_into_tensor, reduce_scatter_tensor, all_to_all_single, send/recv and isend/irecv,
new_group (all ranks, and a one-rank group) with a collective on it, an all_reduce captured in a CUDA
graph and replayed, barrier, destroy_process_group. It also proves which library served the calls:
dladdr() of the process-global ncclCommInitRankConfig must name --lib, /proc/self/maps must map it, and
the launcher requires the NCCL_DEBUG=VERSION banner to mention "weft" when --expect-weft is given.

Buffer registration: PyTorch calls ncclCommRegister only with TORCH_NCCL_USE_TENSOR_REGISTER_ALLOCATOR_HOOK=1
(default off) or an explicit NCCL memory pool; the launcher sets it to 0, or with --register to 1: then
every segment of PyTorch's caching allocator is registered with each communicator and deregistered when
freed, and (with --expect-weft) weft's NCCL_DEBUG_SUBSYS=REG lines must show registrations made.

Windows: with --windows each child also registers two tensors as windows (ncclCommWindowRegister through
ctypes on the process group's communicator, as applications do) and checks all_reduce and all_gather on
them. (PyTorch's own symmetric pools, MemPool + register_mem_pool, need a GPU with multicast, kept off.)

Usage:
  torch_dist_test.py --lib build/libnccl.so.2 --expect-weft      # weft
  torch_dist_test.py                                             # torch's bundled NCCL (validates the test)
Options: --world N (default: 2 or the GPU count if smaller), --init eager|lazy|both, --timeout S.
Exit status 0 only if every check in every child passed.
"""
import argparse
import ctypes
import datetime
import os
import re
import socket
import subprocess
import sys
import threading
import time


# ----------------------------------------------------------------------------------------------------
# Child
# ----------------------------------------------------------------------------------------------------

class _DlInfo(ctypes.Structure):
    _fields_ = [("dli_fname", ctypes.c_char_p), ("dli_fbase", ctypes.c_void_p),
                ("dli_sname", ctypes.c_char_p), ("dli_saddr", ctypes.c_void_p)]


def nccl_provider():
    """File that the process-global symbol ncclCommInitRankConfig comes from (what torch binds to)."""
    glob = ctypes.CDLL(None)
    try:
        fn = glob.ncclCommInitRankConfig
    except AttributeError:
        return None
    dladdr = glob.dladdr
    dladdr.argtypes = [ctypes.c_void_p, ctypes.POINTER(_DlInfo)]
    info = _DlInfo()
    if not dladdr(ctypes.cast(fn, ctypes.c_void_p), ctypes.byref(info)) or not info.dli_fname:
        return None
    return os.path.realpath(info.dli_fname.decode())


def mapped_nccl_libs():
    paths = set()
    with open("/proc/self/maps") as f:
        for line in f:
            parts = line.split()
            if len(parts) >= 6 and "libnccl" in os.path.basename(parts[5]):
                paths.add(os.path.realpath(parts[5]))
    return sorted(paths)


def windows_check(args, dist, torch, dev, rank, world, report, check):
    """Windows as applications make them (PyTorch's own symmetric pools need a GPU with multicast, which
    stays off here): ncclCommWindowRegister through ctypes on the process group's communicator
    (_comm_ptr), on tensors of PyTorch's caching allocator; collectives on them; then deregistration."""
    lib = ctypes.CDLL(args.lib or "libnccl.so.2")
    try:
        backend = dist.group.WORLD._get_backend(dev)
        x = torch.full((1 << 20,), float(rank + 1), device=dev)
        y = torch.empty(world * (1 << 16), device=dev)
        dist.all_reduce(torch.zeros(1, device=dev))  # the communicator exists (lazy init makes it here)
        torch.cuda.synchronize()
        comm = ctypes.c_void_p(backend._comm_ptr())
        wins = []
        for t in (x, y):
            w = ctypes.c_void_p()
            r = lib.ncclCommWindowRegister(comm, ctypes.c_void_p(t.data_ptr()),
                                           ctypes.c_size_t(t.numel() * t.element_size()), ctypes.byref(w), 1)
            report("windows: ncclCommWindowRegister on a tensor", r == 0 and bool(w.value), f"result {r}")
            wins.append(w)
        dist.all_reduce(x)
        check("windows: all_reduce on window tensors", x, torch.full((1 << 20,), float(world * (world + 1) // 2)))
        dist.all_gather_into_tensor(y, x[: 1 << 16])
        check("windows: all_gather_into_tensor on window tensors", y,
              torch.full((world * (1 << 16),), float(world * (world + 1) // 2)))
        torch.cuda.synchronize()
        for w in wins:
            r = lib.ncclCommWindowDeregister(comm, w)
            report("windows: ncclCommWindowDeregister", r == 0, f"result {r}")
    except Exception as e:  # noqa: BLE001 - any failure of the path is a test failure
        report("windows: registration and collectives", False, repr(e))


def child_main(args):
    import torch
    import torch.distributed as dist

    rank = int(os.environ["RANK"])
    world = int(os.environ["WORLD_SIZE"])
    dev = torch.device("cuda", rank)
    torch.cuda.set_device(dev)
    failures = []

    def report(name, ok, detail=""):
        print(f"[rank {rank}] {'PASS' if ok else 'FAIL'} {name}{': ' + detail if detail else ''}", flush=True)
        if not ok:
            failures.append(name)

    def check(name, got, want, exact=True):
        got = got.cpu()
        want = want.cpu()
        if got.shape != want.shape or got.dtype != want.dtype:
            report(name, False, f"shape/dtype {tuple(got.shape)}/{got.dtype}, expected {tuple(want.shape)}/{want.dtype}")
            return
        ok = torch.equal(got, want) if exact else torch.allclose(got.double(), want.double(), rtol=1e-6, atol=1e-6)
        if ok:
            report(name, True)
            return
        bad = (got != want).nonzero()
        i = tuple(bad[0].tolist()) if len(bad) else ()
        report(name, False, f"{len(bad)} wrong elements; first at {i}: expected {want[i].item()} got {got[i].item()}")

    if rank == 0:
        print(f"[rank 0] torch {torch.__version__}, torch.cuda.nccl.version() {torch.cuda.nccl.version()}", flush=True)
    init_kwargs = dict(backend="nccl", init_method="env://", rank=rank, world_size=world,
                       timeout=datetime.timedelta(seconds=args.timeout))
    if args.init == "eager":
        init_kwargs["device_id"] = dev
    t0 = time.time()
    dist.init_process_group(**init_kwargs)
    n = 1 << 20 | 3  # odd, about a million elements
    k = torch.arange(n, device=dev)
    base = (k % 97).to(torch.float32)

    # all_reduce, several types and ops
    x = base * (rank + 1)
    dist.all_reduce(x)
    report("init_process_group + first all_reduce", True, f"{time.time() - t0:.2f} s ({args.init})")
    check("all_reduce sum float32", x, base * (world * (world + 1) // 2))
    xb = ((k % 13) * (rank + 1)).to(torch.bfloat16)
    dist.all_reduce(xb)
    check("all_reduce sum bfloat16", xb, ((k % 13) * (world * (world + 1) // 2)).to(torch.bfloat16))
    xi = (k * 7 + rank * 1000003) % 1000033 + (rank << 40)
    want_max = torch.stack([(k * 7 + r * 1000003) % 1000033 + (r << 40) for r in range(world)]).max(0).values
    dist.all_reduce(xi, op=dist.ReduceOp.MAX)
    check("all_reduce max int64", xi, want_max)
    xa = base * 2 * (rank + 1)
    dist.all_reduce(xa, op=dist.ReduceOp.AVG)
    check("all_reduce avg float32", xa, base * (world + 1), exact=(world & (world - 1)) == 0)

    # one-to-all and all-to-one
    root = world - 1
    xb2 = base + 1000 * rank
    dist.broadcast(xb2, src=root)
    check("broadcast from the last rank", xb2, base + 1000 * root)
    xr = base + rank
    dist.reduce(xr, dst=0)
    if rank == 0:
        check("reduce sum to rank 0", xr, base * world + world * (world - 1) // 2)

    # gather / scatter style
    m = 65537
    mine = torch.arange(m, device=dev, dtype=torch.int32) + rank * 1_000_000
    out = torch.empty(world * m, device=dev, dtype=torch.int32)
    dist.all_gather_into_tensor(out, mine)
    check("all_gather_into_tensor int32",
          out, torch.cat([torch.arange(m, dtype=torch.int32) + r * 1_000_000 for r in range(world)]))
    # Every partial sum, in whatever order the ranks add, stays an integer below 2048, which float16
    # holds exactly: then the result is exact on any number of ranks.
    tri = world * (world + 1) // 2
    span = max(2, 2048 // tri)
    big = (torch.arange(world * m, device=dev) % span).to(torch.float16) * (rank + 1)
    part = torch.empty(m, device=dev, dtype=torch.float16)
    dist.reduce_scatter_tensor(part, big)
    want_rs = ((torch.arange(world * m) % span).double() * tri)[rank * m:(rank + 1) * m]
    check("reduce_scatter_tensor sum float16", part, want_rs.to(torch.float16))
    a2a_in = torch.arange(world * m, device=dev, dtype=torch.int64) + rank * 10_000_000
    a2a_out = torch.empty_like(a2a_in)
    dist.all_to_all_single(a2a_out, a2a_in)
    want_a2a = torch.cat([torch.arange(rank * m, (rank + 1) * m, dtype=torch.int64) + r * 10_000_000
                          for r in range(world)])
    check("all_to_all_single int64", a2a_out, want_a2a)

    # point to point
    if world > 1:
        msg = torch.full((4099,), 0.0, device=dev)
        if rank == 0:
            msg.fill_(42.5)
            dist.send(msg, dst=1)
        elif rank == 1:
            dist.recv(msg, src=0)
            check("send/recv 0 -> 1", msg, torch.full((4099,), 42.5))
        nxt, prv = (rank + 1) % world, (rank - 1) % world
        s = torch.full((100003,), float(rank), device=dev)
        r_ = torch.empty_like(s)
        reqs = [dist.isend(s, dst=nxt), dist.irecv(r_, src=prv)]
        for q in reqs:
            q.wait()
        check("isend/irecv ring", r_, torch.full((100003,), float(prv)))

    # new groups
    g_all = dist.new_group(ranks=list(range(world)))
    y = torch.full((1025,), float(rank + 1), device=dev)
    dist.all_reduce(y, group=g_all)
    check("new_group(all ranks) all_reduce", y, torch.full((1025,), float(world * (world + 1) // 2)))
    g_one = dist.new_group(ranks=[0])
    if rank == 0:
        z = torch.full((33,), 5.0, device=dev)
        dist.all_reduce(z, group=g_one)
        check("new_group([0]) all_reduce", z, torch.full((33,), 5.0))

    # CUDA graph: capture one all_reduce, replay with fresh inputs
    if not args.no_graph:
        try:
            gin = torch.zeros(65536, device=dev)
            side = torch.cuda.Stream()
            side.wait_stream(torch.cuda.current_stream())
            with torch.cuda.stream(side):
                dist.all_reduce(gin)  # warm-up on the capture stream
            torch.cuda.current_stream().wait_stream(side)
            graph = torch.cuda.CUDAGraph()
            with torch.cuda.graph(graph):
                dist.all_reduce(gin)
            ok = True
            for it in range(10):
                gin.fill_(float(rank + 1 + it))
                graph.replay()
                torch.cuda.synchronize()
                want = float(sum(r + 1 + it for r in range(world)))
                if not torch.equal(gin.cpu(), torch.full((65536,), want)):
                    ok = False
                    report("all_reduce in a CUDA graph, 10 replays", False, f"replay {it}: got {gin[0].item()} want {want}")
                    break
            if ok:
                report("all_reduce in a CUDA graph, 10 replays", True)
        except Exception as e:  # noqa: BLE001 - report any capture failure as a test failure
            report("all_reduce in a CUDA graph, 10 replays", False, repr(e))

    if args.windows:
        windows_check(args, dist, torch, dev, rank, world, report, check)

    dist.barrier()
    torch.cuda.synchronize()

    # which library served all this
    provider = nccl_provider()
    mapped = mapped_nccl_libs()
    print(f"[rank {rank}] ncclCommInitRankConfig resolves to {provider}; mapped libnccl files: {mapped}", flush=True)
    if args.lib:
        want_lib = os.path.realpath(args.lib)
        report("the process uses --lib (dladdr of ncclCommInitRankConfig)", provider == want_lib,
               f"got {provider}, expected {want_lib}")
        report("--lib is mapped into the process", want_lib in mapped, str(mapped))
        if len(mapped) > 1:
            print(f"[rank {rank}] note: another libnccl is also mapped (unused for symbol binding): {mapped}", flush=True)

    t1 = time.time()
    dist.destroy_process_group()
    report("destroy_process_group", True, f"{time.time() - t1:.2f} s")
    print(f"[rank {rank}] CHILD RESULT {'FAIL' if failures else 'PASS'} ({len(failures)} failed)", flush=True)
    return 1 if failures else 0


# ----------------------------------------------------------------------------------------------------
# Launcher
# ----------------------------------------------------------------------------------------------------

def free_port():
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def gpu_count():
    try:
        out = subprocess.run(["nvidia-smi", "-L"], capture_output=True, text=True, timeout=60).stdout
        n = len([l for l in out.splitlines() if l.startswith("GPU ")])
        if n:
            return n
    except (OSError, subprocess.SubprocessError):
        pass
    try:
        import torch  # the children are separate processes, so touching CUDA here is harmless
        return torch.cuda.device_count()
    except Exception:  # noqa: BLE001
        return 0


def run_once(args, init, world):
    env = dict(os.environ)
    env.update({
        "MASTER_ADDR": "127.0.0.1", "MASTER_PORT": str(free_port()), "WORLD_SIZE": str(world),
        "NCCL_NVLS_ENABLE": "0", "TORCH_SYMM_MEM_DISABLE_MULTICAST": "1", "NVSHMEM_DISABLE_NVLS": "1",
        "TORCH_NCCL_USE_TENSOR_REGISTER_ALLOCATOR_HOOK": "1" if args.register else "0",
    })
    if args.register or args.windows:
        env.update({"NCCL_DEBUG": "INFO", "NCCL_DEBUG_SUBSYS": "REG"})
    # The banner (NCCL_DEBUG=VERSION, also printed at INFO/TRACE) is part of the proof of the library.
    if env.get("NCCL_DEBUG", "").upper() not in ("VERSION", "INFO", "TRACE"):
        env["NCCL_DEBUG"] = "VERSION"
    if args.lib:
        env["LD_PRELOAD"] = os.path.realpath(args.lib) + (":" + env["LD_PRELOAD"] if env.get("LD_PRELOAD") else "")
    procs = []
    for r in range(world):
        cenv = dict(env, RANK=str(r), LOCAL_RANK=str(r))
        cmd = [sys.executable, os.path.abspath(__file__), "--child", "--init", init, "--timeout", str(args.timeout)]
        if args.lib:
            cmd += ["--lib", args.lib]
        if args.no_graph:
            cmd.append("--no-graph")
        if args.windows:
            cmd.append("--windows")
        procs.append(subprocess.Popen(cmd, env=cenv, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True))
    lines = []
    deadline = time.time() + args.timeout + 120
    # One reader thread per child, so that no child blocks on a full pipe.

    def pump(i, p):
        for line in p.stdout:
            line = line.rstrip("\n")
            lines.append((i, line))
            print(f"  [{init} r{i}] {line}", flush=True)

    threads = [threading.Thread(target=pump, args=(i, p), daemon=True) for i, p in enumerate(procs)]
    for t in threads:
        t.start()
    # A rank that fails leaves the others waiting for it (in the rendezvous or a collective):
    # they get a few seconds to report their own state, then are stopped.
    codes = [None] * len(procs)
    failed_at = None
    while any(c is None for c in codes):
        for i, p in enumerate(procs):
            if codes[i] is None and p.poll() is not None:
                codes[i] = p.returncode
                if p.returncode != 0 and failed_at is None:
                    failed_at = time.time()
                    print(f"  [{init}] rank {i} exited with {p.returncode}; stopping the others in 10 s", flush=True)
        now = time.time()
        if now > deadline or (failed_at is not None and now - failed_at > 10):
            for i, p in enumerate(procs):
                if codes[i] is None:
                    p.kill()
                    p.wait()
                    codes[i] = -9
        time.sleep(0.1)
    for t in threads:
        t.join(timeout=10)
    ok = all(c == 0 for c in codes)
    banners = [l for _, l in lines if re.search(r"NCCL version", l)]
    if args.expect_weft:
        weft_banner = any("weft" in l for l in banners)
        print(f"  [{init}] {'PASS' if weft_banner else 'FAIL'} NCCL_DEBUG=VERSION banner names weft: "
              f"{banners[:1] if banners else 'no banner printed'}")
        ok = ok and weft_banner
    elif banners:
        print(f"  [{init}] banner: {banners[0]}")
    if args.register and args.expect_weft:
        made = sum(1 for _, l in lines if "ncclCommRegister: rank" in l and "-> handle" in l)
        print(f"  [{init}] {'PASS' if made else 'FAIL'} buffers registered through the allocator hook: {made}")
        ok = ok and made > 0
    if args.windows and args.expect_weft:
        made = sum(1 for _, l in lines if "ncclCommWindowRegister: rank" in l and "-> window" in l)
        regs = sum(1 for _, l in lines if "ncclCommRegister: rank" in l and "-> handle" in l)
        print(f"  [{init}] windows: {made} made by ncclCommWindowRegister, {regs} registrations by ncclCommRegister")
    print(f"  [{init}] children exited with {codes}")
    return ok


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
    ap.add_argument("--lib", help="libnccl.so.2 to LD_PRELOAD into the children (default: torch's own)")
    ap.add_argument("--expect-weft", action="store_true", help="require the NCCL_DEBUG=VERSION banner to say weft")
    ap.add_argument("--world", type=int, default=0)
    ap.add_argument("--init", choices=["eager", "lazy", "both"], default="both")
    ap.add_argument("--timeout", type=int, default=300)
    ap.add_argument("--no-graph", action="store_true", help="skip the CUDA graph check")
    ap.add_argument("--register", action="store_true",
                    help="TORCH_NCCL_USE_TENSOR_REGISTER_ALLOCATOR_HOOK=1: the allocator registers its segments")
    ap.add_argument("--windows", action="store_true",
                    help="tensors registered as windows (ncclCommWindowRegister) and collectives on them")
    args = ap.parse_args()
    if args.child:
        return child_main(args)
    world = args.world or min(2, gpu_count())
    if world < 1:
        print("torch_dist_test: FAIL: no GPU found")
        return 2
    if world > gpu_count():
        print(f"torch_dist_test: FAIL: --world {world} needs one GPU per rank, {gpu_count()} visible")
        return 2
    if args.lib and not os.path.exists(args.lib):
        print(f"torch_dist_test: FAIL: --lib {args.lib} does not exist")
        return 2
    inits = ["eager", "lazy"] if args.init == "both" else [args.init]
    results = {}
    for init in inits:
        print(f"torch_dist_test: {init} init, {world} processes, library {args.lib or 'torch bundled NCCL'}", flush=True)
        results[init] = run_once(args, init, world)
    for init, ok in results.items():
        print(f"torch_dist_test {init}: {'PASS' if ok else 'FAIL'}")
    all_ok = all(results.values())
    print(f"torch_dist_test: {'PASS' if all_ok else 'FAIL'}")
    return 0 if all_ok else 1


if __name__ == "__main__":
    sys.exit(main())
