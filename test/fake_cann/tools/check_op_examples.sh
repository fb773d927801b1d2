#!/usr/bin/env bash
# Compiles CANN's own example programs of the stand-in's transformer ops (issue 41: examples/test_aclnn_<op>.cpp of
# ops-transformer, ops-nn and ops-math, or the program on the op's docs page) against build/fake_cann's headers
# and libraries, runs each and prints a Markdown table: op, source, build, run, the first error. Not part of CI: it
# reads the hicann repositories (bare git directories as the fetch tool leaves them, <mirror>/hicann+<repo>/repo).
#
# Usage: test/fake_cann/tools/check_op_examples.sh [--mirror DIR] [--build DIR] [--work DIR]
#   --mirror  where hicann+ops-transformer, hicann+ops-nn, hicann+ops-math are ($CANN_MIRROR, else /work/.mirror)
#   --build   the stand-in's install (default: build/fake_cann of this tree)
#   --work    where sources, binaries and logs go (default: a temporary directory, removed at the end)
# Exit status: 0 when every example builds and runs, 1 otherwise, 2 on bad usage or a missing input.
set -uo pipefail
here=$(cd "$(dirname "$0")/../../.." && pwd)
mirror=${CANN_MIRROR:-/work/.mirror}
install=$here/build/fake_cann
work=
while [ $# -gt 0 ]; do
  case $1 in
    --mirror) mirror=$2; shift 2 ;;
    --build) install=$2; shift 2 ;;
    --work) work=$2; shift 2 ;;
    *) echo "usage: $0 [--mirror DIR] [--build DIR] [--work DIR]" >&2; exit 2 ;;
  esac
done
for lib in libascendcl.so libnnopbase.so libopapi.so; do
  [ -f "$install/lib64/$lib" ] || { echo "check_op_examples: $install/lib64/$lib missing (build the opapi target)" >&2; exit 2; }
done
if [ -z "$work" ]; then
  work=$(mktemp -d)
  trap 'rm -rf "$work"' EXIT
fi
mkdir -p "$work"

# op | repository | path in it (.cpp: the example itself; .md: the docs page's program, the block with main)
examples=$(cat <<'EOF'
FlashAttentionScore|ops-transformer|attention/flash_attention_score/docs/aclnnFlashAttentionScore.md
FlashAttentionScoreV2|ops-transformer|attention/flash_attention_score/examples/test_aclnn_flash_attention_score.cpp
FlashAttentionScoreGrad|ops-transformer|attention/flash_attention_score_grad/docs/aclnnFlashAttentionScoreGrad.md
FlashAttentionScoreGradV2|ops-transformer|attention/flash_attention_score_grad/examples/test_aclnn_flash_attention_score_grad.cpp
RotaryPositionEmbedding|ops-transformer|posembedding/rotary_position_embedding/examples/test_aclnn_rotary_position_embedding.cpp
RotaryPositionEmbeddingGrad|ops-transformer|posembedding/rotary_position_embedding_grad/examples/test_aclnn_rotary_position_embedding_grad.cpp
SwiGlu|ops-nn|activation/swi_glu/examples/test_aclnn_swi_glu.cpp
SwiGluGrad|ops-nn|activation/swi_glu_grad/examples/test_aclnn_swi_glu_grad.cpp
RmsNorm|ops-nn|norm/rms_norm/examples/test_aclnn_rms_norm.cpp
RmsNormGrad|ops-nn|norm/rms_norm_grad/examples/test_aclnn_rms_norm_grad.cpp
LogSoftmaxBackward|ops-nn|activation/log_softmax_grad/examples/test_aclnn_log_softmax_grad.cpp
NLLLoss|ops-nn|loss/nll_loss/examples/test_aclnn_nll_loss.cpp
NLLLossBackward|ops-nn|loss/nll_loss_grad/examples/test_aclnn_nll_loss_grad.cpp
Sigmoid|ops-nn|activation/sigmoid/examples/test_aclnn_sigmoid.cpp
IndexSelect|ops-nn|index/gather_v2/examples/test_aclnn_index_select.cpp
Addmm, InplaceAddmm|ops-nn|matmul/mat_mul_v3/examples/test_aclnn_addmm_aclnninplace_addmm.cpp
Abs|ops-math|math/abs/examples/test_aclnn_abs.cpp
ArgMax|ops-math|math/arg_max_v2/examples/test_aclnn_arg_max_v2.cpp
MaxDim|ops-math|math/arg_max_with_value/examples/test_aclnn_arg_max_with_value.cpp
Clamp|ops-math|conversion/clip_by_value_v2/examples/test_aclnn_clamp.cpp
Cumsum|ops-math|math/cumsum/examples/test_aclnn_cumsum.cpp
PowTensorScalar, InplacePowTensorScalar|ops-math|math/pow/examples/test_aclnn_pow.cpp
PowTensorTensor|ops-math|math/pow/examples/test_aclnn_pow_tensor_tensor.cpp
Rsqrt|ops-math|math/rsqrt/examples/test_aclnn_rsqrt.cpp
SWhere|ops-math|math/select/examples/test_aclnn_s_where.cpp
Tanh, InplaceTanh|ops-math|math/tanh/examples/test_aclnn_tanh.cpp
Sub, InplaceSub|ops-math|math/sub/examples/test_aclnn_sub.cpp
Div, InplaceDiv|ops-math|math/div/examples/test_aclnn_div.cpp
Exp, InplaceExp|ops-math|math/exp/examples/test_aclnn_exp.cpp
Sqrt, InplaceSqrt|ops-math|math/sqrt/examples/test_aclnn_sqrt.cpp
Topk|ops-math|math/topk/docs/aclnnTopk.md
EOF
)

# The program of a docs page: the fenced block that holds main().
extract_main() {
  awk '/^[[:space:]]*```/ { if (inb) { if (hasmain) { printf "%s", buf; exit } inb = 0; buf = ""; hasmain = 0 }
                            else { inb = 1 } next }
       inb { buf = buf $0 "\n"; if ($0 ~ /int main\(/) hasmain = 1 }'
}

# First line worth quoting from a log, as a table cell.
first_error() {
  grep -m1 -E 'error|ERROR|failed|undefined reference|Segmentation|Aborted' "$1" | sed -e 's/|/\\|/g' -e 's/^[[:space:]]*//' |
    cut -c1-150
}

failures=0
echo "| op | example | build | run | first error |"
echo "|---|---|---|---|---|"
while IFS='|' read -r op repo path; do
  name=$(basename "${path%.*}")
  src=$work/$name.cpp bin=$work/$name
  git_dir=$mirror/hicann+$repo/repo
  if ! git -C "$git_dir" cat-file -e "HEAD:$path" 2>/dev/null; then
    echo "| $op | $repo: $path | missing | - | not in $git_dir |"
    failures=$((failures + 1))
    continue
  fi
  if [[ $path == *.md ]]; then git -C "$git_dir" show "HEAD:$path" | extract_main >"$src"; else git -C "$git_dir" show "HEAD:$path" >"$src"; fi
  build=ok run=-
  if ! c++ -std=c++17 -w -I"$install/include" "$src" -o "$bin" -L"$install/lib64" -Wl,-rpath,"$install/lib64" \
      -lopapi -lnnopbase -lascendcl >"$work/$name.build.log" 2>&1; then
    build=fails
    log=$work/$name.build.log
  else
    log=$work/$name.run.log
    if (cd "$work" && ASCEND_HOME_PATH=$install timeout 300 "$bin" >"$log" 2>&1); then run=ok; else run="fails ($?)"; fi
  fi
  note=
  [ "$build" = ok ] && [ "$run" = ok ] || { note=$(first_error "$log"); failures=$((failures + 1)); }
  echo "| $op | $repo: $path | $build | $run | $note |"
done <<<"$examples"
[ "$failures" -eq 0 ]
