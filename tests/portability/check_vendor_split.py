#!/usr/bin/env python3
"""The CUDA/HIP split of the source tree (DESIGN.md section 5): only src/runtime/ and
src/device/arch/ may depend on the GPU vendor. Checked on src/**/*.{cc,h,cu,cuh} with comments,
string literals and character literals blanked out first (they may name anything):

 1. Outside runtime/ and device/arch/: no call of a vendor runtime or driver function, i.e. no
    identifier cudaXxx / cuXxx / hipXxx (prefix then a capital letter) followed by '(' ; and no
    #include of a vendor header (<cuda*>, <cu*.h>, <hip/*>, <nv*>, <nvml*>).
 2. In device code outside device/arch/ (src/device/**): no warp-width assumption, i.e.
    - no literal 32 or 31, and no full 32-lane mask 0xffffffff, except as the whole value
      expression of a named constant (`constexpr <type> kName = 32 * 1024;`) whose name does not
      mention Warp, Lane or Wave: a named constant says what it counts, the warp width must come
      from arch::kWarpSize;
    - no warp intrinsics or inline assembly: __shfl*, __ballot*, __any_sync, __all_sync,
      __syncwarp, __activemask, warpSize, asm(...) belong in device/arch/.
usage: check_vendor_split.py SRC_DIR
"""
import os
import re
import sys

CALL = re.compile(r"\b(?:cuda|cu|hip)[A-Z]\w*\s*\(")
INCLUDE = re.compile(r"^\s*#\s*include\s*<\s*(?:cuda|cu[A-Za-z_]*\.h|hip/|nv)", re.M)
WIDTH = re.compile(r"(?<![\w.])(?:3[12]|0[xX][fF]{8})(?![\w.])")
CONST = re.compile(r"^\s*(?:static\s+)?constexpr\s+[\w:<> ]+?\s+(k\w+)\s*=")
INTRINSIC = re.compile(r"\b(?:__shfl\w*|__ballot\w*|__any_sync|__all_sync|__syncwarp|__activemask|warpSize)\b"
                       r"|\basm\b\s*(?:volatile\s*)?\(")


def strip(text):
    """Blanks comments and string/char literals, keeping line structure."""
    out, i, n = [], 0, len(text)
    while i < n:
        c = text[i]
        if text.startswith("//", i):
            j = text.find("\n", i)
            j = n if j < 0 else j
            out.append(" " * (j - i))
            i = j
        elif text.startswith("/*", i):
            j = text.find("*/", i + 2)
            j = n if j < 0 else j + 2
            out.append(re.sub(r"[^\n]", " ", text[i:j]))
            i = j
        elif c in "\"'" and not (c == "'" and i > 0 and text[i - 1].isalnum()):  # 1'000 digit separators
            j = i + 1
            while j < n and text[j] != c and text[j] != "\n":
                j += 2 if text[j] == "\\" else 1
            out.append(c + " " * (j - i - 1) + (c if j < n else ""))
            i = j + 1
        else:
            out.append(c)
            i += 1
    return "".join(out)


def main():
    src = os.path.abspath(sys.argv[1])
    problems, files = [], 0
    for root, _, names in os.walk(src):
        rel_root = os.path.relpath(root, src).replace(os.sep, "/")
        vendor = rel_root == "runtime" or rel_root.startswith("runtime/") or rel_root == "device/arch"
        device = rel_root == "device" or rel_root.startswith("device/")
        for name in sorted(names):
            if not name.endswith((".cc", ".h", ".cu", ".cuh")) or vendor:
                continue
            files += 1
            path = os.path.join(root, name)
            rel = os.path.relpath(path, os.path.dirname(src))
            with open(path, encoding="utf-8") as f:
                raw = f.read()
            for m in INCLUDE.finditer(raw):
                line = raw.count("\n", 0, m.end()) + 1
                problems.append(f"{rel}:{line}: vendor header include: {raw.splitlines()[line - 1].strip()}")
            for no, line in enumerate(strip(raw).splitlines(), 1):
                for m in CALL.finditer(line):
                    problems.append(f"{rel}:{no}: vendor runtime call {m.group(0).rstrip('( ')}(...)")
                if not device:
                    continue
                for m in INTRINSIC.finditer(line):
                    problems.append(f"{rel}:{no}: warp intrinsic or inline asm outside device/arch: {m.group(0)}")
                if WIDTH.search(line):
                    const = CONST.match(line)
                    if not const or re.search(r"warp|lane|wave", const.group(1), re.I):
                        problems.append(f"{rel}:{no}: literal warp width (use arch::kWarpSize / LaneMask): "
                                        f"{line.strip()}")
    for p in problems:
        print("FAIL:", p)
    print(f"checked {files} files under {src} (outside runtime/ and device/arch/): {len(problems)} problems")
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
