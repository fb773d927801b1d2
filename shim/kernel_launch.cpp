#include "shim/kernel_launch.h"

#include "collector/naming.h"
#include "shim/acl_types.h"
#include "shim/config.h"
#include "shim/reentry.h"
#include "shim/staging.h"

namespace msprobe::shim {

using collector::CapturedArg;
using collector::CapturedList;
using collector::TensorCapture;

thread_local int KernelLaunch::open_ = 0;

StackId launch_stack() {
  const Config &c = session().config();
  return StackTable::global().capture(StackTable::options_for(c.stack));
}

namespace {
std::string_view op_name_of(StackId stack) {
  std::string_view scope = StackTable::global().op_name(stack);
  return scope.empty() ? collector::kDefaultOpName : scope;
}
}  // namespace

KernelLaunch::KernelLaunch(std::string_view op_type, StackId stack, void *stream)
    : stream_(stream), stack_(stack), ticket_(session().begin_launch(op_type, op_name_of(stack), stream)) {
  ++open_;
  use_device_stats_ = ticket_.capture && ticket_.with_data && DeviceStatsBatch::enabled();
}

KernelLaunch::~KernelLaunch() { --open_; }

CapturedArg KernelLaunch::tensor(const TensorMeta &m, bool output) {
  ReentryGuard guard;  // the copies go through the runtime, whose inner calls must not be captured
  TensorCapture t;
  t.dtype = acl_to_dtype(m.dtype);
  if (t.dtype == collector::DType::Raw) t.dtype_name = acl_dtype_label(m.dtype);
  t.shape.assign(m.shape.begin(), m.shape.begin() + m.ndim);
  t.strides.assign(m.strides.begin(), m.strides.begin() + m.ndim);
  t.format = acl_format_name(m.format);
  t.device_stride = t.strides;
  t.device_offset = m.offset;
  int64_t lo = 0, hi = 0;
  size_t es = acl_dtype_size(m.dtype);
  // Statistics on the device: a few scalars cross the host link instead of the tensor. overflow_check also
  // keeps the bytes on the device, read back only if the kernel turns out to overflow.
  if (use_device_stats_ && DeviceStatsBatch::eligible(m)) {
    if (!device_stats_) device_stats_ = std::make_unique<DeviceStatsBatch>(stream_);
    const bool overflow = DeviceStatsBatch::overflow_mode();
    std::shared_ptr<const collector::HostBlock> kept;
    int64_t offset = 0;
    if (!overflow || (kept = device_stats_->snapshot(m, &offset))) {
      t.device_stats = device_stats_->add(m, overflow && output);
      t.block = std::move(kept);
      t.offset = offset;
      if (t.device_stats || t.block) return CapturedArg{std::move(t)};
    }
  }
  // Raw types (complex, 4-bit, fp8) are described but not copied: the collector cannot read them.
  if (ticket_.with_data && t.dtype != collector::DType::Raw && es > 0 && m.data != nullptr && m.extent(&lo, &hi)) {
    const char *first = static_cast<const char *>(m.data) + lo * (int64_t)es;
    t.block = session().staging().copy_async(first, (uint64_t)(hi - lo + 1) * es, stream_);
    t.offset = m.offset - lo;
    staged_ = staged_ || t.block != nullptr;
  }
  return CapturedArg{std::move(t)};
}

void KernelLaunch::input_tensor(const TensorMeta &t) {
  if (ticket_.capture && ticket_.with_inputs) inputs_.push_back(tensor(t, false));
}

void KernelLaunch::input_tensor_list(const std::vector<TensorMeta> &ts) {
  if (!ticket_.capture || !ticket_.with_inputs) return;
  CapturedList list;
  for (const TensorMeta &t : ts) list.push_back(tensor(t, false));
  inputs_.push_back(CapturedArg{std::move(list)});
}

void KernelLaunch::input_value(collector::ValueArg v) {
  if (ticket_.capture && ticket_.with_inputs) inputs_.push_back(CapturedArg{std::move(v)});
}

void KernelLaunch::input_null() {
  if (ticket_.capture && ticket_.with_inputs) inputs_.push_back(CapturedArg{});
}

void KernelLaunch::output_tensor(const TensorMeta &t) {
  if (ticket_.capture && ticket_.with_outputs) outputs_.push_back(tensor(t, true));
}

void KernelLaunch::output_tensor_list(const std::vector<TensorMeta> &ts) {
  if (!ticket_.capture || !ticket_.with_outputs) return;
  CapturedList list;
  for (const TensorMeta &t : ts) list.push_back(tensor(t, true));
  outputs_.push_back(CapturedArg{std::move(list)});
}

void KernelLaunch::output_null() {
  if (ticket_.capture && ticket_.with_outputs) outputs_.push_back(CapturedArg{});
}

void KernelLaunch::finish(bool launched) {
  if (finished_) return;
  finished_ = true;
  if (!ticket_.capture) return;
  ReentryGuard guard;
  if (!launched) {
    // The kernel never ran, but copies and reductions of its inputs may be in flight: their memory must
    // outlive them.
    if (device_stats_) device_stats_->abandon();
    if (staged_ || device_stats_)
      if (auto done = session().staging().fence(stream_)) done->wait();
    return;
  }
  // One copy of every tensor's device statistics, before the event that says the kernel's data is here.
  if (device_stats_ && device_stats_->finish()) staged_ = true;
  collector::KernelCapture k;
  k.name = ticket_.name;
  k.stack_id = stack_;
  k.step = ticket_.step;
  k.rank = ticket_.rank;
  k.launch_index = ticket_.launch_index;
  k.task_id = ticket_.task_id;
  k.stream_id = ticket_.stream_id;
  k.timestamp_us = ticket_.timestamp_us;
  if (ticket_.with_inputs) k.inputs = std::move(inputs_);
  if (ticket_.with_outputs) k.outputs = std::move(outputs_);
  if (staged_) k.ready = session().staging().fence(stream_);
  session().submit(std::move(k));
}

}  // namespace msprobe::shim
