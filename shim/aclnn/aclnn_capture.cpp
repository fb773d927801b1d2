#include "shim/aclnn/aclnn_capture.h"

#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <mutex>
#include <string>
#include <unordered_map>
#include <utility>

#include "format/naming.h"
#include "shim/aclnn/prototypes.h"
#include "shim/base/log.h"
#include "shim/base/reentry.h"
#include "shim/base/safe_read.h"
#include "shim/base/symbols.h"
#include "shim/call/forwarder.h"
#include "shim/call/trampoline.h"
#include "shim/capture/capture_call.h"
#include "shim/capture/session.h"
#include "shim/config/config.h"
#include "shim/device/acl_types.h"
#include "shim/device/handles.h"
#include "shim/device/runtime_api.h"
#include "shim/stacks/stack_python.h"
#include "shim/stacks/stacks.h"

namespace msprobe::shim {
namespace {

namespace vt = format::value_type;

using format::ValueArg;

constexpr std::string_view kPhase1Suffix = "GetWorkspaceSize";

// One parameter of a recorded phase-1 call.
struct CallParam {
  ParamKind kind = ParamKind::OtherPointer;
  Direction dir = Direction::None;
  bool present = false;             // false: NULL (an absent optional tensor)
  std::vector<TensorMeta> tensors;  // Tensor: one; TensorList: its members
  std::optional<ValueArg> value;    // everything that is not a tensor
};

struct Binding;

// A phase-1 call as it arrived, decoded on the thread of phase 2 (issue 29): the Python thread, where torch_npu runs
// phase 1, only copies the argument registers; the argument objects are read where phase 2 runs, before it (torch_npu
// destroys them in the queued call, after phase 2).
struct RawCall {
  static constexpr int kStackSlots = 16;  // a prototype with more is decoded at phase 1
  const Binding *binding = nullptr;
  uint64_t gpr[kGprArgs];
  uint64_t fpr[kFprArgs];
  uint64_t stack[kStackSlots];
  int stack_slots = 0;
};

struct OpCall {
  std::vector<CallParam> params;
  bool repeatable = false;
  uint64_t serial = 0;          // set by CallTable::put: tells this call from a later one at the same executor address
  StackId stack = kEmptyStack;  // taken at phase 1, the call the user's code made; travels to the launch
  // Not decoded yet (params empty): the phase-1 call as it arrived, and the executor-cache keys it goes under.
  std::optional<RawCall> raw;
  ExecCacheKey keys[2];
  // Not decoded yet either: a hit of the executor cache, the call kept under `hit` with these tensor addresses
  // (null: the kept call's own).
  std::optional<ExecCacheKey> hit;
  std::vector<void *> hit_addrs;
  bool decoded() const { return !raw && !hit; }
};

bool is_tensor_kind(ParamKind k) { return k == ParamKind::Tensor || k == ParamKind::TensorList; }

// ---- Tensor metadata --------------------------------------------------------------------------------------

// A tensor the shim did not see created (created before capture was enabled): asked from the runtime.
std::optional<TensorMeta> query_tensor(const void *t) {
  auto shape_fn = runtime::aclGetViewShape.get();
  auto strides_fn = runtime::aclGetViewStrides.get();
  auto offset_fn = runtime::aclGetViewOffset.get();
  auto dtype_fn = runtime::aclGetDataType.get();
  auto format_fn = runtime::aclGetFormat.get();
  auto addr_fn = runtime::aclGetRawTensorAddr.get();
  if (!shape_fn || !strides_fn || !offset_fn || !dtype_fn || !format_fn || !addr_fn) return std::nullopt;
  TensorMeta m;
  int64_t *dims = nullptr, *strides = nullptr;
  uint64_t nd = 0, ns = 0;
  if (shape_fn(t, &dims, &nd) != 0) return std::nullopt;
  bool ok = strides_fn(t, &strides, &ns) == 0 && nd == ns && nd <= (uint64_t)kMaxDims;
  if (ok) {
    m.ndim = (uint8_t)nd;
    for (uint64_t i = 0; i < nd; ++i) {
      m.shape[i] = dims[i];
      m.strides[i] = strides[i];
    }
    ok = offset_fn(t, &m.offset) == 0 && dtype_fn(t, &m.dtype) == 0 && format_fn(t, &m.format) == 0 &&
         addr_fn(t, &m.data) == 0;
  }
  // The storage shape is not asked for (one getter less): the view's own extent stands for it where it is needed
  // (the device statistics' view of the tensor).
  delete[] dims;  // the getters allocate with new[] (cann_abi.md §4.5)
  delete[] strides;
  return ok ? std::optional<TensorMeta>(m) : std::nullopt;
}

std::optional<TensorMeta> tensor_meta(const void *t) {
  if (auto h = handles().get(t))
    if (auto *m = std::get_if<TensorMeta>(&*h)) return *m;
  return query_tensor(t);
}

std::string dtype_value_name(int32_t acl_dtype) {
  format::DType d = acl_to_dtype(acl_dtype);
  return d == format::DType::Raw ? acl_dtype_label(acl_dtype) : std::string(format::dtype_id(d));
}

ValueArg scalar_value(const void *handle) {
  auto h = handles().get(handle);
  const ScalarMeta *s = h ? std::get_if<ScalarMeta>(&*h) : nullptr;
  if (!s) return {vt::kAclScalar, std::monostate{}};
  format::DType d = acl_to_dtype(s->dtype);
  const void *p = s->raw.data();
  auto load = [p](auto v) {
    std::memcpy(&v, p, sizeof v);
    return v;
  };
  switch (d) {
    case format::DType::F32: return {vt::kFloat, (double)load(float{})};
    case format::DType::F64: return {vt::kFloat, load(double{})};
    case format::DType::Bool: return {vt::kBool, load(uint8_t{}) != 0};
    case format::DType::I8: return {vt::kInt, (int64_t)load(int8_t{})};
    case format::DType::I16: return {vt::kInt, (int64_t)load(int16_t{})};
    case format::DType::I32: return {vt::kInt, (int64_t)load(int32_t{})};
    case format::DType::I64: return {vt::kInt, load(int64_t{})};
    case format::DType::U8: return {vt::kInt, (int64_t)load(uint8_t{})};
    case format::DType::U16: return {vt::kInt, (int64_t)load(uint16_t{})};
    case format::DType::U32: return {vt::kInt, (int64_t)load(uint32_t{})};
    case format::DType::U64: return {vt::kInt, (int64_t)load(uint64_t{})};
    default: return {vt::kAclScalar, dtype_value_name(s->dtype)};  // fp16/bf16/complex scalars: type only
  }
}

// A by-value or handle argument that is not a tensor.
std::optional<ValueArg> value_of(ParamKind kind, const RawArgs &a, ArgLocation loc) {
  switch (kind) {
    case ParamKind::Double: return ValueArg{vt::kFloat, read_f64(a, loc)};
    case ParamKind::Float: return ValueArg{vt::kFloat, (double)read_f32(a, loc)};
    case ParamKind::Int64: return ValueArg{vt::kInt, read_int(a, loc, 64, true)};
    case ParamKind::UInt64: return ValueArg{vt::kInt, read_int(a, loc, 64, false)};
    case ParamKind::Int32:
    case ParamKind::OtherEnum: return ValueArg{vt::kInt, read_int(a, loc, 32, true)};
    case ParamKind::UInt32: return ValueArg{vt::kInt, read_int(a, loc, 32, false)};
    case ParamKind::Int16: return ValueArg{vt::kInt, read_int(a, loc, 16, true)};
    case ParamKind::UInt16: return ValueArg{vt::kInt, read_int(a, loc, 16, false)};
    case ParamKind::Int8: return ValueArg{vt::kInt, read_int(a, loc, 8, true)};
    case ParamKind::UInt8: return ValueArg{vt::kInt, read_int(a, loc, 8, false)};
    case ParamKind::Bool: return ValueArg{vt::kBool, read_int(a, loc, 8, false) != 0};
    case ParamKind::DataType: return ValueArg{vt::kAclDataType, dtype_value_name((int32_t)read_int(a, loc, 32, true))};
    default: break;
  }
  const void *p = read_ptr(a, loc);
  if (p == nullptr) return std::nullopt;  // NULL optional argument
  auto h = handles().get(p);
  switch (kind) {
    case ParamKind::Scalar: return scalar_value(p);
    case ParamKind::IntArray:
      if (auto *v = h ? std::get_if<std::vector<int64_t>>(&*h) : nullptr) return ValueArg{vt::kAclIntArray, *v};
      return ValueArg{vt::kAclIntArray, std::monostate{}};
    case ParamKind::FloatArray:
      if (auto *v = h ? std::get_if<std::vector<float>>(&*h) : nullptr)
        return ValueArg{vt::kAclFloatArray, std::vector<double>(v->begin(), v->end())};
      return ValueArg{vt::kAclFloatArray, std::monostate{}};
    case ParamKind::BoolArray:
      if (auto *v = h ? std::get_if<std::vector<bool>>(&*h) : nullptr) return ValueArg{vt::kAclBoolArray, *v};
      return ValueArg{vt::kAclBoolArray, std::monostate{}};
    case ParamKind::ScalarList: {  // each member as a lone aclScalar is written: its own type and value
      std::vector<format::TypedScalar> values;
      auto *m = h ? std::get_if<std::vector<const void *>>(&*h) : nullptr;
      if (m == nullptr) return ValueArg{vt::kAclScalarList, std::monostate{}};
      for (const void *s : *m) {
        ValueArg v = scalar_value(s);
        format::TypedScalar t{std::move(v.type), std::monostate{}};
        std::visit(
            [&t](auto &&x) {
              using X = std::decay_t<decltype(x)>;
              if constexpr (std::is_constructible_v<decltype(t.value), X>) t.value = std::forward<decltype(x)>(x);
            },
            std::move(v.value));
        values.push_back(std::move(t));
      }
      return ValueArg{vt::kAclScalarList, std::move(values)};
    }
    case ParamKind::CString: {
      char buf[256];
      size_t n = 0;
      const char *s = static_cast<const char *>(p);
      while (n < sizeof buf && s[n] != '\0') {  // the runtime accepted it, so it is a C string
        buf[n] = s[n];
        ++n;
      }
      return ValueArg{vt::kStr, std::string(buf, n)};
    }
    default: return ValueArg{vt::kPointer, std::monostate{}};
  }
}

void fill_tensors(CallParam &p, const void *handle) {
  if (p.kind == ParamKind::Tensor) {
    if (auto m = tensor_meta(handle)) p.tensors.push_back(*m);
    return;
  }
  auto h = handles().get(handle);
  if (auto *members = h ? std::get_if<std::vector<const void *>>(&*h) : nullptr)
    for (const void *t : *members)
      if (auto m = tensor_meta(t)) p.tensors.push_back(*m);
}

// ---- Bindings: one per real function handed out -----------------------------------------------------------

struct Binding {
  std::string op;
  void *real = nullptr;
  bool phase1 = true;
  // session().may_capture(op), decided when wrapped (the configuration does not change): false means no kernel
  // of this op type is ever captured, so neither phase needs more than counting the launch.
  bool type_may_capture = true;
  bool step_marker = false;            // session().is_step_marker(op), also fixed
  const OpPrototype *proto = nullptr;  // phase 1 with a header
  std::vector<ArgLocation> locations;  // where each prototype parameter travels
  int stack_slots = kMaxStackSlots;    // exact when the prototype is known
  int executor_param = -1;             // the prototype's aclOpExecutor ** parameter
  // Phase 1 decodes the arguments itself, instead of phase 2: a C string argument (read while the host's buffer is
  // alive), more stack arguments than a RawCall holds, or no header (the header-less rule probes the host's memory).
  bool decode_at_phase1 = true;
};

ArgClass arg_class(ParamKind k) {
  return k == ParamKind::Double ? ArgClass::Float64 : k == ParamKind::Float ? ArgClass::Float32 : ArgClass::Integer;
}

// Recorded phase-1 calls by executor.
class CallTable {
 public:
  void put(const void *ex, OpCall call) {
    std::lock_guard<std::mutex> lk(mu_);
    call.serial = ++serial_;
    if (auto it = calls_.find(ex); it != calls_.end()) {
      it->second = std::move(call);
    } else if (!spare_.empty()) {
      auto node = std::move(spare_.back());
      spare_.pop_back();
      node.key() = ex;
      node.mapped() = std::move(call);
      calls_.insert(std::move(node));
    } else {
      calls_.emplace(ex, std::move(call));
    }
    size_.store(calls_.size(), std::memory_order_relaxed);
  }
  // Phase 2's fast path asks this for every launch: with nothing recorded (the usual state when kernels are
  // filtered out) it is one atomic load. A record put by another thread is ordered by the host's own
  // hand-over of the executor from phase 1 to phase 2.
  bool contains(const void *ex) {
    if (size_.load(std::memory_order_relaxed) == 0) return false;
    std::lock_guard<std::mutex> lk(mu_);
    return calls_.count(ex) != 0;
  }
  std::optional<OpCall> get(const void *ex) {
    std::lock_guard<std::mutex> lk(mu_);
    auto it = calls_.find(ex);
    if (it == calls_.end()) return std::nullopt;
    return it->second;
  }
  void erase(const void *ex) {
    std::lock_guard<std::mutex> lk(mu_);
    if (auto it = calls_.find(ex); it != calls_.end()) drop(it);
    size_.store(calls_.size(), std::memory_order_relaxed);
  }
  // Forgets the call recorded as `serial` only. Phase 2 frees a one-shot executor inside the real call, so
  // by the time its post-hook runs another thread's phase 1 may have got the same address for a new op.
  void erase_if(const void *ex, uint64_t serial) {
    std::lock_guard<std::mutex> lk(mu_);
    auto it = calls_.find(ex);
    if (it != calls_.end() && it->second.serial == serial) drop(it);
    size_.store(calls_.size(), std::memory_order_relaxed);
  }
  template <typename F>
  void update(const void *ex, F &&f) {
    std::lock_guard<std::mutex> lk(mu_);
    auto it = calls_.find(ex);
    if (it != calls_.end()) f(it->second);
  }
  // The call recorded as `decoded.serial`, decoded on the thread of phase 2 (nothing if another took its place).
  // What changed meanwhile stays: the repeatable mark.
  void replace_undecoded(const void *ex, const OpCall &decoded) {
    std::lock_guard<std::mutex> lk(mu_);
    auto it = calls_.find(ex);
    if (it == calls_.end() || it->second.serial != decoded.serial || it->second.decoded()) return;
    const bool repeatable = it->second.repeatable;
    it->second = decoded;
    it->second.repeatable = repeatable;
  }

 private:
  using Map = std::unordered_map<const void *, OpCall>;
  // Nodes of calls forgotten, for the next put: phase 1 records on one thread (torch_npu's Python thread) and phase 2
  // forgets on another (its task queue), where a node made on one and freed on the other costs the allocator's slow
  // path every time.
  void drop(Map::iterator it) {
    auto node = calls_.extract(it);
    if (spare_.size() < kSpareNodes) spare_.push_back(std::move(node));
  }
  static constexpr size_t kSpareNodes = 64;
  std::mutex mu_;
  Map calls_;
  std::vector<Map::node_type> spare_;
  std::atomic<size_t> size_{0};
  uint64_t serial_ = 0;
};

// Tensor `index` of a call in the executor cache's order (present tensors in declaration order, list
// members one by one) now lives at `addr`.
void bind_cached_tensor(OpCall &c, size_t index, void *addr) {
  for (CallParam &p : c.params) {
    if (!is_tensor_kind(p.kind) || !p.present) continue;
    if (index < p.tensors.size()) {
      p.tensors[index].data = addr;
      return;
    }
    index -= p.tensors.size();
  }
}

struct ExecCacheKeyHash {
  size_t operator()(const ExecCacheKey &k) const { return k.a ^ (k.b * 0x9e3779b97f4a7c15ull) ^ k.kind; }
};

// Calls recorded for phase-1 executors the runtime cached, by cache key. Bounded: past the limit the
// table starts over, and hits on forgotten keys are launches without arguments.
class KeptCalls {
 public:
  void put(const ExecCacheKey &key, const OpCall &call) {
    std::lock_guard<std::mutex> lk(mu_);
    if (calls_.size() >= kLimit && calls_.find(key) == calls_.end()) calls_.clear();
    calls_.insert_or_assign(key, call);
  }
  std::optional<OpCall> get(const ExecCacheKey &key) {
    std::lock_guard<std::mutex> lk(mu_);
    auto it = calls_.find(key);
    if (it == calls_.end()) return std::nullopt;
    return it->second;
  }

 private:
  static constexpr size_t kLimit = 1 << 16;
  std::mutex mu_;
  std::unordered_map<ExecCacheKey, OpCall, ExecCacheKeyHash> calls_;
};

// The cache keys set on this thread (by kind), for the next phase 1 here.
thread_local ExecCacheKey t_cache_keys[2] __attribute__((tls_model("initial-exec")));

}  // namespace

struct AclnnCapture::Impl {
  std::mutex mu;
  std::unordered_map<void *, void *> wrappers;  // real function -> wrapper entry
  std::unique_ptr<PrototypeIndex> index;
  CallTable calls;
  KeptCalls kept;

  PrototypeIndex &prototypes() {
    if (!index) index = std::make_unique<PrototypeIndex>(PrototypeIndex::from_environment(&std::getenv));
    return *index;
  }
};

namespace {

AclnnCapture::Impl &state() {
  static auto *impl = new AclnnCapture::Impl;  // immortal: wrappers are called until the process ends
  return *impl;
}

// The executor phase 1 wrote through its out-pointer: read at phase 1 (the real call succeeded, so the host's
// out-pointer is valid then, and only then).
const void *executor_of(const Binding &b, const RawArgs &a) {
  if (b.executor_param < 0) return nullptr;
  auto **out = static_cast<void **>(read_ptr(a, b.locations[(size_t)b.executor_param]));
  return out ? *out : nullptr;
}

// A phase-1 call with a prototype: every parameter read from where the ABI put it. `executor`: the executor phase 1
// returned (executor_of(), read at phase 1); the call is decoded at phase 1 or, from its registers, at phase 2.
std::optional<std::pair<const void *, OpCall>> call_from_prototype(const Binding &b, const RawArgs &a,
                                                                   const void *executor) {
  OpCall call;
  for (size_t i = 0; i < b.proto->params.size(); ++i) {
    const Param &p = b.proto->params[i];
    ArgLocation loc = b.locations[i];
    if (p.kind == ParamKind::ExecutorOut) continue;
    if (p.kind == ParamKind::WorkspaceSizeOut) continue;
    CallParam cp;
    cp.kind = p.kind;
    cp.dir = p.dir;
    if (is_tensor_kind(p.kind)) {
      const void *h = read_ptr(a, loc);
      cp.present = h != nullptr;
      if (h) fill_tensors(cp, h);
    } else {
      cp.value = value_of(p.kind, a, loc);
      cp.present = cp.value.has_value();
    }
    call.params.push_back(std::move(cp));
  }
  if (!executor) return std::nullopt;
  // Every op writes something: when neither type nor name marks an output (GeluBackward declares
  // `const aclTensor *gradInput`), the last tensor parameter is the output, as CANN orders them.
  bool any_output = false;
  for (const CallParam &p : call.params)
    any_output = any_output || p.dir == Direction::Output || p.dir == Direction::InOut;
  if (!any_output)
    for (size_t i = call.params.size(); i-- > 0;)
      if (is_tensor_kind(call.params[i].kind)) {
        call.params[i].dir = Direction::Output;
        break;
      }
  return std::make_pair(executor, std::move(call));
}

RawArgs raw_args(const RawCall &r) {
  RawArgs a{};
  std::memcpy(a.gpr, r.gpr, sizeof a.gpr);
  std::memcpy(a.fpr, r.fpr, sizeof a.fpr);
  std::memcpy(a.stack, r.stack, sizeof(uint64_t) * (size_t)r.stack_slots);
  a.stack_slots = r.stack_slots;
  return a;
}

// Phase 1 without a header (docs/prototypes.md, "no header"): the argument slots are scanned for objects
// the shim saw created; the last tensor is the output (the first is also an input for Inplace ops), every
// other tensor an input; the executor is what the first (uint64_t *, aclOpExecutor **) pair of pointers
// after the last known object points to.
std::optional<std::pair<const void *, OpCall>> call_from_slots(const Binding &b, const RawArgs &a) {
  std::vector<uint64_t> slots(std::begin(a.gpr), std::end(a.gpr));
  slots.insert(slots.end(), a.stack, a.stack + a.stack_slots);
  OpCall call;
  size_t last_known = 0;
  bool any = false;
  for (size_t i = 0; i < slots.size(); ++i) {
    const void *p = reinterpret_cast<const void *>(slots[i]);
    auto h = p ? handles().get(p) : std::nullopt;
    if (!h) continue;
    CallParam cp;
    cp.present = true;
    if (std::holds_alternative<TensorMeta>(*h)) {
      cp.kind = ParamKind::Tensor;
      cp.dir = Direction::Input;
      fill_tensors(cp, p);
    } else if (auto *members = std::get_if<std::vector<const void *>>(&*h)) {
      bool tensors = !members->empty() && handles().get(members->front()).has_value() &&
                     std::holds_alternative<TensorMeta>(*handles().get(members->front()));
      cp.kind = tensors ? ParamKind::TensorList : ParamKind::ScalarList;
      cp.dir = Direction::Input;
      if (tensors) fill_tensors(cp, p);
    } else {
      cp.kind = std::holds_alternative<ScalarMeta>(*h)             ? ParamKind::Scalar
                : std::holds_alternative<std::vector<int64_t>>(*h) ? ParamKind::IntArray
                : std::holds_alternative<std::vector<float>>(*h)   ? ParamKind::FloatArray
                                                                   : ParamKind::BoolArray;
    }
    if (!is_tensor_kind(cp.kind)) {
      RawArgs one{};
      one.gpr[0] = slots[i];
      cp.value = value_of(cp.kind, one, ArgLocation{ArgLocation::Gpr, 0});
    }
    call.params.push_back(std::move(cp));
    last_known = i;
    any = true;
  }
  if (!any) return std::nullopt;
  int first = -1, last = -1;
  for (size_t i = 0; i < call.params.size(); ++i)
    if (is_tensor_kind(call.params[i].kind)) {
      if (first < 0) first = (int)i;
      last = (int)i;
    }
  if (last >= 0) call.params[last].dir = Direction::Output;
  if (first >= 0 && first != last && b.op.rfind("Inplace", 0) == 0) call.params[first].dir = Direction::InOut;
  const pid_t self = getpid();  // once per scan: a fork cannot happen on this thread in between
  for (size_t j = last_known + 1; j + 1 < slots.size(); ++j) {
    uint64_t ws = 0, ex = 0;
    if (slots[j] == 0 || slots[j + 1] == 0 || (slots[j + 1] & 7) != 0) continue;
    if (!safe_read_pair(self, reinterpret_cast<void *>(slots[j]), reinterpret_cast<void *>(slots[j + 1]), &ws, &ex))
      continue;
    if (ws >> 48 || ex == 0 || (ex & 7) != 0 || handles().get(reinterpret_cast<void *>(ex))) continue;
    return std::make_pair(reinterpret_cast<const void *>(ex), std::move(call));
  }
  return std::nullopt;
}

// Whether phase 1 records anything: not for an op type that is never captured, nor once nothing launched from
// now on can be captured (steps past the last selected one, a rank not selected). Kept calls of the executor
// cache are not needed then either: a later hit could not be captured.
bool phase1_records(const Session &session, const Binding &b) { return b.type_may_capture && session.captures_ahead(); }

// The gate in front of phase 1's closure (shim/call/forwarder.h): false sends the call straight to the real function.
bool phase1_gate(void *user, const uint64_t *) {
  const Session *session = active_session();
  if (ReentryGuard::active() || session == nullptr) return false;
  if (phase1_records(*session, *static_cast<const Binding *>(user))) return true;
  // Cache keys set for this call would otherwise be taken by the next recorded phase 1 on this thread.
  if (t_cache_keys[0].kind != ExecCacheKey::None || t_cache_keys[1].kind != ExecCacheKey::None)
    t_cache_keys[0] = t_cache_keys[1] = {};
  return false;
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

// Phase 1, on the thread that made it (torch_npu: the Python thread): what must happen here happens here, the rest
// where phase 2 runs. Here: the stack (the user's call site), the executor (through the host's out-pointer) and the
// argument registers; the arguments are decoded by phase 2 (decode()), as are the calls the executor cache keeps.
void phase1_post(void *user, const RawArgs &a, uint64_t ret) {
  if ((int32_t)ret != 0) return;
  // The runtime stored this executor under the thread's cache keys, if any: they name it from now on.
  ExecCacheKey keys[2] = {std::exchange(t_cache_keys[0], {}), std::exchange(t_cache_keys[1], {})};
  Session *session = active_session();
  if (session == nullptr) return;
  const auto &b = *static_cast<const Binding *>(user);
  if (!phase1_records(*session, b)) return;
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
    call.stack = launch_stack(*session);
    say_when_phase1_has_no_python_frames(*session, call.stack, b);
    state().calls.put(executor, std::move(call));
    return;
  }
  auto rec = b.proto ? call_from_prototype(b, a, executor_of(b, a)) : call_from_slots(b, a);
  if (!rec) return;
  rec->second.stack = launch_stack(*session);
  say_when_phase1_has_no_python_frames(*session, rec->second.stack, b);
  for (const ExecCacheKey &k : keys)
    if (k.kind != ExecCacheKey::None) state().kept.put(k, rec->second);
  state().calls.put(rec->first, std::move(rec->second));
}

// A call recorded at phase 1 as it arrived, decoded on the thread of phase 2 before it runs: its argument objects are
// alive (torch_npu destroys them after phase 2), and its tensors are described by the runtime. The decoded call
// replaces the raw one (a repeatable executor's later launches, and rebinding, use it) and goes under the executor
// cache's keys. False when it cannot be decoded (it is then launched without arguments).
bool decode(const void *executor, OpCall &call) {
  if (call.decoded()) return true;
  OpCall out;
  if (call.hit) {
    std::optional<OpCall> kept = state().kept.get(*call.hit);
    if (!kept) return false;  // its phase 1 ran before capture, or was filtered out
    out = std::move(*kept);
    out.repeatable = false;  // the hit's executor is freed by its phase 2
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
        state().kept.put(k, kept);
      }
  }
  out.serial = call.serial;
  out.stack = call.stack;  // the call site of phase 1, or of the hit
  call = std::move(out);
  // A repeatable executor's later launches (and its address updates) use the decoded call; a one-shot executor's
  // record is forgotten after this launch (aclSetAclOpExecutorRepeatable comes right after phase 1, so it is known).
  if (call.repeatable) state().calls.replace_undecoded(executor, call);
  return true;
}

// A launch needs its call decoded now when it is captured, or when its phase 1 was kept by the executor cache (a later
// hit, captured or not, is bound to the kept call). A repeatable executor not captured now keeps its raw call: its
// argument objects live as long as it does.
bool decode_now(const OpCall &call, bool capturing) {
  if (call.decoded() || capturing) return true;
  return call.raw && (call.keys[0].kind != ExecCacheKey::None || call.keys[1].kind != ExecCacheKey::None);
}

// ---- Phase 2 ------------------------------------------------------------------------------------------------

// The launch being made on this thread (phase 2 does not nest, but keep a few in case a runtime does). Every
// phase2_pre pushes one entry (null when it recorded nothing) or counts one past the limit, and its phase2_post takes
// that one back.
struct InFlight {
  const void *executor;
  std::optional<OpCall> call;
  CaptureCall capture;
};
constexpr int kMaxNesting = 8;
thread_local InFlight *t_inflight[kMaxNesting] __attribute__((tls_model("initial-exec")));
thread_local int t_depth __attribute__((tls_model("initial-exec"))) = 0;
thread_local int t_past_limit __attribute__((tls_model("initial-exec"))) = 0;

// The stack of a launch of a repeatable executor: the launching thread's own when it has Python frames with a scope
// (only the Python frames are looked at first, so a thread without them pays no native walk), else `made`.
StackId relaunch_stack(const Session &session, StackId made) {
  StackCaptureOptions python_only = StackTable::options_for(session.config().stack);
  python_only.native = false;
  if (StackTable::global().op_name(StackTable::global().capture(python_only)).empty()) return made;
  return launch_stack(session);
}

// The launch's record, with its inputs described: copied now, before the kernel can overwrite them (in-place ops).
InFlight *begin_launch(Session &session, const Binding &b, const RawArgs &a) {
  const void *executor = read_ptr(a, ArgLocation{ArgLocation::Gpr, 2});
  void *stream = read_ptr(a, ArgLocation{ArgLocation::Gpr, 3});
  std::optional<OpCall> call = state().calls.get(executor);
  // Phase 2 may run on a task-queue thread without Python frames: the stack is phase 1's.
  StackId stack = call ? call->stack : kEmptyStack;
  // A repeatable executor launched again from Python (MindSpore PyNative's executor cache with
  // MS_DEV_LAUNCH_BLOCKING=1: phase 2 of a hit on the Python thread): this launch's own scope, not its maker's.
  if (call && call->repeatable) stack = relaunch_stack(session, stack);
  auto *f = new InFlight{executor, std::move(call), CaptureCall(session, b.op, stack, stream)};
  if (f->call && decode_now(*f->call, f->capture.capturing()) && !decode(executor, *f->call)) f->call.reset();
  if (f->call && f->capture.capturing()) {
    // What the kernel writes is known before it runs: the stager may take the inputs after it when it writes none of
    // their bytes. Not for an op that works in place (an InOut tensor, an Inplace op): a const input it writes
    // would be taken too late.
    std::vector<TensorMeta> writes;
    bool in_place = b.op.rfind("Inplace", 0) == 0;
    for (const CallParam &p : f->call->params) {
      in_place = in_place || (is_tensor_kind(p.kind) && p.dir == Direction::InOut);
      if (is_tensor_kind(p.kind) && p.dir == Direction::Output)
        writes.insert(writes.end(), p.tensors.begin(), p.tensors.end());
    }
    f->capture.inputs(
        [&](KernelLaunch &k) {
          for (const CallParam &p : f->call->params) {
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
  return f;
}

void phase2_pre(void *user, const RawArgs &a) {
  if (t_depth >= kMaxNesting) {
    ++t_past_limit;
    return;
  }
  InFlight *f = nullptr;
  if (Session *session = active_session())
    guarded([&] { f = begin_launch(*session, *static_cast<const Binding *>(user), a); });
  t_inflight[t_depth++] = f;
}

void phase2_post(void *, const RawArgs &, uint64_t ret) {
  if (t_past_limit > 0) {
    --t_past_limit;
    return;
  }
  if (t_depth == 0) return;
  InFlight *f = t_inflight[--t_depth];
  if (f == nullptr) return;
  const bool launched = (int32_t)ret == 0;
  if (f->call && launched)
    f->capture.outputs([&](KernelLaunch &k) {
      for (const CallParam &p : f->call->params) {
        if (!is_tensor_kind(p.kind) || p.dir == Direction::Input || p.dir == Direction::None) continue;
        if (!p.present)
          k.output_null();
        else if (p.kind == ParamKind::Tensor && !p.tensors.empty())
          k.output_tensor(p.tensors[0]);
        else
          k.output_tensor_list(p.tensors);
      }
    });
  // A kernel the shim has no record of (its phase 1 ran before capture, or it was filtered out) is still
  // named and counted, so that names stay the same whatever the filters; it has no arguments.
  f->capture.finish(launched && f->call.has_value());
  if (f->call && launched && !f->call->repeatable)
    guarded([&] { state().calls.erase_if(f->executor, f->call->serial); });
  delete f;
}

// Phase 2 through a prepend trampoline (shim/call/trampoline.h): its prototype is known, so a plain function takes
// the call. A launch with no recorded call whose name nobody needs is only counted (the fast path); anything
// else goes through phase2_pre / phase2_post as with a libffi forwarder.
using Phase2Fn = int32_t (*)(void *, uint64_t, void *, void *);

int32_t phase2_entry(Binding *b, void *workspace, uint64_t size, void *executor, void *stream) {
  auto real = reinterpret_cast<Phase2Fn>(b->real);
  Session *session = active_session();
  if (ReentryGuard::active() || session == nullptr) return real(workspace, size, executor, stream);
  if (!state().calls.contains(executor) && !phase1_records(*session, *b)) {
    guarded([&] { session->skip_launch(b->op, stream, b->step_marker); });
    KernelLaunch::Uncaptured inside;  // the kernels the op launches are its own, not the host's
    return real(workspace, size, executor, stream);
  }
  RawArgs a{};
  a.gpr[0] = reinterpret_cast<uintptr_t>(workspace);
  a.gpr[1] = size;
  a.gpr[2] = reinterpret_cast<uintptr_t>(executor);
  a.gpr[3] = reinterpret_cast<uintptr_t>(stream);
  phase2_pre(b, a);
  // A real function that throws (it should not: C API) still closes the launch, as a failed one.
  struct Close {
    Binding *b;
    const RawArgs &a;
    bool done = false;
    ~Close() {
      if (!done) phase2_post(b, a, (uint64_t)-1);
    }
  } close{b, a};
  int32_t rc = real(workspace, size, executor, stream);
  close.done = true;
  phase2_post(b, a, (uint64_t)(int64_t)rc);
  return rc;
}

}  // namespace

AclnnCapture::Impl *AclnnCapture::impl() { return &state(); }

void *AclnnCapture::wrap_symbol(const char *name, void *real) {
  std::string_view n(name);
  if (real == nullptr || n.rfind("aclnn", 0) != 0 || n.size() <= 5) return real;
  Impl &m = *impl();
  std::lock_guard<std::mutex> lk(m.mu);
  if (auto it = m.wrappers.find(real); it != m.wrappers.end()) return it->second;
  auto *b = new Binding;  // lives as long as its wrapper: forever
  b->real = real;
  if (n.size() > 5 + kPhase1Suffix.size() && n.substr(n.size() - kPhase1Suffix.size()) == kPhase1Suffix) {
    b->op = std::string(n.substr(5, n.size() - 5 - kPhase1Suffix.size()));
    b->proto = m.prototypes().find(b->op);
    if (b->proto) {
      std::vector<ArgClass> classes;
      for (const Param &p : b->proto->params) classes.push_back(arg_class(p.kind));
      b->locations = locate_args(classes);
      b->stack_slots = stack_slots_needed(classes);
      if (b->stack_slots > kMaxStackSlots) {  // cannot be forwarded exactly: leave it alone
        delete b;
        return real;
      }
      bool c_string = false;
      for (size_t i = 0; i < b->proto->params.size(); ++i) {
        c_string = c_string || b->proto->params[i].kind == ParamKind::CString;
        if (b->proto->params[i].kind == ParamKind::ExecutorOut) b->executor_param = (int)i;
      }
      b->decode_at_phase1 = c_string || b->stack_slots > RawCall::kStackSlots;
    } else {
      log_info("no header declares aclnn%sGetWorkspaceSize; its arguments are found by the header-less rule",
               b->op.c_str());
    }
  } else {
    // Phase 2 exists only next to its phase 1 in the same library (this leaves aclnnInit and friends alone).
    std::string phase1 = std::string(n) + std::string(kPhase1Suffix);
    if (lookup_in_object_of(real, phase1.c_str()) == nullptr) {
      delete b;
      return real;
    }
    b->op = std::string(n.substr(5));
    b->phase1 = false;
  }
  const Session *session = active_session();
  b->type_may_capture = session == nullptr || session->may_capture(b->op);
  b->step_marker = session != nullptr && session->is_step_marker(b->op);
  if (!b->phase1) {
    // Phase 2 is (void *workspace, uint64_t size, aclOpExecutor *executor, aclrtStream stream).
    if (void *t = make_prepend_trampoline(reinterpret_cast<void *>(&phase2_entry), b)) {
      m.wrappers.emplace(real, t);
      return t;
    }
  }
  Forwarder *fw =
      b->phase1 ? Forwarder::create(real, ReturnKind::Int32, nullptr, &phase1_post, b, b->stack_slots, &phase1_gate)
                : Forwarder::create(real, ReturnKind::Int32, &phase2_pre, &phase2_post, b, 0);
  if (fw == nullptr) {
    delete b;
    return real;
  }
  m.wrappers.emplace(real, fw->entry());
  return fw->entry();
}

void AclnnCapture::on_repeatable(const void *executor) {
  impl()->calls.update(executor, [](OpCall &c) { c.repeatable = true; });
}

void AclnnCapture::on_destroyed(const void *executor) { impl()->calls.erase(executor); }

void AclnnCapture::on_rebind(const void *executor, IndexSpace space, size_t index, size_t relative, void *addr) {
  impl()->calls.update(executor, [&](OpCall &c) {
    size_t k = 0;
    for (CallParam &p : c.params) {
      if (!is_tensor_kind(p.kind)) continue;
      bool counts = space == IndexSpace::All || (space == IndexSpace::Inputs && p.dir != Direction::Output) ||
                    (space == IndexSpace::Outputs && p.dir != Direction::Input);
      if (!counts || k++ != index) continue;
      if (relative < p.tensors.size()) p.tensors[relative].data = addr;
      return;
    }
  });
}

ExecCacheKey ExecCacheKey::of_hash(uint64_t hash) { return hash == 0 ? ExecCacheKey{} : ExecCacheKey{Hash, hash, 0}; }

ExecCacheKey ExecCacheKey::of_bytes(const void *buf, size_t len) {
  if (buf == nullptr || len == 0) return {};
  // Two independent 64-bit FNV-1a variants: a collision of both is as likely as of a 128-bit hash.
  const auto *p = static_cast<const unsigned char *>(buf);
  uint64_t a = 0xcbf29ce484222325ull, b = 0x84222325cbf29ce4ull ^ len;
  for (size_t i = 0; i < len; ++i) {
    a = (a ^ p[i]) * 0x100000001b3ull;
    b = (b ^ p[i] ^ (i & 0xff) << 8) * 0x9e3779b97f4a7c15ull;
    b ^= b >> 29;
  }
  return {Bytes, a, b};
}

void AclnnCapture::set_cache_key(ExecCacheKey::Kind kind, const ExecCacheKey &key) {
  if (kind == ExecCacheKey::Hash || kind == ExecCacheKey::Bytes) t_cache_keys[kind - 1] = key;
}

void AclnnCapture::clear_cache_keys() { t_cache_keys[0] = t_cache_keys[1] = {}; }

void AclnnCapture::on_cache_hit(const void *executor, const ExecCacheKey &key, void *const *addrs, size_t n) {
  // Bound to the kept call where phase 2 runs (decode()); here only what names it.
  OpCall call;
  call.hit = key;
  call.hit_addrs.assign(addrs, addrs + n);
  // The hit's own call site (it skips phase 1, where stacks are taken): one key serves several lines of a model.
  if (const Session *session = active_session()) call.stack = launch_stack(*session);
  impl()->calls.put(executor, std::move(call));
}

void AclnnCapture::on_cached_address(const void *executor, size_t index, void *addr) {
  impl()->calls.update(executor, [&](OpCall &c) {
    if (c.hit) {
      if (c.hit_addrs.size() <= index) c.hit_addrs.resize(index + 1, nullptr);
      c.hit_addrs[index] = addr;
    } else {
      bind_cached_tensor(c, index, addr);
    }
  });
}

AclnnCapture &aclnn_capture() {
  static AclnnCapture c;
  return c;
}

}  // namespace msprobe::shim
