// Single-op dump (dump_op_switch "on"), adump's DumpOperatorV2 for host-launched aclnn and aclop kernels
// (shared/reference/cann_dump.md §9). Each call is synchronous, as in CANN: a process-wide mutex, the op's mapping
// info serialized and copied with two device allocations and blocking host-to-device copies, a dump kernel
// enqueued on the op's stream (it reads the tensors when the stream gets there, so an input dump taken before the
// op's kernel holds the values before it), then a stream synchronize. The host pays all of it on every kernel; only
// model execution dumps without host work (acl_mdl.cpp).
#include "fakecann/op_dump.h"

#include <cstring>
#include <mutex>

#include "fakecann/device.h"
#include "fakecann/dump.h"
#include "fakecann/rt_internal.h"
#include "fakecann/stream.h"

namespace fakecann::opdump {
namespace {

std::mutex g_dump_mu;  // adump's process-wide lock around one operator dump

// A device buffer that lives until the dump kernel ran (the stream was synchronized).
struct DeviceBuffer {
  void *p = nullptr;
  explicit DeviceBuffer(uint64_t n) : p(device_alloc(n)) {}
  ~DeviceBuffer() {
    if (p != nullptr) device_free(p);
  }
  DeviceBuffer(const DeviceBuffer &) = delete;
  DeviceBuffer &operator=(const DeviceBuffer &) = delete;
};

// The blocking host-to-device copy of `n` bytes into a fresh device buffer.
int upload(DeviceBuffer &b, const void *src, uint64_t n) {
  if (b.p == nullptr) return rt_error(ACL_ERROR_RT_MEMORY_ALLOCATION);
  return memcpy_impl(b.p, n, src, n, RT_MEMCPY_HOST_TO_DEVICE, nullptr, false);
}

std::vector<dump::Tensor> to_dump(const std::vector<Tensor> &tensors) {
  std::vector<dump::Tensor> out;
  for (const Tensor &t : tensors) out.push_back({t.dtype, t.format, t.shape, t.device, t.bytes});
  return out;
}

// The tensor table the dump kernel reads: every tensor's device address and size.
std::vector<uint64_t> tensor_table(const dump::Kernel &k) {
  std::vector<uint64_t> table;
  for (const auto *list : {&k.inputs, &k.outputs})
    for (const dump::Tensor &t : *list) table.insert(table.end(), {(uint64_t)(uintptr_t)t.device, t.bytes});
  if (table.empty()) table.push_back(0);
  return table;
}

// The stream synchronize of the dump: the host waits until everything queued on `s` ran. Through an event at the
// stream's tail, so that a failed kernel's error is still reported to the host's own synchronize (the stand-in's
// stream reports an error once; a real device's stays in error).
void drain(Stream *s) {
  Event *ev = event_create();
  event_record(ev, s);
  event_synchronize(ev);
  event_destroy(ev);
}

}  // namespace

Switch op_switch() {
  std::shared_ptr<const dump::Config> c = dump::active_config();
  Switch s;
  if (c == nullptr || !c->op_switch) return s;
  s.on = true;
  s.inputs = c->inputs, s.outputs = c->outputs;
  s.l2 = c->level_op, s.l0 = c->level_kernel;
  return s;
}

bool any_dump() { return dump::active_config() != nullptr; }

uint32_t next_task_id() {
  thread_local uint32_t last = 0;
  last = (last + 1) & 0xffffu;
  return last;
}

int dump_tensors(const std::string &op_type, const std::string &op_name, uint32_t task_id,
                 const std::vector<Tensor> &inputs, const std::vector<Tensor> &outputs, void *stream) {
  std::shared_ptr<const dump::Config> c = dump::active_config();
  if (c == nullptr || !c->op_switch) return ACL_SUCCESS;
  std::lock_guard<std::mutex> lk(g_dump_mu);
  Stream *s = nullptr;
  if (int e = resolve_stream(stream, &s)) return e;
  dump::Kernel k{op_type, op_name, task_id, stream_id(s), to_dump(inputs), to_dump(outputs)};
  std::vector<uint8_t> info = dump::op_mapping_info(k);
  std::vector<uint64_t> table = tensor_table(k);
  DeviceBuffer dev_info(info.size()), dev_table(table.size() * 8);
  if (int e = upload(dev_info, info.data(), info.size())) return e;
  if (int e = upload(dev_table, table.data(), table.size() * 8)) return e;
  std::string dir = c->path + "/" + c->time_dir + "/" + std::to_string(current_device());
  // The AICPU dump kernel: builds the file from device memory as the stream reaches it.
  int e = launch_task(stream, [c, dir, k = std::move(k)] { dump::dump_kernel(*c, dir, k); }, "DumpDataInfo");
  if (e != 0) return e;
  drain(s);
  return ACL_SUCCESS;
}

}  // namespace fakecann::opdump
