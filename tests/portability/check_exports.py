#!/usr/bin/env python3
"""Checks the exports of a weft shared library: every expected API name X is a weak definition
(nm type W) whose profiling twin pX is a global definition (T) at the same address; nothing but
the expected names (and their twins) is exported; the SONAME is as given.

usage: check_exports.py LIB SONAME LIST [LIST...]   (LIST: one name per line, '#' comments)
"""
import re
import subprocess
import sys


def main():
    lib, soname, lists = sys.argv[1], sys.argv[2], sys.argv[3:]
    expected = set()
    for path in lists:
        with open(path) as f:
            expected |= {l.split('#')[0].strip() for l in f if l.split('#')[0].strip()}
    out = subprocess.run(["nm", "-D", "--defined-only", lib], check=True, capture_output=True, text=True).stdout
    symbols = {}
    for line in out.splitlines():
        parts = line.split()
        if len(parts) == 3:
            symbols[parts[2]] = (parts[1], parts[0])
    errors = []
    # The one internal name NCCL exports as a plain global (no p-twin).
    plain = {"ncclResetDebugInitInternal"}
    for name in sorted(expected):
        if name.startswith("p") or name in plain:
            if name not in symbols:
                errors.append(f"missing export {name}")
            continue
        api, alias = symbols.get(name), symbols.get("p" + name)
        if api is None or alias is None:
            errors.append(f"missing export {name} or p{name}")
            continue
        if api[0] != "W":
            errors.append(f"{name} is {api[0]}, want W (weak, so that interposers can replace it)")
        if alias[0] != "T":
            errors.append(f"p{name} is {alias[0]}, want T")
        if api[1] != alias[1]:
            errors.append(f"p{name} is not an alias of {name}")
    allowed = expected | {"p" + n for n in expected}
    for name in sorted(symbols):
        if name not in allowed:
            errors.append(f"unexpected export {name} ({symbols[name][0]})")
    dyn = subprocess.run(["readelf", "-d", lib], check=True, capture_output=True, text=True).stdout
    got = re.findall(r"\(SONAME\)\s+Library soname: \[(.*)\]", dyn)
    if got != [soname]:
        errors.append(f"SONAME is {got}, want [{soname}]")
    for e in errors:
        print("FAIL:", e)
    print(f"{lib}: {len(expected)} expected names, {len(symbols)} exports, {len(errors)} problems")
    return 1 if errors else 0


if __name__ == "__main__":
    sys.exit(main())
