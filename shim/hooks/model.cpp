// Models (.om inference, MindSpore's sunk graphs) and CANN's data dump: the calls around which graph-sunk kernels are
// captured (shim/capture/graph_capture.h); ACL graph capture (aclmdlRI*: shim/capture/acl_graphs.h). Loading a model
// (from a file or memory, in the caller's memory, with queues, with a config handle) turns the shim's dump on first;
// executing one (aclmdlExecute*, V2 included) gives its kernels their stack; the host's own dump calls are passed on
// so that its dump keeps working. MindSpore's step hook (MS_DbgOnStepBegin / MS_DbgOnStepEnd, reference/cann_dump.md
// §5) is exported here too: the shim is the hook tool.
#include <cstdint>
#include <map>

#include "acl/acl.h"
#include "acl/acl_dump.h"
#include "shim/capture/acl_graphs.h"
#include "shim/capture/capture_call.h"
#include "shim/capture/graph_capture.h"
#include "shim/hooks/hook.h"

using namespace msprobe::shim;

// The hooks of this family, one a line (shim/hooks/hook.h).
#define MSPROBE_MODEL_HOOKS(X)      \
  X(aclmdlLoadFromFile)             \
  X(aclmdlLoadFromMem)              \
  X(aclmdlLoadFromFileWithMem)      \
  X(aclmdlLoadFromMemWithMem)       \
  X(aclmdlLoadFromFileWithQ)        \
  X(aclmdlLoadFromMemWithQ)         \
  X(aclmdlLoadWithConfig)           \
  X(aclmdlExecute)                  \
  X(aclmdlExecuteAsync)             \
  X(aclmdlExecuteV2)                \
  X(aclmdlExecuteAsyncV2)           \
  X(aclmdlInitDump)                 \
  X(acldumpRegCallback)             \
  X(acldumpUnregCallback)           \
  X(aclmdlRICaptureBegin)           \
  X(aclmdlRICaptureEnd)             \
  X(aclmdlRIExecuteAsync)           \
  X(aclmdlRIDestroy)                \
  X(aclmdlRICaptureTaskGrpBegin)    \
  X(aclmdlRICaptureTaskGrpEnd)      \
  X(aclmdlRICaptureTaskUpdateBegin) \
  X(aclmdlRICaptureTaskUpdateEnd)
MSPROBE_HOOK_SLOTS(MSPROBE_MODEL_HOOKS)

namespace {

// The process's graph capture when the shim captures and this is the host's call (not the shim's own).
GraphCapture *graph() {
  if (ReentryGuard::active() || !capture_enabled()) return nullptr;
  return active_graph_capture();
}

using DumpCallback = int32_t (*)(const acldumpChunk *, int32_t);
using RawCallback = GraphCapture::ChunkCallback;

// Every way of loading a model turns the dump on first; every way of running one gives its kernels their stack.
template <typename Real, typename... Args>
aclError loading(Real real, Args... args) {
  if (!real) return ACL_ERROR_INTERNAL_ERROR;
  if (GraphCapture *g = graph()) g->before_model_load();
  return real(args...);
}

template <typename Real, typename... Args>
aclError executing(Real real, uint32_t modelId, Args... args) {
  if (!real) return ACL_ERROR_INTERNAL_ERROR;
  if (GraphCapture *g = graph()) g->model_executing(modelId);
  return real(modelId, args...);
}

}  // namespace

MSPROBE_HOOK aclError aclmdlLoadFromFile(const char *modelPath, uint32_t *modelId) {
  return loading(MSPROBE_REAL(aclmdlLoadFromFile), modelPath, modelId);
}

MSPROBE_HOOK aclError aclmdlLoadFromMem(const void *model, size_t modelSize, uint32_t *modelId) {
  return loading(MSPROBE_REAL(aclmdlLoadFromMem), model, modelSize, modelId);
}

MSPROBE_HOOK aclError aclmdlLoadFromFileWithMem(const char *modelPath, uint32_t *modelId, void *workPtr,
                                                size_t workSize, void *weightPtr, size_t weightSize) {
  return loading(MSPROBE_REAL(aclmdlLoadFromFileWithMem), modelPath, modelId, workPtr, workSize, weightPtr, weightSize);
}

MSPROBE_HOOK aclError aclmdlLoadFromMemWithMem(const void *model, size_t modelSize, uint32_t *modelId, void *workPtr,
                                               size_t workSize, void *weightPtr, size_t weightSize) {
  return loading(MSPROBE_REAL(aclmdlLoadFromMemWithMem), model, modelSize, modelId, workPtr, workSize, weightPtr,
                 weightSize);
}

MSPROBE_HOOK aclError aclmdlLoadFromFileWithQ(const char *modelPath, uint32_t *modelId, const uint32_t *inputQ,
                                              size_t inputQNum, const uint32_t *outputQ, size_t outputQNum) {
  return loading(MSPROBE_REAL(aclmdlLoadFromFileWithQ), modelPath, modelId, inputQ, inputQNum, outputQ, outputQNum);
}

MSPROBE_HOOK aclError aclmdlLoadFromMemWithQ(const void *model, size_t modelSize, uint32_t *modelId,
                                             const uint32_t *inputQ, size_t inputQNum, const uint32_t *outputQ,
                                             size_t outputQNum) {
  return loading(MSPROBE_REAL(aclmdlLoadFromMemWithQ), model, modelSize, modelId, inputQ, inputQNum, outputQ,
                 outputQNum);
}

MSPROBE_HOOK aclError aclmdlLoadWithConfig(const aclmdlConfigHandle *handle, uint32_t *modelId) {
  return loading(MSPROBE_REAL(aclmdlLoadWithConfig), handle, modelId);
}

MSPROBE_HOOK aclError aclmdlExecute(uint32_t modelId, const aclmdlDataset *input, aclmdlDataset *output) {
  return executing(MSPROBE_REAL(aclmdlExecute), modelId, input, output);
}

MSPROBE_HOOK aclError aclmdlExecuteAsync(uint32_t modelId, const aclmdlDataset *input, aclmdlDataset *output,
                                         aclrtStream stream) {
  return executing(MSPROBE_REAL(aclmdlExecuteAsync), modelId, input, output, stream);
}

MSPROBE_HOOK aclError aclmdlExecuteV2(uint32_t modelId, const aclmdlDataset *input, aclmdlDataset *output,
                                      aclrtStream stream, const aclmdlExecConfigHandle *handle) {
  return executing(MSPROBE_REAL(aclmdlExecuteV2), modelId, input, output, stream, handle);
}

MSPROBE_HOOK aclError aclmdlExecuteAsyncV2(uint32_t modelId, const aclmdlDataset *input, aclmdlDataset *output,
                                           aclrtStream stream, const aclmdlExecConfigHandle *handle) {
  return executing(MSPROBE_REAL(aclmdlExecuteAsyncV2), modelId, input, output, stream, handle);
}

MSPROBE_HOOK aclError aclmdlInitDump(void) {
  auto real = MSPROBE_REAL(aclmdlInitDump);
  if (!real) return ACL_ERROR_INTERNAL_ERROR;
  if (GraphCapture *g = graph()) g->host_init_dump();
  return real();
}

MSPROBE_HOOK aclError acldumpRegCallback(DumpCallback messageCallback, int32_t flag) {
  auto real = MSPROBE_REAL(acldumpRegCallback);
  if (!real) return ACL_ERROR_FAILURE;
  GraphCapture *g = graph();
  if (g == nullptr) return real(messageCallback, flag);
  return g->host_register_callback(reinterpret_cast<RawCallback>(messageCallback), flag,
                                   reinterpret_cast<int32_t (*)(RawCallback, int32_t)>(real));
}

MSPROBE_HOOK void acldumpUnregCallback(void) {
  auto real = MSPROBE_REAL(acldumpUnregCallback);
  if (!real) return;
  if (GraphCapture *g = graph()) return g->host_unregister_callback(real);
  real();
}

// ACL graph capture (shim/capture/acl_graphs.h): which streams are being captured, and the first replay of each graph.
namespace {
AclGraphs *acl_graphs() {
  if (ReentryGuard::active() || !capture_enabled()) return nullptr;
  return &session().acl_graphs();
}
}  // namespace

MSPROBE_HOOK aclError aclmdlRICaptureBegin(aclrtStream stream, aclmdlRICaptureMode mode) {
  auto real = MSPROBE_REAL(aclmdlRICaptureBegin);
  if (!real) return ACL_ERROR_INTERNAL_ERROR;
  aclError rc = real(stream, mode);
  if (rc == ACL_SUCCESS)
    if (AclGraphs *g = acl_graphs()) guarded(Problem::GraphNotFollowed, [&] { g->capture_began(stream); });
  return rc;
}

MSPROBE_HOOK aclError aclmdlRICaptureEnd(aclrtStream stream, aclmdlRI *modelRI) {
  auto real = MSPROBE_REAL(aclmdlRICaptureEnd);
  if (!real) return ACL_ERROR_INTERNAL_ERROR;
  aclError rc = real(stream, modelRI);
  AclGraphs *g = acl_graphs();
  if (g && rc == ACL_SUCCESS && modelRI != nullptr)
    guarded(Problem::GraphNotFollowed, [&] { g->capture_ended(stream, *modelRI); });
  else if (g && rc != ACL_SUCCESS)
    guarded(Problem::GraphNotFollowed, [&] { g->capture_failed(stream); });
  return rc;
}

MSPROBE_HOOK aclError aclmdlRIExecuteAsync(aclmdlRI modelRI, aclrtStream stream) {
  auto real = MSPROBE_REAL(aclmdlRIExecuteAsync);
  if (!real) return ACL_ERROR_INTERNAL_ERROR;
  AclGraphs *g = acl_graphs();
  if (g) guarded(Problem::GraphNotFollowed, [&] { g->replaying(modelRI, stream); });
  aclError rc = real(modelRI, stream);
  if (rc == ACL_SUCCESS && g)
    guarded(Problem::GraphNotFollowed, [&] {
      // Each replayed kernel is a launch of this step, named and selected as an eager one (acl_graphs.h).
      auto begin = [&](const std::string &op_type, const std::string &op_name) {
        LaunchTicket t = session().begin_launch(op_type, op_name, stream);
        return AclGraphs::Ticket{t, t.capture, t.with_inputs, t.with_outputs, t.with_data};
      };
      g->replayed(modelRI, stream, begin, [](msprobe::record::KernelCapture k) { session().submit(std::move(k)); });
    });
  return rc;
}

// Task groups of a capture and their update: which kernels a task update replaces (acl_graphs.h).
MSPROBE_HOOK aclError aclmdlRICaptureTaskGrpBegin(aclrtStream stream) {
  auto real = MSPROBE_REAL(aclmdlRICaptureTaskGrpBegin);
  if (!real) return ACL_ERROR_INTERNAL_ERROR;
  aclError rc = real(stream);
  if (rc == ACL_SUCCESS)
    if (AclGraphs *g = acl_graphs()) guarded(Problem::GraphNotFollowed, [&] { g->group_began(stream); });
  return rc;
}

MSPROBE_HOOK aclError aclmdlRICaptureTaskGrpEnd(aclrtStream stream, aclrtTaskGrp *handle) {
  auto real = MSPROBE_REAL(aclmdlRICaptureTaskGrpEnd);
  if (!real) return ACL_ERROR_INTERNAL_ERROR;
  aclError rc = real(stream, handle);
  if (rc == ACL_SUCCESS && handle != nullptr)
    if (AclGraphs *g = acl_graphs()) guarded(Problem::GraphNotFollowed, [&] { g->group_ended(stream, *handle); });
  return rc;
}

MSPROBE_HOOK aclError aclmdlRICaptureTaskUpdateBegin(aclrtStream stream, aclrtTaskGrp handle) {
  auto real = MSPROBE_REAL(aclmdlRICaptureTaskUpdateBegin);
  if (!real) return ACL_ERROR_INTERNAL_ERROR;
  aclError rc = real(stream, handle);
  if (rc == ACL_SUCCESS)
    if (AclGraphs *g = acl_graphs()) guarded(Problem::GraphNotFollowed, [&] { g->update_began(stream, handle); });
  return rc;
}

MSPROBE_HOOK aclError aclmdlRICaptureTaskUpdateEnd(aclrtStream stream) {
  auto real = MSPROBE_REAL(aclmdlRICaptureTaskUpdateEnd);
  if (!real) return ACL_ERROR_INTERNAL_ERROR;
  aclError rc = real(stream);
  if (AclGraphs *g = acl_graphs()) guarded(Problem::GraphNotFollowed, [&] { g->update_ended(stream); });
  return rc;
}

MSPROBE_HOOK aclError aclmdlRIDestroy(aclmdlRI modelRI) {
  auto real = MSPROBE_REAL(aclmdlRIDestroy);
  if (!real) return ACL_ERROR_INTERNAL_ERROR;
  aclError rc = real(modelRI);
  if (rc == ACL_SUCCESS)
    if (AclGraphs *g = acl_graphs()) guarded(Problem::GraphNotFollowed, [&] { g->destroyed(modelRI); });
  return rc;
}

// MindSpore's hook-tool entry points, looked up by these plain names and called through pointers of exactly these types
// (reference/cann_dump.md §5.2): by-value std::map, which the Itanium C++ ABI passes as a pointer to the caller's copy.
// exts[0] (the kernel names, a std::vector<std::string> of MindSpore's own libstdc++ ABI) is never read: the names come
// from the dump. exts[1] is a bool* "kernel by kernel".
MSPROBE_EXPORT void MS_DbgOnStepBegin(uint32_t device_id, int32_t step, std::map<uint32_t, void *> exts) {
  (void)device_id, (void)step;              // the shim counts steps itself, as msprobe does
  if (active_session() == nullptr) return;  // loaded as a hook tool into a process the shim was not preloaded in
  GraphCapture *g = graph();
  if (g == nullptr) return;
  auto kbyk = exts.find(1);
  g->step_begin(kbyk != exts.end() && kbyk->second != nullptr && *static_cast<const bool *>(kbyk->second));
}

MSPROBE_EXPORT void MS_DbgOnStepEnd(std::map<uint32_t, void *> exts) {
  (void)exts;
  if (active_session() == nullptr) return;
  if (GraphCapture *g = graph()) g->step_end();
}

MSPROBE_HOOK_FAMILY(MSPROBE_MODEL_HOOKS, Linked)
