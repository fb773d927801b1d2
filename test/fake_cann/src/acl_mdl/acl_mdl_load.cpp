// Model API: the variants of model loading and execution (ge api/acl/acl_model/model/model.cpp):
// - aclmdlQuerySize / aclmdlQuerySizeFromMem: the work (intermediate tensors) and weight memory a model needs;
// - aclmdlLoadFromFileWithMem / FromMemWithMem: the model in the caller's device memory (NULL: its own), which must be
//   at least those sizes (else ACL_ERROR_GE_FAILURE);
// - aclmdlLoadFromFileWithQ / FromMemWithQ: checked as GE checks them (no queue list, or an empty one:
//   ACL_ERROR_INVALID_PARAM), then refused: the stand-in has no data queues, so every queue id is unknown
//   (ACL_ERROR_GE_EXEC_MODEL_QUEUE_ID_INVALID);
// - aclmdlLoadWithConfig: a config handle of ACL_MDL_LOAD_TYPE_SIZET and the attributes of that load type;
// - aclmdlExecuteV2: aclmdlExecute on the given stream (NULL: the model's own), waited for; aclmdlExecuteAsyncV2.
#include <cstring>
#include <string>
#include <vector>

#include "acl/acl.h"
#include "fakecann/stream.h"
#include "model_registry.h"

struct aclmdlConfigHandle {
  size_t load_type = 0;
  std::string path;
  const void *mem = nullptr;
  size_t mem_size = 0;
  void *weight = nullptr, *work = nullptr;
  size_t weight_size = 0, work_size = 0;
  const uint32_t *input_q = nullptr, *output_q = nullptr;
  size_t input_q_num = 0, output_q_num = 0;
  int32_t priority = 0;
};

struct aclmdlExecConfigHandle {
  int32_t stream_sync_timeout = -1, event_sync_timeout = -1;
};

using namespace fakecann;

namespace {

// model.cpp aclmdlCheckQueueParam.
bool queues_given(const uint32_t *inputQ, size_t inputQNum, const uint32_t *outputQ, size_t outputQNum) {
  return inputQ != nullptr && outputQ != nullptr && inputQNum != 0 && outputQNum != 0;
}

aclError no_such_queue(uint32_t q) {
  set_error_message("the stand-in has no data queues: queue " + std::to_string(q) + " does not exist");
  return (aclError)ACL_ERROR_GE_EXEC_MODEL_QUEUE_ID_INVALID;
}

// Copies a value of exactly `size` bytes from an attribute.
template <typename T>
aclError take(const void *value, size_t size, T *out) {
  if (value == nullptr || size != sizeof(T)) return ACL_ERROR_INVALID_PARAM;
  std::memcpy(out, value, sizeof(T));
  return ACL_SUCCESS;
}

}  // namespace

extern "C" {

aclError aclmdlQuerySize(const char *fileName, size_t *workSize, size_t *weightSize) {
  if (fileName == nullptr || workSize == nullptr || weightSize == nullptr) return ACL_ERROR_INVALID_PARAM;
  model::Definition def;
  std::string why;
  if (aclError e = model::parse_file(fileName, &def, &why)) return model::refuse_model(e, why);
  uint64_t work = 0, weight = 0;
  model::required_sizes(def, &work, &weight);
  *workSize = work;
  *weightSize = weight;
  return ACL_SUCCESS;
}

aclError aclmdlQuerySizeFromMem(const void *model, size_t modelSize, size_t *workSize, size_t *weightSize) {
  if (model == nullptr || workSize == nullptr || weightSize == nullptr) return ACL_ERROR_INVALID_PARAM;
  model::Definition def;
  std::string why;
  if (aclError e = model::parse(model, modelSize, &def, &why)) return model::refuse_model(e, why);
  uint64_t work = 0, weight = 0;
  model::required_sizes(def, &work, &weight);
  *workSize = work;
  *weightSize = weight;
  return ACL_SUCCESS;
}

aclError aclmdlLoadFromFileWithMem(const char *modelPath, uint32_t *modelId, void *workPtr, size_t workSize,
                                   void *weightPtr, size_t weightSize) {
  if (modelPath == nullptr) return ACL_ERROR_INVALID_PARAM;
  return model::load_model(modelPath, nullptr, 0, {workPtr, workSize, weightPtr, weightSize}, modelId);
}

aclError aclmdlLoadFromMemWithMem(const void *model, size_t modelSize, uint32_t *modelId, void *workPtr,
                                  size_t workSize, void *weightPtr, size_t weightSize) {
  return model::load_model(nullptr, model, modelSize, {workPtr, workSize, weightPtr, weightSize}, modelId);
}

aclError aclmdlLoadFromFileWithQ(const char *modelPath, uint32_t *modelId, const uint32_t *inputQ, size_t inputQNum,
                                 const uint32_t *outputQ, size_t outputQNum) {
  if (!queues_given(inputQ, inputQNum, outputQ, outputQNum)) return ACL_ERROR_INVALID_PARAM;
  if (modelPath == nullptr || modelId == nullptr) return ACL_ERROR_INVALID_PARAM;
  return no_such_queue(inputQ[0]);
}

aclError aclmdlLoadFromMemWithQ(const void *model, size_t modelSize, uint32_t *modelId, const uint32_t *inputQ,
                                size_t inputQNum, const uint32_t *outputQ, size_t outputQNum) {
  if (!queues_given(inputQ, inputQNum, outputQ, outputQNum)) return ACL_ERROR_INVALID_PARAM;
  if (model == nullptr || modelSize == 0 || modelId == nullptr) return ACL_ERROR_INVALID_PARAM;
  return no_such_queue(inputQ[0]);
}

aclmdlConfigHandle *aclmdlCreateConfigHandle(void) { return new aclmdlConfigHandle; }

aclError aclmdlDestroyConfigHandle(aclmdlConfigHandle *handle) {
  if (handle == nullptr) return ACL_ERROR_INVALID_PARAM;
  delete handle;
  return ACL_SUCCESS;
}

aclError aclmdlSetConfigOpt(aclmdlConfigHandle *handle, aclmdlConfigAttr attr, const void *attrValue,
                            size_t valueSize) {
  if (handle == nullptr || attrValue == nullptr) return ACL_ERROR_INVALID_PARAM;
  switch (attr) {
    case ACL_MDL_PRIORITY_INT32: return take(attrValue, valueSize, &handle->priority);
    case ACL_MDL_LOAD_TYPE_SIZET: return take(attrValue, valueSize, &handle->load_type);
    case ACL_MDL_PATH_PTR: {  // a deep copy of the path
      const char *p = nullptr;
      if (aclError e = take(attrValue, valueSize, &p)) return e;
      if (p == nullptr) return ACL_ERROR_INVALID_PARAM;
      handle->path = p;
      return ACL_SUCCESS;
    }
    case ACL_MDL_MEM_ADDR_PTR: return take(attrValue, valueSize, &handle->mem);
    case ACL_MDL_MEM_SIZET: return take(attrValue, valueSize, &handle->mem_size);
    case ACL_MDL_WEIGHT_ADDR_PTR: return take(attrValue, valueSize, &handle->weight);
    case ACL_MDL_WEIGHT_SIZET: return take(attrValue, valueSize, &handle->weight_size);
    case ACL_MDL_WORKSPACE_ADDR_PTR: return take(attrValue, valueSize, &handle->work);
    case ACL_MDL_WORKSPACE_SIZET: return take(attrValue, valueSize, &handle->work_size);
    case ACL_MDL_INPUTQ_NUM_SIZET: return take(attrValue, valueSize, &handle->input_q_num);
    case ACL_MDL_INPUTQ_ADDR_PTR: return take(attrValue, valueSize, &handle->input_q);
    case ACL_MDL_OUTPUTQ_NUM_SIZET: return take(attrValue, valueSize, &handle->output_q_num);
    case ACL_MDL_OUTPUTQ_ADDR_PTR: return take(attrValue, valueSize, &handle->output_q);
    default: return ACL_SUCCESS;  // attributes of load types the stand-in does not emulate
  }
}

aclError aclmdlLoadWithConfig(const aclmdlConfigHandle *handle, uint32_t *modelId) {
  if (handle == nullptr || modelId == nullptr) return ACL_ERROR_INVALID_PARAM;
  const char *path = handle->path.empty() ? nullptr : handle->path.c_str();
  const model::LoadMemory mem{handle->work, handle->work_size, handle->weight, handle->weight_size};
  switch (handle->load_type) {
    case ACL_MDL_LOAD_FROM_FILE:
      return path != nullptr ? model::load_model(path, nullptr, 0, {}, modelId) : ACL_ERROR_INVALID_PARAM;
    case ACL_MDL_LOAD_FROM_FILE_WITH_MEM: return aclmdlLoadFromFileWithMem(path, modelId, mem.work, mem.work_size,
                                                                           mem.weight, mem.weight_size);
    case ACL_MDL_LOAD_FROM_MEM: return aclmdlLoadFromMem(handle->mem, handle->mem_size, modelId);
    case ACL_MDL_LOAD_FROM_MEM_WITH_MEM:
      return aclmdlLoadFromMemWithMem(handle->mem, handle->mem_size, modelId, mem.work, mem.work_size, mem.weight,
                                      mem.weight_size);
    case ACL_MDL_LOAD_FROM_FILE_WITH_Q:
      return aclmdlLoadFromFileWithQ(path, modelId, handle->input_q, handle->input_q_num, handle->output_q,
                                     handle->output_q_num);
    case ACL_MDL_LOAD_FROM_MEM_WITH_Q:
      return aclmdlLoadFromMemWithQ(handle->mem, handle->mem_size, modelId, handle->input_q, handle->input_q_num,
                                    handle->output_q, handle->output_q_num);
    default:
      set_error_message("aclmdlLoadWithConfig: no or unknown ACL_MDL_LOAD_TYPE_SIZET");
      return ACL_ERROR_INVALID_PARAM;
  }
}

aclmdlExecConfigHandle *aclmdlCreateExecConfigHandle(void) { return new aclmdlExecConfigHandle; }

aclError aclmdlDestroyExecConfigHandle(const aclmdlExecConfigHandle *handle) {
  if (handle == nullptr) return ACL_ERROR_INVALID_PARAM;
  delete handle;
  return ACL_SUCCESS;
}

aclError aclmdlSetExecConfigOpt(aclmdlExecConfigHandle *handle, aclmdlExecConfigAttr attr, const void *attrValue,
                                size_t valueSize) {
  if (handle == nullptr || attrValue == nullptr) return ACL_ERROR_INVALID_PARAM;
  switch (attr) {
    case ACL_MDL_STREAM_SYNC_TIMEOUT: return take(attrValue, valueSize, &handle->stream_sync_timeout);
    case ACL_MDL_EVENT_SYNC_TIMEOUT: return take(attrValue, valueSize, &handle->event_sync_timeout);
    default: return ACL_SUCCESS;
  }
}

// On `stream` (NULL: the model's own), then synchronized within the handle's stream timeout (model.cpp).
aclError aclmdlExecuteV2(uint32_t modelId, const aclmdlDataset *input, aclmdlDataset *output, aclrtStream stream,
                         const aclmdlExecConfigHandle *handle) {
  if (handle == nullptr) return ACL_ERROR_INVALID_PARAM;
  if (stream == nullptr) return model::execute_model(modelId, input, output, nullptr, true);
  if (aclError e = model::execute_model(modelId, input, output, stream, false)) return e;
  return aclrtSynchronizeStreamWithTimeout(stream, handle->stream_sync_timeout);
}

aclError aclmdlExecuteAsyncV2(uint32_t modelId, const aclmdlDataset *input, aclmdlDataset *output, aclrtStream stream,
                              const aclmdlExecConfigHandle *handle) {
  if (handle == nullptr) return ACL_ERROR_INVALID_PARAM;
  return model::execute_model(modelId, input, output, stream, false);
}

}  // extern "C"
