// Placeholder op used to bring the build up; replaced by the full op set.
#include "aclnnop/aclnn_add.h"
#include "fakecann/nn.h"

using namespace fakecann;
using namespace fakecann::nn;

extern "C" aclnnStatus aclnnAddGetWorkspaceSize(const aclTensor *self, const aclTensor *other, const aclScalar *alpha,
                                                aclTensor *out, uint64_t *workspaceSize, aclOpExecutor **executor) {
  if (!self || !other || !alpha || !out) return ACLNN_ERR_PARAM_NULLPTR;
  double a = alpha->value;
  ExecutorSpec spec{"Add", {slot(self, Io::Input), slot(other, Io::Input), slot(out, Io::Output)}, 0,
                    [a](const std::vector<Slot> &s) {
                      auto x = gather(s[0].views[0]), y = gather(s[1].views[0]);
                      for (size_t i = 0; i < x.size(); ++i) x[i] += a * y[i];
                      scatter(s[2].views[0], x);
                    }};
  return create_executor(std::move(spec), workspaceSize, executor);
}
FAKECANN_ACLNN_PHASE2(Add)
