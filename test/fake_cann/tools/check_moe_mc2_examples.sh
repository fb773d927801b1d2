#!/usr/bin/env bash
# Compiles CANN's own example programs of the stand-in's MoE, GroupedMatmul, MC2 and all-to-all ops against
# build/fake_cann (its headers and libraries, as a real install is used) and runs each, bounded by a timeout.
# Not a CI test: it needs the fetched repositories, as bare git directories (read with git show, never copied here):
#   OPS_TRANSFORMER_GIT  default /work/.mirror/hicann+ops-transformer/repo  (<op>/examples/test_aclnn_*.cpp)
#   HCCL_GIT             default /work/.mirror/hicann+hccl/repo             (examples/02_collectives/*/main.cc)
# Usage: test/fake_cann/tools/check_moe_mc2_examples.sh [BUILD_DIR]      (BUILD_DIR default: build/)
# Prints one line per example (compiled / ran / exit status, with the first error) and a summary. The HCCL samples
# run one thread per device: FAKE_CANN_DEVICE_COUNT (default 2 here) sets how many devices the stand-in has.
# INCLUDE_ACL=1 compiles every example with -include acl/acl.h: CANN's hccl/hccl.h includes acl/acl.h, the stand-in's
# does not yet (shared/reference/cann_source.md §3 item 5), and the HCCL and MC2 samples rely on it.
set -uo pipefail
here=$(cd "$(dirname "$0")/../../.." && pwd)
build=$(cd "${1:-$here/build}" && pwd)
home=$build/fake_cann
ops_git=${OPS_TRANSFORMER_GIT:-/work/.mirror/hicann+ops-transformer/repo}
hccl_git=${HCCL_GIT:-/work/.mirror/hicann+hccl/repo}
export ASCEND_HOME_PATH=$home FAKE_CANN_DEVICE_COUNT=${FAKE_CANN_DEVICE_COUNT:-2} HCCL_CONNECT_TIMEOUT=20 HCCL_EXEC_TIMEOUT=20
for d in "$ops_git" "$hccl_git"; do
  git -C "$d" rev-parse --git-dir >/dev/null 2>&1 || { echo "check_moe_mc2_examples: $d is not a git directory" >&2; exit 2; }
done
[ -f "$home/lib64/libopapi.so" ] || { echo "check_moe_mc2_examples: no $home/lib64/libopapi.so (build first)" >&2; exit 2; }

work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
# The MC2 examples include "../op_host/op_api/aclnn_<op>.h", their op's own folder: the install's aclnnop/ stands in.
mkdir -p "$work/ex" "$work/op_host" && ln -s "$home/include/aclnnop" "$work/op_host/op_api"
libs=(-L"$home/lib64" -Wl,-rpath,"$home/lib64" -lopapi -lnnopbase -lhccl -lascendcl -lruntime -lpthread)
extra=()
[ "${INCLUDE_ACL:-0}" = 1 ] && extra=(-include acl/acl.h)
passed=0 failed=0

# check REPO PATH: extract, compile, run.
check() {
  local repo=$1 path=$2 name src bin out rc
  name=$(basename "$(dirname "$path")")_$(basename "$path" | sed 's/\.[^.]*$//')
  src=$work/ex/$name.cpp bin=$work/$name
  git -C "$repo" show "HEAD:$path" >"$src" || { echo "MISSING  $path"; failed=$((failed + 1)); return; }
  if ! out=$(g++ -std=c++17 -O0 -w "${extra[@]}" -I"$home/include" -I"$home/include/aclnnop" "$src" -o "$bin" "${libs[@]}" 2>&1); then
    echo "COMPILE  $path: $(grep -m1 'error' <<<"$out")"
    failed=$((failed + 1))
    return
  fi
  out=$(cd "$work" && timeout 120 "$bin" 2>&1)
  rc=$?
  if [ $rc -eq 0 ]; then
    echo "OK       $path ($(grep -c . <<<"$out") lines of output; last: $(tail -1 <<<"$out"))"
    passed=$((passed + 1))
  else
    echo "EXIT $rc  $path: $(grep -m1 -iE 'error|fail' <<<"$out" || tail -1 <<<"$out")"
    failed=$((failed + 1))
  fi
}

for path in moe/moe_gating_top_k_softmax/examples/test_aclnn_moe_gating_top_k_softmax.cpp \
            moe/moe_gating_top_k_softmax_v2/examples/test_aclnn_moe_gating_top_k_softmax_v2.cpp \
            moe/moe_init_routing/examples/test_aclnn_moe_init_routing.cpp \
            moe/moe_init_routing_v2/examples/test_aclnn_moe_init_routing_v2.cpp \
            moe/moe_init_routing_v2_grad/examples/test_aclnn_moe_init_routing_v2_grad.cpp \
            moe/moe_init_routing_v3/examples/test_aclnn_moe_init_routing_v3.cpp \
            moe/moe_finalize_routing/examples/test_aclnn_moe_finalize_routing.cpp \
            moe/moe_finalize_routing_v2/examples/test_aclnn_moe_finalize_routing_v2.cpp \
            moe/moe_finalize_routing_v2_grad/examples/test_aclnn_moe_finalize_routing_v2_grad.cpp \
            gmm/grouped_matmul/examples/test_aclnn_grouped_matmul.cpp \
            mc2/matmul_all_reduce/examples/test_aclnn_matmul_all_reduce.cpp \
            mc2/all_gather_matmul/examples/test_aclnn_all_gather_matmul.cpp \
            mc2/matmul_reduce_scatter/examples/test_aclnn_matmul_reduce_scatter.cpp; do
  check "$ops_git" "$path"
done
for path in examples/02_collectives/06_alltoall/main.cc examples/02_collectives/07_alltoallv/main.cc \
            examples/02_collectives/08_alltoallvc/main.cc; do
  check "$hccl_git" "$path"
done
echo "check_moe_mc2_examples: $passed ran to exit 0, $failed did not (ops-transformer $(git -C "$ops_git" rev-parse --short HEAD), hccl $(git -C "$hccl_git" rev-parse --short HEAD))"
[ "$failed" -eq 0 ]
