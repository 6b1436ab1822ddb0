#!/usr/bin/env bash
# Installs what topocomm needs on a Debian machine, only what is missing:
# hwloc (headers, pkg-config file, lstopo), libudev (hwlocality links hwloc
# statically through pkg-config), Open MPI and MPICH with their compilers,
# Scotch (mapping baseline), ucx_info and fi_info (250 kB: the rails
# export tests ask UCX and libfabric), a C toolchain, CMake and man (the
# install test builds the CMake example and renders a man page), Chromium
# (the report's render test, headless), HPC Challenge (hpcc: the independent
# ping-pong of scripts/tune-crosscheck.py); checks the Rust toolchain.
# Safe to run again: it does nothing when everything is present.
set -euo pipefail

PACKAGES=(
  build-essential pkg-config
  libhwloc-dev hwloc-nox libudev-dev
  openmpi-bin libopenmpi-dev
  mpich libmpich-dev
  libscotch-dev scotch
  ucx-utils libfabric-bin
  cmake man-db
  chromium
  hpcc
)

missing=()
for p in "${PACKAGES[@]}"; do
  if ! dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed"; then
    missing+=("$p")
  fi
done

if ((${#missing[@]})); then
  SUDO=""
  if [ "$(id -u)" -ne 0 ]; then
    if command -v sudo >/dev/null; then SUDO="sudo"; else
      echo "setup: missing packages (${missing[*]}) and not root; run as root or install sudo" >&2
      exit 1
    fi
  fi
  echo "setup: installing ${missing[*]}" >&2
  export DEBIAN_FRONTEND=noninteractive
  $SUDO apt-get update -qq
  $SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
fi

# The Rust toolchain (1.85 or newer, with rustfmt and clippy) comes from rustup.
if ! command -v cargo >/dev/null; then
  [ -x "$HOME/.cargo/bin/cargo" ] && export PATH="$HOME/.cargo/bin:$PATH"
fi
if ! command -v cargo >/dev/null; then
  echo "setup: cargo not found; install Rust 1.85+ with rustup (https://rustup.rs) and run again" >&2
  exit 1
fi
for comp in rustfmt clippy; do
  if ! cargo "${comp/rustfmt/fmt}" --version >/dev/null 2>&1; then
    echo "setup: adding the Rust component $comp" >&2
    rustup component add "$comp"
  fi
done
