#include "tools/replay/refs.h"

#include <algorithm>
#include <cmath>
#include <limits>

#include "format/half.h"
#include "format/minifloat.h"
#include "tools/reader/dump_reader.h"

namespace msprobe::tools::replay {

int64_t numel(const Shape &s) {
  int64_t n = 1;
  for (int64_t d : s) {
    if (d < 0) throw RefError("negative dimension in shape " + shape_text(s));
    n *= d;
  }
  return n;
}

// ---- Call -----------------------------------------------------------------------------------------------------------
namespace {
const char *kind_name(Arg::Kind k) {
  switch (k) {
    case Arg::Kind::Absent: return "absent";
    case Arg::Kind::Tensor: return "a tensor";
    case Arg::Kind::TensorList: return "a tensor list";
    case Arg::Kind::Int: return "an int";
    case Arg::Kind::Float: return "a float";
    case Arg::Kind::Bool: return "a bool";
    case Arg::Kind::IntList: return "an int array";
    case Arg::Kind::BoolList: return "a bool array";
    case Arg::Kind::ScalarList: return "a scalar list";
    case Arg::Kind::Text: return "a string";
  }
  return "?";
}
}  // namespace

void Call::expect_at_least(size_t n) const {
  if (args.size() < n)
    throw RefError(std::string(op) + ": " + std::to_string(args.size()) + " input_args recorded, the reference needs " +
                   std::to_string(n));
}

static RefError wrong_kind(const Call &c, size_t i, const char *want) {
  const std::string got = i < c.args.size() ? kind_name(c.args[i].kind) : "missing";
  return RefError(std::string(c.op) + ": input_args[" + std::to_string(i) + "] is " + got + ", expected " + want);
}

const Tensor &Call::tensor(size_t i) const {
  if (i >= args.size() || args[i].kind != Arg::Kind::Tensor) throw wrong_kind(*this, i, "a tensor");
  return *args[i].tensor;
}

const Tensor *Call::optional_tensor(size_t i) const {
  if (i >= args.size() || args[i].kind == Arg::Kind::Absent) return nullptr;
  return &tensor(i);
}

std::vector<const Tensor *> Call::tensor_list(size_t i) const {
  if (i >= args.size() || args[i].kind != Arg::Kind::TensorList) throw wrong_kind(*this, i, "a tensor list");
  return args[i].tensors;
}

double Call::number(size_t i) const {
  if (i >= args.size()) throw wrong_kind(*this, i, "a number");
  const Arg &a = args[i];
  if (a.kind == Arg::Kind::Float || a.kind == Arg::Kind::Int || a.kind == Arg::Kind::Bool) return a.f;
  // A one-element tensor stands for a scalar (aclnn ops take scalars both ways).
  if (a.kind == Arg::Kind::Tensor && a.tensor->size() == 1) return a.tensor->v[0];
  throw wrong_kind(*this, i, "a number");
}

double Call::number_or(size_t i, double fallback) const {
  return i >= args.size() || args[i].kind == Arg::Kind::Absent ? fallback : number(i);
}

int64_t Call::integer(size_t i) const {
  if (i >= args.size() || (args[i].kind != Arg::Kind::Int && args[i].kind != Arg::Kind::Bool))
    throw wrong_kind(*this, i, "an int");
  return args[i].i;
}

bool Call::boolean(size_t i) const {
  if (i >= args.size() || (args[i].kind != Arg::Kind::Bool && args[i].kind != Arg::Kind::Int))
    throw wrong_kind(*this, i, "a bool");
  return args[i].b;
}

// An empty sequence is written as [] and reads as an empty tensor list (the two cannot be told apart).
static bool empty_list(const Arg &a) { return a.kind == Arg::Kind::TensorList && a.tensors.empty(); }

std::vector<int64_t> Call::int_list(size_t i) const {
  if (i < args.size() && empty_list(args[i])) return {};
  if (i >= args.size() || args[i].kind != Arg::Kind::IntList) throw wrong_kind(*this, i, "an int array");
  return args[i].ints;
}

std::vector<bool> Call::bool_list(size_t i) const {
  if (i < args.size() && empty_list(args[i])) return {};
  if (i >= args.size() || args[i].kind != Arg::Kind::BoolList) throw wrong_kind(*this, i, "a bool array");
  return args[i].bools;
}

std::vector<double> Call::number_list(size_t i) const {
  if (i < args.size() && empty_list(args[i])) return {};
  const bool sequence = i < args.size() && (args[i].kind == Arg::Kind::IntList || args[i].kind == Arg::Kind::BoolList ||
                                            args[i].kind == Arg::Kind::ScalarList);
  if (!sequence) throw wrong_kind(*this, i, "a list of numbers");
  std::vector<double> out;
  for (const Arg &s : args[i].scalars) out.push_back(s.f);
  return out;
}

std::string Call::text(size_t i) const {
  if (i >= args.size() || args[i].kind != Arg::Kind::Text) throw wrong_kind(*this, i, "a string");
  return args[i].text;
}

const std::vector<const Call *> &Call::member_calls() const {
  if (members.calls.empty())
    throw RefError(std::string(op) + ": a collective, and the kernels of its other ranks were not found");
  return members.calls;
}

// ---- Helpers --------------------------------------------------------------------------------------------------------
Shape strides_of(const Shape &s) {
  Shape st(s.size(), 1);
  for (size_t i = s.size(); i-- > 1;) st[i - 1] = st[i] * s[i];
  return st;
}

Shape broadcast_shapes(const Shape &a, const Shape &b) {
  Shape out(std::max(a.size(), b.size()), 1);
  for (size_t i = 0; i < out.size(); ++i) {
    const int64_t x = i < out.size() - a.size() ? 1 : a[i - (out.size() - a.size())];
    const int64_t y = i < out.size() - b.size() ? 1 : b[i - (out.size() - b.size())];
    if (x != y && x != 1 && y != 1)
      throw RefError("shapes " + shape_text(a) + " and " + shape_text(b) + " do not broadcast");
    out[i] = x == 1 ? y : x;
  }
  return out;
}

std::vector<double> broadcast_to(const Tensor &t, const Shape &to) {
  if (t.shape == to) return t.v;
  if (t.shape.size() > to.size()) throw RefError("cannot broadcast " + shape_text(t.shape) + " to " + shape_text(to));
  const size_t lead = to.size() - t.shape.size();
  const Shape src = strides_of(t.shape);
  Shape st(to.size(), 0);  // source stride per output dim; 0 where the source repeats
  for (size_t i = 0; i < t.shape.size(); ++i) {
    if (t.shape[i] == to[lead + i])
      st[lead + i] = src[i];
    else if (t.shape[i] != 1)
      throw RefError("cannot broadcast " + shape_text(t.shape) + " to " + shape_text(to));
  }
  const auto n = static_cast<size_t>(numel(to));
  std::vector<double> out(n);
  Shape idx(to.size(), 0);
  int64_t off = 0;
  for (size_t k = 0; k < n; ++k) {
    out[k] = t.v[static_cast<size_t>(off)];
    for (size_t d = to.size(); d-- > 0;) {  // odometer
      if (++idx[d] < to[d]) {
        off += st[d];
        break;
      }
      off -= st[d] * (to[d] - 1);
      idx[d] = 0;
    }
  }
  return out;
}

Tensor sum_to(const Tensor &t, const Shape &to) {
  if (t.shape == to) return t;
  if (broadcast_shapes(to, t.shape) != t.shape)
    throw RefError("cannot sum " + shape_text(t.shape) + " to " + shape_text(to));
  // Each element of `t` adds to the element of `to` it was broadcast from: broadcast the indices of `to`.
  Tensor idx(to, std::vector<double>(static_cast<size_t>(numel(to))));
  for (size_t i = 0; i < idx.v.size(); ++i) idx.v[i] = static_cast<double>(i);
  const std::vector<double> from = broadcast_to(idx, t.shape);
  Tensor out = Tensor::zeros(to);
  for (size_t k = 0; k < t.v.size(); ++k) out.v[static_cast<size_t>(from[k])] += t.v[k];
  return out;
}

void gemm(const double *a, const double *b, double *c, size_t m, size_t k, size_t n) {
  for (size_t i = 0; i < m; ++i)
    for (size_t kk = 0; kk < k; ++kk) {
      const double x = a[i * k + kk];
      for (size_t j = 0; j < n; ++j) c[i * n + j] += x * b[kk * n + j];
    }
}

int64_t wrap_dim(int64_t dim, int64_t rank) {
  const int64_t r = std::max<int64_t>(rank, 1);
  if (dim < -r || dim >= r)
    throw RefError("dim " + std::to_string(dim) + " out of range for rank " + std::to_string(rank));
  return dim < 0 ? dim + r : dim;
}

double round_to_dtype(double x, format::DType t) {
  using format::DType;
  switch (t) {
    case DType::F64: return x;
    case DType::F32: return static_cast<double>(static_cast<float>(x));
    case DType::F16: return format::half_to_float(format::float_to_half(static_cast<float>(x)));
    case DType::BF16: return format::bf16_to_float(format::float_to_bf16(static_cast<float>(x)));
    case DType::Bool: return x != 0 ? 1.0 : 0.0;
    case DType::Raw: return x;
    default:
      if (format::is_narrow_float(t)) return format::narrow_to_float(t, format::float_to_narrow(t, x));
      return std::isfinite(x) ? std::trunc(x) : x;  // integers: C's float -> int conversion
  }
}

// ---- The table --------------------------------------------------------------------------------------------------
namespace {
std::vector<RefEntry> all_entries() {
  std::vector<RefEntry> all;
  for (auto part : {elementwise_refs(), matmul_refs(), norm_refs(), tensor_refs(), loss_optim_refs(), collective_refs(),
                    attention_refs(), transformer_refs(), moe_refs()})
    all.insert(all.end(), part.begin(), part.end());
  std::sort(all.begin(), all.end(), [](const RefEntry &a, const RefEntry &b) { return a.op_type < b.op_type; });
  return all;
}
const std::vector<RefEntry> &table() {
  static const std::vector<RefEntry> t = all_entries();
  return t;
}
}  // namespace

const RefEntry *find_reference(std::string_view op_type) {
  const auto &t = table();
  auto it = std::lower_bound(t.begin(), t.end(), op_type,
                             [](const RefEntry &e, std::string_view k) { return e.op_type < k; });
  return it != t.end() && it->op_type == op_type ? &*it : nullptr;
}

std::vector<std::string_view> reference_op_types() {
  std::vector<std::string_view> out;
  for (const RefEntry &e : table()) out.push_back(e.op_type);
  return out;
}

}  // namespace msprobe::tools::replay
