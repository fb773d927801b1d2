// libcust_opapi.so of the custom-op vendor "msprobe_test": two aclnn ops written the way a vendor writes
// them against the stand-in's executor API (fakecann/nn.h), built outside libopapi and unknown to the
// capture shim. Phase 1 validates and records the by-value arguments in the kernel; phase 2 enqueues it.
#include <cmath>
#include <cstdint>
#include <vector>

#include "aclnn_long_kernel.h"
#include "aclnn_scale_shift.h"
#include "fakecann/nn.h"
#include "fakecann/tensor_io.h"

namespace {

using fakecann::TensorView;
using fakecann::nn::Io;
using fakecann::nn::Kind;
using fakecann::nn::Slot;

bool floating(const TensorView &v) { return v.dtype == ACL_FLOAT || v.dtype == ACL_DOUBLE; }

// Null -> NULLPTR; a dead handle, a dtype other than float32/float64, or a shape/dtype unlike those of
// `like` (when given) -> INVALID.
aclnnStatus check_tensor(const aclTensor *t, const aclTensor *like) {
  if (t == nullptr) return ACLNN_ERR_PARAM_NULLPTR;
  if (!fakecann::nn::live(t, Kind::Tensor) || !floating(t->view)) return ACLNN_ERR_PARAM_INVALID;
  if (like != nullptr && (t->view.shape != like->view.shape || t->view.dtype != like->view.dtype))
    return ACLNN_ERR_PARAM_INVALID;
  return ACLNN_SUCCESS;
}

}  // namespace

extern "C" {

aclnnStatus aclnnScaleShiftGetWorkspaceSize(const aclTensor *self, double scale, const aclTensor *other, float shift,
                                            int64_t mode, bool flag, aclTensor *out, uint64_t *workspaceSize,
                                            aclOpExecutor **executor) {
  for (aclnnStatus rc : {check_tensor(self, nullptr), check_tensor(other, self), check_tensor(out, self)})
    if (rc != ACLNN_SUCCESS) return rc;
  if (mode < -64 || mode > 64) return ACLNN_ERR_PARAM_INVALID;
  fakecann::nn::ExecutorSpec spec;
  spec.op = "ScaleShift";
  spec.slots = {fakecann::nn::slot(self, Io::Input), fakecann::nn::slot(other, Io::Input),
                fakecann::nn::slot(out, Io::Output)};
  spec.workspace_bytes = 512;  // asked for like a real tiling would: phase 2 must pass device memory
  spec.kernel = [scale, shift, mode, flag](const std::vector<Slot> &s) {
    std::vector<double> x = fakecann::gather(s[0].views[0]), y = fakecann::gather(s[1].views[0]);
    for (size_t i = 0; i < x.size(); ++i) {
      // Products and sum rounded one at a time (no FMA: built with -ffp-contract=off), then exact steps.
      double v = std::ldexp(x[i] * scale + y[i] * static_cast<double>(shift), static_cast<int>(mode));
      x[i] = flag ? -v : v;
    }
    fakecann::scatter(s[2].views[0], x);
  };
  return fakecann::nn::create_executor(std::move(spec), workspaceSize, executor);
}

FAKECANN_ACLNN_PHASE2(ScaleShift)

aclnnStatus aclnnMsprobeTestVeryLongKernelNameAbcdefghijAbcdefghijAbcdefghijAbcdefghijAbcdefghijAbcdefghijAbcdefghijAbcdefghijAbcdefghijAbcdefghijAbcdefghijAbcdefghijAbcdefghijAbcdefghijAbcdefghijAbcdefghijAbcdefghijAbcdefghijAbcdefghijAbcdefghijAbcdefghijAbcdefghijZGetWorkspaceSize(
    const aclTensor *self, double alpha, aclTensor *out, uint64_t *workspaceSize, aclOpExecutor **executor) {
  for (aclnnStatus rc : {check_tensor(self, nullptr), check_tensor(out, self)})
    if (rc != ACLNN_SUCCESS) return rc;
  fakecann::nn::ExecutorSpec spec;
  spec.op = "MsprobeTestVeryLongKernelNameAbcdefghijAbcdefghijAbcdefghijAbcdefghijAbcdefghijAbcdefghijAbcdefghijAbcdefghijAbcdefghijAbcdefghijAbcdefghijAbcdefghijAbcdefghijAbcdefghijAbcdefghijAbcdefghijAbcdefghijAbcdefghijAbcdefghijAbcdefghijAbcdefghijAbcdefghijZ";
  spec.slots = {fakecann::nn::slot(self, Io::Input), fakecann::nn::slot(out, Io::Output)};
  spec.kernel = [alpha](const std::vector<Slot> &s) {
    std::vector<double> x = fakecann::gather(s[0].views[0]);
    for (double &e : x) e *= alpha;
    fakecann::scatter(s[1].views[0], x);
  };
  return fakecann::nn::create_executor(std::move(spec), workspaceSize, executor);
}

FAKECANN_ACLNN_PHASE2(MsprobeTestVeryLongKernelNameAbcdefghijAbcdefghijAbcdefghijAbcdefghijAbcdefghijAbcdefghijAbcdefghijAbcdefghijAbcdefghijAbcdefghijAbcdefghijAbcdefghijAbcdefghijAbcdefghijAbcdefghijAbcdefghijAbcdefghijAbcdefghijAbcdefghijAbcdefghijAbcdefghijAbcdefghijZ)

}  // extern "C"
