#!/usr/bin/env bash
# Runs a real MPI application that nobody on this project wrote, plain and
# under a wrapper (default `topocomm accel --`), checks that its results are
# identical and prints its own timings side by side (docs/benchmarks/accel.md).
#
# The application: LAMMPS (Debian package `lammps`, /usr/bin/lmp, version
# 29 Sep 2021, linked against Debian's Open MPI: libmpi.so.40; the script
# reads the MPI from `ldd` and picks mpirun.openmpi or mpirun.mpich to match).
# The input is LAMMPS's own standard benchmark bench/in.lj (3d Lennard-Jones
# melt, 32000 atoms, fixed velocity seed 87287), reproduced below unchanged
# except for its last lines: thermo output every 10 steps at 15 significant
# digits (thermo_modify format float %.15g) instead of the default 2 lines
# at 8 digits, so that the comparison is strict. Its halo exchange sends
# messages of tens to hundreds of KiB between neighbouring ranks every step
# (MPI_Irecv/MPI_Send in LAMMPS's CommBrick), plus MPI_Allreduce for thermo.
#
# Compared exactly (must be identical): the thermo table (step, temperature,
# pair energy, total energy, pressure at steps 0,10,...,100), the atom count,
# the per-rank atom/ghost/neighbour statistics, the total neighbour count and
# the number of neighbour list builds. With the same rank count and binding,
# LAMMPS computes the same floating-point operations in the same order, so
# any difference means a message arrived with wrong contents or order.
# Reported, not compared: LAMMPS's "Loop time", "Performance" and the Comm row
# of its timing breakdown, and the wall time of the whole mpirun.
#
#   scripts/real-app.sh                          # plain vs `topocomm accel --`
#   scripts/real-app.sh --wrap 'env --'          # plumbing test
#   scripts/real-app.sh --runs 5 --np 2 --scale 2
#
# Options:
#   --wrap CMD   command put before mpirun (default 'topocomm accel --'; {impl}
#                becomes openmpi or mpich, e.g. 'topocomm accel --mpi {impl} --')
#   --np N       ranks (default 2; beyond the PU count Open MPI gets --oversubscribe)
#   --runs N     plain/wrapped pairs, alternating which goes first (default 1)
#   --scale K    box replication per dimension (default 1: 32000 atoms; 2: 256000)
#   --steps N    MD steps (default 100)
#   --keep DIR   keep the inputs and outputs in DIR (default: a temp dir, removed)
# Exit status: 0 identical results, 1 results differ or a run failed, 2 usage,
# missing wrapper or install failure.
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
WRAP='topocomm accel --'
NP=2
RUNS=1
SCALE=1
STEPS=100
KEEP=""

die() { echo "real-app: $*" >&2; exit 2; }
while (($#)); do
  case "$1" in
    --wrap) WRAP="${2?--wrap needs a value}"; shift 2 ;;
    --np) NP="${2?}"; shift 2 ;;
    --runs) RUNS="${2?}"; shift 2 ;;
    --scale) SCALE="${2?}"; shift 2 ;;
    --steps) STEPS="${2?}"; shift 2 ;;
    --keep) KEEP="${2?}"; shift 2 ;;
    -h|--help) sed -n '2,/^set -euo/p' "$0" | sed '$d; s/^# \{0,1\}//'; exit 0 ;;
    *) die "unknown argument '$1' (see --help)" ;;
  esac
done
for v in NP RUNS SCALE STEPS; do
  [[ "${!v}" =~ ^[1-9][0-9]*$ ]] || die "--${v,,} must be a positive integer, got '${!v}'"
done
((STEPS % 10 == 0)) || die "--steps must be a multiple of 10 (thermo output every 10 steps)"

# Install LAMMPS when missing, as scripts/setup.sh does.
if ! dpkg-query -W -f='${Status}' lammps 2>/dev/null | grep -q "install ok installed" || ! command -v lmp >/dev/null; then
  SUDO=""
  if [ "$(id -u)" -ne 0 ]; then
    if command -v sudo >/dev/null; then SUDO="sudo"; else
      die "the Debian package lammps is missing and this is not root; run as root or install sudo"
    fi
  fi
  echo "real-app: installing lammps" >&2
  export DEBIAN_FRONTEND=noninteractive
  $SUDO apt-get update -qq || die "apt-get update failed"
  $SUDO apt-get install -y -qq --no-install-recommends lammps >/dev/null || die "apt-get install lammps failed"
fi
LMP="$(command -v lmp)"

# The MPI that lmp links.
LIBS="$(ldd "$LMP"; ldd "$(ldd "$LMP" | awk '/liblammps/ {print $3}')" 2>/dev/null || true)"
if grep -q 'libmpi\.so\.40' <<<"$LIBS"; then IMPL=openmpi
elif grep -q 'libmpich' <<<"$LIBS"; then IMPL=mpich
else die "cannot tell which MPI $LMP links (ldd shows neither libmpi.so.40 nor libmpich)"; fi
MPIRUN="mpirun.$IMPL"
command -v "$MPIRUN" >/dev/null || die "$MPIRUN not found (lmp links $IMPL)"
if [ "$IMPL" = openmpi ]; then
  LAUNCH=("$MPIRUN" -n "$NP" --bind-to core)
  (( NP > $(nproc) )) && LAUNCH+=(--oversubscribe)
  export OMPI_ALLOW_RUN_AS_ROOT="${OMPI_ALLOW_RUN_AS_ROOT:-1}" OMPI_ALLOW_RUN_AS_ROOT_CONFIRM="${OMPI_ALLOW_RUN_AS_ROOT_CONFIRM:-1}"
else
  LAUNCH=("$MPIRUN" -n "$NP" -bind-to core)
fi
export OMP_NUM_THREADS=1

# The wrapper: words of --wrap, {impl} substituted; the first must exist.
read -r -a WRAPV <<<"${WRAP//\{impl\}/$IMPL}"
((${#WRAPV[@]})) || die "--wrap is empty"
if ! command -v "${WRAPV[0]}" >/dev/null; then
  if [ "${WRAPV[0]}" = topocomm ] && [ -x "$ROOT/target/release/topocomm" ]; then
    WRAPV[0]="$ROOT/target/release/topocomm"
  else
    die "wrapper command '${WRAPV[0]}' not found (from --wrap '$WRAP'); build topocomm ('cargo build --release') or put it on PATH, or test the plumbing with --wrap 'env --'"
  fi
fi

if [ -n "$KEEP" ]; then DIR="$KEEP"; mkdir -p "$DIR"; else DIR="$(mktemp -d)"; trap 'rm -rf "$DIR"' EXIT; fi

# LAMMPS bench/in.lj; only the thermo lines at the end and the run length differ.
cat >"$DIR/in.lj" <<EOF
# 3d Lennard-Jones melt

variable	x index 1
variable	y index 1
variable	z index 1

variable	xx equal 20*\$x
variable	yy equal 20*\$y
variable	zz equal 20*\$z

units		lj
atom_style	atomic

lattice		fcc 0.8442
region		box block 0 \${xx} 0 \${yy} 0 \${zz}
create_box	1 box
create_atoms	1 box
mass		1 1.0

velocity	all create 1.44 87287 loop geom

pair_style	lj/cut 2.5
pair_coeff	1 1 1.0 1.0 2.5

neighbor	0.3 bin
neigh_modify	delay 0 every 20 check no

fix		1 all nve

thermo		10
thermo_modify	format float %.15g
run		$STEPS
EOF
APP=("$LMP" -in "$DIR/in.lj" -var x "$SCALE" -var y "$SCALE" -var z "$SCALE" -log none -nocite)

echo "real-app: $LMP links $IMPL; $((32000 * SCALE * SCALE * SCALE)) atoms, $STEPS steps, $NP ranks" >&2
echo "real-app: plain:   ${LAUNCH[*]} ${APP[*]}" >&2
echo "real-app: wrapped: ${WRAPV[*]} ${LAUNCH[*]} ${APP[*]}" >&2

# run NAME CMD... -> $DIR/NAME.out, wall seconds in $DIR/NAME.wall
run() {
  local name="$1"; shift
  local t0 t1
  t0=$(date +%s.%N)
  if ! "$@" >"$DIR/$name.out" 2>&1; then
    echo "real-app: $name run failed: $*" >&2
    tail -n 30 "$DIR/$name.out" >&2
    exit 1
  fi
  t1=$(date +%s.%N)
  awk -v a="$t0" -v b="$t1" 'BEGIN {printf "%.2f\n", b - a}' >"$DIR/$name.wall"
}

# Result lines that must be identical.
results() {
  awk '
    /^Step / {on = 1}
    /^Loop time/ {on = 0}
    on {print; next}
    /^Created [0-9]+ atoms/ || /^(Nlocal|Nghost|Neighs):/ || /^Histogram:/ || /^Total # of neighbors/ ||
    /^Ave neighs\/atom/ || /^Neighbor list builds/ || /MPI processor grid/ {print}
  ' "$1" | sed 's/[[:space:]]*$//'
}

# name -> "loop_s comm_s steps_per_s wall_s"
timing() {
  awk -v wall="$(cat "$DIR/$1.wall")" '
    /^Loop time of/ {loop = $4}
    /^Performance:/ {for (i = 1; i < NF; i++) if ($(i + 1) ~ /^timesteps\/s/) tps = $i}
    /^Comm +\|/ {split($0, f, "|"); comm = f[3]; gsub(/ /, "", comm)}
    END {printf "%s %s %s %s\n", loop, comm, tps, wall}
  ' "$DIR/$1.out"
}

for ((r = 1; r <= RUNS; r++)); do
  if ((r % 2)); then
    run "plain.$r" "${LAUNCH[@]}" "${APP[@]}"
    run "wrapped.$r" "${WRAPV[@]}" "${LAUNCH[@]}" "${APP[@]}"
  else
    run "wrapped.$r" "${WRAPV[@]}" "${LAUNCH[@]}" "${APP[@]}"
    run "plain.$r" "${LAUNCH[@]}" "${APP[@]}"
  fi
done

results "$DIR/plain.1.out" >"$DIR/plain.1.res"
rows=$(grep -c . "$DIR/plain.1.res" || true)
if ! grep -q '^Step ' "$DIR/plain.1.res" || ((rows < STEPS / 10 + 2)); then
  echo "real-app: no thermo table in the plain output ($DIR/plain.1.out):" >&2
  tail -n 30 "$DIR/plain.1.out" >&2
  exit 1
fi

echo "real-app: $(head -n 1 "$DIR/plain.1.out")" >&2
status=0
for ((r = 1; r <= RUNS; r++)); do
  for kind in plain wrapped; do
    results "$DIR/$kind.$r.out" >"$DIR/$kind.$r.res"
    if ! cmp -s "$DIR/plain.1.res" "$DIR/$kind.$r.res"; then
      echo "real-app: RESULTS DIFFER: $kind run $r vs plain run 1:" >&2
      diff "$DIR/plain.1.res" "$DIR/$kind.$r.res" >&2 || true
      status=1
    fi
  done
done

echo
echo "Results (plain run 1 | wrapped run 1; compared exactly over all $RUNS run(s) of each):"
w=$(awk '{ if (length > m) m = length } END {print m + 2}' "$DIR/plain.1.res")
paste -d'\t' "$DIR/plain.1.res" "$DIR/wrapped.1.res" | awk -F'\t' -v w="$w" '{
  printf "%-*s| %s%s\n", w, $1, $2, ($1 == $2 ? "" : "   <-- differs") }'

echo
echo "Timing (LAMMPS's own lines; wall = the whole mpirun):"
printf "%-4s  %12s %12s  %12s %12s  %10s %10s  %9s %9s\n" run "plain loop s" "wrapped" "plain comm s" "wrapped" \
  "plain st/s" "wrapped" "plain wall" "wrapped"
for ((r = 1; r <= RUNS; r++)); do
  read -r pl pc pt pw <<<"$(timing "plain.$r")"
  read -r wl wc wt ww <<<"$(timing "wrapped.$r")"
  printf "%-4s  %12s %12s  %12s %12s  %10s %10s  %9s %9s\n" "$r" "$pl" "$wl" "$pc" "$wc" "$pt" "$wt" "$pw" "$ww"
done
for kind in plain wrapped; do
  for ((r = 1; r <= RUNS; r++)); do timing "$kind.$r"; done | awk '{print $1}' | sort -g | awk -v k="$kind" '
    {v[NR] = $1} END {n = NR; m = (n % 2) ? v[(n + 1) / 2] : (v[n / 2] + v[n / 2 + 1]) / 2;
      printf "%-7s median loop time %.4g s over %d run(s)\n", k ":", m, n}'
done

if ((status)); then
  echo "real-app: FAIL: results differ (outputs in ${KEEP:-a temp dir; rerun with --keep DIR})" >&2
else
  echo "real-app: OK: results identical (plain vs wrapped, $RUNS run(s) each)"
fi
exit $status
