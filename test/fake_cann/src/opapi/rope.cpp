// RotaryPositionEmbedding and its grad (ops-transformer posembedding/rotary_position_embedding*), what torch_npu's
// npu_rotary_mul launches (mode 0 for "half", 1 for "interleave"). y = x * cos + rotate(x) * sin over the last dim
// D, with cos / sin broadcast over the first three dims of x. Both aclnn layers are generated: dtypes are checked as
// 161002, shapes and the mode by the tiling, 561002. The Atlas A2/A3 tiling has the half and interleave templates
// only: the quarter (2) and interleave-half (3) modes of the formula page are refused, as there.
#include <array>

#include "op_common.h"

using namespace fakecann;
using namespace fakecann::ops;

namespace {

constexpr int64_t kHalf = 0, kInterleave = 1;
constexpr int64_t kMaxDim = 896;  // A2/A3: D < 896, even

// rotate(x) within one row of d: half: (-x2, x1); interleave: (-x[2k+1], x[2k]) pairs. The grad applies its
// transpose, which is -rotate.
void rotate(const double *x, double *r, int64_t d, int64_t mode) {
  const int64_t h = d / 2;
  for (int64_t k = 0; k < h; ++k) {
    if (mode == kHalf) {
      r[k] = -x[k + h];
      r[k + h] = x[k];
    } else {
      r[2 * k] = -x[2 * k + 1];
      r[2 * k + 1] = x[2 * k];
    }
  }
}

// cos / sin: each of the first three dims is 1 or x's (the docs list every such pattern but (1, S, N)); the
// interleave template broadcasts over all but one of them.
void check_broadcast(const Shape &x, const Shape &c, int64_t mode) {
  int kept = 0;
  for (size_t i = 0; i < 3; ++i) {
    if (c[i] != 1 && c[i] != x[i]) fail_tiling("cos shape " + show(c) + " does not broadcast to x " + show(x));
    kept += c[i] != 1 && x[i] != 1;
  }
  const bool one_s_n = c[0] == 1 && x[0] != 1 && kept == 2;
  if (one_s_n || (mode == kInterleave && kept > 1))
    fail_tiling("cos shape " + show(c) + " is not a layout the mode-" + std::to_string(mode) + " kernel takes");
}

// The checks both ops share: x-like tensors (x / dy), their cos and sin, the mode.
void check_rope(const Shape &x, const Shape &cos, const Shape &sin, int64_t mode) {
  if (mode != kHalf && mode != kInterleave)
    fail_tiling("mode " + std::to_string(mode) + " is not 0 (half) or 1 (interleave) on Atlas A2/A3");
  if (x.size() != 4 || cos.size() != 4) fail_tiling("x, cos and sin must be 4-D, x is " + show(x));
  if (cos != sin) fail_tiling("cos " + show(cos) + " and sin " + show(sin) + " differ");
  if (cos[3] != x[3]) fail_tiling("cos's last dim differs from x's");
  if (x[3] % 2 != 0 || x[3] >= kMaxDim) fail_tiling("D must be even and below 896, got " + std::to_string(x[3]));
  check_broadcast(x, cos, mode);
}

const TensorView &same_dtype(const aclTensor *t, const char *name, aclDataType dt) {
  const TensorView &v = tensor(t, name, kFloats);
  if (v.dtype != dt) fail(std::string(name) + "'s dtype differs from the first input's");
  return v;
}

// Values of cos / sin read at every element of x (broadcast by stride-0 views).
struct Tables {
  Values cos, sin;
};
Tables tables(const Slots &s, size_t cos_slot, const Shape &x) {
  return {gather(expand(view(s, cos_slot), x)), gather(expand(view(s, cos_slot + 1), x))};
}

void forward_kernel(const Slots &s, const Shape &shape, int64_t mode) {
  const Values x = gather(view(s, 0));
  const Tables t = tables(s, 1, shape);
  const int64_t d = shape[3];
  Values y(x.size()), r((size_t)d);
  for (size_t row = 0; row < x.size(); row += (size_t)d) {
    rotate(&x[row], r.data(), d, mode);
    for (size_t k = 0; k < (size_t)d; ++k) y[row + k] = x[row + k] * t.cos[row + k] + r[k] * t.sin[row + k];
  }
  scatter(view(s, 3), y);
}

// dx = dy * cos - rotate(dy * sin); with x: dcos = sum(dy * x), dsin = sum(dy * rotate(x)) over the broadcast dims.
void grad_kernel(const Slots &s, const Shape &shape, const Shape &cos_shape, int64_t mode) {
  const Values dy = gather(view(s, 0));
  const Tables t = tables(s, 1, shape);
  const int64_t d = shape[3];
  Values dx(dy.size()), u((size_t)d), r((size_t)d);
  for (size_t row = 0; row < dy.size(); row += (size_t)d) {
    for (size_t k = 0; k < (size_t)d; ++k) u[k] = dy[row + k] * t.sin[row + k];
    rotate(u.data(), r.data(), d, mode);
    for (size_t k = 0; k < (size_t)d; ++k) dx[row + k] = dy[row + k] * t.cos[row + k] - r[k];
  }
  scatter(view(s, 4), dx);
  if (!s[3].present) return;  // no x: dcos and dsin are not computed
  std::vector<int64_t> dims;
  for (size_t i = 0; i < 3; ++i)
    if (cos_shape[i] != shape[i]) dims.push_back((int64_t)i);
  Shape reduced;
  const std::vector<size_t> to = reduce_index(shape, dims, &reduced);
  const Values x = gather(view(s, 3));
  Values dcos((size_t)numel(cos_shape), 0.0), dsin(dcos.size(), 0.0);
  for (size_t row = 0; row < x.size(); row += (size_t)d) {
    rotate(&x[row], r.data(), d, mode);
    for (size_t k = 0; k < (size_t)d; ++k) {
      dcos[to[row + k]] += dy[row + k] * x[row + k];
      dsin[to[row + k]] += dy[row + k] * r[k];
    }
  }
  scatter(view(s, 5), dcos);
  scatter(view(s, 6), dsin);
}

}  // namespace

extern "C" {

aclnnStatus aclnnRotaryPositionEmbeddingGetWorkspaceSize(const aclTensor *x, const aclTensor *cos, const aclTensor *sin,
                                                         int64_t mode, aclTensor *out, uint64_t *workspaceSize,
                                                         aclOpExecutor **executor) {
  return phase1("RotaryPositionEmbedding", workspaceSize, executor, [&] {
    const TensorView &xv = tensor(x, "x", kFloats);
    const TensorView &c = same_dtype(cos, "cos", xv.dtype), &sn = same_dtype(sin, "sin", xv.dtype);
    const TensorView &o = same_dtype(out, "out", xv.dtype);
    check_rope(xv.shape, c.shape, sn.shape, mode);
    if (o.shape != xv.shape) fail_tiling("out shape " + show(o.shape) + " differs from x " + show(xv.shape));
    const Shape shape = xv.shape;
    return ExecutorSpec{
        "",
        {nn::slot(x, Io::Input), nn::slot(cos, Io::Input), nn::slot(sin, Io::Input), nn::slot(out, Io::Output)},
        0,
        [shape, mode](const Slots &s) { forward_kernel(s, shape, mode); }};
  });
}

aclnnStatus aclnnRotaryPositionEmbeddingGradGetWorkspaceSize(const aclTensor *dy, const aclTensor *cos,
                                                             const aclTensor *sin, const aclTensor *xOptional,
                                                             int64_t mode, const aclTensor *dxOut,
                                                             const aclTensor *dcosOut, const aclTensor *dsinOut,
                                                             uint64_t *workspaceSize, aclOpExecutor **executor) {
  return phase1("RotaryPositionEmbeddingGrad", workspaceSize, executor, [&] {
    const TensorView &g = tensor(dy, "dy", kFloats);
    const TensorView &c = same_dtype(cos, "cos", g.dtype), &sn = same_dtype(sin, "sin", g.dtype);
    const TensorView &dx = same_dtype(dxOut, "dxOut", g.dtype);
    const TensorView &dc = same_dtype(dcosOut, "dcosOut", g.dtype), &ds = same_dtype(dsinOut, "dsinOut", g.dtype);
    check_rope(g.shape, c.shape, sn.shape, mode);
    if (dx.shape != g.shape) fail_tiling("dxOut shape " + show(dx.shape) + " differs from dy " + show(g.shape));
    if (xOptional != nullptr) {  // without x, dcos / dsin may be empty placeholders (CANN's example passes [1,1,1,0])
      if (same_dtype(xOptional, "xOptional", g.dtype).shape != g.shape) fail_tiling("xOptional's shape differs");
      if (dc.shape != c.shape || ds.shape != c.shape) fail_tiling("dcosOut and dsinOut must have cos's shape");
    }
    const Shape shape = g.shape, cos_shape = c.shape;
    return ExecutorSpec{
        "",
        {nn::slot(dy, Io::Input), nn::slot(cos, Io::Input), nn::slot(sin, Io::Input), nn::slot(xOptional, Io::Input),
         nn::slot(dxOut, Io::Output), nn::slot(dcosOut, Io::Output), nn::slot(dsinOut, Io::Output)},
        workspace_for(numel(cos_shape)),
        [shape, cos_shape, mode](const Slots &s) { grad_kernel(s, shape, cos_shape, mode); }};
  });
}

}  // extern "C"
