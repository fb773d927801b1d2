#!/usr/bin/env bash
# aarch64 (Kunpeng) build and tests on an x86-64 Debian host: installs Debian's cross compiler, the arm64
# multiarch -dev packages and qemu-user-static, cross-builds into build-aarch64/ (warnings are errors) and runs
# the suite under qemu with ctest. Idempotent; Debian packages only. Extra arguments go to ctest.
#
#   scripts/test_aarch64.sh                 # gtests + C++ integration hosts; dumps checked by the host's python3
#   MSPROBE_AARCH64_PYTHON=1 scripts/test_aarch64.sh   # also train.py & co. under an arm64 python3 (slow)
#
# Without binfmt_misc (a container without the privilege to register it), only the tests whose executables
# ctest starts itself run (gtests, through CMAKE_CROSSCOMPILING_EMULATOR); the rest need a child aarch64
# process to be exec'able and are skipped with a message.
set -euo pipefail
here=${MSPROBE_AARCH64_SOURCE_DIR:-$(cd "$(dirname "$0")/.." && pwd)}
build=${MSPROBE_AARCH64_BUILD_DIR:-$here/build-aarch64}
jobs=${MSPROBE_JOBS:-2}
SUDO=""
if [ "$(id -u)" -ne 0 ]; then SUDO="sudo"; fi
export DEBIAN_FRONTEND=noninteractive

# ---- 1. packages ---------------------------------------------------------------------------------------------
"$here/scripts/setup.sh"  # the host's own tools: cmake, ninja, python3-numpy, pytest, ...
updated=0
if ! dpkg --print-foreign-architectures | grep -qx arm64; then
  $SUDO dpkg --add-architecture arm64
  $SUDO apt-get update -qq
  updated=1
fi
packages=(
  g++-aarch64-linux-gnu binutils-aarch64-linux-gnu qemu-user-static
  libffi-dev:arm64 libelf-dev:arm64 libunwind-dev:arm64 liblz4-dev:arm64 libspdlog-dev:arm64
  libgtest-dev:arm64 libgmock-dev:arm64 libbenchmark-dev:arm64
)
missing=()
for p in "${packages[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if [ ${#missing[@]} -gt 0 ]; then
  echo "test_aarch64: installing ${missing[*]}"
  [ $updated -eq 1 ] || $SUDO apt-get update -qq
  $SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
fi

# ---- 2. binfmt_misc: lets any process (ctest, pytest, a shell) exec aarch64 programs through qemu --------------
# qemu-user-static's own registration (/usr/lib/binfmt.d) needs systemd-binfmt or binfmt-support running; this
# does the same thing by hand. The interpreter is static, so an LD_PRELOAD meant for the guest (the shim) does
# not disturb qemu itself.
binfmt=/proc/sys/fs/binfmt_misc
if [ ! -e $binfmt/qemu-aarch64 ]; then
  { mountpoint -q $binfmt || $SUDO mount -t binfmt_misc binfmt_misc $binfmt; } 2>/dev/null || true
  if [ -w $binfmt/register ] || [ -n "$SUDO" ]; then
    $SUDO sh -c "cat /usr/lib/binfmt.d/qemu-aarch64.conf > $binfmt/register" 2>/dev/null || true
  fi
fi
have_binfmt=0
if [ -e $binfmt/qemu-aarch64 ] && grep -qx enabled $binfmt/qemu-aarch64; then have_binfmt=1; fi

# ---- 3. an arm64 python3 with numpy and pytest (optional) -----------------------------------------------------
# Not co-installable with the host's python3, so its .debs are unpacked (dpkg -x) into $build/pyroot; the
# launcher $build/pyroot/python3 points the loader at the unpacked libraries.
# python3.11-venv: ensurepip, so that the wheel can be pip-installed into an arm64 venv (test_wheel.py); its pip and
# setuptools wheels are the host's /usr/share/python-wheels (architecture-independent, from python3-venv).
pyroot=$build/pyroot
pydebs=(
  python3.11-minimal:arm64 libpython3.11-minimal:arm64 libpython3.11-stdlib:arm64 python3.11-venv:arm64
  python3-numpy:arm64 libblas3:arm64 liblapack3:arm64 libgfortran5:arm64 libexpat1:arm64 libssl3:arm64
  libbz2-1.0:arm64 libffi8:arm64 zlib1g:arm64
  python3-pytest python3-attr python3-more-itertools python3-pkg-resources python3-pluggy python3-py
  python3-exceptiongroup python3-iniconfig python3-packaging python3-tomli
)
pystamp=$pyroot/.complete-$(echo "${pydebs[*]}" | md5sum | cut -c1-8)  # another package list: unpacked anew
if [ "${MSPROBE_AARCH64_PYTHON:-0}" = 1 ] && [ ! -e "$pystamp" ]; then
  rm -rf "$pyroot" "$build/debs"
  mkdir -p "$pyroot" "$build/debs"
  (cd "$build/debs" && apt-get download -qq "${pydebs[@]}" 2>&1 | grep -v '^W: Download' || true)
  for d in "$build"/debs/*.deb; do dpkg -x "$d" "$pyroot"; done
  # What update-alternatives would have done for libblas.so.3 / liblapack.so.3.
  ln -sf blas/libblas.so.3 "$pyroot/usr/lib/aarch64-linux-gnu/libblas.so.3"
  ln -sf lapack/liblapack.so.3 "$pyroot/usr/lib/aarch64-linux-gnu/liblapack.so.3"
  # The interpreter's launcher is a static aarch64 program: an x86 shell script would itself get the guest's
  # LD_PRELOAD (the shim) and make the host's loader complain on stderr.
  aarch64-linux-gnu-gcc -std=c11 -O2 -Wall -Wextra -Werror -static -o "$pyroot/python3" \
    "$here/scripts/aarch64_python_launcher.c"
  touch "$pystamp"
fi
test_python=/usr/bin/python3
if [ "${MSPROBE_AARCH64_PYTHON:-0}" = 1 ]; then test_python=$pyroot/python3; fi

# ---- 4. cross build -----------------------------------------------------------------------------------------
cmake -S "$here" -B "$build" -G Ninja -DCMAKE_TOOLCHAIN_FILE="$here/cmake/toolchain-aarch64-linux-gnu.cmake" \
  -DMSPROBE_WERROR=ON -DCMAKE_BUILD_TYPE=RelWithDebInfo -DTEST_PYTHON="$test_python" >/dev/null
ninja -C "$build" -j "$jobs"

# ---- 5. tests under qemu --------------------------------------------------------------------------------------
# Tests run binutils on the binaries they built (nm, objcopy, strip, ...): the aarch64 ones, first in PATH.
toolbin=$build/toolbin
mkdir -p "$toolbin"
for t in nm objcopy objdump readelf strip addr2line c++filt; do ln -sf "/usr/bin/aarch64-linux-gnu-$t" "$toolbin/$t"; done
export PATH=$toolbin:$PATH

# pytest files that drive an aarch64 Python workload (train.py, tiny_npu, or ctypes into the aarch64 libraries)
# need the arm64 python3 as the test interpreter (MSPROBE_AARCH64_PYTHON=1); the others start C++ programs
# (acl_app, msprobe-inspect, format_probe, ...) and check their output with the host's python3 and numpy.
# MSPROBE_AARCH64_EXCLUDE overrides the list (empty: run everything).
needs_target_python='^unit\.(shim\.test_stacks_python|fake_cann\.test_(hccl_ctypes|hccl_alltoall|aclnn_ops|aclnn_moe|aclnn_mc2'
needs_target_python+='|aclnn_transformer_ops|cast_minifloat|cast_minifloat_950|pta_cache|layouts)|examples\..*)$'
needs_target_python+='|^integration\.[a-z]+\.test_(train|llm_train|llm_tasks|graph_train|demo|readme|ms_kbk|pynative'
needs_target_python+='|msprobe_rules|inspect(_compare|_replay|_replay_llm|_flight|_ranks|_report|_old_form|_new_user|_docs|_llm)?'
needs_target_python+='|shim_(config_errors|crash|capture_cost|races|races_hosts|layouts|acl_graphs'
needs_target_python+='|custom_op|describe_faults|device_stats|dump|dump_modes|dump_ranks|flight|graph|hostile|kill_stress|linkage'
needs_target_python+='|op_launch_path|process|pta_cache|rt_hccl|stacks'
needs_target_python+='|tasks|writer)|dump_leaves|wheel)$'
needs_target_python+='|^bench_(stacks_py|passthrough|writer|compare_shims)_smoke$'
if [ $have_binfmt -eq 0 ]; then
  echo "test_aarch64: binfmt_misc is not available: running only the tests ctest starts itself (no pytest files)"
  exclude='\.|^shim_stacks$|^bench_(stacks_py|passthrough|writer|compare_shims)_smoke$'
elif [ "$test_python" = /usr/bin/python3 ]; then
  exclude=$needs_target_python
else
  exclude=""
fi
exclude=${MSPROBE_AARCH64_EXCLUDE-$exclude}
exclude_args=()
if [ -n "$exclude" ]; then exclude_args=(-E "$exclude"); fi
# Code runs several times slower under qemu (more on a loaded machine): the tests' wall-clock bounds (a launch that
# must not wait for the device, HCCL timeouts) scale with this factor (test/unit/time_scale.h).
export MSPROBE_TEST_TIME_SCALE=${MSPROBE_TEST_TIME_SCALE:-10}
# The tests' ctest TIMEOUTs (hang detectors sized for native runs: train.py takes ~1 s natively, ~40 s here) get the
# same factor. ctest has no timeout multiplier and --timeout only covers tests without a TIMEOUT, so the generated
# CTestTestfile.cmake files are scaled; cmake's next generate step (above, every run) writes them afresh.
find "$build" -name CTestTestfile.cmake -exec perl -pi -e \
  's/\bTIMEOUT "(\d+(?:\.\d+)?)"/sprintf("TIMEOUT \"%d\"", $1 * $ENV{MSPROBE_TEST_TIME_SCALE} + 0.5)/ge' {} +
cd "$build"
ctest --output-on-failure --timeout 1800 -j "$jobs" "${exclude_args[@]}" "$@"
