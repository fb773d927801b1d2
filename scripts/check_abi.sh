#!/usr/bin/env bash
# Checks that preloaded libraries load on any glibc >= 2.28 system (docs/portability.md): DT_NEEDED holds only
# libc/libm/libdl/libpthread/ld-linux, no required symbol version is above GLIBC_2.28 (MSPROBE_GLIBC_MAX), nothing
# is required from the host's libstdc++/libgcc (GLIBCXX, CXXABI, GCC_) and there is no RPATH/RUNPATH.
#   scripts/check_abi.sh LIB...        exit 1 (and one line per problem) when a library breaks the rule
set -euo pipefail
max=${MSPROBE_GLIBC_MAX:-GLIBC_2.28}
max=${max#GLIBC_}
status=0
for lib in "$@"; do
  problems=()
  # readelf reads any architecture's ELF (the aarch64 cross build too).
  while read -r needed; do
    case $needed in
      libc.so.6 | libm.so.6 | libdl.so.2 | libpthread.so.0 | ld-linux-x86-64.so.2 | ld-linux-aarch64.so.1) ;;
      *) problems+=("DT_NEEDED $needed") ;;
    esac
  done < <(readelf -dW "$lib" | sed -n 's/.*(NEEDED).*\[\(.*\)\]/\1/p')
  if readelf -dW "$lib" | grep -qE '\((RPATH|RUNPATH)\)'; then problems+=("has an RPATH/RUNPATH"); fi
  # Versions the library requires (.gnu.version_r), as readelf -V prints them: "Name: GLIBC_2.14  Flags: ...".
  while read -r v; do
    case $v in
      GLIBC_PRIVATE) problems+=("requires $v") ;;
      GLIBC_[0-9]*)
        if [ "$(printf '%s\n%s\n' "${v#GLIBC_}" "$max" | sort -V | tail -1)" != "$max" ]; then problems+=("requires $v"); fi ;;
      *) problems+=("requires $v") ;;  # GLIBCXX_*, CXXABI_*, GCC_*: the host's C++ runtime
    esac
  done < <(readelf -VW "$lib" | sed -n '/\.gnu\.version_r/,$p' | sed -n 's/.*Name: \([^ ]*\).*Flags.*/\1/p' | sort -u)
  newest=$(readelf -VW "$lib" | sed -n '/\.gnu\.version_r/,$p' | sed -n 's/.*Name: \(GLIBC_[0-9][^ ]*\).*/\1/p' | sort -V | tail -1)
  if [ ${#problems[@]} -eq 0 ]; then
    echo "check_abi: $lib: ok (DT_NEEDED: $(readelf -dW "$lib" | sed -n 's/.*(NEEDED).*\[\(.*\)\]/\1/p' | tr '\n' ' ')newest ${newest:-none} <= GLIBC_$max)"
  else
    status=1
    for p in "${problems[@]}"; do echo "check_abi: $lib: $p (rule: docs/portability.md)"; done
  fi
done
exit $status
