// Matrix products (Matmul, Mm, BatchMatMul) with numpy's matmul rules: 1-D operands promoted and the added dim
// removed, batch dims broadcast. cubeMathType says how the cube unit reads float32 operands: 0 (KEEP_DTYPE) and 4
// as they are, 1 (ALLOW_FP32_DOWN_PRECISION) and 3 (USE_HF32) as HF32 (10-bit mantissa), 2 (USE_FP16) as fp16.
#include <bit>
#include <cmath>

#include "format/half.h"
#include "tools/reader/dump_reader.h"
#include "tools/replay/refs.h"

namespace msprobe::tools::replay {
namespace {

double hf32(double x) {
  const uint32_t bits = std::bit_cast<uint32_t>(static_cast<float>(x));
  if ((bits & 0x7F800000u) == 0x7F800000u) return x;  // inf / NaN as they are
  const uint32_t r = (bits + 0xFFFu + ((bits >> 13) & 1u)) & ~0x1FFFu;
  return static_cast<double>(std::bit_cast<float>(r));
}

Tensor cube_operand(const Tensor &t, int64_t cube) {
  if (t.dtype != format::DType::F32 || cube == 0 || cube == 4) return t;
  Tensor out = t;
  for (double &x : out.v) x = cube == 2 ? format::half_to_float(format::float_to_half(static_cast<float>(x))) : hf32(x);
  return out;
}

Tensor matmul(Tensor a, Tensor b) {
  if (a.shape.empty() || b.shape.empty()) throw RefError("matmul of a 0-d tensor");
  const bool a_vec = a.shape.size() == 1, b_vec = b.shape.size() == 1;
  if (a_vec) a.shape.insert(a.shape.begin(), 1);
  if (b_vec) b.shape.push_back(1);
  const int64_t m = a.shape[a.shape.size() - 2], k = a.shape.back();
  const int64_t k2 = b.shape[b.shape.size() - 2], n = b.shape.back();
  if (k != k2) throw RefError("matmul: inner dimensions differ: " + shape_text(a.shape) + " @ " + shape_text(b.shape));
  const Shape a_batch(a.shape.begin(), a.shape.end() - 2), b_batch(b.shape.begin(), b.shape.end() - 2);
  const Shape batch = broadcast_shapes(a_batch, b_batch);
  // Broadcast the batch dims of each operand by broadcasting a tensor of matrix indices.
  auto batch_index = [&](const Shape &own) {
    Tensor idx(own, std::vector<double>(static_cast<size_t>(numel(own))));
    for (size_t i = 0; i < idx.v.size(); ++i) idx.v[i] = static_cast<double>(i);
    return broadcast_to(idx, batch);
  };
  const std::vector<double> ai = batch_index(a_batch), bi = batch_index(b_batch);
  Shape out_shape = batch;
  out_shape.push_back(m);
  out_shape.push_back(n);
  Tensor out = Tensor::zeros(out_shape);
  const auto M = static_cast<size_t>(m), N = static_cast<size_t>(n), K = static_cast<size_t>(k);
  for (size_t p = 0; p < ai.size(); ++p) {
    const double *A = a.v.data() + static_cast<size_t>(ai[p]) * M * K;
    const double *B = b.v.data() + static_cast<size_t>(bi[p]) * K * N;
    double *C = out.v.data() + p * M * N;
    for (size_t i = 0; i < M; ++i)
      for (size_t kk = 0; kk < K; ++kk) {
        const double x = A[i * K + kk];
        for (size_t j = 0; j < N; ++j) C[i * N + j] += x * B[kk * N + j];
      }
  }
  if (b_vec) out.shape.pop_back();
  if (a_vec) out.shape.erase(out.shape.end() - (b_vec ? 1 : 2));
  return out;
}

Outputs matmul_op(const Call &c) {  // (self, mat2, cubeMathType)
  c.expect_at_least(2);
  const int64_t cube = c.count() > 2 ? c.integer(2) : 0;
  return {matmul(cube_operand(c.tensor(0), cube), cube_operand(c.tensor(1), cube))};
}

Outputs mm_op(const Call &c) {
  c.expect_at_least(2);
  if (c.tensor(0).rank() != 2 || c.tensor(1).rank() != 2) throw RefError("Mm: operands are not 2-D");
  return matmul_op(c);
}

Outputs bmm_op(const Call &c) {
  c.expect_at_least(2);
  if (c.tensor(0).rank() != 3 || c.tensor(1).rank() != 3) throw RefError("BatchMatMul: operands are not 3-D");
  return matmul_op(c);
}

const RefEntry kRefs[] = {
    {"Matmul", matmul_op},
    {"Mm", mm_op},
    {"BatchMatMul", bmm_op},
};

}  // namespace

std::span<const RefEntry> matmul_refs() { return kRefs; }

}  // namespace msprobe::tools::replay
