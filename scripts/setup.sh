#!/usr/bin/env bash
# Installs everything msprobe-shim needs to build, test and benchmark, from Debian packages only.
# Idempotent: packages already present are skipped, and `apt-get update` runs at most once.
set -euo pipefail

packages=(
  build-essential cmake ninja-build pkg-config clang-format
  clang-tidy-16  # the function-size gate (scripts/clang_tidy.sh --gate); 16 parses the C++20 that GCC 12 takes
  libelf-dev libunwind-dev nlohmann-json3-dev libspdlog-dev liblz4-dev libffi-dev
  libgtest-dev libgmock-dev libbenchmark-dev
  python3 python3-numpy python3-pytest
  file binutils
  python3-build python3-venv python3-setuptools python3-wheel  # the wheel (scripts/build_wheel.sh, test_wheel.py)
  debootstrap  # the Debian 11 chroot of the compat stage (scripts/compat_chroot.sh)
  lz4  # the lz4 tool: tests decompress MSPROBE_COMPRESS=lz4 files with it, independently of our reader
  clang libclang-rt-14-dev  # libFuzzer and the clang sanitizer runtimes (scripts/fuzz.sh)
  openmpi-bin libopenmpi-dev  # msprobe-inspect-mpi, the MPI driver of first-nan / first-diff (docs/inspect.md)
  libjs-chart.js  # Chart.js, embedded into msprobe-inspect when it is built: its report draws with it (docs/report.md)
  chromium fonts-dejavu-core python3-pil  # headless chromium, a font, and PIL to read its screenshots: the report's
                                          # browser tests (test_inspect_report.py) and bench/bench_report.py
)

missing=()
for p in "${packages[@]}"; do
  if ! dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed"; then
    missing+=("$p")
  fi
done

if [ ${#missing[@]} -eq 0 ]; then
  echo "setup: all ${#packages[@]} packages already installed"
  exit 0
fi

SUDO=""
if [ "$(id -u)" -ne 0 ]; then SUDO="sudo"; fi
echo "setup: installing ${missing[*]}"
export DEBIAN_FRONTEND=noninteractive
$SUDO apt-get update -qq
$SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}"
echo "setup: done"
