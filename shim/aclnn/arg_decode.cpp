#include "shim/aclnn/arg_decode.h"

#include <unistd.h>

#include <cstring>
#include <string>

#include "shim/base/safe_read.h"
#include "shim/device/acl_types.h"
#include "shim/device/runtime_api.h"

namespace msprobe::shim {
namespace {

namespace vt = format::value_type;
using format::ValueArg;

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

[[gnu::always_inline]] inline std::optional<TensorMeta> tensor_meta(const void *t) {
  if (auto m = handles().tensor(t)) return m;
  return query_tensor(t);
}

std::string dtype_value_name(int32_t acl_dtype) {
  format::DType d = acl_to_dtype(acl_dtype);
  return d == format::DType::Raw ? acl_dtype_label(acl_dtype) : std::string(format::dtype_id(d));
}

[[gnu::always_inline]] inline ValueArg scalar_value(const void *handle) {
  ScalarMeta scalar;
  bool known = false;
  handles().read(handle, [&](const HandleMeta &m) {
    if (auto *v = std::get_if<ScalarMeta>(&m)) scalar = *v, known = true;
  });
  if (!known) return {vt::kAclScalar, std::monostate{}};
  const ScalarMeta *s = &scalar;
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

// A C string the runtime accepted (so readable), at most 256 bytes of it.
ValueArg c_string_value(const char *s) {
  char buf[256];
  size_t n = 0;
  while (n < sizeof buf && s[n] != '\0') {
    buf[n] = s[n];
    ++n;
  }
  return ValueArg{vt::kStr, std::string(buf, n)};
}

// A by-value or handle argument that is not a tensor.
[[gnu::always_inline]] inline std::optional<ValueArg> value_of(ParamKind kind, const RawArgs &a, ArgLocation loc) {
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
  if (kind == ParamKind::Scalar) return scalar_value(p);
  if (kind == ParamKind::CString) return c_string_value(static_cast<const char *>(p));
  std::optional<HandleMeta> h;
  if (kind == ParamKind::IntArray || kind == ParamKind::FloatArray || kind == ParamKind::BoolArray ||
      kind == ParamKind::ScalarList)
    h = handles().get(p);
  switch (kind) {
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
    default: return ValueArg{vt::kPointer, std::monostate{}};
  }
}

[[gnu::always_inline]] inline void add_tensor(CallParam &p, const void *handle) {
  if (auto m = tensor_meta(handle)) {
    p.tensors.push_back(*m);
    p.handles.push_back(handle);
  }
}

// The members of a list the shim saw created; empty when it did not.
std::vector<const void *> list_members(const void *list) {
  std::vector<const void *> members;
  handles().read(list, [&](const HandleMeta &m) {
    if (auto *v = std::get_if<std::vector<const void *>>(&m)) members = *v;
  });
  return members;
}

void fill_tensors(CallParam &p, const void *handle) {
  if (p.kind == ParamKind::Tensor) {
    add_tensor(p, handle);
    return;
  }
  for (const void *t : list_members(handle)) add_tensor(p, t);
}

}  // namespace

// The executor phase 1 wrote through its out-pointer: read at phase 1 (the real call succeeded, so the host's
// out-pointer is valid then, and only then).
const void *executor_of(const Binding &b, const RawArgs &a) {
  if (b.executor_param < 0) return nullptr;
  auto **out = static_cast<void **>(read_ptr(a, b.locations[(size_t)b.executor_param]));
  return out ? *out : nullptr;
}

// The parameter by which CANN's MC2 ops (aclnnMatmulAllReduce, aclnnAllGatherMatmul...) name their communicator.
constexpr std::string_view kCommGroupParam = "group";

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
      if (p.kind == ParamKind::CString && p.name == kCommGroupParam && cp.present)
        if (const auto *group = std::get_if<std::string>(&cp.value->value)) {
          call.comm_group = *group;
          call.comm_group_param = (int)call.params.size();
        }
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

namespace {

// What a slot of the header-less scan holds when it is an object the shim saw created: its kind and value (a tensor
// an input until the rule says otherwise); nullopt for anything else.
std::optional<CallParam> slot_param(const void *p, uint64_t word) {
  std::optional<ParamKind> kind;
  bool list_of_tensors = false;
  handles().read(p, [&](const HandleMeta &h) {
    if (std::holds_alternative<TensorMeta>(h))
      kind = ParamKind::Tensor;
    else if (auto *members = std::get_if<std::vector<const void *>>(&h)) {
      kind = ParamKind::ScalarList;
      list_of_tensors = !members->empty();  // checked below, outside this shard's lock
    } else if (std::holds_alternative<ScalarMeta>(h))
      kind = ParamKind::Scalar;
    else if (std::holds_alternative<std::vector<int64_t>>(h))
      kind = ParamKind::IntArray;
    else if (std::holds_alternative<std::vector<float>>(h))
      kind = ParamKind::FloatArray;
    else
      kind = ParamKind::BoolArray;
  });
  if (!kind) return std::nullopt;
  if (list_of_tensors) {
    std::vector<const void *> members = list_members(p);
    if (!members.empty() && handles().tensor(members.front())) kind = ParamKind::TensorList;
  }
  CallParam cp;
  cp.present = true;
  cp.kind = *kind;
  if (is_tensor_kind(cp.kind)) {
    cp.dir = Direction::Input;
    fill_tensors(cp, p);
  } else {
    RawArgs one{};
    one.gpr[0] = word;
    cp.value = value_of(cp.kind, one, ArgLocation{ArgLocation::Gpr, 0});
  }
  return cp;
}

}  // namespace

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
    std::optional<CallParam> cp = p && handles().may_hold(p) ? slot_param(p, slots[i]) : std::nullopt;
    if (!cp) continue;
    call.params.push_back(std::move(*cp));
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
    if (ws >> 48 || ex == 0 || (ex & 7) != 0 || handles().read(reinterpret_cast<void *>(ex), [](auto &) {})) continue;
    return std::make_pair(reinterpret_cast<const void *>(ex), std::move(call));
  }
  return std::nullopt;
}

void *current_address(const void *handle) {
  void *addr = nullptr;
  if (handles().read(handle, [&](const HandleMeta &m) {
        if (auto *t = std::get_if<TensorMeta>(&m)) addr = t->data;
      }))
    return addr;
  auto get = runtime::aclGetRawTensorAddr.get();  // made before capture started: the runtime knows
  if (get == nullptr || get(handle, &addr) != 0) return nullptr;
  return addr;
}

}  // namespace msprobe::shim
