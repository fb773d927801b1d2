// gather/scatter of strided device views, used by every kernel of the stand-in.
#include "fakecann/tensor_io.h"

#include <sstream>

#include "fakecann/device.h"
#include "fakecann/dtype.h"
#include "fakecann/stream.h"

namespace fakecann {

int64_t TensorView::numel() const {
  int64_t n = 1;
  for (int64_t d : shape) n *= d;
  return n;
}

bool TensorView::is_contiguous() const { return strides == contiguous_strides(shape); }

std::string TensorView::describe() const {
  std::ostringstream os;
  os << "dtype=" << dtype << " shape=[";
  for (size_t i = 0; i < shape.size(); ++i) os << (i ? "," : "") << shape[i];
  os << "] strides=[";
  for (size_t i = 0; i < strides.size(); ++i) os << (i ? "," : "") << strides[i];
  os << "] offset=" << offset << " data=" << data;
  return os.str();
}

std::vector<int64_t> contiguous_strides(const std::vector<int64_t> &shape) {
  std::vector<int64_t> s(shape.size(), 1);
  for (size_t i = shape.size(); i-- > 1;) s[i - 1] = s[i] * (shape[i] > 0 ? shape[i] : 1);
  return s;
}

TensorView contiguous_view(aclDataType dtype, std::vector<int64_t> shape, void *data) {
  TensorView v;
  v.dtype = dtype;
  v.strides = contiguous_strides(shape);
  v.storage_shape = {1};
  for (int64_t d : shape) v.storage_shape[0] *= d;
  v.shape = std::move(shape);
  v.data = data;
  return v;
}

void *device_bytes(const void *dev, uint64_t bytes) {
  void *h = device_host_alias(dev, bytes);
  if (h == nullptr) {
    std::ostringstream os;
    os << "device access out of bounds: " << dev << " + " << bytes << " bytes is not inside one live allocation";
    throw KernelError(os.str());
  }
  return h;
}

namespace {

// The span of elements [min_off, max_off] that the view touches, relative to data.
void view_extent(const TensorView &v, int64_t *lo, int64_t *hi) {
  int64_t a = v.offset, b = v.offset;
  for (size_t i = 0; i < v.shape.size(); ++i) {
    if (v.shape[i] <= 0) continue;
    int64_t span = (v.shape[i] - 1) * v.strides[i];
    if (span > 0)
      b += span;
    else
      a += span;
  }
  *lo = a;
  *hi = b;
}

template <typename F>
void for_each_offset(const TensorView &v, F &&f) {
  const size_t nd = v.shape.size();
  int64_t n = v.numel();
  if (n <= 0) return;
  std::vector<int64_t> idx(nd, 0);
  int64_t off = v.offset;
  for (int64_t i = 0; i < n; ++i) {
    f(i, off);
    for (size_t d = nd; d-- > 0;) {
      if (++idx[d] < v.shape[d]) {
        off += v.strides[d];
        break;
      }
      off -= v.strides[d] * (v.shape[d] - 1);
      idx[d] = 0;
    }
  }
}

char *view_base(const TensorView &v, int64_t *lo_out) {
  if (!dtype_is_numeric(v.dtype)) throw KernelError("unsupported dtype in kernel: " + v.describe());
  if (v.strides.size() != v.shape.size()) throw KernelError("strides rank != shape rank: " + v.describe());
  int64_t lo, hi;
  view_extent(v, &lo, &hi);
  if (lo < 0) throw KernelError("view reaches before its storage: " + v.describe());
  if (dtype_packed(v.dtype)) lo -= lo % 2;  // start at a whole byte: element indexes keep their nibble
  char *first = static_cast<char *>(v.data) + (int64_t)dtype_bytes(v.dtype, (uint64_t)lo);
  char *host = static_cast<char *>(device_bytes(first, dtype_bytes(v.dtype, (uint64_t)(hi - lo + 1))));
  *lo_out = lo;
  return host;
}

}  // namespace

namespace {

// Row-major with no gaps (size-1 dimensions may have any stride): element i is at offset + i.
bool dense(const TensorView &v) {
  int64_t expected = 1;
  for (size_t d = v.shape.size(); d-- > 0;) {
    if (v.shape[d] != 1 && v.strides[d] != expected) return false;
    expected *= v.shape[d];
  }
  return true;
}

// Element i of a dense run of T, converted with `to_double`: the dtype switch is taken once per tensor.
template <typename T, typename Conv>
void load_run(const char *p, size_t n, double *out, Conv to_double) {
  for (size_t i = 0; i < n; ++i) {
    T v;
    std::memcpy(&v, p + i * sizeof(T), sizeof(T));
    out[i] = to_double(v);
  }
}

}  // namespace

std::vector<double> gather(const TensorView &v) {
  std::vector<double> out((size_t)(v.numel() > 0 ? v.numel() : 0));
  if (out.empty()) return out;
  int64_t lo;
  char *host = view_base(v, &lo);
  if (dense(v) && !dtype_packed(v.dtype)) {
    const char *p = host + (v.offset - lo) * (int64_t)dtype_size(v.dtype);
    switch (v.dtype) {
      case ACL_FLOAT: load_run<float>(p, out.size(), out.data(), [](float x) { return (double)x; }); return out;
      case ACL_FLOAT16:
        load_run<uint16_t>(p, out.size(), out.data(), [](uint16_t x) { return (double)half_to_float(x); });
        return out;
      case ACL_BF16:
        load_run<uint16_t>(p, out.size(), out.data(), [](uint16_t x) { return (double)bf16_to_float(x); });
        return out;
      default:
        for (size_t i = 0; i < out.size(); ++i) out[i] = load_element(p, v.dtype, i);
        return out;
    }
  }
  for_each_offset(v,
                  [&](int64_t i, int64_t off) { out[(size_t)i] = load_element(host, v.dtype, (uint64_t)(off - lo)); });
  return out;
}

void scatter(const TensorView &v, const std::vector<double> &values) {
  if (v.numel() <= 0) return;
  if ((int64_t)values.size() != v.numel()) throw KernelError("scatter size mismatch: " + v.describe());
  int64_t lo;
  char *host = view_base(v, &lo);
  if (dense(v) && !dtype_packed(v.dtype)) {
    char *p = host + (v.offset - lo) * (int64_t)dtype_size(v.dtype);
    if (v.dtype == ACL_FLOAT) {
      for (size_t i = 0; i < values.size(); ++i) {
        float f = (float)values[i];
        std::memcpy(p + 4 * i, &f, 4);
      }
    } else {
      for (size_t i = 0; i < values.size(); ++i) store_element(p, v.dtype, i, values[i]);
    }
    return;
  }
  for_each_offset(
      v, [&](int64_t i, int64_t off) { store_element(host, v.dtype, (uint64_t)(off - lo), values[(size_t)i]); });
}

}  // namespace fakecann
