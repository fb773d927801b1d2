// ApplyAdamWV2: one in-place AdamW step (torch.optim.AdamW semantics, as ops-nn documents it). The
// hyper-parameters arrive as by-value floats; `step` is a device tensor (float32 or int64, 1 element)
// that the op reads but does not advance.
#include <algorithm>
#include <cmath>

#include "op_common.h"

using namespace fakecann;
using namespace fakecann::ops;

extern "C" aclnnStatus aclnnApplyAdamWV2GetWorkspaceSize(aclTensor *varRef, aclTensor *mRef, aclTensor *vRef,
                                                         aclTensor *maxGradNormOptionalRef, const aclTensor *grad,
                                                         const aclTensor *step, float lr, float beta1, float beta2,
                                                         float weightDecay, float eps, bool amsgrad, bool maximize,
                                                         uint64_t *workspaceSize, aclOpExecutor **executor) {
  return phase1("ApplyAdamWV2", workspaceSize, executor, [&] {
    const TensorView &var = tensor(varRef, "varRef", kFloats);
    tensor(mRef, "mRef", kFloats, var.shape);
    tensor(vRef, "vRef", kFloats, var.shape);
    tensor(grad, "grad", kFloats, var.shape);
    optional_tensor(maxGradNormOptionalRef, "maxGradNormOptionalRef", kFloats, var.shape, amsgrad);
    if (tensor(step, "step", dtypes({ACL_FLOAT, ACL_INT64})).numel() != 1) fail("step must hold one element");
    double a = lr, b1 = beta1, b2 = beta2, wd = weightDecay, ep = eps;
    return ExecutorSpec{
        "",
        {nn::slot(varRef, Io::InOut), nn::slot(mRef, Io::InOut), nn::slot(vRef, Io::InOut),
         nn::slot(maxGradNormOptionalRef, Io::InOut), nn::slot(grad, Io::Input), nn::slot(step, Io::Input)},
        0,
        [=](const Slots &s) {
          Values p = gather(view(s, 0)), m = gather(view(s, 1)), v = gather(view(s, 2));
          Values g = gather(view(s, 4)), mx = amsgrad ? gather(view(s, 3)) : Values();
          double t = gather(view(s, 5))[0];
          double bc1 = 1 - std::pow(b1, t), bc2 = 1 - std::pow(b2, t);
          for (size_t i = 0; i < p.size(); ++i) {
            double gi = maximize ? -g[i] : g[i];
            p[i] *= 1 - a * wd;
            m[i] = b1 * m[i] + (1 - b1) * gi;
            v[i] = b2 * v[i] + (1 - b2) * gi * gi;
            double second = v[i];
            if (amsgrad) second = mx[i] = std::max(mx[i], v[i]);
            p[i] -= a / bc1 * m[i] / (std::sqrt(second) / std::sqrt(bc2) + ep);
          }
          scatter(view(s, 0), p);
          scatter(view(s, 1), m);
          scatter(view(s, 2), v);
          if (amsgrad) scatter(view(s, 3), mx);
        }};
  });
}
