// SwiGlu and SwiGluGrad (ops-nn activation/swi_glu*): x is cut in two halves A | B along `dim`, out = swish(A) * B.
// The kernel sees x as rows (the dims before `dim`) of one flat block (`dim` and the dims after it) and splits each
// block in the middle, which is the split along `dim` since its length must be even. The aclnn layers are
// generated: dtype and `dim` errors are 161002, shapes the tiling's 561002.
#include <cmath>

#include "op_common.h"

using namespace fakecann;
using namespace fakecann::ops;

namespace {

struct Halves {
  int64_t rows = 1, half = 0;  // x is rows x (2 * half), out rows x half
};

// The split of x along dim (wrapped); `halved` is x's shape with that dim halved (out's, and yGrad's).
Halves split(const Shape &x, int64_t dim, Shape *halved) {
  if (x.empty()) fail("x must have at least one dim");
  if (dim < -(int64_t)x.size() || dim >= (int64_t)x.size())
    fail("dim " + std::to_string(dim) + " is outside [-" + std::to_string(x.size()) + ", " +
         std::to_string(x.size() - 1) + "]");
  const size_t d = (size_t)(dim < 0 ? dim + (int64_t)x.size() : dim);
  if (x[d] % 2 != 0) fail_tiling("x's dim " + std::to_string(d) + " of " + show(x) + " is not even");
  Halves h;
  for (size_t i = 0; i < d; ++i) h.rows *= x[i];
  h.half = numel(Shape(x.begin() + (ptrdiff_t)d, x.end())) / 2;
  *halved = x;
  (*halved)[d] /= 2;
  return h;
}

double sigmoid(double v) { return 1.0 / (1.0 + std::exp(-v)); }

const TensorView &like(const aclTensor *t, const char *name, aclDataType dt) {
  const TensorView &v = tensor(t, name, kFloats);
  if (v.dtype != dt) fail(std::string(name) + "'s dtype differs from x's");
  return v;
}

}  // namespace

extern "C" {

aclnnStatus aclnnSwiGluGetWorkspaceSize(const aclTensor *x, int64_t dim, const aclTensor *out, uint64_t *workspaceSize,
                                        aclOpExecutor **executor) {
  return phase1("SwiGlu", workspaceSize, executor, [&] {
    const TensorView &xv = tensor(x, "x", kFloats);
    const TensorView &o = like(out, "out", xv.dtype);
    Shape halved;
    const Halves h = split(xv.shape, dim, &halved);
    if (o.shape != halved) fail_tiling("out shape " + show(o.shape) + ", expected " + show(halved));
    return ExecutorSpec{"", {nn::slot(x, Io::Input), nn::slot(out, Io::Output)}, 0, [h](const Slots &s) {
                          const Values v = gather(view(s, 0));
                          Values y((size_t)(h.rows * h.half));
                          for (int64_t r = 0; r < h.rows; ++r)
                            for (int64_t c = 0; c < h.half; ++c) {
                              const double a = v[(size_t)(r * 2 * h.half + c)],
                                           b = v[(size_t)(r * 2 * h.half + h.half + c)];
                              y[(size_t)(r * h.half + c)] = a * sigmoid(a) * b;
                            }
                          scatter(view(s, 1), y);
                        }};
  });
}

// d/dA = g * B * (sig(A) + sig(A) (1 - sig(A)) A), d/dB = g * swish(A); out has x's shape.
aclnnStatus aclnnSwiGluGradGetWorkspaceSize(const aclTensor *yGrad, const aclTensor *x, int64_t dim,
                                            const aclTensor *out, uint64_t *workspaceSize, aclOpExecutor **executor) {
  return phase1("SwiGluGrad", workspaceSize, executor, [&] {
    const TensorView &xv = tensor(x, "x", kFloats);
    const TensorView &g = like(yGrad, "yGrad", xv.dtype), &o = like(out, "out", xv.dtype);
    Shape halved;
    const Halves h = split(xv.shape, dim, &halved);
    if (g.shape != halved) fail_tiling("yGrad shape " + show(g.shape) + ", expected " + show(halved));
    if (o.shape != xv.shape) fail_tiling("out shape " + show(o.shape) + " differs from x's " + show(xv.shape));
    return ExecutorSpec{
        "", {nn::slot(yGrad, Io::Input), nn::slot(x, Io::Input), nn::slot(out, Io::Output)}, 0, [h](const Slots &s) {
          const Values gv = gather(view(s, 0)), v = gather(view(s, 1));
          Values dx(v.size());
          for (int64_t r = 0; r < h.rows; ++r)
            for (int64_t c = 0; c < h.half; ++c) {
              const auto ia = (size_t)(r * 2 * h.half + c), ib = ia + (size_t)h.half;
              const double a = v[ia], b = v[ib], gr = gv[(size_t)(r * h.half + c)], sg = sigmoid(a);
              dx[ia] = gr * (sg + sg * (1 - sg) * a) * b;
              dx[ib] = gr * sg * a;
            }
          scatter(view(s, 2), dx);
        }};
  });
}

}  // extern "C"
