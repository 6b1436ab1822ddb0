#!/usr/bin/env bash
# Scale of the mapper's inputs (issue 19): `topocomm map` of 3,000,000 ranks
# with few edges (a chain every 1000 ranks) onto 50,000 nodes of 64 PUs,
# time and peak memory next to the 10 s limit the issue sets. Not run by CI.
#   scripts/bench-map-scale.sh [TOPOCOMM] [REPEATS]
set -euo pipefail
bin=${1:-$(dirname "$0")/../target/release/topocomm}
repeats=${2:-3}
[ -x "$bin" ] || { echo "bench-map-scale: $bin is not an executable (make build)" >&2; exit 2; }
dir=$(mktemp -d); trap 'rm -rf "$dir"' EXIT
python3 - "$dir/3m.csv" <<'PY'
import sys
with open(sys.argv[1], "w") as f:
    f.write("src,dst,bytes,msgs\n")
    for i in range(0, 3000000, 1000):
        f.write(f"{i},{i+1},1000,1\n")
    f.write("2999999,0,10,1\n")
PY
for strategy in auto packed; do
  secs=(); kib=()
  for _ in $(seq "$repeats"); do
    read -r s k < <( { /usr/bin/time -f "%e %M" "$bin" map "$dir/3m.csv" --topology "synthetic:pack:2 core:16 pu:2" \
      --nodes 50000 --strategy "$strategy" --out "$dir/out.perm" -q; } 2>&1 | tail -1)
    secs+=("$s"); kib+=("$k")
  done
  python3 - "$strategy" "${secs[*]}" "${kib[*]}" <<'PY'
import statistics, sys
st, secs, kib = sys.argv[1], [float(x) for x in sys.argv[2].split()], [int(x) for x in sys.argv[3].split()]
s = statistics.median(secs)
print(f"map --strategy {st:7} 3,000,000 ranks, 3,001 edges, 50,000 nodes: median {s:5.2f} s "
      f"(min {min(secs):.2f}, max {max(secs):.2f}; limit 10 s: {s/10:.2f}x)  peak RSS {max(kib)/1024:5.0f} MiB")
PY
done
