#include "shim/aclnn/phases.h"

#include <algorithm>
#include <atomic>
#include <cstdlib>
#include <cstring>
#include <new>
#include <utility>

#include "shim/aclnn/arg_decode.h"
#include "shim/base/log.h"
#include "shim/base/problems.h"
#include "shim/base/reentry.h"
#include "shim/capture/capture_call.h"
#include "shim/capture/communicators.h"
#include "shim/config/config.h"
#include "shim/stacks/stack_python.h"

namespace msprobe::shim {

PrototypeIndex &AclnnState::prototypes() {
  if (index) return *index;
  index = std::make_unique<PrototypeIndex>(PrototypeIndex::from_environment(&std::getenv));
  // Said once, at the first aclnn op: without headers most ops' arguments cannot be read (docs/prototypes.md).
  if (index->roots().empty())
    log_warn(
        "no CANN op headers found (ASCEND_HOME_PATH, ASCEND_TOOLKIT_HOME, ASCEND_OPP_PATH): aclnn arguments are read "
        "by the header-less rule, which cannot place ops with by-value arguments; source CANN's set_env.sh or set "
        "ASCEND_HOME_PATH");
  return *index;
}

namespace {
thread_local ExecCacheKey t_cache_keys[2] __attribute__((tls_model("initial-exec")));
}  // namespace

ExecCacheKey *thread_cache_keys() { return t_cache_keys; }

namespace {

// ---- Phase 1 --------------------------------------------------------------------------------------------------------

// Whether phase 1 records anything: not for an op type that is never captured, nor once nothing launched from
// now on can be captured (steps past the last selected one, a rank not selected). Kept calls of the executor
// cache are not needed then either: a later hit could not be captured.
bool phase1_records(const Session &session, const Binding &b) {
  return b.facts.may_capture && session.captures_ahead();
}

// Under torch_npu's TASK_QUEUE_ENABLE=2 phase 1 runs on the task queue's thread (EXEC_NPU_CMD_V2), whose stack holds
// no Python frames: the kernels' stacks and OpNames then have none. Said once, with the way out; checked only at that
// level, and only until said.
void say_when_phase1_has_no_python_frames(const Session &session, StackId stack, const Binding &b) {
  static std::atomic<bool> said{false};
  if (session.config().host_task_queue != 2 || said.load(std::memory_order_relaxed)) return;
  if (PythonStacks::global().interpreter_address() == 0) return;  // not a Python host: no frames to miss
  if (!StackTable::global().python_frame_ids(stack).empty()) return;
  if (said.exchange(true)) return;
  log_warn(
      "aclnn%sGetWorkspaceSize ran on a thread without Python frames: with TASK_QUEUE_ENABLE=2 torch_npu makes the "
      "arguments and runs phase 1 on its task queue's thread, so the kernels' stacks (stack.json) and the scopes in "
      "their names hold no Python frames; run with TASK_QUEUE_ENABLE=1 (phase 1 on the Python thread) to have them",
      b.op.c_str());
}

// What phase 1 keeps of a call that succeeded (phase1_post).
void keep_phase1(Session &session, const Binding &b, const RawArgs &a, const ExecCacheKey (&keys)[2]) {
  if (!phase1_records(session, b)) return;
  if (!b.decode_at_phase1) {
    const void *executor = executor_of(b, a);
    if (executor == nullptr) return;
    OpCall call;
    RawCall &r = call.raw.emplace();
    r.binding = &b;
    std::memcpy(r.gpr, a.gpr, sizeof r.gpr);
    std::memcpy(r.fpr, a.fpr, sizeof r.fpr);
    r.stack_slots = std::min(a.stack_slots, RawCall::kStackSlots);
    std::memcpy(r.stack, a.stack, sizeof(uint64_t) * (size_t)r.stack_slots);
    call.keys[0] = keys[0];
    call.keys[1] = keys[1];
    call.stack = launch_stack(session);
    say_when_phase1_has_no_python_frames(session, call.stack, b);
    aclnn_state().calls.put(executor, std::move(call));
    return;
  }
  auto rec = b.proto ? call_from_prototype(b, a, executor_of(b, a)) : call_from_slots(b, a);
  if (!rec && !b.proto) report_problem(Problem::ArgumentsNotFound, ("aclnn" + b.op + "GetWorkspaceSize").c_str());
  if (!rec) return;
  rec->second.stack = launch_stack(session);
  say_when_phase1_has_no_python_frames(session, rec->second.stack, b);
  for (const ExecCacheKey &k : keys)
    if (k.kind != ExecCacheKey::None) aclnn_state().kept.put(k, rec->second);
  aclnn_state().calls.put(rec->first, std::move(rec->second));
}

}  // namespace

// The gate in front of phase 1's closure (shim/call/forwarder.h): false sends the call straight to the real function.
bool phase1_gate(void *user, const uint64_t *) {
  const Session *session = active_session();
  if (ReentryGuard::active() || session == nullptr) return false;
  if (phase1_records(*session, *static_cast<const Binding *>(user))) return true;
  // Cache keys set for this call would otherwise be taken by the next recorded phase 1 on this thread.
  ExecCacheKey *keys = thread_cache_keys();
  if (keys[0].kind != ExecCacheKey::None || keys[1].kind != ExecCacheKey::None) keys[0] = keys[1] = {};
  return false;
}

// Phase 1, on the thread that made it (torch_npu: the Python thread): what must happen here happens here, the rest
// where phase 2 runs. Here: the stack (the user's call site), the executor (through the host's out-pointer) and the
// argument registers; the arguments are decoded by phase 2 (decode()), as are the calls the executor cache keeps.
void phase1_post(void *user, const RawArgs &a, uint64_t ret) {
  if ((int32_t)ret != 0) return;
  // The runtime stored this executor under the thread's cache keys, if any: they name it from now on.
  const ExecCacheKey keys[2] = {std::exchange(t_cache_keys[0], {}), std::exchange(t_cache_keys[1], {})};
  Session *session = active_session();
  if (session == nullptr) return;
  guarded(Problem::ArgumentsNotKept, [&] { keep_phase1(*session, *static_cast<const Binding *>(user), a, keys); });
}

namespace {

// ---- Phase 2 --------------------------------------------------------------------------------------------------------

// A call recorded at phase 1 as it arrived, decoded on the thread of phase 2 before it runs: its argument objects are
// alive (torch_npu destroys them after phase 2), and its tensors are described by the runtime. The decoded call
// replaces the raw one (a repeatable executor's later launches, and rebinding, use it) and goes under the executor
// cache's keys. False when it cannot be decoded (it is then launched without arguments).
bool decode(const void *executor, OpCall &call) {
  if (call.decoded()) return true;
  OpCall out;
  if (call.hit) {
    std::optional<OpCall> kept = aclnn_state().kept.get(*call.hit);
    if (!kept) return false;  // its phase 1 ran before capture, or was filtered out
    out = std::move(*kept);
    out.repeatable = false;  // the hit's executor is freed by its phase 2
    for (CallParam &p : out.params) std::fill(p.handles.begin(), p.handles.end(), nullptr);  // destroyed since
    for (size_t i = 0; i < call.hit_addrs.size(); ++i)
      if (call.hit_addrs[i]) bind_cached_tensor(out, i, call.hit_addrs[i]);
  } else {
    const RawCall r = *call.raw;
    auto rec = call_from_prototype(*r.binding, raw_args(r), executor);
    if (!rec) return false;
    out = std::move(rec->second);
    out.repeatable = call.repeatable;
    for (const ExecCacheKey &k : call.keys)
      if (k.kind != ExecCacheKey::None) {
        OpCall kept = out;
        kept.stack = call.stack;
        aclnn_state().kept.put(k, kept);
      }
  }
  out.serial = call.serial;
  out.stack = call.stack;  // the call site of phase 1, or of the hit
  call = std::move(out);
  // A repeatable executor's later launches (and its address updates) use the decoded call; a one-shot executor's
  // record is forgotten after this launch (aclSetAclOpExecutorRepeatable comes right after phase 1, so it is known).
  if (call.repeatable) aclnn_state().calls.replace_undecoded(executor, call);
  return true;
}

// A launch needs its call decoded now when it is captured, or when its phase 1 was kept by the executor cache (a later
// hit, captured or not, is bound to the kept call). A repeatable executor not captured now keeps its raw call: its
// argument objects live as long as it does.
bool decode_now(const OpCall &call, bool capturing) {
  if (call.decoded() || capturing) return true;
  return call.raw && (call.keys[0].kind != ExecCacheKey::None || call.keys[1].kind != ExecCacheKey::None);
}

// The stack of a launch of a repeatable executor: the launching thread's own when it has Python frames with a scope
// (only the Python frames are looked at first, so a thread without them pays no native walk), else `made`.
StackId relaunch_stack(const Session &session, StackId made) {
  StackCaptureOptions python_only = StackTable::options_for(session.config().stack);
  python_only.native = false;
  if (StackTable::global().op_name(StackTable::global().capture(python_only)).empty()) return made;
  return launch_stack(session);
}

// Each tensor at the storage address its handle has now: what the kernel reads at this launch (CANN reads every
// tensor's address at launch; aclSetRawTensorAddr and the executor's setters change it between launches).
void read_addresses_now(OpCall &call) {
  for (CallParam &p : call.params)
    for (size_t i = 0; i < p.handles.size() && i < p.tensors.size(); ++i)
      if (p.handles[i] != nullptr)
        if (void *addr = current_address(p.handles[i])) p.tensors[i].data = addr;
}

// One aclnn launch on this thread, from the gate to its finish. Whoever opens it owns it (phase2_entry's frame, or
// the forwarder path's per-thread slot): no path, an exception included, leaves the thread marked as inside a launch.
class AclnnLaunch {
 public:
  AclnnLaunch(Session &session, const Binding &b, const void *executor, void *stream) noexcept
      : executor_(executor),
        call_(recorded(executor)),
        capture_(session, b.op, stream, b.facts, [&] { return stack_of(session); }) {
    bool prepared = false;
    guarded(Problem::LaunchNotTracked, [&] {
      prepare(b);
      prepared = true;
    });
    if (!prepared) call_.reset();  // finished as a launch without a record: counted and named, not written
  }
  ~AclnnLaunch() { close(-1); }  // not closed: the real call never returned (it threw), so it counts as failed
  AclnnLaunch(const AclnnLaunch &) = delete;
  AclnnLaunch &operator=(const AclnnLaunch &) = delete;

  // After the real call: its outputs, the hand-over, and the record forgotten when its executor is gone.
  void close(int32_t rc) noexcept;

 private:
  static std::optional<OpCall> recorded(const void *executor) noexcept;
  StackId stack_of(const Session &session) const;
  void prepare(const Binding &b);
  void describe_inputs(const Binding &b);

  const void *executor_;
  std::optional<OpCall> call_;
  communicators::Issue comm_;  // an MC2 op's place in its communicator
  CaptureCall capture_;
  bool closed_ = false;
};

std::optional<OpCall> AclnnLaunch::recorded(const void *executor) noexcept {
  std::optional<OpCall> call;
  guarded(Problem::LaunchNotTracked, [&] {
    if (aclnn_state().calls.contains(executor)) call = aclnn_state().calls.get(executor);
  });
  return call;
}

// An MC2 op's `group` argument is written as its communicator's label (communicators::Issue::label), not HCCL's
// name, which differs from run to run: msprobe compares string arguments, and two runs of one program must agree.
// The name stays in the entry's "comm". Unchanged when the communicator is not known.
void name_group_by_label(OpCall &call, const communicators::Issue &issue) {
  if (issue.label.empty() || call.comm_group_param < 0 || (size_t)call.comm_group_param >= call.params.size()) return;
  std::optional<format::ValueArg> &v = call.params[(size_t)call.comm_group_param].value;
  if (v && std::holds_alternative<std::string>(v->value)) v->value = issue.label;
}

// Phase 2 may run on a task-queue thread without Python frames: the stack is phase 1's. A repeatable executor launched
// again from Python (MindSpore PyNative's executor cache with MS_DEV_LAUNCH_BLOCKING=1: phase 2 of a hit on the Python
// thread): this launch's own scope, not its maker's.
StackId AclnnLaunch::stack_of(const Session &session) const {
  StackId stack = call_ ? call_->stack : kEmptyStack;
  return call_ && call_->repeatable ? relaunch_stack(session, stack) : stack;
}

void AclnnLaunch::prepare(const Binding &b) {
  if (!call_) return;
  describe_fault_point(DescribeFault::Launch);
  const bool decoded_before = call_->decoded();
  if (decode_now(*call_, capture_.capturing()) && !decode(executor_, *call_)) {
    call_.reset();
    return;
  }
  // Numbered whether or not it is captured, as HCCL's own kernels are (shim/capture/communicators.h).
  if (!call_->comm_group.empty()) {
    comm_ = communicators::take_by_group(call_->comm_group);
    name_group_by_label(*call_, comm_);
  }
  if (!capture_.capturing()) return;
  if (decoded_before) read_addresses_now(*call_);
  describe_inputs(b);
}

// The inputs, copied now, before the kernel can overwrite them (in-place ops). What the kernel writes is known before
// it runs: the stager may take the inputs after it when it writes none of their bytes. Not for an op that works in
// place (an InOut tensor, an Inplace op): a const input it writes would be taken too late.
void AclnnLaunch::describe_inputs(const Binding &b) {
  std::vector<TensorMeta> writes;
  bool in_place = b.op.rfind("Inplace", 0) == 0;
  for (const CallParam &p : call_->params) {
    in_place = in_place || (is_tensor_kind(p.kind) && p.dir == Direction::InOut);
    if (is_tensor_kind(p.kind) && p.dir == Direction::Output)
      writes.insert(writes.end(), p.tensors.begin(), p.tensors.end());
  }
  capture_.inputs(
      [&](KernelLaunch &k) {
        if (comm_.info) k.set_comm(*comm_.info);
        for (const CallParam &p : call_->params) {
          if (p.dir == Direction::Output) continue;
          if (!p.present)
            k.input_null();
          else if (p.kind == ParamKind::Tensor && !p.tensors.empty())
            k.input_tensor(p.tensors[0]);
          else if (p.kind == ParamKind::TensorList)
            k.input_tensor_list(p.tensors);
          else if (p.value)
            k.input_value(*p.value);
          else
            k.input_null();
        }
      },
      in_place ? nullptr : &writes);
}

void AclnnLaunch::close(int32_t rc) noexcept {
  if (closed_) return;
  closed_ = true;
  const bool launched = rc == 0;
  if (call_ && launched)
    capture_.outputs([&](KernelLaunch &k) {
      for (const CallParam &p : call_->params) {
        if (!is_tensor_kind(p.kind) || p.dir == Direction::Input || p.dir == Direction::None) continue;
        if (!p.present)
          k.output_null();
        else if (p.kind == ParamKind::Tensor && !p.tensors.empty())
          k.output_tensor(p.tensors[0]);
        else
          k.output_tensor_list(p.tensors);
      }
    });
  // A kernel the shim has no record of (its phase 1 ran before capture, or it was filtered out) is still named and
  // counted, so that names stay the same whatever the filters; it has no arguments.
  capture_.finish(launched && call_.has_value());
  if (!launched) communicators::give_back(comm_);
  if (call_ && launched && !call_->repeatable)
    guarded(Problem::LaunchNotTracked, [&] { aclnn_state().calls.erase_if(executor_, call_->serial); });
}

// The forwarder path's launches on this thread (phase 2 does not nest, but keep a few in case a runtime does): each
// phase2_pre pushes one (null when the gate stayed shut) or counts one past the limit, its phase2_post takes it back.
constexpr int kMaxNesting = 8;
struct OpenLaunch {
  AclnnLaunch *launch;  // null: the gate stayed shut, or (bare) no memory for it
  bool bare;            // KernelLaunch::enter_uncaptured() stands in for it
};
thread_local OpenLaunch t_open[kMaxNesting] __attribute__((tls_model("initial-exec")));
thread_local int t_depth __attribute__((tls_model("initial-exec"))) = 0;
thread_local int t_past_limit __attribute__((tls_model("initial-exec"))) = 0;

using Phase2Fn = int32_t (*)(void *, uint64_t, void *, void *);

}  // namespace

int32_t phase2_entry(Binding *b, void *workspace, uint64_t size, void *executor, void *stream) {
  auto real = reinterpret_cast<Phase2Fn>(b->real);
  Session *session = capture_gate();
  if (session == nullptr) return real(workspace, size, executor, stream);
  AclnnLaunch launch(*session, *b, executor, stream);
  const int32_t rc = real(workspace, size, executor, stream);
  launch.close(rc);
  return rc;
}

void phase2_pre(void *user, const RawArgs &a) {
  if (t_depth >= kMaxNesting) {
    ++t_past_limit;
    return;
  }
  OpenLaunch open{nullptr, false};
  if (Session *session = capture_gate()) {
    const void *executor = read_ptr(a, ArgLocation{ArgLocation::Gpr, 2});
    void *stream = read_ptr(a, ArgLocation{ArgLocation::Gpr, 3});
    open.launch = new (std::nothrow) AclnnLaunch(*session, *static_cast<const Binding *>(user), executor, stream);
    if (open.launch == nullptr) {
      report_problem(Problem::LaunchNotTracked, "out of memory");
      KernelLaunch::enter_uncaptured();  // the kernels it launches are still its own
      open.bare = true;
    }
  }
  t_open[t_depth++] = open;
}

void phase2_post(void *, const RawArgs &, uint64_t ret) {
  if (t_past_limit > 0) {
    --t_past_limit;
    return;
  }
  if (t_depth == 0) return;
  const OpenLaunch open = t_open[--t_depth];
  if (open.bare) KernelLaunch::leave_uncaptured();
  if (open.launch == nullptr) return;
  open.launch->close((int32_t)ret);
  delete open.launch;
}

}  // namespace msprobe::shim
