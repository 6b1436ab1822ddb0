#!/usr/bin/env bash
# Scale of the machine model (issue 19): time and peak memory of
# `topocomm topo --classes` on a synthetic topology of 1,048,576 PUs, next to
# the limits the issue sets (5 s, 1 GiB). Not run by CI (it is a benchmark);
# the unit test synthetic::tests::a_million_pus_is_linear keeps the builder
# linear.
#   scripts/bench-topo-scale.sh [TOPOCOMM] [REPEATS]
set -euo pipefail
bin=${1:-$(dirname "$0")/../target/release/topocomm}
repeats=${2:-5}
desc="synthetic:pack:16 core:256 pu:256"
[ -x "$bin" ] || { echo "bench-topo-scale: $bin is not an executable (make build)" >&2; exit 2; }
for cmd in "topo --classes" "topo --pair 0,1048575" "topo --json"; do
  secs=(); kib=()
  for _ in $(seq "$repeats"); do
    read -r s k < <( { /usr/bin/time -f "%e %M" "$bin" $cmd --topology "$desc" > /dev/null; } 2>&1 | tail -1)
    secs+=("$s"); kib+=("$k")
  done
  python3 - "$cmd" "${secs[*]}" "${kib[*]}" <<'PY'
import statistics, sys
cmd, secs, kib = sys.argv[1], [float(x) for x in sys.argv[2].split()], [int(x) for x in sys.argv[3].split()]
s, m = statistics.median(secs), max(kib) / 1024
print(f"{cmd:24} 1048576 PUs: median {s:5.2f} s (min {min(secs):.2f}, max {max(secs):.2f}; limit 5 s: {s/5:.2f}x)"
      f"  peak RSS {m:6.0f} MiB (limit 1024 MiB: {m/1024:.2f}x)")
PY
done
