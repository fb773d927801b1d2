#include "shim/capture/kernel_launch.h"

#include <sys/prctl.h>

#include <atomic>
#include <string_view>

#include "format/naming.h"
#include "races/clocks.h"
#include "shim/base/log.h"
#include "shim/base/reentry.h"
#include "shim/capture/acl_graphs.h"
#include "shim/capture/scope_names.h"
#include "shim/config/config.h"
#include "shim/device/acl_types.h"

namespace msprobe::shim {

using record::CapturedArg;
using record::CapturedList;
using record::TensorCapture;

thread_local int KernelLaunch::open_ = 0;

namespace {

// MindSpore's PyNative pipeline (reference/mindspore_runtime.md §5) runs an op's C++ on its frontend_queue thread,
// phase 1 on backend_queue and phase 2 on launch_queue (names set with pthread_setname_np): none has the Python frames
// of the line that made the op, which by then has moved on. Said once per process, on the first stack taken on one of
// them; with MS_DEV_LAUNCH_BLOCKING=1 (MindSpore 2.7+) the three stages run on the Python thread and never get here.
void check_mindspore_queue_thread() {
  static thread_local int8_t checked = 0;
  if (checked) return;
  checked = 1;
  char name[16] = {};
  if (prctl(PR_GET_NAME, name, 0, 0, 0) != 0) return;
  const std::string_view n(name);
  if (n != "frontend_queue" && n != "backend_queue" && n != "launch_queue") return;
  static std::atomic<bool> said{false};
  if (said.exchange(true)) return;
  log_warn(
      "MindSpore's PyNative pipeline prepares and launches kernels on its own threads (%s here), which have no "
      "Python frames: kernels are named Default and stack.json has no Python lines; run with "
      "MS_DEV_LAUNCH_BLOCKING=1 (MindSpore 2.7 and later) to get the Python frames",
      name);
}

}  // namespace

StackId launch_stack(const Session &session) {
  check_mindspore_queue_thread();
  return StackTable::global().capture(StackTable::options_for(session.config().stack));
}

namespace {
[[gnu::always_inline]] inline std::string_view op_name_of(StackId stack) {
  std::string_view scope = StackTable::global().op_name(stack);
  return scope.empty() ? format::kDefaultOpName : scope;
}
}  // namespace

KernelLaunch::KernelLaunch(Session &session, std::string_view op_type, StackId stack, void *stream,
                           std::optional<bool> is_marker)
    : session_(session), stack_(stack) {
  ++open_;
  AclGraphs &graphs = session.acl_graphs();
  const bool updating = graphs.updating(stream);
  if (!updating && !graphs.capturing(stream)) {
    ticket_ = scope_names::armed() ? session.begin_unnamed_launch(op_type, stream, is_marker)
                                   : session.begin_launch(op_type, op_name_of(stack), stream, is_marker);
    if (ticket_.name_pending) op_type_ = op_type;
    if (!ticket_.capture) return;
    // Stamped before the real launch, on the launching thread: its place on `stream` among events and waits.
    if (races::StreamClocks *clocks = session.stream_clocks()) race_.emplace().stamp = clocks->launch(stream);
    staging_ = session.stager().begin(stream);
    return;
  }
  // A launch into a graph being captured, or by a task update, runs nowhere now: it is no kernel of this step (the
  // replays' kernels are). Its description goes to the graph; a capture's copies are recorded into the graph.
  op_type_ = op_type;
  const Config &c = session.config();
  ticket_.with_inputs = c.data_mode != DataMode::Output;
  ticket_.with_outputs = c.data_mode != DataMode::Input;
  named_later_ = scope_names::armed();
  if (updating) {
    update_stream_ = stream;
  } else {
    graph_stream_ = stream;
    staging_ = graphs.staging_for(stream, session.task_policy().takes_data, c.buffer_bytes);
  }
}

KernelLaunch::~KernelLaunch() {
  --open_;
  if ((ticket_.name_pending || named_later_) && !finished_) finish(false);  // it gets its name in order
}

void KernelLaunch::park(std::optional<record::KernelCapture> kernel, bool counted) {
  scope_names::Pending p;
  p.counted = counted;
  p.session = &session_;
  p.ticket = ticket_;
  p.op_type = std::move(op_type_);
  p.fallback_op_name = std::string(op_name_of(stack_));
  p.kernel = std::move(kernel);
  p.named = graph_name_;
  if (p.kernel) p.staging = std::move(staging_);
  scope_names::park(std::move(p));
}

void KernelLaunch::tensor(const TensorMeta &m, Side side, size_t slot, int64_t item, CapturedArg &into) {
  ReentryGuard guard;  // the copies go through the runtime, whose inner calls must not be captured
  TensorCapture &t = into.v.emplace<TensorCapture>();
  t.dtype = acl_to_dtype(m.dtype);
  if (t.dtype == format::DType::Raw) t.dtype_name = acl_dtype_label(m.dtype);
  t.shape.assign(m.shape.begin(), m.shape.begin() + m.ndim);
  t.block_strides.assign(m.strides.begin(), m.strides.begin() + m.ndim);
  t.format = acl_format_name(m.format);
  t.stride = t.block_strides;
  t.offset = m.offset;
  if (staging_) staging_->take(m, side, slot, item, t);
}

inline bool KernelLaunch::takes(Side side) const {
  return capturing() && (side == Side::Input ? ticket_.with_inputs : ticket_.with_outputs);
}

void KernelLaunch::race_access(const TensorMeta &m, Side side, int32_t item) {
  if (!race_ || m.data == nullptr) return;
  int64_t lo = 0, hi = 0;
  const size_t size = acl_dtype_size(m.dtype);
  if (size == 0 || !m.extent(&lo, &hi)) return;  // sub-byte or unknown type, or an empty view: no bytes known
  const auto base = reinterpret_cast<uint64_t>(m.data);
  const bool in = side == Side::Input;
  race_->accesses.push_back({base + (uint64_t)lo * size, base + (uint64_t)(hi + 1) * size,
                             race_unknown_ ? record::AccessKind::Unknown
                             : in          ? record::AccessKind::Read
                                           : record::AccessKind::Write,
                             in ? record::AccessRole::Input : record::AccessRole::Output, race_slots_[in ? 0 : 1],
                             item});
}

[[gnu::always_inline]] inline void KernelLaunch::add_tensor(Side side, const TensorMeta &t) {
  if (race_) {
    race_access(t, side, -1);
    ++race_slots_[side == Side::Input ? 0 : 1];
  }
  if (!takes(side)) return;
  CapturedList &args = list_of(side);
  size_t slot = args.size();
  tensor(t, side, slot, -1, args.emplace_back());
}

void KernelLaunch::add_tensor_list(Side side, const std::vector<TensorMeta> &ts) {
  for (size_t i = 0; i < ts.size() && race_; ++i) race_access(ts[i], side, (int32_t)i);
  if (race_) ++race_slots_[side == Side::Input ? 0 : 1];
  if (!takes(side)) return;
  CapturedList &args = list_of(side);
  size_t slot = args.size();
  CapturedList &list = args.emplace_back().v.emplace<CapturedList>();
  list.reserve(ts.size());
  for (const TensorMeta &t : ts) tensor(t, side, slot, (int64_t)list.size(), list.emplace_back());
}

void KernelLaunch::add_null(Side side) {
  if (race_) ++race_slots_[side == Side::Input ? 0 : 1];
  if (takes(side)) list_of(side).emplace_back();
}

void KernelLaunch::input_tensor(const TensorMeta &t) { add_tensor(Side::Input, t); }
void KernelLaunch::input_tensor_list(const std::vector<TensorMeta> &ts) { add_tensor_list(Side::Input, ts); }
void KernelLaunch::input_null() { add_null(Side::Input); }
void KernelLaunch::output_tensor(const TensorMeta &t) { add_tensor(Side::Output, t); }
void KernelLaunch::output_tensor_list(const std::vector<TensorMeta> &ts) { add_tensor_list(Side::Output, ts); }
void KernelLaunch::output_null() { add_null(Side::Output); }

void KernelLaunch::inputs_done(const std::vector<TensorMeta> *writes) {
  if (staging_) staging_->inputs_done(writes);
}

void KernelLaunch::input_value(format::ValueArg v) {
  if (race_) ++race_slots_[0];
  if (takes(Side::Input)) inputs_.emplace_back().v.emplace<format::ValueArg>(std::move(v));
}

void KernelLaunch::hand_to_graph() {
  AclGraphs::Kernel k;
  k.op_type = op_type_;
  k.op_name = std::string(op_name_of(stack_));
  k.stack_id = stack_;
  if (named_later_) k.named = graph_name_ = std::make_shared<std::string>();
  k.inputs = inputs_;
  k.outputs = outputs_;
  if (graph_stream_ != nullptr)
    session_.acl_graphs().kernel_captured(graph_stream_, std::move(k), staging_.get());
  else
    session_.acl_graphs().kernel_updated(update_stream_, std::move(k));
}

void KernelLaunch::finish(bool launched) {
  if (finished_) return;
  finished_ = true;
  if (graph_stream_ != nullptr || update_stream_ != nullptr) {
    if (launched) hand_to_graph();
    if (named_later_) park(std::nullopt, false);  // the framework names it too: it takes its name in order
    return;
  }
  if (!ticket_.capture) {
    if (ticket_.name_pending) park(std::nullopt);
    return;
  }
  ReentryGuard guard;
  if (!launched) {
    staging_->abandon();
    staging_->handed_over();
    if (ticket_.name_pending) park(std::nullopt);
    return;
  }
  record::KernelCapture k;
  static_cast<format::KernelHeader &>(k) = ticket_;
  k.stack_id = stack_;
  if (ticket_.with_inputs) k.inputs = std::move(inputs_);
  if (ticket_.with_outputs) k.outputs = std::move(outputs_);
  k.ready = staging_->finish();
  k.notes = staging_->notes();
  k.race = std::move(race_);
  if (ticket_.name_pending) {
    park(std::move(k));
    return;
  }
  session_.submit(std::move(k));
  staging_->handed_over();
}

}  // namespace msprobe::shim
