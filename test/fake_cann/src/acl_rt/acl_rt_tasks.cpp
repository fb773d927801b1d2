// ACL runtime: the runtime's built-in device tasks, enqueued on a stream (and recorded by a capture like any task):
// - aclrtValueWrite / aclrtValueWait (runtime memory_stars.cc MemWriteValue / MemWaitValue, api_error.cc checks): a
//   64-bit store, and a wait until the 64-bit value at a device address meets ACL_STREAM_WAIT_VALUE_GEQ (a signed
//   compare: the STARS BGE branch of stars_cond_isa_helper.cc), _EQ, _AND ((v & value) != 0) or _NOR
//   (~(v | value) != 0). The wait holds its stream; only aclrtDestroyStreamForce ends it early.
// - aclrtReduceAsync (memory.cpp, memory_stars.cc): dst[i] = dst[i] op src[i] over `count` bytes; Atlas A2 reduces
//   int8, int16, int32, fp16, fp32 and bf16 by SUM, MAX and MIN (api_ref 12_execution_control.md). Integer sums wrap;
//   EQUAL, whose result CANN does not document, is refused as a feature the stand-in lacks.
// - aclrtRandomNumAsync (kernel.cpp, random_num_task.cc): CANN's device draws from Philox4_32_10 with the 16-byte
//   counter at randomCounterAddr; so does the stand-in's (the counter advances by the blocks drawn), but how the
//   device turns those words into values is not in CANN's source: the stand-in's uniform values are min + u * (max -
//   min) with u in [0, 1) (integers: min + word % (max - min)), normal ones Box-Muller, truncated ones redrawn
//   beyond two standard deviations, and a dropout bitmask has bit i (LSB first) set when element i is kept (u >= the
//   ratio). The numbers are the stand-in's own, only their distribution is CANN's.
#include <cmath>
#include <cstdint>
#include <cstring>
#include <functional>
#include <string>

#include "acl/acl.h"
#include "fakecann/device.h"
#include "fakecann/dtype.h"
#include "fakecann/rt_internal.h"
#include "fakecann/stream.h"
#include "fakecann/tensor_io.h"

using namespace fakecann;

namespace {

aclError invalid(const std::string &why) {
  set_error_message(why);
  return rt_error(ACL_ERROR_RT_PARAM_INVALID);
}

bool device_range(const void *p, uint64_t bytes) { return p != nullptr && device_host_alias(p, bytes) != nullptr; }

// 64-bit device values, read and written whole when aligned (another stream's task may be writing them).
uint64_t load_u64(const void *dev) {
  const void *h = device_bytes(dev, 8);
  uint64_t v;
  if (reinterpret_cast<uintptr_t>(h) % 8 == 0)
    __atomic_load(static_cast<const uint64_t *>(h), &v, __ATOMIC_ACQUIRE);
  else
    std::memcpy(&v, h, 8);
  return v;
}

void store_u64(void *dev, uint64_t v) {
  void *h = device_bytes(dev, 8);
  if (reinterpret_cast<uintptr_t>(h) % 8 == 0)
    __atomic_store(static_cast<uint64_t *>(h), &v, __ATOMIC_RELEASE);
  else
    std::memcpy(h, &v, 8);
}

bool wait_satisfied(uint64_t v, uint64_t value, uint32_t flag) {
  switch (flag) {
    case ACL_STREAM_WAIT_VALUE_GEQ: return (int64_t)v >= (int64_t)value;
    case ACL_STREAM_WAIT_VALUE_EQ: return v == value;
    case ACL_STREAM_WAIT_VALUE_AND: return (v & value) != 0;
    default: return ~(v | value) != 0;  // ACL_STREAM_WAIT_VALUE_NOR
  }
}

// ---- reduce ----

bool reducible(aclDataType t) {
  return t == ACL_INT8 || t == ACL_INT16 || t == ACL_INT32 || t == ACL_FLOAT16 || t == ACL_FLOAT || t == ACL_BF16;
}

// The types aclrtReduceAsync maps to a runtime type at all (memory.cpp kMapDataType); others are the ACL's refusal.
bool known_to_reduce(aclDataType t) {
  return reducible(t) || t == ACL_INT4 || t == ACL_UINT8 || t == ACL_UINT16 || t == ACL_UINT32;
}

double reduce_one(double a, double b, aclrtReduceKind kind, aclDataType t) {
  if (kind == ACL_RT_MEMCPY_SDMA_AUTOMATIC_MAX) return std::fmax(a, b);
  if (kind == ACL_RT_MEMCPY_SDMA_AUTOMATIC_MIN) return std::fmin(a, b);
  if (dtype_is_float(t)) return (double)((float)a + (float)b);  // fp32 arithmetic, then rounded to the type
  const int bits = (int)dtype_size(t) * 8;                      // integers wrap at their width
  const int64_t sum = (int64_t)a + (int64_t)b;
  const uint64_t mask = (bits == 64) ? ~0ull : ((1ull << bits) - 1);
  uint64_t u = (uint64_t)sum & mask;
  if (u >> (bits - 1)) u |= ~mask;  // sign-extend
  return (double)(int64_t)u;
}

void reduce_now(void *dst, const void *src, uint64_t count, aclrtReduceKind kind, aclDataType t) {
  void *d = device_bytes(dst, count);
  const void *s = device_bytes(src, count);
  const uint64_t n = count / dtype_size(t);
  for (uint64_t i = 0; i < n; ++i)
    store_element(d, t, i, reduce_one(load_element(d, t, i), load_element(s, t, i), kind, t));
}

}  // namespace

extern "C" {

aclError aclrtValueWrite(void *devAddr, uint64_t value, uint32_t flag, aclrtStream stream) {
  if (devAddr == nullptr) return ACL_ERROR_INVALID_PARAM;
  if (flag != 0) return invalid("aclrtValueWrite: flag must be 0");
  if (!device_range(devAddr, 8)) return invalid("aclrtValueWrite: devAddr is not device memory");
  return enqueue_device_task(
      stream, [devAddr, value] { store_u64(devAddr, value); }, "MEM_WRITE_VALUE");
}

aclError aclrtValueWait(void *devAddr, uint64_t value, uint32_t flag, aclrtStream stream) {
  if (devAddr == nullptr) return ACL_ERROR_INVALID_PARAM;
  if (flag > ACL_STREAM_WAIT_VALUE_NOR) return invalid("aclrtValueWait: flag must be in [0, 4)");
  if (!device_range(devAddr, 8)) return invalid("aclrtValueWait: devAddr is not device memory");
  return enqueue_device_task(
      stream,
      [devAddr, value, flag] { worker_wait_until([&] { return wait_satisfied(load_u64(devAddr), value, flag); }); },
      "MEM_WAIT_VALUE");
}

aclError aclrtReduceAsync(void *dst, const void *src, uint64_t count, aclrtReduceKind kind, aclDataType type,
                          aclrtStream stream, void *reserve) {
  if (dst == nullptr || src == nullptr || reserve != nullptr || !known_to_reduce(type)) {
    set_error_message("aclrtReduceAsync: null address, a reserve that is not NULL, or a type it does not reduce");
    return ACL_ERROR_INVALID_PARAM;
  }
  if (kind < ACL_RT_MEMCPY_SDMA_AUTOMATIC_SUM || kind > ACL_RT_MEMCPY_SDMA_AUTOMATIC_EQUAL)
    return invalid("aclrtReduceAsync: unknown reduce kind " + std::to_string((int)kind));
  if (kind == ACL_RT_MEMCPY_SDMA_AUTOMATIC_EQUAL || !reducible(type)) {
    set_error_message("aclrtReduceAsync: Atlas A2 reduces int8/int16/int32/fp16/fp32/bf16 by SUM, MAX or MIN");
    return rt_error(ACL_ERROR_RT_FEATURE_NOT_SUPPORT);
  }
  if (!device_range(dst, count) || !device_range(src, count))
    return invalid("aclrtReduceAsync: dst or src is not `count` bytes of device memory");
  return enqueue_device_task(
      stream, [=] { reduce_now(dst, src, count, kind, type); }, "REDUCE");
}

}  // extern "C"
