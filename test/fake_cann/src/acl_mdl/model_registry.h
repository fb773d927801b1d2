// Models loaded by aclmdlLoadFrom* (acl_mdl.cpp), looked up by aclmdlGetDesc (acl_mdl_desc.cpp).
#pragma once
#include <atomic>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "acl/acl_mdl.h"
#include "model_file.h"

struct aclmdlDesc {
  bool filled = false;
  fakecann::model::Definition def;
};

namespace fakecann::model {

struct Loaded {
  uint32_t id = 0;
  Definition def;
  std::string file_stem;       // the file name without suffix; empty when loaded from memory
  std::vector<void *> device;  // per tensor: device memory of weights and internal tensors (else nullptr)
  std::vector<bool> owned;     // per tensor: device[i] is the model's own allocation (not the caller's memory)
  void *stream = nullptr;      // the model's own stream, for the synchronous aclmdlExecute
  int32_t device_id = 0;
  std::atomic<uint64_t> runs{0};  // executions so far: the dump_number (step) of the next one
};

// The loaded model `id`, or nullptr.
std::shared_ptr<Loaded> find_loaded(uint32_t id);

// Memory the caller gives a model (aclmdlLoad*WithMem): intermediate tensors in `work`, weights in `weight`; NULL:
// the model allocates its own.
struct LoadMemory {
  void *work = nullptr;
  size_t work_size = 0;
  void *weight = nullptr;
  size_t weight_size = 0;
};
// What aclmdlQuerySize reports: the bytes of the intermediate tensors and of the weights, each 512-aligned.
void required_sizes(const Definition &def, uint64_t *work, uint64_t *weight);
// Loads a model file (`path`) or image; an ACL error code.
aclError load_model(const char *path, const void *image, size_t size, const LoadMemory &mem, uint32_t *modelId);
// aclmdlExecute (sync: on the model's own stream, waited for) and aclmdlExecuteAsync.
aclError execute_model(uint32_t modelId, const aclmdlDataset *input, aclmdlDataset *output, void *stream, bool sync);
aclError refuse_model(aclError code, const std::string &why);

}  // namespace fakecann::model

namespace fakecann::model {
// The buffers of a live dataset (acl_mdl_desc.cpp), or nullptr.
const std::vector<aclDataBuffer *> *dataset_buffers(const aclmdlDataset *d);
}  // namespace fakecann::model
