#!/usr/bin/env bash
# The compat stage (scripts/test.sh compat; docs/portability.md): the shim as users get it loads and works on an
# older system. Builds the shim, msprobe-inspect and the CANN stand-in against the glibc 2.28 stubs into build-compat/ (only those
# targets), checks their ABI (scripts/check_abi.sh), then in a Debian 11 chroot (glibc 2.31, CPython 3.9, its own
# numpy; made once by scripts/compat_chroot.sh and cached) runs:
#   full:      train.py without the shim, under the shim (statistics) and (tensor): dumps verified with the
#              chroot's python3/numpy (test/compat/check_dump.py), Python frames present, losses and final
#              parameters bit-identical to the run without the shim, no "not found" warning; msprobe-inspect
#              (built like the shim) verifies the tensor dump there
#   no-libelf: libelf removed from the system (the stand-in keeps a private copy in a link-map namespace of its
#              own, test/compat/libelf_forward.c): train.py under the shim still dumps, same losses, and the
#              warning names what is degraded
#   bare:      libffi and libelf removed likewise: `python3 -c` under the shim starts (the issue's failing command), and
#              examples/acl_app (a C++ ACL program) under the shim dumps
# Each run sees the cached chroot through an overlay in a private mount namespace: the cache is never written.
# Prints "compat: N checks passed" or "compat: N of M checks failed" last.
set -uo pipefail
here=$(cd "$(dirname "$0")/.." && pwd)
build=${MSPROBE_COMPAT_BUILD_DIR:-$here/build-compat}
steps=3
SUDO=""
if [ "$(id -u)" -ne 0 ]; then SUDO="sudo"; fi  # mounts and chroot
t0=$SECONDS

# ---- 1. build (only the shim, the stand-in and examples/) and ABI check ---------------------------------------
set -e
cmake -S "$here" -B "$build" -G Ninja -DMSPROBE_WERROR=ON -DCMAKE_BUILD_TYPE=RelWithDebInfo \
  -DMSPROBE_GLIBC_COMPAT_CANN=ON -DMSPROBE_BUILD_TESTS=OFF >/dev/null
ninja -C "$build" msprobe_shim msprobe_inspect test/fake_cann/all examples
t_build=$((SECONDS - t0))
root=$("$here/scripts/compat_chroot.sh")
t_chroot=$((SECONDS - t0 - t_build))
set +e

passed=0
failed=0
check() {  # check NAME COMMAND...: one PASS/FAIL line
  local name=$1
  shift
  if "$@"; then
    echo "compat: PASS $name"
    passed=$((passed + 1))
  else
    echo "compat: FAIL $name"
    failed=$((failed + 1))
  fi
}
check "check_abi libmsprobe_shim.so msprobe-inspect" "$here/scripts/check_abi.sh" "$build/lib/libmsprobe_shim.so" \
  "$build/bin/msprobe-inspect"

# ---- 2. runs in the chroot -------------------------------------------------------------------------------------
work=$(mktemp -d /tmp/msprobe-compat.XXXXXX)
trap '$SUDO rm -rf "$work"' EXIT
shim=$build/lib/libmsprobe_shim.so

# in_chroot VARIANT SCRIPT: runs SCRIPT (bash) inside the chroot seen through an overlay, with libffi and/or
# libelf removed for VARIANT no-libelf / bare. The run's /tmp is $work/VARIANT/upper/tmp on the host.
in_chroot() {
  local variant=$1 script=$2 d=$work/$1
  mkdir -p "$d/upper" "$d/work" "$d/merged"
  $SUDO unshare --mount --propagation private bash -euc '
    root=$1 d=$2 variant=$3 here=$4 build=$5 script=$6
    mount -t overlay overlay -o "lowerdir=$root,upperdir=$d/upper,workdir=$d/work" "$d/merged"
    m=$d/merged
    # The stand-in keeps a private libelf out of every library path (see test/compat/libelf_forward.c).
    if [ "$variant" != full ]; then
      mkdir -p "$m/opt/cann-private"
      cp "$m"/usr/lib/*-linux-gnu/libelf-*.so "$m/opt/cann-private/libelf.so.1"
      rm -f "$m"/usr/lib/*-linux-gnu/libelf[.-]*so*
    fi
    if [ "$variant" = bare ]; then rm -f "$m"/usr/lib/*-linux-gnu/libffi.so*; fi
    mount -t proc proc "$m/proc"
    mount --bind /dev "$m/dev"
    mkdir -p "$m$here" "$m/tmp"
    mount --bind -o ro "$here" "$m$here"
    if [ "${build#"$here"/}" = "$build" ]; then mkdir -p "$m$build" && mount --bind "$build" "$m$build"; fi
    exec chroot "$m" /usr/bin/env -i PATH=/usr/bin:/bin HOME=/tmp LANG=C.UTF-8 PYTHONDONTWRITEBYTECODE=1 \
      ASCEND_HOME_PATH="$build/fake_cann" \
      MSPROBE_COMPAT_CANN_LIBELF=$([ "$variant" = full ] || echo /opt/cann-private/libelf.so.1) /bin/bash -c "$script"
  ' in_chroot "$root" "$d" "$variant" "$here" "$build" "$script"
}

train="python3 $here/examples/train.py --steps $steps"
checker="python3 $here/test/compat/check_dump.py"
pre="LD_PRELOAD=$shim"
t_runs0=$SECONDS
# full: libffi and libelf present.
in_chroot full "
  set -e
  cat /etc/debian_version > /tmp/debian_version; ldd --version | head -1 > /tmp/glibc; python3 -V > /tmp/python
  $train --dump /tmp/plain.npz > /tmp/plain.out
  $pre MSPROBE_DUMP_PATH=/tmp/stats MSPROBE_TASK=statistics $train --dump /tmp/stats.npz > /tmp/stats.out 2> /tmp/stats.err
  $pre MSPROBE_DUMP_PATH=/tmp/tensor MSPROBE_TASK=tensor $train --dump /tmp/tensor.npz > /tmp/tensor.out 2> /tmp/tensor.err
  $checker dump /tmp/stats statistics --python-frames > /tmp/check_stats
  $checker dump /tmp/tensor tensor --python-frames > /tmp/check_tensor
  $checker same /tmp/plain.npz /tmp/stats.npz > /tmp/same_stats
  $checker same /tmp/plain.npz /tmp/tensor.npz > /tmp/same_tensor
  $build/bin/msprobe-inspect verify /tmp/tensor > /tmp/inspect_verify
" > "$work/full.log" 2>&1
full=$work/full/upper/tmp
echo "compat: chroot: Debian $(cat "$full/debian_version" 2>/dev/null), $(cat "$full/glibc" 2>/dev/null), $(cat "$full/python" 2>/dev/null)"
check "full: runs in the chroot" grep -q . "$full/same_tensor"
for f in check_stats check_tensor same_stats same_tensor inspect_verify; do
  check "full: $f: $(cat "$full/$f" 2>/dev/null)" grep -qE "^check_dump: ok|^verify: .*: OK$" "$full/$f"
done
check "full: printed losses identical" cmp -s "$full/plain.out" "$full/tensor.out"
check "full: no 'not found' warning" bash -c "! grep -h 'not found' '$full/stats.err' '$full/tensor.err'"

# no-libelf: train.py (libffi is needed by Python's ctypes itself).
in_chroot no-libelf "
  set -e
  ! ls /usr/lib/*-linux-gnu/libelf[.-]*so* 2>/dev/null
  $pre MSPROBE_DUMP_PATH=/tmp/tensor MSPROBE_TASK=tensor $train --dump /tmp/tensor.npz > /tmp/tensor.out 2> /tmp/tensor.err
  $checker dump /tmp/tensor tensor --python-frames > /tmp/check_tensor
" > "$work/no-libelf.log" 2>&1
nolibelf=$work/no-libelf/upper/tmp
check "no-libelf: $(cat "$nolibelf/check_tensor" 2>/dev/null)" grep -q "^check_dump: ok" "$nolibelf/check_tensor"
check "no-libelf: warning: $(grep -h 'libelf' "$nolibelf/tensor.err" 2>/dev/null | head -1)" \
  grep -q "libelf.so.1 not found: degraded: native stack frames are not symbolized" "$nolibelf/tensor.err"
check "no-libelf: losses as the full run" cmp -s "$full/plain.out" "$nolibelf/tensor.out"

# bare: neither libffi nor libelf.
in_chroot bare "
  set -e
  ! ls /usr/lib/*-linux-gnu/libelf[.-]*so* /usr/lib/*-linux-gnu/libffi.so* 2>/dev/null
  $pre python3 -c 'print(\"started\", \"libmsprobe_shim.so\" in open(\"/proc/self/maps\").read())' > /tmp/python.out 2>&1
  $pre MSPROBE_DUMP_PATH=/tmp/acl MSPROBE_TASK=tensor $build/bin/acl_app > /tmp/acl.out 2> /tmp/acl.err || echo \$? > /tmp/acl.rc
  $checker dump /tmp/acl tensor > /tmp/check_acl
" > "$work/bare.log" 2>&1
bare=$work/bare/upper/tmp
check "bare: python3 starts with the shim loaded" grep -qx "started True" "$bare/python.out"
check "bare: acl_app exits 0 (its own results verified)" test ! -e "$bare/acl.rc" -a -e "$bare/acl.out"
check "bare: acl_app: $(cat "$bare/check_acl" 2>/dev/null)" grep -q "^check_dump: ok" "$bare/check_acl"
check "bare: warning: $(grep -h 'libelf' "$bare/acl.err" 2>/dev/null | head -1)" \
  grep -q "libelf.so.1 not found: degraded" "$bare/acl.err"
t_runs=$((SECONDS - t_runs0))

if [ $failed -gt 0 ]; then
  for l in full no-libelf bare; do echo "--- $l.log"; tail -20 "$work/$l.log"; done
  for f in "$work"/*/upper/tmp/*.err; do echo "--- $f"; tail -5 "$f"; done
fi
echo "compat: times: build ${t_build}s, chroot ${t_chroot}s, runs ${t_runs}s"
total=$((passed + failed))
if [ $failed -eq 0 ]; then
  echo "compat: $total checks passed (Debian $(cat "$full/debian_version" 2>/dev/null) chroot, $((SECONDS - t0))s)"
else
  echo "compat: $failed of $total checks failed"
  exit 1
fi
