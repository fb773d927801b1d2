// Model API: loading, executing and unloading models (acl_mdl.h). Loading parses and checks the stand-in's
// model file (model_file.h), allocates device memory for weights and intermediate tensors and copies the
// weights there. Executing binds the datasets' device buffers and enqueues the whole model as one task on the
// stream (like rtModelExecute): its kernels run one after another on the stream's worker, with no host call per
// kernel, and with dump on the worker produces each selected kernel's dump file right after it.
#include <map>
#include <mutex>

#include "fakecann/acl_internal.h"
#include "fakecann/caller.h"
#include "fakecann/device.h"
#include "fakecann/dump.h"
#include "fakecann/rt_internal.h"
#include "fakecann/stream.h"
#include "model_registry.h"
#include "runtime/rt.h"

using namespace fakecann;

namespace fakecann::model {
namespace {

std::mutex g_mu;
std::map<uint32_t, std::shared_ptr<Loaded>> *g_models = new std::map<uint32_t, std::shared_ptr<Loaded>>;
uint32_t g_next_id = 1;

aclError refuse(aclError code, const std::string &why) {
  set_error_message(why);
  return code;
}

void release(Loaded &m) {
  for (size_t i = 0; i < m.device.size(); ++i)
    if (m.device[i] != nullptr && m.owned[i]) rtFree(m.device[i]);
  m.device.clear();
  if (m.stream != nullptr) rtStreamDestroy(m.stream);
  m.stream = nullptr;
}

constexpr uint64_t kAlign = 512;
uint64_t aligned(uint64_t n) { return (n + kAlign - 1) / kAlign * kAlign; }

// Where tensor i goes: in the caller's memory of its kind when given (at the next aligned offset), else its own.
aclError place_tensor(Loaded &m, size_t i, const LoadMemory &mem, uint64_t *work_off, uint64_t *weight_off) {
  const Tensor &t = m.def.tensors[i];
  const bool weight = t.role == Role::Weight;
  void *base = weight ? mem.weight : mem.work;
  if (base == nullptr) {
    m.owned[i] = true;
    return rtMalloc(&m.device[i], t.bytes, RT_MEMORY_HBM, 0);
  }
  uint64_t *off = weight ? weight_off : work_off;
  m.device[i] = static_cast<char *>(base) + *off;
  *off += aligned(t.bytes);
  return ACL_SUCCESS;
}

// Device memory for weights (copied now) and intermediate tensors (the caller's when given: aclmdlLoad*WithMem),
// and the model's own stream.
aclError place(Loaded &m, const LoadMemory &mem) {
  uint64_t need_work = 0, need_weight = 0, work_off = 0, weight_off = 0;
  required_sizes(m.def, &need_work, &need_weight);
  // Memory the caller gives must be device memory of the size aclmdlQuerySize reports (GE's davinci_model.cc
  // asserts the size: a failure of GE, ACL_ERROR_GE_FAILURE).
  if ((mem.work != nullptr && (mem.work_size < need_work || device_host_alias(mem.work, need_work) == nullptr)) ||
      (mem.weight != nullptr && (mem.weight_size < need_weight || device_host_alias(mem.weight, need_weight) == nullptr)))
    return refuse(ACL_ERROR_GE_FAILURE, "the work or weight memory given is smaller than aclmdlQuerySize says");
  m.device.assign(m.def.tensors.size(), nullptr);
  m.owned.assign(m.def.tensors.size(), false);
  for (size_t i = 0; i < m.def.tensors.size(); ++i) {
    const Tensor &t = m.def.tensors[i];
    if (t.role == Role::Input || t.role == Role::Output || t.bytes == 0) continue;
    if (aclError e = place_tensor(m, i, mem, &work_off, &weight_off)) return e;
    if (t.role == Role::Weight)
      if (aclError e = rtMemcpy(m.device[i], t.bytes, t.weight.data(), t.bytes, RT_MEMCPY_HOST_TO_DEVICE)) return e;
  }
  return rtStreamCreate(&m.stream, RT_STREAM_PRIORITY_DEFAULT);
}

aclError load(aclError parsed, Definition def, const std::string &why, std::string stem, const LoadMemory &mem,
              uint32_t *modelId) {
  if (parsed != ACL_SUCCESS) return refuse(parsed, why);
  auto m = std::make_shared<Loaded>();
  m->def = std::move(def);
  m->file_stem = std::move(stem);
  m->device_id = current_device();
  if (aclError e = place(*m, mem)) {
    release(*m);
    return e;
  }
  std::lock_guard<std::mutex> lk(g_mu);
  m->id = g_next_id++;
  (*g_models)[m->id] = m;
  *modelId = m->id;
  return ACL_SUCCESS;
}

std::string file_stem(const std::string &path) {
  size_t slash = path.rfind('/');
  std::string base = slash == std::string::npos ? path : path.substr(slash + 1);
  size_t dot = base.rfind('.');
  return dot == std::string::npos || dot == 0 ? base : base.substr(0, dot);
}

}  // namespace

aclError refuse_model(aclError code, const std::string &why) { return refuse(code, why); }

void required_sizes(const Definition &def, uint64_t *work, uint64_t *weight) {
  *work = *weight = 0;
  for (const Tensor &t : def.tensors) {
    if (t.role == Role::Weight) *weight += aligned(t.bytes);
    if (t.role == Role::Internal) *work += aligned(t.bytes);
  }
}

aclError load_model(const char *path, const void *image, size_t size, const LoadMemory &mem, uint32_t *modelId) {
  if (modelId == nullptr || (path == nullptr && (image == nullptr || size == 0))) return ACL_ERROR_INVALID_PARAM;
  if (int e = require_context()) return e;
  Definition def;
  std::string why;
  aclError parsed = path != nullptr ? parse_file(path, &def, &why) : parse(image, size, &def, &why);
  return load(parsed, std::move(def), why, path != nullptr ? file_stem(path) : "", mem, modelId);
}

std::shared_ptr<Loaded> find_loaded(uint32_t id) {
  std::lock_guard<std::mutex> lk(g_mu);
  auto it = g_models->find(id);
  return it == g_models->end() ? nullptr : it->second;
}

}  // namespace fakecann::model

namespace {

using model::Loaded;
using model::refuse_model;
using model::Role;

// One execution, as the stream's worker runs it.
struct Run {
  std::shared_ptr<Loaded> model;
  std::vector<TensorView> views;  // per tensor of the model, over the bound device memory
  std::shared_ptr<const dump::Config> dump;
  std::string dump_dir;
  int32_t stream_id = 0;
};

dump::Tensor dump_tensor(const TensorView &v, uint64_t bytes) { return {v.dtype, v.format, v.shape, v.data, bytes}; }

void run_model(const Run &r) {
  const model::Definition &def = r.model->def;
  const std::string &stem = r.model->file_stem;
  for (size_t n = 0; n < def.nodes.size(); ++n) {
    const model::Node &node = def.nodes[n];
    std::vector<TensorView> in, out;
    for (size_t t : node.inputs) in.push_back(r.views[t]);
    for (size_t t : node.outputs) out.push_back(r.views[t]);
    node.kernel(in, out, node.attrs);
    log_model_kernel(node.type.c_str(), node.name.c_str());
    if (r.dump == nullptr || !r.dump->selects(def.name, stem.empty() ? def.name : stem, node.name)) continue;
    dump::Kernel k{node.type, node.name, (uint32_t)n, r.stream_id, {}, {}};
    for (size_t t : node.inputs) k.inputs.push_back(dump_tensor(r.views[t], def.tensors[t].bytes));
    for (size_t t : node.outputs) k.outputs.push_back(dump_tensor(r.views[t], def.tensors[t].bytes));
    dump::dump_kernel(*r.dump, r.dump_dir, k);
  }
}

// The device address of each model input (or output) from the dataset's buffers, which must be device memory
// holding at least the tensor's bytes. An output buffer over NULL with size 0 gets device memory here.
aclError bind_io(const Loaded &m, const aclmdlDataset *ds, bool output, std::vector<TensorView> &views) {
  const std::vector<aclDataBuffer *> *buffers = model::dataset_buffers(ds);
  const std::vector<size_t> &list = output ? m.def.outputs : m.def.inputs;
  const aclError mismatch = output ? ACL_ERROR_MODEL_OUTPUT_NOT_MATCH : ACL_ERROR_MODEL_INPUT_NOT_MATCH;
  const std::string what = output ? "output " : "input ";
  if (buffers == nullptr) return refuse_model(ACL_ERROR_INVALID_PARAM, what + "dataset is NULL or destroyed");
  if (buffers->size() != list.size())
    return refuse_model(mismatch, what + "dataset holds " + std::to_string(buffers->size()) +
                                      " buffers, the model has " + std::to_string(list.size()));
  for (size_t i = 0; i < list.size(); ++i) {
    const model::Tensor &t = m.def.tensors[list[i]];
    aclDataBuffer *b = (*buffers)[i];
    if (!acl_handle_live(b))
      return refuse_model(ACL_ERROR_INVALID_PARAM, what + std::to_string(i) + ": destroyed buffer");
    if (output && b->data == nullptr && b->size == 0 && t.bytes > 0) {
      if (aclError e = rtMalloc(&b->data, t.bytes, RT_MEMORY_HBM, 0)) return e;
      b->size = t.bytes;
    }
    if (b->size < t.bytes || (t.bytes > 0 && device_host_alias(b->data, t.bytes) == nullptr))
      return refuse_model(mismatch, what + std::to_string(i) + " (" + t.name + "): the buffer is not " +
                                        std::to_string(t.bytes) + " bytes of device memory");
    views[list[i]] = contiguous_view(t.dtype, t.shape, b->data);
    views[list[i]].format = t.format;
  }
  return ACL_SUCCESS;
}

}  // namespace

aclError model::execute_model(uint32_t modelId, const aclmdlDataset *input, aclmdlDataset *output, void *stream,
                              bool sync) {
  if (int e = require_context()) return e;
  std::shared_ptr<Loaded> m = model::find_loaded(modelId);
  if (m == nullptr) return refuse_model(ACL_ERROR_INVALID_MODEL_ID, "no loaded model " + std::to_string(modelId));
  Run r{m, std::vector<TensorView>(m->def.tensors.size()), dump::active_config(), "", 0};
  for (size_t t = 0; t < m->def.tensors.size(); ++t)
    if (m->device[t] != nullptr) {
      r.views[t] = contiguous_view(m->def.tensors[t].dtype, m->def.tensors[t].shape, m->device[t]);
      r.views[t].format = m->def.tensors[t].format;  // what the dump reports (the bytes stay row-major here)
    }
  if (aclError e = bind_io(*m, input, false, r.views)) return e;
  if (aclError e = bind_io(*m, output, true, r.views)) return e;
  void *s = sync ? m->stream : stream;
  Stream *st;
  if (int e = resolve_stream(s, &st)) return e;
  r.stream_id = stream_id(st);
  const uint64_t step = m->runs++;  // the iteration: dump_number and dump_step's index
  if (r.dump != nullptr && r.dump->model_dump() && r.dump->step_selected(step))
    r.dump_dir = r.dump->path + "/" + r.dump->time_dir + "/" + std::to_string(m->device_id) + "/" + m->def.name + "/" +
                 std::to_string(m->id) + "/" + std::to_string(step);
  else
    r.dump = nullptr;
  if (int e = launch_task(
          s, [r = std::move(r)] { run_model(r); }, "model"))
    return e;
  return sync ? stream_synchronize(st) : ACL_SUCCESS;
}

extern "C" {

aclError aclmdlLoadFromFile(const char *modelPath, uint32_t *modelId) {
  if (modelPath == nullptr) return ACL_ERROR_INVALID_PARAM;
  return model::load_model(modelPath, nullptr, 0, {}, modelId);
}

aclError aclmdlLoadFromMem(const void *model, size_t modelSize, uint32_t *modelId) {
  return model::load_model(nullptr, model, modelSize, {}, modelId);
}

aclError aclmdlExecute(uint32_t modelId, const aclmdlDataset *input, aclmdlDataset *output) {
  return model::execute_model(modelId, input, output, nullptr, true);
}

aclError aclmdlExecuteAsync(uint32_t modelId, const aclmdlDataset *input, aclmdlDataset *output, aclrtStream stream) {
  return model::execute_model(modelId, input, output, stream, false);
}

// Frees the model's device memory at once: work of it still queued on a stream must have been synchronized.
aclError aclmdlUnload(uint32_t modelId) {
  std::shared_ptr<Loaded> m;
  {
    std::lock_guard<std::mutex> lk(model::g_mu);
    auto it = model::g_models->find(modelId);
    if (it == model::g_models->end()) return ACL_ERROR_INVALID_MODEL_ID;
    m = it->second;
    model::g_models->erase(it);
  }
  model::release(*m);
  return ACL_SUCCESS;
}

}  // extern "C"
