#include "shim/capture/kernel_launch.h"

#include "format/naming.h"
#include "shim/base/reentry.h"
#include "shim/config/config.h"
#include "shim/device/acl_types.h"
#include "shim/device/device_ring.h"
#include "shim/device/staging.h"

namespace msprobe::shim {

using record::CapturedArg;
using record::CapturedList;
using record::TensorCapture;

thread_local int KernelLaunch::open_ = 0;

StackId launch_stack(const Session &session) {
  return StackTable::global().capture(StackTable::options_for(session.config().stack));
}

namespace {
std::string_view op_name_of(StackId stack) {
  std::string_view scope = StackTable::global().op_name(stack);
  return scope.empty() ? format::kDefaultOpName : scope;
}
}  // namespace

KernelLaunch::KernelLaunch(Session &session, std::string_view op_type, StackId stack, void *stream)
    : session_(session),
      stream_(stream),
      stack_(stack),
      ticket_(session.begin_launch(op_type, op_name_of(stack), stream)) {
  ++open_;
  use_device_stats_ = ticket_.capture && ticket_.with_data && DeviceStatsBatch::enabled(session.device_stats());
}

KernelLaunch::~KernelLaunch() { --open_; }

DeviceStatsBatch &KernelLaunch::device_stats_batch() {
  if (!device_stats_)
    device_stats_ = std::make_unique<DeviceStatsBatch>(stream_, session_.device_stats(), session_.staging());
  return *device_stats_;
}

CapturedArg KernelLaunch::tensor(const TensorMeta &m, Side side, size_t slot, int64_t item) {
  ReentryGuard guard;  // the copies go through the runtime, whose inner calls must not be captured
  const bool output = side == Side::Output;
  TensorCapture t;
  t.dtype = acl_to_dtype(m.dtype);
  if (t.dtype == format::DType::Raw) t.dtype_name = acl_dtype_label(m.dtype);
  t.shape.assign(m.shape.begin(), m.shape.begin() + m.ndim);
  t.block_strides.assign(m.strides.begin(), m.strides.begin() + m.ndim);
  t.format = acl_format_name(m.format);
  t.stride = t.block_strides;
  t.offset = m.offset;
  if (session_.flight_ring() != nullptr && ticket_.with_data) {
    flight_tensor(m, side, slot, item, t);
    return CapturedArg{std::move(t)};
  }
  int64_t lo = 0, hi = 0;
  size_t es = acl_dtype_size(m.dtype);
  // Statistics on the device: a few scalars cross the host link instead of the tensor. overflow_check also
  // keeps the bytes on the device, read back only if the kernel turns out to overflow.
  if (use_device_stats_ && DeviceStatsBatch::eligible(m)) {
    const bool overflow = session_.device_stats().overflow;
    std::shared_ptr<const record::HostBlock> kept;
    int64_t offset = 0;
    if (!overflow || (kept = device_stats_batch().snapshot(m, &offset))) {
      t.device_stats = device_stats_batch().add(m, overflow && output);
      t.block = std::move(kept);
      t.block_offset = offset;
      if (t.device_stats || t.block) return CapturedArg{std::move(t)};
    }
  }
  // Raw types (complex, 4-bit, fp8) are described but not copied: the collector cannot read them.
  if (ticket_.with_data && t.dtype != format::DType::Raw && es > 0 && m.data != nullptr && m.extent(&lo, &hi)) {
    const char *first = static_cast<const char *>(m.data) + lo * (int64_t)es;
    t.block = session_.staging().copy_async(first, (uint64_t)(hi - lo + 1) * es, stream_);
    t.block_offset = m.offset - lo;
    staged_ = staged_ || t.block != nullptr;
  }
  return CapturedArg{std::move(t)};
}

void KernelLaunch::flight_tensor(const TensorMeta &m, Side side, size_t slot, int64_t item, TensorCapture &t) {
  // The check: NaN and Inf show in an output's extremes, reduced on the device (only scalars come back).
  const bool eligible = use_device_stats_ && DeviceStatsBatch::eligible(m);
  if (side == Side::Output && eligible) t.device_stats = device_stats_batch().add(m);
  int64_t lo = 0, hi = 0;
  const size_t es = acl_dtype_size(m.dtype);
  if (t.dtype == format::DType::Raw || es == 0 || m.data == nullptr || !m.extent(&lo, &hi)) return;
  const uint64_t bytes = (uint64_t)(hi - lo + 1) * es;
  DeviceRing::Refusal why = DeviceRing::Refusal::None;
  t.block = session_.flight_ring()->copy_in(static_cast<const char *>(m.data) + lo * (int64_t)es, bytes, stream_, &why);
  if (t.block) {
    t.block_offset = m.offset - lo;
    staged_ = true;
    return;
  }
  // Not kept: its statistics, from the device, stand for it.
  if (!t.device_stats && eligible) t.device_stats = device_stats_batch().add(m);
  const char *reason = why == DeviceRing::Refusal::TooLarge   ? "is larger than the ring"
                       : why == DeviceRing::Refusal::NoRoom   ? "found no room in the ring (kernels being checked)"
                       : why == DeviceRing::Refusal::NoMemory ? "has no ring (no memory for it)"
                                                              : "could not be copied into the ring";
  std::string where = std::string(side == Side::Output ? "output." : "input.") + std::to_string(slot);
  if (item >= 0) where += "." + std::to_string(item);
  notes_ += (notes_.empty() ? "" : "; ") + where + " (" + std::to_string(bytes) + " bytes) " + reason +
            (t.device_stats ? ": statistics only" : ": described only");
}

void KernelLaunch::add_tensor(Side side, const TensorMeta &t) {
  if (takes(side)) list_of(side).push_back(tensor(t, side, list_of(side).size()));
}

void KernelLaunch::add_tensor_list(Side side, const std::vector<TensorMeta> &ts) {
  if (!takes(side)) return;
  CapturedList list;
  for (const TensorMeta &t : ts) list.push_back(tensor(t, side, list_of(side).size(), (int64_t)list.size()));
  list_of(side).push_back(CapturedArg{std::move(list)});
}

void KernelLaunch::add_null(Side side) {
  if (takes(side)) list_of(side).push_back(CapturedArg{});
}

void KernelLaunch::input_tensor(const TensorMeta &t) { add_tensor(Side::Input, t); }
void KernelLaunch::input_tensor_list(const std::vector<TensorMeta> &ts) { add_tensor_list(Side::Input, ts); }
void KernelLaunch::input_null() { add_null(Side::Input); }
void KernelLaunch::output_tensor(const TensorMeta &t) { add_tensor(Side::Output, t); }
void KernelLaunch::output_tensor_list(const std::vector<TensorMeta> &ts) { add_tensor_list(Side::Output, ts); }
void KernelLaunch::output_null() { add_null(Side::Output); }

void KernelLaunch::input_value(format::ValueArg v) {
  if (takes(Side::Input)) inputs_.push_back(CapturedArg{std::move(v)});
}

void KernelLaunch::finish(bool launched) {
  if (finished_) return;
  finished_ = true;
  if (!ticket_.capture) return;
  ReentryGuard guard;
  DeviceRing *ring = session_.flight_ring();
  if (!launched) {
    // The kernel never ran, but copies and reductions of its inputs may be in flight: their memory must
    // outlive them.
    if (device_stats_) device_stats_->abandon();
    if (staged_ || device_stats_)
      if (auto done = session_.staging().fence(stream_)) done->wait();
    if (ring) ring->seal();
    return;
  }
  // One copy of every tensor's device statistics, before the event that says the kernel's data is here.
  if (device_stats_ && device_stats_->finish()) staged_ = true;
  record::KernelCapture k;
  static_cast<format::KernelHeader &>(k) = ticket_;
  k.stack_id = stack_;
  if (ticket_.with_inputs) k.inputs = std::move(inputs_);
  if (ticket_.with_outputs) k.outputs = std::move(outputs_);
  if (staged_) k.ready = session_.staging().fence(stream_);
  if (!notes_.empty()) k.notes.emplace_back(format::json_key::kFlightNote, std::move(notes_));
  session_.submit(std::move(k));
  if (ring) ring->seal();  // handed over: the collector lets its ring bytes go in time
}

}  // namespace msprobe::shim
