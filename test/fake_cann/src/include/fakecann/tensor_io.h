// How kernels read and write device tensors: a TensorView is a strided view (strides and offset in
// elements, as aclCreateTensor gives them) over device memory. gather() materializes the logical
// elements (row-major order) as doubles; scatter() writes them back with rounding to the dtype.
// Both run on a stream worker and throw KernelError when the view leaves its allocation.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include "acl/acl_base.h"
#include "fakecann/export.h"

namespace fakecann {

struct TensorView {
  aclDataType dtype = ACL_DT_UNDEFINED;
  aclFormat format = ACL_FORMAT_ND;
  std::vector<int64_t> shape;
  std::vector<int64_t> strides;  // elements
  int64_t offset = 0;            // elements, from `data`
  void *data = nullptr;          // device address of the storage base
  std::vector<int64_t> storage_shape;

  FAKECANN_API int64_t numel() const;
  FAKECANN_API bool is_contiguous() const;
  FAKECANN_API std::string describe() const;
};

FAKECANN_API std::vector<int64_t> contiguous_strides(const std::vector<int64_t> &shape);
FAKECANN_API TensorView contiguous_view(aclDataType dtype, std::vector<int64_t> shape, void *data);

FAKECANN_API std::vector<double> gather(const TensorView &v);
FAKECANN_API void scatter(const TensorView &v, const std::vector<double> &values);

// Raw byte access for kernels that move bits (copies, collectives): range must lie in one allocation.
FAKECANN_API void *device_bytes(const void *dev, uint64_t bytes);

}  // namespace fakecann
