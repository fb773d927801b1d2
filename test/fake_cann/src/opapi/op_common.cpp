// Shared phase-1 checks, view helpers and the phase-1 wrapper of libopapi's ops.
#include "op_common.h"

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <limits>
#include <optional>
#include <sstream>

#include "fakecann/call_counters.h"
#include "fakecann/stream.h"

namespace fakecann::ops {

void fail(const std::string &why) { throw ParamError{ACLNN_ERR_PARAM_INVALID, why}; }
void fail_tiling(const std::string &why) { throw ParamError{ACLNN_ERR_INNER_TILING_ERROR, why}; }

namespace {

[[noreturn]] void null_arg(const char *name) {
  throw ParamError{ACLNN_ERR_PARAM_NULLPTR, std::string(name) + " is NULL"};
}

void require_live(const void *p, nn::Kind kind, const char *name) {
  if (!nn::live(p, kind)) fail(std::string(name) + " is not a live handle (destroyed or never created)");
}

void require_dtype(const TensorView &v, const char *name, DtypeSet allowed) {
  bool ok = v.dtype >= 0 && v.dtype < 64 && (allowed >> v.dtype & 1) != 0;
  if (!ok) fail(std::string(name) + ": dtype " + std::to_string(v.dtype) + " is not supported by this op");
}

// Test-only planted bug: FAKE_CANN_PERTURB_OP=<OpName> (e.g. "Add", read at each phase 1) makes that op
// scale every floating-point output by 1.001 after computing it, so tools that compare dumps against a
// reference have a known-wrong kernel to find. Unset in normal runs.
bool perturbed(const char *op) {
  const char *p = std::getenv("FAKE_CANN_PERTURB_OP");
  return p != nullptr && std::strcmp(p, op) == 0;
}

// `kernel`, then `change` on the values of each floating-point output view, in slot order, until it returns false.
nn::Kernel then_outputs(nn::Kernel kernel, std::function<bool(Values &)> change) {
  return [kernel = std::move(kernel), change = std::move(change)](const Slots &slots) {
    kernel(slots);
    for (const Slot &s : slots) {
      if (s.io == Io::Input || !s.present) continue;
      for (const TensorView &v : s.views) {
        if (!dtype_is_float(v.dtype)) continue;
        Values x = gather(v);
        const bool more = change(x);
        scatter(v, x);
        if (!more) return;
      }
    }
  };
}

nn::Kernel with_perturbation(nn::Kernel kernel) {
  return then_outputs(std::move(kernel), [](Values &x) {
    for (double &e : x) e *= 1.001;
    return true;
  });
}

// Test-only planted bug: FAKE_CANN_NAN_OP=<OpName> (read at each phase 1, so a host can plant it for one call) makes
// that op write a quiet NaN into the first element of its first floating-point output after computing it: a kernel
// that computes wrongly from finite inputs, for tools that look for where non-finite values began. Unset normally.
bool nan_planted(const char *op) {
  const char *p = std::getenv("FAKE_CANN_NAN_OP");
  return p != nullptr && std::strcmp(p, op) == 0;
}

nn::Kernel with_nan(nn::Kernel kernel) {
  return then_outputs(std::move(kernel), [](Values &x) {
    if (x.empty()) return true;
    x[0] = std::numeric_limits<double>::quiet_NaN();
    return false;
  });
}

// Test-only planted bug: FAKE_CANN_PERTURB_ELEMENT=<OpName>[:<index>] (read at each phase 1) multiplies one element
// (index in C order, default 0) of that op's first floating-point output by 1.01 after computing it: a kernel wrong by
// a relative 1e-2 in one place, for tools that judge each kernel against a reference. A malformed index fails phase 1;
// an index past that output changes nothing and says so on stderr. Unset normally.
std::optional<size_t> perturbed_element(const char *op) {
  const char *p = std::getenv("FAKE_CANN_PERTURB_ELEMENT");
  if (p == nullptr) return std::nullopt;
  const std::string v(p);
  const size_t colon = v.find(':');
  if (v.compare(0, colon, op) != 0 || (colon == std::string::npos ? v.size() : colon) != std::strlen(op))
    return std::nullopt;
  if (colon == std::string::npos) return 0;
  const std::string index = v.substr(colon + 1);
  char *end = nullptr;
  const unsigned long long at = std::strtoull(index.c_str(), &end, 10);
  if (index.empty() || index[0] == '-' || *end != '\0')
    fail("FAKE_CANN_PERTURB_ELEMENT='" + v + "': the index after ':' is not a non-negative integer");
  return static_cast<size_t>(at);
}

nn::Kernel with_element_perturbed(nn::Kernel kernel, const char *op, size_t index) {
  return then_outputs(std::move(kernel), [op = std::string(op), index](Values &x) {
    if (index < x.size())
      x[index] *= 1.01;
    else
      std::fprintf(stderr,
                   "fake_cann: FAKE_CANN_PERTURB_ELEMENT: %s's first floating-point output has %zu elements, "
                   "index %zu changes nothing\n",
                   op.c_str(), x.size(), index);
    return false;
  });
}

}  // namespace

const TensorView &tensor(const aclTensor *t, const char *name, DtypeSet allowed) {
  if (t == nullptr) null_arg(name);
  require_live(t, nn::Kind::Tensor, name);
  require_dtype(t->view, name, allowed);
  return t->view;
}

const TensorView &tensor(const aclTensor *t, const char *name, DtypeSet allowed, const Shape &shape) {
  const TensorView &v = tensor(t, name, allowed);
  require_shape(v, shape, name);
  return v;
}

const TensorView *optional_tensor(const aclTensor *t, const char *name, DtypeSet allowed) {
  return t == nullptr ? nullptr : &tensor(t, name, allowed);
}

const TensorView *optional_tensor(const aclTensor *t, const char *name, DtypeSet allowed, const Shape &shape,
                                  bool required) {
  return t == nullptr && !required ? nullptr : &tensor(t, name, allowed, shape);
}

double scalar(const aclScalar *s, const char *name) {
  if (s == nullptr) null_arg(name);
  require_live(s, nn::Kind::Scalar, name);
  if (!dtype_is_numeric(s->dtype)) fail(std::string(name) + ": scalar dtype is not supported");
  return s->value;
}

std::vector<double> scalar_list(const aclScalarList *l, const char *name) {
  if (l == nullptr) null_arg(name);
  require_live(l, nn::Kind::ScalarList, name);
  std::vector<double> out;
  for (const aclScalar *s : l->items) out.push_back(scalar(s, name));
  return out;
}

const std::vector<int64_t> &int_array(const aclIntArray *a, const char *name) {
  if (a == nullptr) null_arg(name);
  require_live(a, nn::Kind::IntArray, name);
  return a->values;
}

std::vector<bool> bool_array(const aclBoolArray *a, const char *name) {
  if (a == nullptr) null_arg(name);
  require_live(a, nn::Kind::BoolArray, name);
  return a->values;
}

std::vector<const TensorView *> tensor_list(const aclTensorList *l, const char *name, DtypeSet allowed) {
  if (l == nullptr) null_arg(name);
  require_live(l, nn::Kind::TensorList, name);
  std::vector<const TensorView *> out;
  for (const aclTensor *t : l->items) out.push_back(&tensor(t, name, allowed));
  return out;
}

std::string show(const Shape &s) {
  std::ostringstream os;
  os << '[';
  for (size_t i = 0; i < s.size(); ++i) os << (i ? "," : "") << s[i];
  os << ']';
  return os.str();
}

void require_shape(const TensorView &v, const Shape &want, const char *name) {
  if (v.shape != want) fail(std::string(name) + ": shape " + show(v.shape) + ", expected " + show(want));
}

double round_to(aclDataType t, double v) {
  unsigned char buf[16] = {};
  store_element(buf, t, 0, v);
  return load_element(buf, t, 0);
}

int64_t wrap_dim(int64_t dim, size_t rank) {
  int64_t r = (int64_t)std::max<size_t>(rank, 1);  // a 0-d tensor accepts dim 0 and -1, as in torch
  if (dim < -r || dim >= r) fail("dim " + std::to_string(dim) + " out of range for rank " + std::to_string(rank));
  return dim < 0 ? dim + r : dim;
}

Shape broadcast_shape(const Shape &a, const Shape &b) {
  Shape out(std::max(a.size(), b.size()), 1);
  for (size_t i = 0; i < out.size(); ++i) {
    int64_t x = i < out.size() - a.size() ? 1 : a[i - (out.size() - a.size())];
    int64_t y = i < out.size() - b.size() ? 1 : b[i - (out.size() - b.size())];
    if (x != y && x != 1 && y != 1) fail("shapes " + show(a) + " and " + show(b) + " do not broadcast");
    out[i] = x == 1 ? y : x;
  }
  return out;
}

int64_t numel(const Shape &s) {
  int64_t n = 1;
  for (int64_t d : s) n *= d;
  return n;
}

TensorView expand(TensorView v, const Shape &to) {
  size_t lead = to.size() - v.shape.size();
  Shape strides(to.size(), 0);
  for (size_t i = 0; i < v.shape.size(); ++i)
    strides[lead + i] = v.shape[i] == to[lead + i] ? v.strides[i] : 0;  // size-1 dims repeat
  v.shape = to;
  v.strides = std::move(strides);
  return v;
}

TensorView move_dim_last(TensorView v, int64_t dim) {
  if (v.shape.empty()) return v;
  std::rotate(v.shape.begin() + dim, v.shape.begin() + dim + 1, v.shape.end());
  std::rotate(v.strides.begin() + dim, v.strides.begin() + dim + 1, v.strides.end());
  return v;
}

TensorView unsqueeze(TensorView v, size_t pos) {
  v.shape.insert(v.shape.begin() + (ptrdiff_t)pos, 1);
  v.strides.insert(v.strides.begin() + (ptrdiff_t)pos, 0);
  return v;
}

std::vector<size_t> reduce_index(const Shape &shape, const std::vector<int64_t> &dims, Shape *reduced) {
  Shape kept_stride(shape.size(), 0);
  reduced->clear();
  size_t stride = 1;
  for (size_t d = shape.size(); d-- > 0;) {
    if (std::find(dims.begin(), dims.end(), (int64_t)d) != dims.end()) continue;
    kept_stride[d] = (int64_t)stride;
    stride *= (size_t)shape[d];
  }
  for (size_t d = 0; d < shape.size(); ++d)
    reduced->push_back(std::find(dims.begin(), dims.end(), (int64_t)d) != dims.end() ? 1 : shape[d]);
  std::vector<size_t> map((size_t)numel(shape));
  Shape idx(shape.size(), 0);
  size_t out = 0;
  for (size_t i = 0; i < map.size(); ++i) {
    map[i] = out;
    for (size_t d = shape.size(); d-- > 0;) {  // odometer over the multi-index
      if (++idx[d] < shape[d]) {
        out += (size_t)kept_stride[d];
        break;
      }
      out -= (size_t)(kept_stride[d] * (shape[d] - 1));
      idx[d] = 0;
    }
  }
  return map;
}

uint64_t workspace_for(int64_t elements) {
  uint64_t bytes = (uint64_t)std::max<int64_t>(elements, 1) * sizeof(float);
  return (bytes + 511) / 512 * 512;
}

aclnnStatus phase1(const char *op, uint64_t *workspaceSize, aclOpExecutor **executor,
                   const std::function<ExecutorSpec()> &build) {
  count_call(CallKind::Phase1);
  try {
    ExecutorSpec spec = build();
    spec.op = op;
    if (perturbed(op)) spec.kernel = with_perturbation(std::move(spec.kernel));
    if (nan_planted(op)) spec.kernel = with_nan(std::move(spec.kernel));
    if (std::optional<size_t> at = perturbed_element(op))
      spec.kernel = with_element_perturbed(std::move(spec.kernel), op, *at);
    return nn::create_executor(std::move(spec), workspaceSize, executor);
  } catch (const ParamError &e) {
    set_error_message(std::string("aclnn") + op + "GetWorkspaceSize: " + e.message);
    return e.code;
  } catch (const std::exception &e) {
    set_error_message(std::string("aclnn") + op + "GetWorkspaceSize: internal error: " + e.what());
    return ACLNN_ERR_INNER;
  }
}

}  // namespace fakecann::ops

// Phase 2 of every op in the spec (uniform: validate the executor, enqueue its kernel).
#include "aclnn_phase2.inc"
