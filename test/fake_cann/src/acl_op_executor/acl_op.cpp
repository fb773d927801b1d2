// Single-op API: aclop attributes and execution (acl_op.h), plus the built-in op registry that
// libacl_op_compiler executes through fakecann::aclop (aclop_internal.h).
//
// An op is checked synchronously at launch (op type, descs against the op's shape/dtype rules, attrs,
// buffer sizes), then its CPU kernel is enqueued on the stream with copies of everything it needs, so
// the host may destroy descs, buffers and attrs right after the call, as with the real ACL.
#include "acl/acl_op.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <functional>
#include <map>
#include <mutex>
#include <numbers>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include "fakecann/acl_internal.h"
#include "fakecann/aclop_internal.h"
#include "fakecann/caller.h"
#include "fakecann/dtype.h"
#include "fakecann/op_dump.h"
#include "fakecann/op_registry.h"
#include "fakecann/op_task.h"
#include "fakecann/stream.h"
#include "fakecann/tensor_io.h"

namespace fakecann::aclop {

namespace {

std::mutex g_attr_mu;
std::set<const aclopAttr *> *g_attrs = new std::set<const aclopAttr *>;  // live attrs (refuses double destroy)

bool attr_live(const aclopAttr *a) {
  std::lock_guard<std::mutex> lk(g_attr_mu);
  return g_attrs->count(a) != 0;
}

// A refused call: the ACL error code and the text for aclGetRecentErrMsg.
struct Refused {
  aclError code;
  std::string why;
};

[[noreturn]] void refuse(const std::string &why, aclError code = ACL_ERROR_INVALID_PARAM) { throw Refused{code, why}; }

std::string shape_str(const std::vector<int64_t> &d) {
  std::ostringstream os;
  os << "[";
  for (size_t i = 0; i < d.size(); ++i) os << (i ? "," : "") << d[i];
  os << "]";
  return os.str();
}

int64_t numel(const std::vector<int64_t> &d) {
  int64_t n = 1;
  for (int64_t x : d) n *= x;
  return n;
}

bool shape_known(const std::vector<int64_t> &d) {
  return std::all_of(d.begin(), d.end(), [](int64_t x) { return x >= 0; });
}

// ---- attribute access (a present attribute of the wrong type is an error, as in GE) ----

template <typename T>
const T *find_attr(const Attrs &a, const char *name) {
  auto it = a.find(name);
  if (it == a.end()) return nullptr;
  const T *v = std::get_if<T>(&it->second);
  if (v == nullptr) refuse(std::string("attr ") + name + " has the wrong type");
  return v;
}

bool attr_bool(const Attrs &a, const char *name, bool dflt) {
  const bool *v = find_attr<bool>(a, name);
  return v ? *v : dflt;
}

// ---- the op registry ----

// Checks the call against the op's rules and returns the output shapes it will produce.
using InferFn = std::vector<std::vector<int64_t>> (*)(const std::vector<Arg> &in, const std::vector<Arg> &out,
                                                      const Attrs &attrs);

struct OpDef {
  int min_inputs, max_inputs, num_outputs;
  InferFn infer;
  KernelFn kernel;
};

void require_dtype(const Arg &a, std::initializer_list<aclDataType> allowed, const char *what) {
  if (std::find(allowed.begin(), allowed.end(), a.dtype) == allowed.end())
    refuse(std::string(what) + ": unsupported dtype " + std::to_string((int)a.dtype));
}

void require_present(const std::vector<Arg> &in, size_t i, const char *op) {
  if (i >= in.size() || !in[i].present)
    refuse(std::string(op) + ": required input " + std::to_string(i) + " is absent");
}

// ---- elementwise binary ops with numpy broadcasting ----

std::vector<int64_t> broadcast_shapes(const std::vector<int64_t> &a, const std::vector<int64_t> &b) {
  size_t n = std::max(a.size(), b.size());
  std::vector<int64_t> out(n);
  for (size_t i = 0; i < n; ++i) {
    int64_t x = i < n - a.size() ? 1 : a[i - (n - a.size())];
    int64_t y = i < n - b.size() ? 1 : b[i - (n - b.size())];
    if (x != y && x != 1 && y != 1) refuse("shapes " + shape_str(a) + " and " + shape_str(b) + " do not broadcast");
    out[i] = (x == 1) ? y : x;
  }
  return out;
}

// A view of `in` (contiguous) read as the broadcast shape `out`: stride 0 along broadcast dims.
TensorView broadcast_view(const TensorView &in, const std::vector<int64_t> &out) {
  TensorView v = in;
  std::vector<int64_t> cs = contiguous_strides(in.shape);
  size_t off = out.size() - in.shape.size();
  v.strides.assign(out.size(), 0);
  for (size_t i = 0; i < in.shape.size(); ++i) v.strides[off + i] = (in.shape[i] == 1) ? 0 : cs[i];
  v.shape = out;
  return v;
}

std::vector<std::vector<int64_t>> infer_binary(const std::vector<Arg> &in, const std::vector<Arg> &out, const Attrs &) {
  require_present(in, 0, "binary op");
  require_present(in, 1, "binary op");
  require_dtype(in[0], {ACL_FLOAT, ACL_FLOAT16, ACL_BF16, ACL_INT32}, "x1");
  if (in[1].dtype != in[0].dtype || out[0].dtype != in[0].dtype) refuse("x1, x2 and y must have the same dtype");
  return {broadcast_shapes(in[0].dims, in[1].dims)};
}

enum class BinOp { Add, Sub, Mul };

template <BinOp OP>
void run_binary(const std::vector<TensorView> &in, const std::vector<TensorView> &out, const Attrs &) {
  auto a = gather(broadcast_view(in[0], out[0].shape));
  auto b = gather(broadcast_view(in[1], out[0].shape));
  const bool integral = out[0].dtype == ACL_INT32;
  for (size_t i = 0; i < a.size(); ++i) {
    if (integral) {
      // int32 arithmetic wraps on the device; doubles would lose the low bits of large products.
      int64_t x = (int64_t)a[i], y = (int64_t)b[i];
      uint64_t r = OP == BinOp::Add   ? (uint64_t)x + (uint64_t)y
                   : OP == BinOp::Sub ? (uint64_t)x - (uint64_t)y
                                      : (uint64_t)x * (uint64_t)y;
      a[i] = (double)(int32_t)(uint32_t)r;
    } else {
      a[i] = OP == BinOp::Add ? a[i] + b[i] : OP == BinOp::Sub ? a[i] - b[i] : a[i] * b[i];
    }
  }
  scatter(out[0], a);
}

// ---- elementwise unary activations: y = f(x), same shape and dtype ----

std::vector<std::vector<int64_t>> infer_unary(const std::vector<Arg> &in, const std::vector<Arg> &out, const Attrs &) {
  require_present(in, 0, "unary op");
  require_dtype(in[0], {ACL_FLOAT, ACL_FLOAT16, ACL_BF16}, "x");
  if (out[0].dtype != in[0].dtype) refuse("x and y must have the same dtype");
  return {in[0].dims};
}

double relu(double x) { return x > 0 || std::isnan(x) ? x : 0.0; }
double gelu(double x) { return 0.5 * x * (1.0 + std::erf(x / std::numbers::sqrt2)); }  // exact (erf) form

template <double (*F)(double)>
void run_unary(const std::vector<TensorView> &in, const std::vector<TensorView> &out, const Attrs &) {
  auto x = gather(in[0]);
  for (double &v : x) v = F(v);
  scatter(out[0], x);
}

// ---- Muls (elewise_calculation_ops.h): y = x * attr value (required float), same shape and dtype;
// the float dtypes only (CANN also takes int16/32/64 and complex) ----

std::vector<std::vector<int64_t>> infer_muls(const std::vector<Arg> &in, const std::vector<Arg> &out,
                                             const Attrs &attrs) {
  require_present(in, 0, "Muls");
  require_dtype(in[0], {ACL_FLOAT, ACL_FLOAT16, ACL_BF16}, "Muls x");
  if (out[0].dtype != in[0].dtype) refuse("Muls: y must have x's dtype");
  if (find_attr<float>(attrs, "value") == nullptr) refuse("Muls: required attr value is missing");
  return {in[0].dims};
}

void run_muls(const std::vector<TensorView> &in, const std::vector<TensorView> &out, const Attrs &attrs) {
  const double value = *find_attr<float>(attrs, "value");
  auto x = gather(in[0]);
  for (double &v : x) v *= value;
  scatter(out[0], x);
}

// ---- ReluGrad (nonlinear_fuc_ops.h): backprops = gradients where features > 0, else 0 (features: Relu's
// input or output, either gives the same result); float dtypes, and one shape (no broadcasting) ----

std::vector<std::vector<int64_t>> infer_relu_grad(const std::vector<Arg> &in, const std::vector<Arg> &out,
                                                  const Attrs &) {
  require_present(in, 0, "ReluGrad");
  require_present(in, 1, "ReluGrad");
  require_dtype(in[0], {ACL_FLOAT, ACL_FLOAT16, ACL_BF16}, "ReluGrad gradients");
  if (in[1].dtype != in[0].dtype || out[0].dtype != in[0].dtype)
    refuse("ReluGrad: gradients, features and backprops must have the same dtype");
  if (in[1].dims != in[0].dims)
    refuse("ReluGrad: gradients " + shape_str(in[0].dims) + " and features " + shape_str(in[1].dims) + " differ");
  return {in[0].dims};
}

void run_relu_grad(const std::vector<TensorView> &in, const std::vector<TensorView> &out, const Attrs &) {
  auto g = gather(in[0]), f = gather(in[1]);
  for (size_t i = 0; i < g.size(); ++i)
    if (!(f[i] > 0)) g[i] = 0.0;
  scatter(out[0], g);
}

// ---- MatMul: y = op(x1) @ op(x2) (+ bias), 2-D; inputs x1, x2, bias?, offset_w? ----

std::vector<std::vector<int64_t>> infer_matmul(const std::vector<Arg> &in, const std::vector<Arg> &out,
                                               const Attrs &attrs) {
  require_present(in, 0, "MatMul");
  require_present(in, 1, "MatMul");
  require_dtype(in[0], {ACL_FLOAT, ACL_FLOAT16, ACL_BF16}, "MatMul x1");
  if (in[1].dtype != in[0].dtype) refuse("MatMul: x1 and x2 must have the same dtype");
  // The cube unit accumulates in fp32, so fp16/bf16 inputs may produce an fp32 output.
  if (out[0].dtype != in[0].dtype && out[0].dtype != ACL_FLOAT) refuse("MatMul: y must have x1's dtype or float32");
  if (in[0].dims.size() != 2 || in[1].dims.size() != 2) refuse("MatMul: x1 and x2 must be 2-D");
  bool t1 = attr_bool(attrs, "transpose_x1", false), t2 = attr_bool(attrs, "transpose_x2", false);
  int64_t m = t1 ? in[0].dims[1] : in[0].dims[0], k1 = t1 ? in[0].dims[0] : in[0].dims[1];
  int64_t k2 = t2 ? in[1].dims[1] : in[1].dims[0], n = t2 ? in[1].dims[0] : in[1].dims[1];
  if (k1 != k2) refuse("MatMul: inner dimensions differ: " + shape_str(in[0].dims) + " x " + shape_str(in[1].dims));
  if (in.size() > 2 && in[2].present) {
    if (in[2].dims.size() != 1 || in[2].dims[0] != n) refuse("MatMul: bias must be 1-D of size N");
    if (in[2].dtype != out[0].dtype && in[2].dtype != in[0].dtype) refuse("MatMul: bias dtype mismatch");
  }
  if (in.size() > 3 && in[3].present) refuse("MatMul: offset_w (quantization) is not supported");
  return {{m, n}};
}

void run_matmul(const std::vector<TensorView> &in, const std::vector<TensorView> &out, const Attrs &attrs) {
  bool t1 = attr_bool(attrs, "transpose_x1", false), t2 = attr_bool(attrs, "transpose_x2", false);
  auto logical = [](TensorView v, bool transposed) {
    if (transposed) {
      std::swap(v.shape[0], v.shape[1]);
      std::swap(v.strides[0], v.strides[1]);
    }
    return v;
  };
  TensorView a = logical(in[0], t1), b = logical(in[1], t2);
  const int64_t m = a.shape[0], k = a.shape[1], n = b.shape[1];
  auto x = gather(a), w = gather(b);
  std::vector<double> bias;
  if (in.size() > 2 && in[2].data != nullptr) bias = gather(in[2]);
  std::vector<double> y((size_t)(m * n));
  for (int64_t i = 0; i < m; ++i)
    for (int64_t j = 0; j < n; ++j) {
      double acc = bias.empty() ? 0.0 : bias[(size_t)j];
      for (int64_t p = 0; p < k; ++p) acc += x[(size_t)(i * k + p)] * w[(size_t)(p * n + j)];
      y[(size_t)(i * n + j)] = acc;
    }
  scatter(out[0], y);
}

// ---- Cast: y = x converted to attr dst_type (float -> int truncates, as the device does) ----

bool castable(aclDataType t) {
  switch (t) {
    case ACL_FLOAT:
    case ACL_FLOAT16:
    case ACL_BF16:
    case ACL_DOUBLE:
    case ACL_INT32:
    case ACL_INT64:
    case ACL_INT8:
    case ACL_UINT8:
    case ACL_BOOL: return true;
    default: return false;
  }
}

std::vector<std::vector<int64_t>> infer_cast(const std::vector<Arg> &in, const std::vector<Arg> &out,
                                             const Attrs &attrs) {
  require_present(in, 0, "Cast");
  int64_t dst;
  auto it = attrs.find("dst_type");
  if (it == attrs.end()) refuse("Cast: required attr dst_type is missing");
  if (auto *i = std::get_if<int64_t>(&it->second))
    dst = *i;
  else if (auto *d = std::get_if<aclDataType>(&it->second))
    dst = *d;
  else
    refuse("Cast: attr dst_type must be an int");
  if (!castable(in[0].dtype)) refuse("Cast: unsupported source dtype");
  if (!castable((aclDataType)dst)) refuse("Cast: unsupported dst_type " + std::to_string(dst));
  if (out[0].dtype != (aclDataType)dst) refuse("Cast: y's dtype differs from dst_type");
  return {in[0].dims};
}

void run_cast(const std::vector<TensorView> &in, const std::vector<TensorView> &out, const Attrs &) {
  scatter(out[0], gather(in[0]));
}

// ---- ReduceSumD: y = sum of x over attr axes (list-int; empty = all), attr keep_dims ----

std::vector<int64_t> normalized_axes(const Attrs &attrs, size_t rank) {
  const auto *axes = find_attr<std::vector<int64_t>>(attrs, "axes");
  if (axes == nullptr) refuse("ReduceSumD: required attr axes is missing");
  std::vector<int64_t> r;
  for (int64_t a : *axes) {
    int64_t x = a < 0 ? a + (int64_t)rank : a;
    if (x < 0 || x >= (int64_t)rank) refuse("ReduceSumD: axis " + std::to_string(a) + " out of range");
    if (std::find(r.begin(), r.end(), x) != r.end()) refuse("ReduceSumD: repeated axis");
    r.push_back(x);
  }
  if (r.empty())
    for (size_t i = 0; i < rank; ++i) r.push_back((int64_t)i);
  std::sort(r.begin(), r.end());
  return r;
}

std::vector<std::vector<int64_t>> infer_reduce_sum(const std::vector<Arg> &in, const std::vector<Arg> &out,
                                                   const Attrs &attrs) {
  require_present(in, 0, "ReduceSumD");
  require_dtype(in[0], {ACL_FLOAT, ACL_FLOAT16, ACL_BF16, ACL_INT32}, "ReduceSumD x");
  if (out[0].dtype != in[0].dtype) refuse("ReduceSumD: y must have x's dtype");
  auto axes = normalized_axes(attrs, in[0].dims.size());
  bool keep = attr_bool(attrs, "keep_dims", false);
  std::vector<int64_t> shape;
  for (size_t i = 0; i < in[0].dims.size(); ++i) {
    bool reduced = std::binary_search(axes.begin(), axes.end(), (int64_t)i);
    if (!reduced)
      shape.push_back(in[0].dims[i]);
    else if (keep)
      shape.push_back(1);
  }
  return {shape};
}

void run_reduce_sum(const std::vector<TensorView> &in, const std::vector<TensorView> &out, const Attrs &attrs) {
  const TensorView &x = in[0];
  auto axes = normalized_axes(attrs, x.shape.size());
  // Permute the view so the reduced axes come last: each output element is then one contiguous run.
  TensorView p = x;
  p.shape.clear();
  p.strides.clear();
  int64_t run = 1;
  for (int pass = 0; pass < 2; ++pass)
    for (size_t i = 0; i < x.shape.size(); ++i) {
      bool reduced = std::binary_search(axes.begin(), axes.end(), (int64_t)i);
      if (reduced != (pass == 1)) continue;
      p.shape.push_back(x.shape[i]);
      p.strides.push_back(x.strides[i]);
      if (reduced) run *= x.shape[i];
    }
  auto v = gather(p);
  std::vector<double> y((size_t)out[0].numel(), 0.0);
  for (size_t o = 0; o < y.size(); ++o) {
    double acc = 0.0;
    for (int64_t r = 0; r < run; ++r) acc += v[o * (size_t)run + (size_t)r];
    y[o] = acc;
  }
  scatter(out[0], y);
}

const std::map<std::string, OpDef> &registry() {
  static const std::map<std::string, OpDef> ops = {
      {"Add", {2, 2, 1, infer_binary, run_binary<BinOp::Add>}},
      {"Sub", {2, 2, 1, infer_binary, run_binary<BinOp::Sub>}},
      {"Mul", {2, 2, 1, infer_binary, run_binary<BinOp::Mul>}},
      {"MatMul", {2, 4, 1, infer_matmul, run_matmul}},
      {"Cast", {1, 1, 1, infer_cast, run_cast}},
      {"ReduceSumD", {1, 1, 1, infer_reduce_sum, run_reduce_sum}},
      {"Relu", {1, 1, 1, infer_unary, run_unary<relu>}},
      {"Gelu", {1, 1, 1, infer_unary, run_unary<gelu>}},
      {"Muls", {1, 1, 1, infer_muls, run_muls}},
      {"ReluGrad", {2, 2, 1, infer_relu_grad, run_relu_grad}},
  };
  return ops;
}

const OpDef &find_op(const char *opType) {
  if (opType == nullptr) refuse("opType is NULL");
  auto it = registry().find(opType);
  if (it == registry().end()) refuse(std::string("op type not found: ") + opType, ACL_ERROR_OP_NOT_FOUND);
  return it->second;
}

// Formats whose bytes are not row-major (5HD, fractal) would need a layout transform the stand-in
// does not implement.
bool plain_format(aclFormat f) {
  switch (f) {
    case ACL_FORMAT_NC1HWC0:
    case ACL_FORMAT_FRACTAL_Z:
    case ACL_FORMAT_NC1HWC0_C04:
    case ACL_FORMAT_FRACTAL_NZ:
    case ACL_FORMAT_NDC1HWC0:
    case ACL_FRACTAL_Z_3D: return false;
    default: return true;
  }
}

Arg read_desc(const aclTensorDesc *d, const char *what, int i, bool may_be_absent) {
  std::string name = std::string(what) + " desc " + std::to_string(i);
  if (d == nullptr || !acl_handle_live(d)) refuse(name + " is NULL or destroyed");
  Arg a;
  a.dtype = d->dtype;
  a.format = d->format;
  a.dims = d->dims;
  if (a.dtype == ACL_DT_UNDEFINED) {
    if (!may_be_absent) refuse(name + " has dtype ACL_DT_UNDEFINED");
    return a;  // an unused optional input
  }
  a.present = true;
  if (dtype_size(a.dtype) == 0) refuse(name + ": unsupported dtype " + std::to_string((int)a.dtype));
  if (!plain_format(a.format)) refuse(name + ": unsupported format " + std::to_string((int)a.format));
  return a;
}

bool unknown_shape(const std::vector<int64_t> &d) { return !shape_known(d); }

// Is the (possibly dynamic) desc shape `desc` compatible with the inferred shape?
bool shape_fits(const std::vector<int64_t> &desc, const std::vector<int64_t> &inferred) {
  if (desc.size() == 1 && desc[0] == -2) return true;  // unknown rank
  if (desc.size() != inferred.size()) return false;
  for (size_t i = 0; i < desc.size(); ++i)
    if (desc[i] != -1 && desc[i] != inferred[i]) return false;
  return true;
}

struct Checked {
  const OpDef *op;
  std::vector<Arg> in, out;
  std::vector<std::vector<int64_t>> out_shapes;
  Attrs attrs;
};

Checked check_descs(const char *opType, int numInputs, const aclTensorDesc *const inputDesc[], int numOutputs,
                    const aclTensorDesc *const outputDesc[], const aclopAttr *attr) {
  Checked c;
  c.op = &find_op(opType);
  if (numInputs < 0 || numOutputs < 0 || (numInputs > 0 && inputDesc == nullptr) ||
      (numOutputs > 0 && outputDesc == nullptr))
    refuse("bad input/output counts or NULL desc arrays");
  if (numInputs < c.op->min_inputs || numInputs > c.op->max_inputs)
    refuse(std::string(opType) + ": wrong number of inputs " + std::to_string(numInputs));
  if (numOutputs != c.op->num_outputs)
    refuse(std::string(opType) + ": wrong number of outputs " + std::to_string(numOutputs));
  if (attr != nullptr) {
    if (!attr_live(attr)) refuse("attr is destroyed or not an aclopAttr");
    c.attrs = attr->values;
  }
  for (int i = 0; i < numInputs; ++i) c.in.push_back(read_desc(inputDesc[i], "input", i, true));
  for (int i = 0; i < numOutputs; ++i) c.out.push_back(read_desc(outputDesc[i], "output", i, false));
  for (const Arg &a : c.in)
    if (a.present && !shape_known(a.dims)) refuse("input shapes must be known: " + shape_str(a.dims));
  c.out_shapes = c.op->infer(c.in, c.out, c.attrs);
  for (size_t i = 0; i < c.out.size(); ++i)
    if (!shape_fits(c.out[i].dims, c.out_shapes[i]))
      refuse(std::string(opType) + ": output " + std::to_string(i) + " desc shape " + shape_str(c.out[i].dims) +
             " differs from the op's " + shape_str(c.out_shapes[i]));
  return c;
}

aclError report(const Refused &r) {
  set_error_message(r.why);
  return r.code;
}

}  // namespace

NodeCheck check_node(const std::string &opType, const std::vector<Arg> &in, const std::vector<Arg> &out,
                     const Attrs &attrs) {
  NodeCheck r;
  try {
    const OpDef &op = find_op(opType.c_str());
    if ((int)in.size() < op.min_inputs || (int)in.size() > op.max_inputs || (int)out.size() != op.num_outputs)
      refuse(opType + ": wrong number of inputs or outputs");
    r.out_shapes = op.infer(in, out, attrs);
    for (size_t i = 0; i < out.size(); ++i)
      if (out[i].dims != r.out_shapes[i])
        refuse(opType + ": output " + std::to_string(i) + " shape " + shape_str(out[i].dims) + " differs from the op's " +
               shape_str(r.out_shapes[i]));
    r.kernel = op.kernel;
  } catch (const Refused &e) {
    r.code = e.code;
    r.why = e.why;
  }
  return r;
}

bool op_registered(const char *opType) { return opType != nullptr && registry().count(opType) != 0; }

aclError check(const char *opType, int numInputs, const aclTensorDesc *const inputDesc[], int numOutputs,
               const aclTensorDesc *const outputDesc[], const aclopAttr *attr) {
  try {
    check_descs(opType, numInputs, inputDesc, numOutputs, outputDesc, attr);
    return ACL_SUCCESS;
  } catch (const Refused &r) {
    return report(r);
  }
}

// The single-op dump's view of an aclop's tensors (contiguous; an unused optional input is left out).
std::vector<opdump::Tensor> dumped(const std::vector<TensorView> &views) {
  std::vector<opdump::Tensor> out;
  for (const TensorView &v : views)
    if (v.data != nullptr || !v.shape.empty())
      out.push_back({v.dtype, v.format, v.shape, v.data, (uint64_t)numel(v.shape) * dtype_size(v.dtype)});
  return out;
}

// The single-op dump of one aclop execution (dump_op_switch "on"): its inputs before the kernel and its outputs
// after it, each synchronous (cann_dump.md §9). The file's op type and op name are both the op type: the stand-in
// has no GE single-op model whose node name CANN would use.
void dump_op(const char *opType, uint32_t task, bool inputs, const std::vector<TensorView> &views,
             aclrtStream stream) {
  const std::vector<opdump::Tensor> none, tensors = dumped(views);
  int rc = opdump::dump_tensors(opType, opType, task, inputs ? tensors : none, inputs ? none : tensors, stream);
  if (rc != 0) std::fprintf(stderr, "[fake_cann] %s: single-op dump failed (%d)\n", opType, rc);
}

aclError execute(const char *opType, int numInputs, const aclTensorDesc *const inputDesc[],
                 const aclDataBuffer *const inputs[], int numOutputs, const aclTensorDesc *const outputDesc[],
                 aclDataBuffer *const outputs[], const aclopAttr *attr, aclrtStream stream,
                 aclTensorDesc *const *updatableOutputDesc, const void *caller) {
  try {
    Checked c = check_descs(opType, numInputs, inputDesc, numOutputs, outputDesc, attr);
    if ((numInputs > 0 && inputs == nullptr) || (numOutputs > 0 && outputs == nullptr))
      refuse("NULL data buffer array");
    std::vector<TensorView> in, out;
    for (int i = 0; i < numInputs; ++i) {
      const Arg &a = c.in[(size_t)i];
      const aclDataBuffer *b = inputs[i];
      if (!a.present) {
        in.push_back(TensorView{});  // unused optional input: NULL buffer or a buffer over NULL
        continue;
      }
      uint64_t need = (uint64_t)numel(a.dims) * dtype_size(a.dtype);
      if (b == nullptr || !acl_handle_live(b)) refuse("input buffer " + std::to_string(i) + " is NULL or destroyed");
      if (b->size < need || (need > 0 && b->data == nullptr))
        refuse("input buffer " + std::to_string(i) + " holds " + std::to_string(b->size) + " bytes, its desc needs " +
               std::to_string(need));
      in.push_back(contiguous_view(a.dtype, a.dims, b->data));
    }
    for (int i = 0; i < numOutputs; ++i) {
      const Arg &a = c.out[(size_t)i];
      const std::vector<int64_t> &shape = c.out_shapes[(size_t)i];
      aclDataBuffer *b = outputs[i];
      uint64_t need = (uint64_t)numel(shape) * dtype_size(a.dtype);
      if (b == nullptr || !acl_handle_live(b)) refuse("output buffer " + std::to_string(i) + " is NULL or destroyed");
      if (b->size < need || (need > 0 && b->data == nullptr))
        refuse("output buffer " + std::to_string(i) + " holds " + std::to_string(b->size) +
               " bytes, the output needs " + std::to_string(need));
      out.push_back(contiguous_view(a.dtype, shape, b->data));
    }
    // The kernel's args, TBE style: the inputs' device addresses (0: an unused optional one), then the outputs'.
    std::vector<uint64_t> addresses;
    for (const TensorView &v : in) addresses.push_back(reinterpret_cast<uint64_t>(v.data));
    for (const TensorView &v : out) addresses.push_back(reinterpret_cast<uint64_t>(v.data));
    const opdump::Switch sw = opdump::op_switch();  // read once per call
    const uint32_t task = sw.on ? opdump::next_task_id() : 0;
    if (sw.on && sw.inputs) dump_op(opType, task, true, in, stream);
    const std::vector<TensorView> dumped_out = sw.on && sw.outputs ? out : std::vector<TensorView>{};
    KernelFn kernel = c.op->kernel;
    Attrs attrs = std::move(c.attrs);
    // Through libruntime's exported launch API, as the real ACL launches an op's kernel (fakecann/op_task.h).
    int e = launch_op_task(
        stream, addresses,
        [kernel, in = std::move(in), out = std::move(out), attrs = std::move(attrs)] { kernel(in, out, attrs); });
    if (e != 0) return e;
    log_kernel_launch(opType, caller);
    if (sw.on && sw.outputs) dump_op(opType, task, false, dumped_out, stream);
    // Dynamic shapes: the V2 entry points report the real output shapes through the descs.
    if (updatableOutputDesc != nullptr)
      for (int i = 0; i < numOutputs; ++i)
        if (unknown_shape(updatableOutputDesc[i]->dims)) updatableOutputDesc[i]->dims = c.out_shapes[(size_t)i];
    return ACL_SUCCESS;
  } catch (const Refused &r) {
    return report(r);
  }
}

}  // namespace fakecann::aclop

using fakecann::aclop::attr_live;

namespace {

aclError set_attr(aclopAttr *attr, const char *name, AclAttrValue v) {
  if (attr == nullptr || name == nullptr || !attr_live(attr)) return ACL_ERROR_INVALID_PARAM;
  attr->values[name] = std::move(v);
  return ACL_SUCCESS;
}

template <typename T, typename Src>
aclError set_list(aclopAttr *attr, const char *name, int n, const Src *values) {
  if (n < 0 || (n > 0 && values == nullptr)) return ACL_ERROR_INVALID_PARAM;
  return set_attr(attr, name, T(values, values + n));
}

}  // namespace

extern "C" {

aclopAttr *aclopCreateAttr(void) {
  auto *a = new aclopAttr;
  std::lock_guard<std::mutex> lk(fakecann::aclop::g_attr_mu);
  fakecann::aclop::g_attrs->insert(a);
  return a;
}

void aclopDestroyAttr(const aclopAttr *attr) {
  {
    std::lock_guard<std::mutex> lk(fakecann::aclop::g_attr_mu);
    if (attr == nullptr || fakecann::aclop::g_attrs->erase(attr) == 0) return;
  }
  delete attr;
}

aclError aclopSetAttrBool(aclopAttr *attr, const char *attrName, uint8_t attrValue) {
  return set_attr(attr, attrName, attrValue != 0);
}
aclError aclopSetAttrInt(aclopAttr *attr, const char *attrName, int64_t attrValue) {
  return set_attr(attr, attrName, attrValue);
}
aclError aclopSetAttrFloat(aclopAttr *attr, const char *attrName, float attrValue) {
  return set_attr(attr, attrName, attrValue);
}
aclError aclopSetAttrString(aclopAttr *attr, const char *attrName, const char *attrValue) {
  if (attrValue == nullptr) return ACL_ERROR_INVALID_PARAM;
  return set_attr(attr, attrName, std::string(attrValue));
}
aclError aclopSetAttrDataType(aclopAttr *attr, const char *attrName, aclDataType attrValue) {
  return set_attr(attr, attrName, attrValue);
}
aclError aclopSetAttrListInt(aclopAttr *attr, const char *attrName, int numValues, const int64_t *values) {
  return set_list<std::vector<int64_t>>(attr, attrName, numValues, values);
}
aclError aclopSetAttrListFloat(aclopAttr *attr, const char *attrName, int numValues, const float *values) {
  return set_list<std::vector<float>>(attr, attrName, numValues, values);
}
aclError aclopSetAttrListBool(aclopAttr *attr, const char *attrName, int numValues, const uint8_t *values) {
  return set_list<std::vector<uint8_t>>(attr, attrName, numValues, values);
}

aclError aclopExecute(const char *opType, int numInputs, const aclTensorDesc *const inputDesc[],
                      const aclDataBuffer *const inputs[], int numOutputs, const aclTensorDesc *const outputDesc[],
                      aclDataBuffer *const outputs[], const aclopAttr *attr, aclrtStream stream) {
  return fakecann::aclop::execute(opType, numInputs, inputDesc, inputs, numOutputs, outputDesc, outputs, attr, stream,
                                  nullptr, __builtin_return_address(0));
}

aclError aclopExecuteV2(const char *opType, int numInputs, aclTensorDesc *inputDesc[], aclDataBuffer *inputs[],
                        int numOutputs, aclTensorDesc *outputDesc[], aclDataBuffer *outputs[], aclopAttr *attr,
                        aclrtStream stream) {
  return fakecann::aclop::execute(opType, numInputs, inputDesc, inputs, numOutputs, outputDesc, outputs, attr, stream,
                                  outputDesc, __builtin_return_address(0));
}

}  // extern "C"
