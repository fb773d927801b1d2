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
  void *stream = nullptr;      // the model's own stream, for the synchronous aclmdlExecute
  int32_t device_id = 0;
  std::atomic<uint64_t> runs{0};  // executions so far: the dump_number (step) of the next one
};

// The loaded model `id`, or nullptr.
std::shared_ptr<Loaded> find_loaded(uint32_t id);

}  // namespace fakecann::model

namespace fakecann::model {
// The buffers of a live dataset (acl_mdl_desc.cpp), or nullptr.
const std::vector<aclDataBuffer *> *dataset_buffers(const aclmdlDataset *d);
}  // namespace fakecann::model
