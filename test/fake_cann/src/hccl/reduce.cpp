// Reductions of the collectives, element by element over the ranks' staged chunks.
#include "reduce.h"

#include <cmath>
#include <cstring>
#include <limits>
#include <type_traits>

#include "fakecann/dtype.h"

namespace fakecann::hccl {

bool dtype_defined(HcclDataType t) {
  return (uint32_t)t <= (uint32_t)HCCL_DATA_TYPE_INT128 ||
         ((uint32_t)t >= (uint32_t)HCCL_DATA_TYPE_HIF8 && (uint32_t)t <= (uint32_t)HCCL_DATA_TYPE_FP8E8M0);
}

bool dtype_reducible(HcclDataType t) { return dtype_bytes(t) != 0 && (uint32_t)t <= (uint32_t)HCCL_DATA_TYPE_INT128; }

uint64_t dtype_bytes(HcclDataType t) {
  switch (t) {
    case HCCL_DATA_TYPE_INT8:
    case HCCL_DATA_TYPE_UINT8:
    case HCCL_DATA_TYPE_HIF8:
    case HCCL_DATA_TYPE_FP8E4M3:
    case HCCL_DATA_TYPE_FP8E5M2:
    case HCCL_DATA_TYPE_FP8E8M0: return 1;
    case HCCL_DATA_TYPE_INT16:
    case HCCL_DATA_TYPE_UINT16:
    case HCCL_DATA_TYPE_FP16:
    case HCCL_DATA_TYPE_BFP16: return 2;
    case HCCL_DATA_TYPE_INT32:
    case HCCL_DATA_TYPE_UINT32:
    case HCCL_DATA_TYPE_FP32: return 4;
    case HCCL_DATA_TYPE_INT64:
    case HCCL_DATA_TYPE_UINT64:
    case HCCL_DATA_TYPE_FP64: return 8;
    default: return 0;
  }
}

const char *dtype_name(HcclDataType t) {
  switch (t) {
    case HCCL_DATA_TYPE_INT8: return "int8";
    case HCCL_DATA_TYPE_INT16: return "int16";
    case HCCL_DATA_TYPE_INT32: return "int32";
    case HCCL_DATA_TYPE_FP16: return "fp16";
    case HCCL_DATA_TYPE_FP32: return "fp32";
    case HCCL_DATA_TYPE_INT64: return "int64";
    case HCCL_DATA_TYPE_UINT64: return "uint64";
    case HCCL_DATA_TYPE_UINT8: return "uint8";
    case HCCL_DATA_TYPE_UINT16: return "uint16";
    case HCCL_DATA_TYPE_UINT32: return "uint32";
    case HCCL_DATA_TYPE_FP64: return "fp64";
    case HCCL_DATA_TYPE_BFP16: return "bfp16";
    case HCCL_DATA_TYPE_INT128: return "int128";
    case HCCL_DATA_TYPE_HIF8: return "hif8";
    case HCCL_DATA_TYPE_FP8E4M3: return "fp8e4m3";
    case HCCL_DATA_TYPE_FP8E5M2: return "fp8e5m2";
    case HCCL_DATA_TYPE_FP8E8M0: return "fp8e8m0";
    default: return "reserved";
  }
}

bool op_defined(HcclReduceOp op) { return (uint32_t)op <= (uint32_t)HCCL_REDUCE_MIN; }

const char *op_name(HcclReduceOp op) {
  switch (op) {
    case HCCL_REDUCE_SUM: return "sum";
    case HCCL_REDUCE_PROD: return "prod";
    case HCCL_REDUCE_MAX: return "max";
    case HCCL_REDUCE_MIN: return "min";
    default: return "reserved";
  }
}

namespace {

template <typename T, typename F>
void reduce_ints(F f, const char *const *srcs, uint32_t nsrc, char *dst, uint64_t count) {
  for (uint64_t i = 0; i < count; ++i) {
    T acc, v;
    std::memcpy(&acc, srcs[0] + i * sizeof(T), sizeof(T));
    for (uint32_t r = 1; r < nsrc; ++r) {
      std::memcpy(&v, srcs[r] + i * sizeof(T), sizeof(T));
      acc = f(acc, v);
    }
    std::memcpy(dst + i * sizeof(T), &acc, sizeof(T));
  }
}

template <typename T>
void reduce_int(HcclReduceOp op, const char *const *srcs, uint32_t nsrc, char *dst, uint64_t count) {
  using U = std::make_unsigned_t<T>;
  // Through uint64_t: no promotion to (signed) int, so no overflow UB; the cast back wraps (C++20).
  switch (op) {
    case HCCL_REDUCE_SUM:
      return reduce_ints<T>([](T a, T b) { return (T)(U)((uint64_t)(U)a + (uint64_t)(U)b); }, srcs, nsrc, dst, count);
    case HCCL_REDUCE_PROD:
      return reduce_ints<T>([](T a, T b) { return (T)(U)((uint64_t)(U)a * (uint64_t)(U)b); }, srcs, nsrc, dst, count);
    case HCCL_REDUCE_MAX: return reduce_ints<T>([](T a, T b) { return a < b ? b : a; }, srcs, nsrc, dst, count);
    default: return reduce_ints<T>([](T a, T b) { return b < a ? b : a; }, srcs, nsrc, dst, count);
  }
}

template <typename F>
void reduce_floats(aclDataType t, F f, const char *const *srcs, uint32_t nsrc, char *dst, uint64_t count) {
  for (uint64_t i = 0; i < count; ++i) {
    double acc = load_element(srcs[0], t, i);
    for (uint32_t r = 1; r < nsrc; ++r) acc = f(acc, load_element(srcs[r], t, i));
    store_element(dst, t, i, acc);
  }
}

void reduce_float(aclDataType t, HcclReduceOp op, const char *const *srcs, uint32_t nsrc, char *dst, uint64_t count) {
  constexpr double nan = std::numeric_limits<double>::quiet_NaN();
  switch (op) {
    case HCCL_REDUCE_SUM:
      return reduce_floats(
          t, [](double a, double b) { return a + b; }, srcs, nsrc, dst, count);
    case HCCL_REDUCE_PROD:
      return reduce_floats(
          t, [](double a, double b) { return a * b; }, srcs, nsrc, dst, count);
    // NaN wins, as in the device's vector max/min.
    case HCCL_REDUCE_MAX:
      return reduce_floats(
          t, [](double a, double b) { return std::isnan(a) || std::isnan(b) ? nan : (a < b ? b : a); }, srcs, nsrc, dst,
          count);
    default:
      return reduce_floats(
          t, [](double a, double b) { return std::isnan(a) || std::isnan(b) ? nan : (b < a ? b : a); }, srcs, nsrc, dst,
          count);
  }
}

}  // namespace

void reduce(HcclDataType t, HcclReduceOp op, const char *const *srcs, uint32_t nsrc, char *dst, uint64_t count) {
  switch (t) {
    case HCCL_DATA_TYPE_INT8: return reduce_int<int8_t>(op, srcs, nsrc, dst, count);
    case HCCL_DATA_TYPE_INT16: return reduce_int<int16_t>(op, srcs, nsrc, dst, count);
    case HCCL_DATA_TYPE_INT32: return reduce_int<int32_t>(op, srcs, nsrc, dst, count);
    case HCCL_DATA_TYPE_INT64: return reduce_int<int64_t>(op, srcs, nsrc, dst, count);
    case HCCL_DATA_TYPE_UINT8: return reduce_int<uint8_t>(op, srcs, nsrc, dst, count);
    case HCCL_DATA_TYPE_UINT16: return reduce_int<uint16_t>(op, srcs, nsrc, dst, count);
    case HCCL_DATA_TYPE_UINT32: return reduce_int<uint32_t>(op, srcs, nsrc, dst, count);
    case HCCL_DATA_TYPE_UINT64: return reduce_int<uint64_t>(op, srcs, nsrc, dst, count);
    case HCCL_DATA_TYPE_FP16: return reduce_float(ACL_FLOAT16, op, srcs, nsrc, dst, count);
    case HCCL_DATA_TYPE_BFP16: return reduce_float(ACL_BF16, op, srcs, nsrc, dst, count);
    case HCCL_DATA_TYPE_FP32: return reduce_float(ACL_FLOAT, op, srcs, nsrc, dst, count);
    case HCCL_DATA_TYPE_FP64: return reduce_float(ACL_DOUBLE, op, srcs, nsrc, dst, count);
    default: return;  // rejected when the collective was issued
  }
}

}  // namespace fakecann::hccl
