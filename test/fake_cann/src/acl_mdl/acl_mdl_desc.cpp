// Model API: model descriptions and datasets of the model API (acl_mdl.h).
#include <cstring>
#include <mutex>
#include <set>

#include "acl/acl_mdl.h"
#include "fakecann/acl_internal.h"
#include "fakecann/stream.h"
#include "model_registry.h"

using namespace fakecann;

struct aclmdlDataset {
  std::vector<aclDataBuffer *> buffers;
};

namespace {

std::mutex g_mu;
std::set<const void *> *g_live = new std::set<const void *>;  // descs and datasets, to refuse double destroy

bool live(const void *p) {
  std::lock_guard<std::mutex> lk(g_mu);
  return p != nullptr && g_live->count(p) != 0;
}

// The i-th input or output of a filled desc, or nullptr.
const model::Tensor *io(const aclmdlDesc *d, size_t i, bool output) {
  if (!live(d) || !d->filled) return nullptr;
  const std::vector<size_t> &list = output ? d->def.outputs : d->def.inputs;
  return i < list.size() ? &d->def.tensors[list[i]] : nullptr;
}

aclError dims_of(const model::Tensor *t, aclmdlIODims *dims) {
  if (t == nullptr || dims == nullptr || t->shape.size() > ACL_MAX_DIM_CNT) return ACL_ERROR_INVALID_PARAM;
  std::memset(dims, 0, sizeof *dims);
  std::strncpy(dims->name, t->name.c_str(), ACL_MAX_TENSOR_NAME_LEN - 1);
  dims->dimCount = t->shape.size();
  for (size_t i = 0; i < t->shape.size(); ++i) dims->dims[i] = t->shape[i];
  return ACL_SUCCESS;
}

aclError fill(aclmdlDesc *d, aclError parsed, model::Definition def, const std::string &why) {
  if (parsed != ACL_SUCCESS) {
    set_error_message(why);
    return parsed;
  }
  d->def = std::move(def);
  d->filled = true;
  return ACL_SUCCESS;
}

}  // namespace

extern "C" {

aclmdlDesc *aclmdlCreateDesc(void) {
  auto *d = new aclmdlDesc;
  std::lock_guard<std::mutex> lk(g_mu);
  g_live->insert(d);
  return d;
}

aclError aclmdlDestroyDesc(aclmdlDesc *modelDesc) {
  {
    std::lock_guard<std::mutex> lk(g_mu);
    if (modelDesc == nullptr || g_live->erase(modelDesc) == 0) return ACL_ERROR_INVALID_PARAM;
  }
  delete modelDesc;
  return ACL_SUCCESS;
}

aclError aclmdlGetDesc(aclmdlDesc *modelDesc, uint32_t modelId) {
  if (!live(modelDesc)) return ACL_ERROR_INVALID_PARAM;
  std::shared_ptr<model::Loaded> m = model::find_loaded(modelId);
  if (m == nullptr) return ACL_ERROR_INVALID_MODEL_ID;
  return fill(modelDesc, ACL_SUCCESS, m->def, "");
}

aclError aclmdlGetDescFromFile(aclmdlDesc *modelDesc, const char *modelPath) {
  if (!live(modelDesc) || modelPath == nullptr) return ACL_ERROR_INVALID_PARAM;
  model::Definition def;
  std::string why;
  aclError e = model::parse_file(modelPath, &def, &why);
  return fill(modelDesc, e, std::move(def), why);
}

aclError aclmdlGetDescFromMem(aclmdlDesc *modelDesc, const void *model, size_t modelSize) {
  if (!live(modelDesc) || model == nullptr || modelSize == 0) return ACL_ERROR_INVALID_PARAM;
  model::Definition def;
  std::string why;
  aclError e = model::parse(model, modelSize, &def, &why);
  return fill(modelDesc, e, std::move(def), why);
}

size_t aclmdlGetNumInputs(aclmdlDesc *d) { return live(d) && d->filled ? d->def.inputs.size() : 0; }
size_t aclmdlGetNumOutputs(aclmdlDesc *d) { return live(d) && d->filled ? d->def.outputs.size() : 0; }

size_t aclmdlGetInputSizeByIndex(aclmdlDesc *d, size_t i) {
  const model::Tensor *t = io(d, i, false);
  return t ? t->bytes : 0;
}
size_t aclmdlGetOutputSizeByIndex(aclmdlDesc *d, size_t i) {
  const model::Tensor *t = io(d, i, true);
  return t ? t->bytes : 0;
}
const char *aclmdlGetInputNameByIndex(const aclmdlDesc *d, size_t i) {
  const model::Tensor *t = io(d, i, false);
  return t ? t->name.c_str() : "";
}
const char *aclmdlGetOutputNameByIndex(const aclmdlDesc *d, size_t i) {
  const model::Tensor *t = io(d, i, true);
  return t ? t->name.c_str() : "";
}
aclFormat aclmdlGetInputFormat(const aclmdlDesc *d, size_t i) {
  const model::Tensor *t = io(d, i, false);
  return t ? t->format : ACL_FORMAT_UNDEFINED;
}
aclFormat aclmdlGetOutputFormat(const aclmdlDesc *d, size_t i) {
  const model::Tensor *t = io(d, i, true);
  return t ? t->format : ACL_FORMAT_UNDEFINED;
}
aclDataType aclmdlGetInputDataType(const aclmdlDesc *d, size_t i) {
  const model::Tensor *t = io(d, i, false);
  return t ? t->dtype : ACL_DT_UNDEFINED;
}
aclDataType aclmdlGetOutputDataType(const aclmdlDesc *d, size_t i) {
  const model::Tensor *t = io(d, i, true);
  return t ? t->dtype : ACL_DT_UNDEFINED;
}
aclError aclmdlGetInputDims(const aclmdlDesc *d, size_t i, aclmdlIODims *dims) {
  return dims_of(io(d, i, false), dims);
}
aclError aclmdlGetOutputDims(const aclmdlDesc *d, size_t i, aclmdlIODims *dims) {
  return dims_of(io(d, i, true), dims);
}

aclmdlDataset *aclmdlCreateDataset(void) {
  auto *d = new aclmdlDataset;
  std::lock_guard<std::mutex> lk(g_mu);
  g_live->insert(d);
  return d;
}

// Frees the dataset only: its buffers stay the caller's.
aclError aclmdlDestroyDataset(const aclmdlDataset *dataset) {
  {
    std::lock_guard<std::mutex> lk(g_mu);
    if (dataset == nullptr || g_live->erase(dataset) == 0) return ACL_ERROR_INVALID_PARAM;
  }
  delete dataset;
  return ACL_SUCCESS;
}

aclError aclmdlAddDatasetBuffer(aclmdlDataset *dataset, aclDataBuffer *dataBuffer) {
  if (!live(dataset) || dataBuffer == nullptr || !acl_handle_live(dataBuffer)) return ACL_ERROR_INVALID_PARAM;
  dataset->buffers.push_back(dataBuffer);
  return ACL_SUCCESS;
}

size_t aclmdlGetDatasetNumBuffers(const aclmdlDataset *dataset) { return live(dataset) ? dataset->buffers.size() : 0; }

aclDataBuffer *aclmdlGetDatasetBuffer(const aclmdlDataset *dataset, size_t index) {
  if (!live(dataset) || index >= dataset->buffers.size()) return nullptr;
  return dataset->buffers[index];
}

}  // extern "C"

namespace fakecann::model {
// For acl_mdl.cpp: the buffers of a live dataset, or nullptr.
const std::vector<aclDataBuffer *> *dataset_buffers(const aclmdlDataset *d) { return live(d) ? &d->buffers : nullptr; }
}  // namespace fakecann::model
