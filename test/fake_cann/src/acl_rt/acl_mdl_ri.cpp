// ACL runtime: model runtime instances made by stream capture (acl_rt.h, aclmdlRI*), over the runtime's capture
// (src/runtime/capture.cpp, fakecann/stream.h): between aclmdlRICaptureBegin and aclmdlRICaptureEnd every task
// submitted to the stream (kernel launches, asynchronous copies and memsets, event records and waits), and to the
// streams that join it through an event, is recorded into the instance instead of running; aclmdlRIExecuteAsync
// enqueues the recorded tasks as one task, in their order; aclmdlRIDestroy lets them go (the kernels' argument blocks,
// their op tasks). Collectives and whole-model executions on a capturing stream are refused
// (ACL_ERROR_RT_CAPTURE_MODE_NOT_SUPPORT): the stand-in does not capture them.
// Task groups (aclmdlRICaptureTaskGrpBegin/End) name a capture's kernels; a task update
// (aclmdlRICaptureTaskUpdateBegin/End on another stream) replaces them with the kernels launched in between, one for
// one, each when that stream gets to it: later replays run the new ones (docs/zh/api_ref/15_model_running_instance).
// Instances are also built from bound streams (aclmdlRIBuildBegin, BindStream, EndTask, BuildEnd, UnbindStream: the
// runtime's model_build.cpp tells how).
#include "acl/acl.h"
#include "fakecann/rt_internal.h"
#include "fakecann/stream.h"

using namespace fakecann;

extern "C" {

aclError aclmdlRICaptureBegin(aclrtStream stream, aclmdlRICaptureMode mode) {
  Stream *s;
  if (aclError e = context_stream(stream, &s)) return e;
  return stream_begin_capture(s, (int)mode);
}

aclError aclmdlRICaptureGetInfo(aclrtStream stream, aclmdlRICaptureStatus *status, aclmdlRI *modelRI) {
  if (status == nullptr || modelRI == nullptr) return ACL_ERROR_INVALID_PARAM;
  Stream *s;
  if (aclError e = context_stream(stream, &s)) return e;
  int st = 0;
  CapturedModel *m = nullptr;
  if (aclError e = stream_capture_info(s, &st, &m)) return e;
  *status = (aclmdlRICaptureStatus)st;
  if (m != nullptr) *modelRI = m;
  return ACL_SUCCESS;
}

aclError aclmdlRICaptureEnd(aclrtStream stream, aclmdlRI *modelRI) {
  if (modelRI == nullptr) return ACL_ERROR_INVALID_PARAM;
  Stream *s;
  if (aclError e = context_stream(stream, &s)) return e;
  CapturedModel *m = nullptr;
  if (aclError e = stream_end_capture(s, &m)) return e;
  *modelRI = m;
  return ACL_SUCCESS;
}

aclError aclmdlRIExecuteAsync(aclmdlRI modelRI, aclrtStream stream) {
  Stream *s;
  if (aclError e = context_stream(stream, &s)) return e;
  if (stream_capturing(s)) {
    set_error_message("aclmdlRIExecuteAsync on a capturing stream");
    return rt_error(ACL_ERROR_RT_STREAM_CAPTURED);
  }
  return captured_model_execute(static_cast<CapturedModel *>(modelRI), s);
}

aclError aclmdlRIDestroy(aclmdlRI modelRI) { return captured_model_destroy(static_cast<CapturedModel *>(modelRI)); }

aclError aclmdlRICaptureThreadExchangeMode(aclmdlRICaptureMode *mode) {
  if (mode == nullptr) return ACL_ERROR_INVALID_PARAM;
  int m = (int)*mode;
  if (aclError e = capture_exchange_thread_mode(&m)) return e;
  *mode = (aclmdlRICaptureMode)m;
  return ACL_SUCCESS;
}

aclError aclmdlRIDebugJsonPrint(aclmdlRI modelRI, const char *path, uint32_t flags) {
  if (path == nullptr || flags > ACL_MDLRI_DEBUG_JSON_PRINT_VERBOSE) return ACL_ERROR_INVALID_PARAM;
  return captured_model_write_json(static_cast<CapturedModel *>(modelRI), path);
}

aclError aclmdlRICaptureTaskGrpBegin(aclrtStream stream) {
  Stream *s;
  if (aclError e = context_stream(stream, &s)) return e;
  return stream_task_group_begin(s);
}

aclError aclmdlRICaptureTaskGrpEnd(aclrtStream stream, aclrtTaskGrp *handle) {
  if (handle == nullptr) return ACL_ERROR_INVALID_PARAM;
  Stream *s;
  if (aclError e = context_stream(stream, &s)) return e;
  TaskGroup *g = nullptr;
  if (aclError e = stream_task_group_end(s, &g)) return e;
  *handle = g;
  return ACL_SUCCESS;
}

aclError aclmdlRICaptureTaskUpdateBegin(aclrtStream stream, aclrtTaskGrp handle) {
  Stream *s;
  if (aclError e = context_stream(stream, &s)) return e;
  return stream_task_update_begin(s, static_cast<TaskGroup *>(handle));
}

aclError aclmdlRICaptureTaskUpdateEnd(aclrtStream stream) {
  Stream *s;
  if (aclError e = context_stream(stream, &s)) return e;
  return stream_task_update_end(s);
}

aclError aclmdlRISetName(aclmdlRI modelRI, const char *name) {
  if (modelRI == nullptr || name == nullptr) return ACL_ERROR_INVALID_PARAM;
  return captured_model_set_name(static_cast<CapturedModel *>(modelRI), name);
}

aclError aclmdlRIGetName(aclmdlRI modelRI, uint32_t maxLen, char *name) {
  if (modelRI == nullptr || name == nullptr) return ACL_ERROR_INVALID_PARAM;
  return captured_model_name(static_cast<CapturedModel *>(modelRI), maxLen, name);
}

aclError aclmdlRIGetId(aclmdlRI modelRI, uint32_t *modelRIId) {
  if (modelRI == nullptr || modelRIId == nullptr) return ACL_ERROR_INVALID_PARAM;
  return captured_model_id(static_cast<CapturedModel *>(modelRI), modelRIId);
}

// The instance's tasks, as aclmdlRIDebugJsonPrint writes them, on stdout (CANN writes its log).
aclError aclmdlRIDebugPrint(aclmdlRI modelRI) {
  if (modelRI == nullptr) return ACL_ERROR_INVALID_PARAM;
  return captured_model_write_json(static_cast<CapturedModel *>(modelRI), "/dev/stdout");
}

aclError aclmdlRIDestroyRegisterCallback(aclmdlRI modelRI, aclrtCallback func, void *userData) {
  return captured_model_on_destroy(static_cast<CapturedModel *>(modelRI), func, userData, true);
}

aclError aclmdlRIDestroyUnregisterCallback(aclmdlRI modelRI, aclrtCallback func) {
  return captured_model_on_destroy(static_cast<CapturedModel *>(modelRI), func, nullptr, false);
}

aclError aclmdlRIBuildBegin(aclmdlRI *modelRI, uint32_t flag) {
  if (modelRI == nullptr) return ACL_ERROR_INVALID_PARAM;
  if (int e = require_context()) return e;
  CapturedModel *m = nullptr;
  if (aclError e = model_build_begin(flag, &m)) return e;
  *modelRI = m;
  return ACL_SUCCESS;
}

aclError aclmdlRIBindStream(aclmdlRI modelRI, aclrtStream stream, uint32_t flag) {
  if (modelRI == nullptr) return ACL_ERROR_INVALID_PARAM;
  Stream *s;
  if (aclError e = context_stream(stream, &s)) return e;
  return model_bind_stream(static_cast<CapturedModel *>(modelRI), s, flag);
}

aclError aclmdlRIEndTask(aclmdlRI modelRI, aclrtStream stream) {
  if (modelRI == nullptr) return ACL_ERROR_INVALID_PARAM;
  Stream *s;
  if (aclError e = context_stream(stream, &s)) return e;
  return model_end_task(static_cast<CapturedModel *>(modelRI), s);
}

aclError aclmdlRIBuildEnd(aclmdlRI modelRI, void *reserve) {
  if (modelRI == nullptr || reserve != nullptr) return ACL_ERROR_INVALID_PARAM;
  return model_build_end(static_cast<CapturedModel *>(modelRI));
}

aclError aclmdlRIUnbindStream(aclmdlRI modelRI, aclrtStream stream) {
  if (modelRI == nullptr) return ACL_ERROR_INVALID_PARAM;
  Stream *s;
  if (aclError e = context_stream(stream, &s)) return e;
  return model_unbind_stream(static_cast<CapturedModel *>(modelRI), s);
}

}  // extern "C"
