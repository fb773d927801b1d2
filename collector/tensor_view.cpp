#include "collector/tensor_view.h"

#include <cstring>
#include <functional>
#include <optional>
#include <utility>

#include "format/minifloat.h"

namespace msprobe::collector {

using record::CapturedArg;
using record::CapturedList;
using record::TensorCapture;

namespace {

// `count` elements `jump` bytes apart, copied one after the other to `out`; returns the end. kSize: the element size
// when known at compile time (a fixed-size copy the compiler inlines), 0 for `size` at run time.
template <size_t kSize>
unsigned char *gather_strided(unsigned char *out, const unsigned char *in, int64_t jump, int64_t count, size_t size) {
  const size_t n = kSize != 0 ? kSize : size;
  for (int64_t j = 0; j < count; ++j, in += jump, out += n) std::memcpy(out, in, n);
  return out;
}

// The view's element range in its block, [lo, hi] (hi < lo: empty), and whether it is row-major contiguous.
struct ViewSpan {
  int64_t lo, hi;
  bool contiguous;
};
ViewSpan span_of(const TensorCapture &t) {
  ViewSpan v{t.block_offset, t.block_offset, true};
  int64_t expect = 1;
  for (size_t i = t.shape.size(); i-- > 0;) {
    const int64_t span = (t.shape[i] - 1) * t.block_strides[i];
    (span > 0 ? v.hi : v.lo) += span;
    if (t.shape[i] != 1 && t.block_strides[i] != expect) v.contiguous = false;
    expect *= t.shape[i];
  }
  return v;
}

// One step of an odometer over the view's first `dims` dimensions: `idx` and the element offset `off` (in the block)
// move to the next element (with all dimensions) or the next row (without the innermost).
[[gnu::always_inline]] inline void next_index(const TensorCapture &t, size_t dims, std::vector<int64_t> &idx,
                                              int64_t &off) {
  for (size_t d = dims; d-- > 0;) {
    if (++idx[d] < t.shape[d]) {
      off += t.block_strides[d];
      return;
    }
    off -= t.block_strides[d] * (t.shape[d] - 1);
    idx[d] = 0;
  }
}

// The sub-byte types (FP4, FP6): their elements packed (format/minifloat.h). A contiguous view that starts on a byte is
// read in place; any other is packed again, element by element, into `scratch`.
const unsigned char *materialize_packed(const TensorCapture &t, const unsigned char *base, uint64_t n,
                                        std::vector<unsigned char> &scratch) {
  const ViewSpan v = span_of(t);
  if (v.lo < 0 || format::storage_bytes(t.dtype, (uint64_t)v.hi + 1) > t.block->size()) return nullptr;
  const auto group = (int64_t)format::whole_byte_elements(t.dtype);
  if (v.contiguous && t.block_offset % group == 0) return base + format::storage_bytes(t.dtype, t.block_offset);
  scratch.assign(format::storage_bytes(t.dtype, n), 0);
  const size_t nd = t.shape.size();
  std::vector<int64_t> idx(nd, 0);
  int64_t off = t.block_offset;
  for (uint64_t e = 0; e < n; ++e) {
    format::store_narrow_code(t.dtype, scratch.data(), e, format::narrow_code_at(t.dtype, base, (uint64_t)off));
    next_index(t, nd, idx, off);
  }
  return scratch.data();
}

}  // namespace

const unsigned char *materialize(const TensorCapture &t, std::vector<unsigned char> &scratch, uint64_t *bytes) {
  const size_t es = format::element_size(t.dtype);
  uint64_t n = 1;
  for (int64_t d : t.shape) n *= (uint64_t)(d > 0 ? d : 0);
  *bytes = format::storage_bytes(t.dtype, n);
  if (!t.block) return nullptr;
  const auto *base = static_cast<const unsigned char *>(t.block->data());
  if (base == nullptr) return nullptr;  // the producer could not give the bytes back
  if (n == 0) return base;
  if (format::element_bits(t.dtype) % 8 != 0) return materialize_packed(t, base, n, scratch);
  const auto [lo, hi, contiguous] = span_of(t);
  if (lo < 0 || (uint64_t)(hi + 1) * es > t.block->size()) return nullptr;
  if (contiguous) return base + t.block_offset * es;
  scratch.resize(*bytes);
  // Gathered a row at a time: the innermost dimension's elements, in one copy when they are adjacent (a slice, a
  // padded row), else one by one (a transposed view), with a fixed-size copy for the usual element sizes.
  const size_t nd = t.shape.size();
  const int64_t row = nd > 0 ? t.shape[nd - 1] : 1;
  const int64_t step = nd > 0 ? t.block_strides[nd - 1] : 1;
  const size_t outer_dims = nd > 0 ? nd - 1 : 0;
  std::vector<int64_t> idx(outer_dims, 0);
  int64_t off = t.block_offset;
  unsigned char *out = scratch.data();
  for (uint64_t done = 0; done < n; done += static_cast<uint64_t>(row)) {
    const unsigned char *in = base + off * static_cast<int64_t>(es);
    if (step == 1) {
      std::memcpy(out, in, static_cast<size_t>(row) * es);
      out += static_cast<size_t>(row) * es;
    } else {
      const int64_t jump = step * static_cast<int64_t>(es);
      switch (es) {
        case 2: out = gather_strided<2>(out, in, jump, row, es); break;
        case 4: out = gather_strided<4>(out, in, jump, row, es); break;
        case 8: out = gather_strided<8>(out, in, jump, row, es); break;
        default: out = gather_strided<0>(out, in, jump, row, es);
      }
    }
    next_index(t, outer_dims, idx, off);  // the next row
  }
  return scratch.data();
}

namespace {

// "3 NaN, 1 +Inf, 0 -Inf", or the kinds alone when only the device's extremes were taken (a flight tensor kept as
// statistics only: which kinds, not how many).
std::string counts_text(const format::TensorStats &st) {
  if (st.counts_exact)
    return std::to_string(st.nan_count) + " NaN, " + std::to_string(st.pos_inf_count) + " +Inf, " +
           std::to_string(st.neg_inf_count) + " -Inf";
  std::string kinds;
  for (auto [n, kind] : {std::pair{st.nan_count, "NaN"}, {st.pos_inf_count, "+Inf"}, {st.neg_inf_count, "-Inf"}})
    if (n) kinds += (kinds.empty() ? "" : ", ") + std::string(kind);
  return kinds + " (not counted)";
}

}  // namespace

std::string nonfinite_outputs(const record::KernelCapture &k, format::StatPrecision precision) {
  std::string found;
  std::function<void(const CapturedArg &, const std::string &)> visit = [&](const CapturedArg &a,
                                                                            const std::string &path) {
    if (auto *l = std::get_if<CapturedList>(&a.v)) {
      for (size_t i = 0; i < l->size(); ++i) visit((*l)[i], path + "." + std::to_string(i));
      return;
    }
    const auto *t = std::get_if<TensorCapture>(&a.v);
    if (!t || !format::is_floating(t->dtype)) return;
    std::optional<format::TensorStats> pre = t->device_stats ? t->device_stats->stats() : std::nullopt;
    if (!pre && !t->block) return;
    std::vector<unsigned char> scratch;
    uint64_t bytes = 0;
    const unsigned char *data = pre ? nullptr : materialize(*t, scratch, &bytes);
    if (!pre && !data) return;
    const format::TensorStats st = pre ? *pre : format::compute_stats(t->dtype, data, t->shape, precision);
    if (!st.has_nan_or_inf()) return;
    if (!found.empty()) found += "; ";
    found += "output" + path + ": " + counts_text(st);
  };
  if (k.outputs)
    for (size_t i = 0; i < k.outputs->size(); ++i) visit((*k.outputs)[i], "." + std::to_string(i));
  return found;
}

}  // namespace msprobe::collector
