// Data movement: Cast, Cat, Permute, InplaceCopy and InplaceZero. Each is a gather from a (re-shaped,
// re-strided or broadcast) view of the input and a scatter into the output's view.
#include <algorithm>

#include "op_common.h"

using namespace fakecann;
using namespace fakecann::ops;

namespace {

// math/cast/op_api/aclnn_cast.cpp CheckDtypeValid: Atlas A2 (NpuArch 2201) casts between the numeric types and BF16;
// Ascend 950 (register-based) between those and HIFLOAT8, FLOAT8_E5M2, FLOAT8_E4M3FN, FLOAT4_E2M1 and FLOAT4_E1M2 too
// (and COMPLEX32, and to INT4, which the stand-in does not cast, as it casts no complex type). The values are rounded
// as fakecann/minifloat.h tells.
DtypeSet cast_types() {
  const DtypeSet base = kArith | dtypes({ACL_UINT16, ACL_UINT32, ACL_UINT64});
  if (!regbase(soc().npu_arch)) return base;
  return base | dtypes({ACL_HIFLOAT8, ACL_FLOAT8_E5M2, ACL_FLOAT8_E4M3FN, ACL_FLOAT4_E2M1, ACL_FLOAT4_E1M2});
}

// dst = src read through `reshape(src_view)`: the whole kernel of every op in this file but Cat.
nn::Kernel copy_kernel(std::function<TensorView(const TensorView &)> reshape) {
  return [reshape](const Slots &s) { scatter(view(s, s.size() - 1), gather(reshape(view(s, 0)))); };
}

}  // namespace

extern "C" {

aclnnStatus aclnnCastGetWorkspaceSize(const aclTensor *self, const aclDataType dtype, aclTensor *out,
                                      uint64_t *workspaceSize, aclOpExecutor **executor) {
  return phase1("Cast", workspaceSize, executor, [&] {
    const TensorView &x = tensor(self, "self", cast_types()), &o = tensor(out, "out", cast_types());
    if (o.dtype != dtype)
      fail("dtype " + std::to_string(dtype) + " differs from out's dtype " + std::to_string(o.dtype));
    require_shape(o, x.shape, "out");
    return ExecutorSpec{"",
                        {nn::slot(self, Io::Input), nn::slot(out, Io::Output)},
                        0,
                        copy_kernel([](const TensorView &v) { return v; })};
  });
}

// selfRef = src (converted to selfRef's dtype), src broadcast to selfRef's shape.
aclnnStatus aclnnInplaceCopyGetWorkspaceSize(aclTensor *selfRef, const aclTensor *src, uint64_t *workspaceSize,
                                             aclOpExecutor **executor) {
  return phase1("InplaceCopy", workspaceSize, executor, [&] {
    Shape shape = tensor(selfRef, "selfRef", kArith).shape;
    const TensorView &from = tensor(src, "src", kArith);
    if (broadcast_shape(shape, from.shape) != shape)
      fail("src " + show(from.shape) + " does not broadcast to selfRef " + show(shape));
    // src is slot 1 and the destination slot 0, so the kernel is written out rather than copy_kernel.
    return ExecutorSpec{"", {nn::slot(selfRef, Io::InOut), nn::slot(src, Io::Input)}, 0, [shape](const Slots &s) {
                          scatter(view(s, 0), gather(expand(view(s, 1), shape)));
                        }};
  });
}

aclnnStatus aclnnInplaceZeroGetWorkspaceSize(aclTensor *selfRef, uint64_t *workspaceSize, aclOpExecutor **executor) {
  return phase1("InplaceZero", workspaceSize, executor, [&] {
    tensor(selfRef, "selfRef", kArith);
    return ExecutorSpec{"", {nn::slot(selfRef, Io::InOut)}, 0, [](const Slots &s) {
                          scatter(view(s, 0), Values((size_t)view(s, 0).numel(), 0.0));
                        }};
  });
}

aclnnStatus aclnnPermuteGetWorkspaceSize(const aclTensor *self, const aclIntArray *dims, aclTensor *out,
                                         uint64_t *workspaceSize, aclOpExecutor **executor) {
  return phase1("Permute", workspaceSize, executor, [&] {
    const TensorView &x = tensor(self, "self", kArith), &o = tensor(out, "out", kArith);
    const std::vector<int64_t> &raw = int_array(dims, "dims");
    if (raw.size() != x.shape.size())
      fail("dims has " + std::to_string(raw.size()) + " entries for a rank-" + std::to_string(x.shape.size()) +
           " tensor");
    std::vector<int64_t> perm;
    Shape want;
    for (int64_t d : raw) {
      perm.push_back(wrap_dim(d, x.shape.size()));
      if (std::count(perm.begin(), perm.end(), perm.back()) > 1) fail("dims is not a permutation");
      want.push_back(x.shape[(size_t)perm.back()]);
    }
    require_shape(o, want, "out");
    return ExecutorSpec{
        "", {nn::slot(self, Io::Input), nn::slot(out, Io::Output)}, 0, copy_kernel([perm](const TensorView &v) {
          TensorView p = v;
          for (size_t i = 0; i < perm.size(); ++i) {
            p.shape[i] = v.shape[(size_t)perm[i]];
            p.strides[i] = v.strides[(size_t)perm[i]];
          }
          return p;
        })};
  });
}

// Each input lands in a slice of out along dim: out's view with a shifted offset and the input's shape.
aclnnStatus aclnnCatGetWorkspaceSize(const aclTensorList *tensors, int64_t dim, aclTensor *out, uint64_t *workspaceSize,
                                     aclOpExecutor **executor) {
  return phase1("Cat", workspaceSize, executor, [&] {
    std::vector<const TensorView *> in = tensor_list(tensors, "tensors", kArith);
    const TensorView &o = tensor(out, "out", kArith);
    if (in.empty()) fail("tensors is empty");
    Shape want = in[0]->shape;
    if (want.empty()) fail("cannot concatenate 0-d tensors");
    size_t d = (size_t)wrap_dim(dim, want.size());
    want[d] = 0;
    for (const TensorView *t : in) {
      Shape a = t->shape, b = want;
      if (a.size() != b.size()) fail("tensors differ in rank");
      a[d] = b[d] = 0;
      if (a != b) fail("tensor " + show(t->shape) + " does not match the others outside dim " + std::to_string(d));
      want[d] += t->shape[d];
    }
    require_shape(o, want, "out");
    return ExecutorSpec{"", {nn::slot(tensors, Io::Input), nn::slot(out, Io::Output)}, 0, [d](const Slots &s) {
                          int64_t at = 0;
                          for (const TensorView &t : s[0].views) {
                            TensorView slice = view(s, 1);
                            slice.offset += at * slice.strides[d];
                            slice.shape = t.shape;
                            scatter(slice, gather(t));
                            at += t.shape[d];
                          }
                        }};
  });
}

}  // extern "C"
