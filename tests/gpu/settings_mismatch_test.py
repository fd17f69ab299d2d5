#!/usr/bin/env python3
"""Ranks started with different environments must fail creation with a named error, not hang.

Two processes (GPUs 0 and 1) create one communicator through weft's libnccl.so.2 (ctypes); the
second sets NCCL_WEFT_P2P_SIMPLE_NCHANNELS=0 (or the variable given). Both must return
ncclInvalidUsage within the timeout, and ncclGetLastError must name the setting and the other
rank. Then both run again with equal settings and must succeed (the check is not too strict).

Usage: settings_mismatch_test.py --lib build/libnccl.so.2 [--var NAME=VALUE] [--timeout S]
Exit status 0 only if every check passed.
"""
import argparse
import ctypes
import multiprocessing as mp
import os
import sys
import time

NCCL_UNIQUE_ID_BYTES = 128
NCCL_INVALID_USAGE = 5


class UniqueId(ctypes.Structure):
    _fields_ = [("internal", ctypes.c_char * NCCL_UNIQUE_ID_BYTES)]


def child(lib_path, rank, uid_bytes, env, out):
    os.environ.update(env)
    os.environ["CUDA_VISIBLE_DEVICES"] = str(rank)  # before CUDA starts: the rank's GPU is device 0
    nccl = ctypes.CDLL(lib_path)
    uid = UniqueId()
    ctypes.memmove(ctypes.byref(uid), uid_bytes, NCCL_UNIQUE_ID_BYTES)
    comm = ctypes.c_void_p()
    t0 = time.time()
    rc = nccl.ncclCommInitRank(ctypes.byref(comm), 2, uid, rank)
    nccl.ncclGetLastError.restype = ctypes.c_char_p
    text = (nccl.ncclGetLastError(comm if rc == 0 else None) or b"").decode(errors="replace")
    if rc == 0:
        nccl.ncclCommDestroy(comm)
    out.put((rank, rc, text, time.time() - t0))


def run(lib, env1, timeout):
    nccl = ctypes.CDLL(lib)
    uid = UniqueId()
    if nccl.ncclGetUniqueId(ctypes.byref(uid)) != 0:
        raise RuntimeError("ncclGetUniqueId failed")
    ctx = mp.get_context("spawn")
    out = ctx.Queue()
    procs = [ctx.Process(target=child, args=(lib, r, ctypes.string_at(ctypes.addressof(uid), NCCL_UNIQUE_ID_BYTES), env1 if r == 1 else {}, out))
             for r in range(2)]
    for p in procs:
        p.start()
    results = {}
    deadline = time.time() + timeout
    while len(results) < 2 and time.time() < deadline:
        try:
            rank, rc, text, secs = out.get(timeout=max(0.1, deadline - time.time()))
            results[rank] = (rc, text, secs)
        except Exception:
            break
    for p in procs:
        p.join(timeout=5)
        if p.is_alive():
            p.kill()
    return results


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--lib", required=True)
    ap.add_argument("--var", default="NCCL_WEFT_P2P_SIMPLE_NCHANNELS=0")
    ap.add_argument("--timeout", type=float, default=60)
    args = ap.parse_args()
    lib = os.path.abspath(args.lib)
    name, value = args.var.split("=", 1)
    ok = True

    got = run(lib, {name: value}, args.timeout)
    for r in range(2):
        if r not in got:
            print(f"FAIL mismatch: rank {r} did not return within {args.timeout} s (hang)")
            ok = False
            continue
        rc, text, secs = got[r]
        named = name in text and f"rank {1 - r}" in text
        print(f"{'PASS' if rc == NCCL_INVALID_USAGE and named else 'FAIL'} mismatch rank {r}: rc={rc} "
              f"after {secs:.2f} s: {text}")
        ok = ok and rc == NCCL_INVALID_USAGE and named

    got = run(lib, {}, args.timeout)
    for r in range(2):
        rc = got.get(r, (-1, "no answer", 0))[0]
        print(f"{'PASS' if rc == 0 else 'FAIL'} equal settings rank {r}: rc={rc}")
        ok = ok and rc == 0
    print("settings_mismatch_test:", "PASS" if ok else "FAIL")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
