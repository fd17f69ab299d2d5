#!/usr/bin/env bash
# Where a kernel's register spills are (GPU machine, needs cuobjdump and nvdisasm): the source
# lines of the local-memory loads and stores (LDL/STL) in the SASS of every kernel whose name
# contains PATTERN, most frequent first. The build must carry line info (-lineinfo, weft's default).
#   bash tools/spill_lines.sh build-gpu/libnccl.so.2 weftKernelSpecialSimple
set -u
lib=$1 pattern=$2 tmp=$(mktemp -d)
(cd $tmp && cuobjdump -xelf all "$OLDPWD/$lib" > /dev/null 2>&1 || cuobjdump -xelf all "$lib" > /dev/null)
for cubin in $tmp/*.cubin; do
  nvdisasm -g -c "$cubin" 2>/dev/null | awk -v pat="$pattern" '
    /^[ \t]*\.text\./ { fn = $0; keep = index($0, pat) > 0 }
    /\/\/## File/ { where = $0; sub(/.*File "/, "", where); sub(/", line /, ":", where); sub(/[ ,].*$/, "", where) }
    keep && /(LDL|STL)/ { kind = ($0 ~ /STL/) ? "STL" : "LDL"; n[kind " " where]++ }
    END { for (k in n) print n[k], k }'
done | sort -rn | head -40
rm -rf $tmp
