#!/usr/bin/env bash
# Builds msprobe_shim-<VERSION>-py3-none-manylinux_2_28_<arch>.whl from an already built tree, with Debian's
# python3-build (no network, no PyPI: `/usr/bin/python3 -m build --no-isolation --wheel`).
#
#   scripts/build_wheel.sh [OUTDIR]          # OUTDIR default: $MSPROBE_BUILD_DIR/wheel; prints the wheel's path
#   MSPROBE_BUILD_DIR=build-aarch64 scripts/build_wheel.sh   # the aarch64 wheel from the cross build
#   MSPROBE_WHEEL_TAG=linux scripts/build_wheel.sh           # msprobe_shim-<VERSION>-py3-none-linux_<arch>.whl:
#       no portability promise (PEP 600's tag for "this host"), built even when the manylinux checks fail;
#       they are then printed as warnings
#
# Steps: copies packaging/ and VERSION into a scratch directory, copies lib/libmsprobe_shim.so and
# bin/msprobe-inspect of the build directory into the package with their debug sections removed (DWARF holds
# the build and source paths), refuses files that would not be relocatable (RPATH/RUNPATH, a build or source
# path left in their strings) or that break the manylinux_2_28 promise of the wheel's name (a GLIBC symbol
# version above 2.28, a DT_NEEDED outside libc/libm/libdl/libpthread/ld-linux, GLIBCXX/CXXABI from the host),
# and builds the wheel. The architecture in the name is read from the library's ELF header (packaging/setup.py).
set -euo pipefail
here=$(cd "$(dirname "$0")/.." && pwd)
build=$(cd "${MSPROBE_BUILD_DIR:-$here/build}" && pwd)
out=${1:-$build/wheel}
tag=${MSPROBE_WHEEL_TAG:-manylinux_2_28}
case "$tag" in manylinux_2_28|linux) ;; *) echo "build_wheel: MSPROBE_WHEEL_TAG=$tag: accepted: manylinux_2_28, linux" >&2; exit 2 ;; esac
lib=$build/lib/libmsprobe_shim.so
inspect=$build/bin/msprobe-inspect
SUDO=""
if [ "$(id -u)" -ne 0 ]; then SUDO="sudo"; fi

die() { echo "build_wheel: $*" >&2; exit 1; }
for f in "$lib" "$inspect"; do
  [ -f "$f" ] || die "$f is missing: build first (MSPROBE_BUILD_DIR=$build scripts/build.sh)"
done

# ---- tools (Debian packages; idempotent) -----------------------------------------------------------------------
missing=()
for p in python3-build python3-venv python3-setuptools python3-wheel binutils; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if [ ${#missing[@]} -gt 0 ]; then
  echo "build_wheel: installing ${missing[*]}" >&2
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null ||
    { $SUDO apt-get update -qq && DEBIAN_FRONTEND=noninteractive \
        $SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null; }
fi

# ---- stage ------------------------------------------------------------------------------------------------------
stage=$(mktemp -d "${TMPDIR:-/tmp}/msprobe_wheel.XXXXXX")
trap 'rm -rf "$stage"' EXIT
cp -r "$here/packaging/." "$stage/"
cp "$here/VERSION" "$stage/VERSION"
pkg=$stage/src/msprobe_shim
mkdir -p "$pkg/lib" "$pkg/bin"
case "$(od -An -tu2 -j18 -N2 "$lib" | tr -d ' ')" in
  62) arch=x86_64; prefix="" ;;
  183) arch=aarch64; prefix=aarch64-linux-gnu- ;;
  *) die "$lib: neither an x86_64 nor an aarch64 ELF file" ;;
esac
objcopy=${prefix}objcopy
command -v "$objcopy" >/dev/null || die "$objcopy not found (binutils-${prefix%-} for the $arch wheel)"
"$objcopy" --strip-debug "$lib" "$pkg/lib/libmsprobe_shim.so"
"$objcopy" --strip-debug "$inspect" "$pkg/bin/msprobe-inspect"
chmod 0755 "$pkg/lib/libmsprobe_shim.so" "$pkg/bin/msprobe-inspect"

# ---- checks: relocatable, and what manylinux_2_28 promises ------------------------------------------------------
problems=()
# The source directory the build was configured from (not necessarily this checkout).
srcdir=$(sed -n 's/^CMAKE_HOME_DIRECTORY:INTERNAL=//p' "$build/CMakeCache.txt" 2>/dev/null || true)
for f in "$pkg/lib/libmsprobe_shim.so" "$pkg/bin/msprobe-inspect"; do
  name=${f#"$pkg/"}
  dyn=$(readelf -dW "$f")
  if grep -Eq '\((RPATH|RUNPATH)\)' <<<"$dyn"; then
    problems+=("$name: has $(grep -Eo '\((RPATH|RUNPATH)\).*' <<<"$dyn" | head -1)")
  fi
  for needed in $(grep -Eo 'Shared library: \[[^]]+\]' <<<"$dyn" | sed 's/.*\[\(.*\)\]/\1/'); do
    case "$needed" in
      libc.so.6|libm.so.6|libdl.so.2|libpthread.so.0|ld-linux-x86-64.so.2|ld-linux-aarch64.so.1) ;;
      *) problems+=("$name: DT_NEEDED $needed (only libc, libm, libdl, libpthread and ld-linux are allowed)") ;;
    esac
  done
  # Required versions (the verneed section), whatever the symbols: GLIBC_2.x above 2.28, any GLIBCXX/CXXABI.
  vers=$(readelf -VW "$f" | sed -n '/Version needs section/,$p' | grep -Eo '(GLIBC|GLIBCXX|CXXABI)_[0-9.]+' | sort -u)
  for v in $vers; do
    case "$v" in
      GLIBC_2.*)
        minor=${v#GLIBC_2.}; minor=${minor%%.*}
        [ "$minor" -le 28 ] || problems+=("$name: requires $v (manylinux_2_28 allows GLIBC_2.28 at most)") ;;
      *) problems+=("$name: requires $v from the host's libstdc++") ;;
    esac
  done
  for path in "$here" "$build" $srcdir; do
    if strings -a "$f" | grep -qF "$path"; then
      problems+=("$name: holds the build path $path: $(strings -a "$f" | grep -F "$path" | head -1)")
    fi
  done
done
if [ ${#problems[@]} -gt 0 ] && [ "$tag" = linux ]; then
  printf 'build_wheel: warning: %s\n' "${problems[@]}" >&2
  echo "build_wheel: warning: the files above break manylinux_2_28: building the host-only linux_$arch wheel" >&2
elif [ ${#problems[@]} -gt 0 ]; then
  printf 'build_wheel: %s\n' "${problems[@]}" >&2
  die "not building msprobe_shim-*-manylinux_2_28_$arch.whl: the files above would not keep its promise"
fi

# ---- build --------------------------------------------------------------------------------------------------------
mkdir -p "$out"
log=$stage.log
if ! (cd "$stage" && MSPROBE_WHEEL_TAG=$tag /usr/bin/python3 -m build --no-isolation --wheel --outdir "$stage/dist" .) >"$log" 2>&1; then
  tail -30 "$log" >&2; rm -f "$log"
  die "python3 -m build failed"
fi
rm -f "$log"
wheel=$(ls "$stage"/dist/*.whl)
[ "$(echo "$wheel" | wc -l)" -eq 1 ] || die "expected one wheel, got: $wheel"
case "$(basename "$wheel")" in
  "msprobe_shim-$(cat "$here/VERSION")-py3-none-${tag}_$arch.whl") ;;
  *) die "unexpected wheel name $(basename "$wheel")" ;;
esac
cp "$wheel" "$out/"
echo "$out/$(basename "$wheel")"
