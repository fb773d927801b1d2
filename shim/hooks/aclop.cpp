// aclop: single-op execution by op type (libascendcl's aclopExecute/V2, libacl_op_compiler's
// aclopCompileAndExecute/V2). Tensors come from the descriptor + data buffer pairs (contiguous, shape
// from the descriptor); attributes set with aclopSetAttr* are recorded as named values after the inputs.
#include <map>
#include <mutex>
#include <string>
#include <unordered_map>
#include <vector>

#include "acl/acl.h"
#include "acl/acl_op_compiler.h"
#include "format/naming.h"
#include "shim/capture/capture_call.h"
#include "shim/device/acl_types.h"
#include "shim/device/runtime_api.h"
#include "shim/hooks/hook.h"

using namespace msprobe::shim;
using msprobe::format::ValueArg;
namespace vt = msprobe::format::value_type;  // the dump's value types

namespace {

// Attributes by aclopAttr handle, in the order they were first set.
class AttrTable {
 public:
  void create(const void *a) {
    std::lock_guard<std::mutex> lk(mu_);
    attrs_[a].clear();
  }
  void erase(const void *a) {
    std::lock_guard<std::mutex> lk(mu_);
    attrs_.erase(a);
  }
  void set(const void *a, const char *name, ValueArg v) {
    if (a == nullptr || name == nullptr) return;
    v.name = name;
    std::lock_guard<std::mutex> lk(mu_);
    auto &list = attrs_[a];
    for (ValueArg &old : list)
      if (*old.name == name) {
        old = std::move(v);
        return;
      }
    list.push_back(std::move(v));
  }
  std::vector<ValueArg> get(const void *a) {
    std::lock_guard<std::mutex> lk(mu_);
    auto it = attrs_.find(a);
    return it == attrs_.end() ? std::vector<ValueArg>{} : it->second;
  }

 private:
  std::mutex mu_;
  std::unordered_map<const void *, std::vector<ValueArg>> attrs_;
};

AttrTable &attrs() {
  static auto *t = new AttrTable;
  return *t;
}

// A descriptor + buffer as a contiguous tensor; nullopt for an unused optional input (ACL_DT_UNDEFINED).
std::optional<TensorMeta> tensor_of(const aclTensorDesc *desc, const aclDataBuffer *buf) {
  auto type_fn = runtime::aclGetTensorDescType.get();
  auto format_fn = runtime::aclGetTensorDescFormat.get();
  auto ndims_fn = runtime::aclGetTensorDescNumDims.get();
  auto dim_fn = runtime::aclGetTensorDescDimV2.get();
  auto addr_fn = runtime::aclGetDataBufferAddr.get();
  if (!desc || !type_fn || !format_fn || !ndims_fn || !dim_fn || !addr_fn) return std::nullopt;
  TensorMeta m;
  m.dtype = type_fn(desc);
  if (m.dtype == ACL_DT_UNDEFINED) return std::nullopt;
  m.format = format_fn(desc);
  size_t n = ndims_fn(desc);
  if (n > (size_t)kMaxDims) return std::nullopt;  // includes ACL_UNKNOWN_RANK
  m.ndim = (uint8_t)n;
  for (size_t i = 0; i < n; ++i)
    if (dim_fn(desc, i, &m.shape[i]) != ACL_SUCCESS || m.shape[i] < 0) return std::nullopt;
  int64_t stride = 1;
  for (size_t i = n; i-- > 0;) {
    m.strides[i] = stride;
    stride *= m.shape[i];
  }
  m.data = buf ? addr_fn(buf) : nullptr;
  return m;
}

// Runs `real` inside a capture of op `op_type`: descriptors and buffers before it, outputs after (read then: V2 may
// have updated a dynamic shape); an unused optional tensor (ACL_DT_UNDEFINED) is null.
template <typename Desc, typename Buf, typename ODesc, typename OBuf, typename Real>
aclError capture(const char *op_type, int nin, Desc *const in_desc[], Buf *const in_buf[], int nout,
                 ODesc *const out_desc[], OBuf *const out_buf[], const aclopAttr *attr, aclrtStream stream,
                 Real &&real) {
  if (op_type == nullptr) return real();  // refused by the runtime
  return capture_call(
      op_type, stream,
      [&](KernelLaunch &k) {
        for (int i = 0; i < nin && in_desc && in_buf; ++i) {
          if (auto t = tensor_of(in_desc[i], in_buf[i]))
            k.input_tensor(*t);
          else
            k.input_null();
        }
        for (ValueArg &v : attrs().get(attr)) k.input_value(std::move(v));
      },
      real,
      [&](KernelLaunch &k) {
        for (int i = 0; i < nout && out_desc && out_buf; ++i) {
          if (auto t = tensor_of(out_desc[i], out_buf[i]))
            k.output_tensor(*t);
          else
            k.output_null();
        }
      },
      [](aclError rc) { return rc == ACL_SUCCESS; });
}

}  // namespace

// The hooks of this family, one a line (shim/hooks/hook.h).
#define MSPROBE_ACLOP_HOOKS(X) \
  X(aclopCreateAttr)           \
  X(aclopDestroyAttr)          \
  X(aclopSetAttrBool)          \
  X(aclopSetAttrInt)           \
  X(aclopSetAttrFloat)         \
  X(aclopSetAttrString)        \
  X(aclopSetAttrDataType)      \
  X(aclopSetAttrListInt)       \
  X(aclopSetAttrListFloat)     \
  X(aclopSetAttrListBool)      \
  X(aclopExecute)              \
  X(aclopExecuteV2)            \
  X(aclopCompileAndExecute)    \
  X(aclopCompileAndExecuteV2)
MSPROBE_HOOK_SLOTS(MSPROBE_ACLOP_HOOKS)

MSPROBE_HOOK aclopAttr *aclopCreateAttr(void) {
  auto real = MSPROBE_REAL(aclopCreateAttr);
  aclopAttr *a = real ? real() : nullptr;
  if (a && capture_enabled()) guarded(Problem::DescriptorNotKept, [&] { attrs().create(a); });
  return a;
}

MSPROBE_HOOK void aclopDestroyAttr(const aclopAttr *attr) {
  if (auto real = MSPROBE_REAL(aclopDestroyAttr)) real(attr);
  if (attr) guarded(Problem::DescriptorNotKept, [&] { attrs().erase(attr); });
}

// Each setter forwards, then records the value the runtime accepted.
#define MSPROBE_SET_ATTR_HOOK(fn, T, make_value)                                             \
  MSPROBE_HOOK aclError fn(aclopAttr *attr, const char *attrName, T attrValue) {             \
    auto real = MSPROBE_REAL(fn);                                                            \
    if (!real) return ACL_ERROR_INVALID_PARAM;                                               \
    aclError rc = real(attr, attrName, attrValue);                                           \
    if (rc == ACL_SUCCESS && capture_enabled())                                              \
      guarded(Problem::DescriptorNotKept, [&] { attrs().set(attr, attrName, make_value); }); \
    return rc;                                                                               \
  }
MSPROBE_SET_ATTR_HOOK(aclopSetAttrBool, uint8_t, (ValueArg{vt::kBool, attrValue != 0}))
MSPROBE_SET_ATTR_HOOK(aclopSetAttrInt, int64_t, (ValueArg{vt::kInt, attrValue}))
MSPROBE_SET_ATTR_HOOK(aclopSetAttrFloat, float, (ValueArg{vt::kFloat, (double)attrValue}))
MSPROBE_SET_ATTR_HOOK(aclopSetAttrString, const char *, (ValueArg{vt::kStr, std::string(attrValue ? attrValue : "")}))
MSPROBE_SET_ATTR_HOOK(aclopSetAttrDataType, aclDataType,
                      (ValueArg{vt::kAclDataType, std::string(msprobe::format::dtype_id(acl_to_dtype(attrValue)))}))
#undef MSPROBE_SET_ATTR_HOOK

#define MSPROBE_SET_LIST_ATTR_HOOK(fn, T, type_name, Elem)                                          \
  MSPROBE_HOOK aclError fn(aclopAttr *attr, const char *attrName, int numValues, const T *values) { \
    auto real = MSPROBE_REAL(fn);                                                                   \
    if (!real) return ACL_ERROR_INVALID_PARAM;                                                      \
    aclError rc = real(attr, attrName, numValues, values);                                          \
    if (rc == ACL_SUCCESS && capture_enabled())                                                     \
      guarded(Problem::DescriptorNotKept, [&] {                                                     \
        std::vector<Elem> v;                                                                        \
        for (int i = 0; i < numValues && values; ++i) v.push_back((Elem)values[i]);                 \
        attrs().set(attr, attrName, ValueArg{type_name, std::move(v)});                             \
      });                                                                                           \
    return rc;                                                                                      \
  }
MSPROBE_SET_LIST_ATTR_HOOK(aclopSetAttrListInt, int64_t, vt::kListInt, int64_t)
MSPROBE_SET_LIST_ATTR_HOOK(aclopSetAttrListFloat, float, vt::kListFloat, double)
MSPROBE_SET_LIST_ATTR_HOOK(aclopSetAttrListBool, uint8_t, vt::kListBool, bool)
#undef MSPROBE_SET_LIST_ATTR_HOOK

MSPROBE_HOOK aclError aclopExecute(const char *opType, int numInputs, const aclTensorDesc *const inputDesc[],
                                   const aclDataBuffer *const inputs[], int numOutputs,
                                   const aclTensorDesc *const outputDesc[], aclDataBuffer *const outputs[],
                                   const aclopAttr *attr, aclrtStream stream) {
  auto real = MSPROBE_REAL(aclopExecute);
  if (!real) return ACL_ERROR_API_NOT_SUPPORT;
  return capture(opType, numInputs, inputDesc, inputs, numOutputs, outputDesc, outputs, attr, stream, [&] {
    return real(opType, numInputs, inputDesc, inputs, numOutputs, outputDesc, outputs, attr, stream);
  });
}

MSPROBE_HOOK aclError aclopExecuteV2(const char *opType, int numInputs, aclTensorDesc *inputDesc[],
                                     aclDataBuffer *inputs[], int numOutputs, aclTensorDesc *outputDesc[],
                                     aclDataBuffer *outputs[], aclopAttr *attr, aclrtStream stream) {
  auto real = MSPROBE_REAL(aclopExecuteV2);
  if (!real) return ACL_ERROR_API_NOT_SUPPORT;
  return capture(opType, numInputs, inputDesc, inputs, numOutputs, outputDesc, outputs, attr, stream, [&] {
    return real(opType, numInputs, inputDesc, inputs, numOutputs, outputDesc, outputs, attr, stream);
  });
}

MSPROBE_HOOK aclError aclopCompileAndExecute(const char *opType, int numInputs, const aclTensorDesc *const inputDesc[],
                                             const aclDataBuffer *const inputs[], int numOutputs,
                                             const aclTensorDesc *const outputDesc[], aclDataBuffer *const outputs[],
                                             const aclopAttr *attr, aclopEngineType engineType,
                                             aclopCompileType compileFlag, const char *opPath, aclrtStream stream) {
  auto real = MSPROBE_REAL(aclopCompileAndExecute);
  if (!real) return ACL_ERROR_API_NOT_SUPPORT;
  return capture(opType, numInputs, inputDesc, inputs, numOutputs, outputDesc, outputs, attr, stream, [&] {
    return real(opType, numInputs, inputDesc, inputs, numOutputs, outputDesc, outputs, attr, engineType, compileFlag,
                opPath, stream);
  });
}

MSPROBE_HOOK aclError aclopCompileAndExecuteV2(const char *opType, int numInputs, aclTensorDesc *inputDesc[],
                                               aclDataBuffer *inputs[], int numOutputs, aclTensorDesc *outputDesc[],
                                               aclDataBuffer *outputs[], aclopAttr *attr, aclopEngineType engineType,
                                               aclopCompileType compileFlag, const char *opPath, aclrtStream stream) {
  auto real = MSPROBE_REAL(aclopCompileAndExecuteV2);
  if (!real) return ACL_ERROR_API_NOT_SUPPORT;
  return capture(opType, numInputs, inputDesc, inputs, numOutputs, outputDesc, outputs, attr, stream, [&] {
    return real(opType, numInputs, inputDesc, inputs, numOutputs, outputDesc, outputs, attr, engineType, compileFlag,
                opPath, stream);
  });
}

MSPROBE_HOOK_FAMILY(MSPROBE_ACLOP_HOOKS, Linked)
