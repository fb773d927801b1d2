#!/usr/bin/env bash
# Makes (once) and prints the path of a Debian 11 (bullseye, glibc 2.31, CPython 3.9) chroot for the compat
# stage, debootstrapped into /var/cache/msprobe-shim/ (MSPROBE_COMPAT_CACHE), with python3 and python3-numpy, from
# the Debian archive this machine's apt is configured with (MSPROBE_COMPAT_MIRROR overrides it). Idempotent and safe against a half-made cache: the tree is built under a temporary
# name and renamed into place only when complete (a ".complete" stamp); a leftover temporary tree is removed.
# The compat stage never writes to it: each run sees it through an overlay (scripts/test_compat.sh), where
# libffi and libelf are removed for the runs "without".
set -euo pipefail
cache=${MSPROBE_COMPAT_CACHE:-/var/cache/msprobe-shim}

# The default archive of the host's apt sources: the first "deb" entry whose suites include the host's own release
# (VERSION_CODENAME: not its -security or -updates suites, not a third-party repository), in the deb822 files of
# /etc/apt/sources.list.d/*.sources or in the one-line format of /etc/apt/sources.list{,.d/*.list}. The same
# archive serves every Debian release, bullseye included.
default_archive() {
  local codename f
  codename=$(. /etc/os-release 2>/dev/null && echo "${VERSION_CODENAME:-}")
  [ -n "$codename" ] || return 1
  for f in /etc/apt/sources.list.d/*.sources; do
    [ -f "$f" ] || continue
    awk -v want="$codename" '
      function field(name,   i, v) {
        for (i = 1; i <= NF; i++) if (tolower($i) ~ "^" name ":") { v = $i; sub(/^[^:]*:[ \t]*/, "", v); return v }
        return ""
      }
      BEGIN { RS = ""; FS = "\n" }
      {
        if (tolower(field("enabled")) == "no") next
        if (field("types") !~ /(^|[ \t])deb([ \t]|$)/) next
        n = split(field("suites"), suites, /[ \t]+/)
        for (j = 1; j <= n; j++) if (suites[j] == want) { split(field("uris"), uris, /[ \t]+/); print uris[1]; exit }
      }' "$f"
  done | head -n 1 | grep . && return 0
  # deb [options] URI SUITE COMPONENTS...
  cat /etc/apt/sources.list /etc/apt/sources.list.d/*.list 2>/dev/null |
    awk -v want="$codename" '$1 == "deb" { i = 2; if ($i ~ /^\[/) { while ($i !~ /\]$/) i++; i++ } if ($(i + 1) == want) { print $i; exit } }' |
    grep .
}
mirror=${MSPROBE_COMPAT_MIRROR:-}
packages=python3,python3-numpy,libelf1  # libelf1: the runs "with libelf"; the others hide it (and libffi7)
root=$cache/bullseye-$(echo "$packages" | md5sum | cut -c1-8)  # another package list: another tree
SUDO=""
if [ "$(id -u)" -ne 0 ]; then SUDO="sudo"; fi
if [ -f "$root/.complete" ]; then echo "$root"; exit 0; fi
if [ -z "$mirror" ] && ! mirror=$(default_archive); then
  echo "compat: no Debian archive of this machine's release in its apt sources (/etc/apt/sources.list," \
    "/etc/apt/sources.list.d/); set MSPROBE_COMPAT_MIRROR to one" >&2
  exit 1
fi
if ! command -v debootstrap >/dev/null; then
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq --no-install-recommends debootstrap >&2 ||
    { DEBIAN_FRONTEND=noninteractive $SUDO apt-get update -qq >&2 &&
      DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq --no-install-recommends debootstrap >&2; }
fi
$SUDO mkdir -p "$cache"
exec 9>"$cache/.lock"
flock 9  # two CI runs on one machine: the second waits, then finds the finished tree
if [ -f "$root/.complete" ]; then echo "$root"; exit 0; fi
tmp=$root.partial
# A debootstrap killed half way may leave its /proc, /sys ... mounted inside the tree.
for mnt in $(awk -v t="$tmp/" 'index($2, t) == 1 {print $2}' /proc/mounts | sort -r); do $SUDO umount -l "$mnt" || true; done
$SUDO rm -rf --one-file-system "$tmp" "$root"
echo "compat: debootstrap bullseye from $mirror into $root (once; cached)" >&2
$SUDO debootstrap --variant=minbase --include="$packages" bullseye "$tmp" "$mirror" >"$cache/debootstrap.log" 2>&1 ||
  { tail -20 "$cache/debootstrap.log" >&2; exit 1; }
$SUDO rm -rf "$tmp/var/cache/apt/archives"/*.deb
$SUDO touch "$tmp/.complete"
$SUDO mv "$tmp" "$root"
echo "$root"
