// CPU references of aclnn kernels for `msprobe-inspect replay` (the msprobe pre-check at kernel level).
//
// A reference takes one kernel's phase-1 arguments as dump.json records them (`input_args`, in declaration order:
// tensors with their dumped values, absent optional tensors, scalars, int/bool arrays, dtypes) and returns what the
// kernel must have written to each of its `output` tensors, computed in float64 from the op's definition (CANN /
// torch semantics). This is the project's own code, independent of the CANN stand-in in test/fake_cann, and shares
// nothing with the shim. The table from OpType to reference is in refs.cpp; each refs_*.cpp holds one op family.
#pragma once
#include <cstdint>
#include <memory>
#include <optional>
#include <span>
#include <stdexcept>
#include <string>
#include <string_view>
#include <vector>

#include "format/format.h"

namespace msprobe::tools::replay {

// The reference cannot use the kernel's arguments (wrong count or kind, shapes that do not fit): the kernel is
// reported as skipped with this message, never as passed.
class RefError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

using Shape = std::vector<int64_t>;

int64_t numel(const Shape &s);

// A tensor's values in C order, as doubles.
struct Tensor {
  Shape shape;
  std::vector<double> v;
  std::optional<format::DType> dtype;  // of the dumped tensor; nullopt for a computed result
  // A result only: the elements the kernel writes, when it leaves some untouched (GroupedMatmul's rows past its
  // groups): those hold whatever the memory held and are not judged. Empty: every element is written.
  std::vector<bool> written;

  Tensor() = default;
  Tensor(Shape s, std::vector<double> values) : shape(std::move(s)), v(std::move(values)) {}
  static Tensor zeros(Shape s) {
    const auto n = static_cast<size_t>(numel(s));
    return Tensor(std::move(s), std::vector<double>(n, 0.0));
  }
  size_t size() const { return v.size(); }
  int64_t rank() const { return static_cast<int64_t>(shape.size()); }
};

// One recorded phase-1 argument.
struct Arg {
  // IntList / BoolList: a sequence of ints / bools only; ScalarList: any other sequence of numbers (floats, or an
  // aclScalarList whose members mix int, float and bool).
  enum class Kind { Absent, Tensor, TensorList, Int, Float, Bool, IntList, BoolList, ScalarList, Text };
  Kind kind = Kind::Absent;
  const Tensor *tensor = nullptr;
  std::vector<const Tensor *> tensors;
  int64_t i = 0;  // Int (uint64 values wrap: 2^64 - 1 reads as -1, as the C parameter would)
  double f = 0;   // Float, and Int / Bool as a number
  bool b = false;
  std::vector<int64_t> ints;
  std::vector<bool> bools;
  std::vector<Arg> scalars;  // every sequence: its members as scalar arguments (Int, Float, Bool), in order
  std::string text;          // Text, and the dtype name of an aclDataType argument
};

// What the dumped output slot holds (the reference may use it, e.g. Cast's target dtype).
struct OutSpec {
  bool present = false;
  Shape shape;
  std::optional<format::DType> dtype;
};

struct Call;

// A collective's members: the same instance of the kernel in the folder of every member of its communicator, in
// comm-rank order (the entries' "comm" objects agree on name and seq; without one, the kernel of the same name in every
// rank folder of the step, in rank order), each with its recorded arguments. `self` is this kernel's place among them.
struct Members {
  std::vector<const Call *> calls;
  size_t self = 0;
  std::shared_ptr<const void> owner;  // keeps `calls` alive
};

struct Call {
  std::string_view op;
  std::vector<Arg> args;
  std::vector<OutSpec> outputs;
  Members members;  // collectives only (RefEntry::collective)

  size_t count() const { return args.size(); }
  // Typed access; RefError naming the op and the position when the argument is of another kind.
  const Tensor &tensor(size_t i) const;
  const Tensor *optional_tensor(size_t i) const;  // nullptr when absent (or past the end)
  std::vector<const Tensor *> tensor_list(size_t i) const;
  double number(size_t i) const;  // Float, Int or Bool
  double number_or(size_t i, double fallback) const;
  int64_t integer(size_t i) const;  // Int or Bool
  bool boolean(size_t i) const;     // Bool or Int
  std::vector<int64_t> int_list(size_t i) const;
  std::vector<bool> bool_list(size_t i) const;
  // Any sequence of numbers (IntList, BoolList, ScalarList): each member's value as a number.
  std::vector<double> number_list(size_t i) const;
  std::string text(size_t i) const;  // a string argument
  void expect_at_least(size_t n) const;
  // The members of a collective; RefError when there are none (replay found no folder of the other ranks).
  const std::vector<const Call *> &member_calls() const;
};

// The outputs in `output` order, the members of a tensor list output each in its place ("output.0.1"); nullopt where
// the kernel writes nothing (absent optional output, a mask bit off).
using Outputs = std::vector<std::optional<Tensor>>;
using RefFn = Outputs (*)(const Call &);

struct RefEntry {
  std::string_view op_type;
  RefFn fn;
  // Results are rounded to the output dtype before comparing (Cast: the exact value in the new dtype is the
  // benchmark). Integer and bool outputs are always rounded.
  bool round_to_output = false;
  // A collective: the result depends on every member rank's arguments (Call::members).
  bool collective = false;
};

// The reference of an op type, nullptr when there is none.
const RefEntry *find_reference(std::string_view op_type);
// Every op type with a reference, sorted.
std::vector<std::string_view> reference_op_types();

// ---- Shared helpers of the refs_*.cpp files -------------------------------------------------------------------
// Row-major strides of a shape.
Shape strides_of(const Shape &s);
// The sum of `t` over the dims along which it was broadcast to `t.shape` from `to` (the gradient of broadcast_to):
// `to` broadcasts to t.shape; the result has shape `to`.
Tensor sum_to(const Tensor &t, const Shape &to);
// The matrix product of [m, k] and [k, n] blocks in C order (the refs' one GEMM): c[m, n] += a @ b.
void gemm(const double *a, const double *b, double *c, size_t m, size_t k, size_t n);
// numpy broadcasting; RefError when the shapes do not broadcast.
Shape broadcast_shapes(const Shape &a, const Shape &b);
// The values of `t` broadcast to `to` (C order).
std::vector<double> broadcast_to(const Tensor &t, const Shape &to);
// Elementwise f(a, b) with broadcasting.
template <class F>
Tensor binary(const Tensor &a, const Tensor &b, F f) {
  Shape s = broadcast_shapes(a.shape, b.shape);
  std::vector<double> x = broadcast_to(a, s), y = broadcast_to(b, s);
  for (size_t k = 0; k < x.size(); ++k) x[k] = f(x[k], y[k]);
  return Tensor(std::move(s), std::move(x));
}
template <class F>
Tensor unary(const Tensor &a, F f) {
  Tensor out(a.shape, a.v);
  for (double &x : out.v) x = f(x);
  return out;
}
// `dim` in [-rank, rank) (a 0-d tensor accepts 0 and -1) -> [0, rank).
int64_t wrap_dim(int64_t dim, int64_t rank);
// The value as the output dtype stores it (round to nearest even; integers truncate; bool is != 0; the narrow floats
// as Ascend's Cast rounds them, in its SATURATION mode).
double round_to_dtype(double x, format::DType t);

// The tables of the op families (refs_*.cpp), collected by refs.cpp.
std::span<const RefEntry> elementwise_refs();
std::span<const RefEntry> matmul_refs();
std::span<const RefEntry> norm_refs();
std::span<const RefEntry> tensor_refs();
std::span<const RefEntry> loss_optim_refs();
std::span<const RefEntry> collective_refs();
std::span<const RefEntry> attention_refs();
std::span<const RefEntry> transformer_refs();
std::span<const RefEntry> moe_refs();

}  // namespace msprobe::tools::replay
