// ACL runtime: aclrtRandomNumAsync (acl kernel.cpp, runtime random_num_task.cc; see acl_rt_tasks.cpp for what is
// CANN's and what is the stand-in's own). The checks are CANN's, in its order: the ACL maps the data type (others
// ACL_ERROR_INVALID_PARAM) and writes the runtime's type number into the caller's taskInfo->dataType; the runtime
// refuses a reserve that is not NULL, a type the function does not draw (dropout bitmask and normal: bf16, fp16, fp32;
// uniform: those and int32, int64, uint32, uint64), a null counter or result address, and parameters whose isAddr is
// not 0 or 1 or whose size is 0 or more than the type's (8 for an address). Parameters given by address are read from
// device memory when the task runs.
#include <cmath>
#include <cstdint>
#include <cstring>
#include <string>
#include <vector>

#include "acl/acl.h"
#include "fakecann/dtype.h"
#include "fakecann/rt_internal.h"
#include "fakecann/stream.h"
#include "fakecann/tensor_io.h"

using namespace fakecann;

namespace {

// rts_stars.h rtRandomNumDataType, in order.
enum RandomType : int { kInt32, kInt64, kUint32, kUint64, kBf16, kFp16, kFp32, kTypeCount };

int random_type(aclDataType t) {
  switch (t) {
    case ACL_INT32: return kInt32;
    case ACL_INT64: return kInt64;
    case ACL_UINT32: return kUint32;
    case ACL_UINT64: return kUint64;
    case ACL_BF16: return kBf16;
    case ACL_FLOAT16: return kFp16;
    case ACL_FLOAT: return kFp32;
    default: return -1;
  }
}

constexpr aclDataType kAclType[kTypeCount] = {ACL_INT32, ACL_INT64,   ACL_UINT32, ACL_UINT64,
                                              ACL_BF16,  ACL_FLOAT16, ACL_FLOAT};
constexpr uint8_t kTypeSize[kTypeCount] = {4, 8, 4, 8, 2, 2, 4};

// ---- Philox4x32-10 ----
struct Philox {
  uint32_t counter[4];
  uint32_t key[2];
  uint32_t out[4];
  int used = 4;

  static void mulhilo(uint32_t a, uint32_t b, uint32_t *hi, uint32_t *lo) {
    const uint64_t p = (uint64_t)a * b;
    *hi = (uint32_t)(p >> 32);
    *lo = (uint32_t)p;
  }
  void block() {
    uint32_t c[4] = {counter[0], counter[1], counter[2], counter[3]}, k[2] = {key[0], key[1]};
    for (int r = 0; r < 10; ++r) {
      uint32_t hi0, lo0, hi1, lo1;
      mulhilo(0xD2511F53u, c[0], &hi0, &lo0);
      mulhilo(0xCD9E8D57u, c[2], &hi1, &lo1);
      const uint32_t n[4] = {hi1 ^ c[1] ^ k[0], lo1, hi0 ^ c[3] ^ k[1], lo0};
      std::memcpy(c, n, sizeof(c));
      k[0] += 0x9E3779B9u;
      k[1] += 0xBB67AE85u;
    }
    std::memcpy(out, c, sizeof(out));
    for (int i = 0; i < 4 && ++counter[i] == 0; ++i) {
    }
    used = 0;
  }
  uint32_t next() {
    if (used == 4) block();
    return out[used++];
  }
  double unit() { return (next() >> 8) * (1.0 / 16777216.0); }             // [0, 1), 24 bits
  double unit_open() { return ((next() >> 8) + 1) * (1.0 / 16777216.0); }  // (0, 1]
  double normal() {
    const double r = std::sqrt(-2.0 * std::log(unit_open())), a = 2.0 * M_PI * unit();
    return r * std::cos(a);
  }
};

// One parameter's raw bytes: its value, or the bytes at its device address (read when the task runs).
uint64_t param_bits(const aclrtRandomParaInfo &p) {
  uint64_t v = 0;
  if (p.isAddr == 0) {
    std::memcpy(&v, p.valueOrAddr, p.size);
    return v;
  }
  void *addr;
  std::memcpy(&addr, p.valueOrAddr, sizeof(addr));
  std::memcpy(&v, device_bytes(addr, p.size), p.size);
  return v;
}

double param_value(const aclrtRandomParaInfo &p, int type) {
  const uint64_t bits = param_bits(p);
  return load_element(&bits, kAclType[type], 0);
}

// random_num_task.cc CheckRandomParam.
bool param_ok(const aclrtRandomParaInfo &p, size_t type_size) {
  const size_t limit = p.isAddr == 1 ? 8 : type_size;
  return (p.isAddr == 0 || p.isAddr == 1) && p.size != 0 && p.size <= limit;
}

struct RandomTask {
  aclrtRandomNumTaskInfo info;
  int type;
};

void draw_values(const RandomTask &t, Philox &g, uint64_t num, void *out) {
  const auto &pi = t.info.randomNumFuncParaInfo.paramInfo;
  const aclDataType at = kAclType[t.type];
  const bool uniform = t.info.randomNumFuncParaInfo.funcType == ACL_RT_RANDOM_NUM_FUNC_TYPE_UNIFORM_DIS;
  const bool truncated = t.info.randomNumFuncParaInfo.funcType == ACL_RT_RANDOM_NUM_FUNC_TYPE_TRUNCATED_NORMAL_DIS;
  if (uniform && t.type <= kUint64) {  // integers: min + word % (max - min), in the type's width
    const uint64_t lo = param_bits(pi.uniformDisInfo.min), hi = param_bits(pi.uniformDisInfo.max);
    const uint64_t mask = kTypeSize[t.type] == 8 ? ~0ull : 0xFFFFFFFFull;
    const uint64_t span = (hi - lo) & mask;
    for (uint64_t i = 0; i < num; ++i) {
      uint64_t w = g.next();
      if (kTypeSize[t.type] == 8) w = w << 32 | g.next();
      const uint64_t v = (lo + (span == 0 ? 0 : w % span)) & mask;
      std::memcpy(static_cast<char *>(out) + i * kTypeSize[t.type], &v, kTypeSize[t.type]);
    }
    return;
  }
  const double a = uniform ? param_value(pi.uniformDisInfo.min, t.type) : param_value(pi.normalDisInfo.mean, t.type);
  const double b = uniform ? param_value(pi.uniformDisInfo.max, t.type) : param_value(pi.normalDisInfo.stddev, t.type);
  for (uint64_t i = 0; i < num; ++i) {
    double v;
    if (uniform) {
      v = a + g.unit() * (b - a);
    } else {
      double z = g.normal();
      while (truncated && std::fabs(z) > 2.0) z = g.normal();
      v = a + b * z;
    }
    store_element(out, at, i, v);
  }
}

void run_random(const RandomTask &t) {
  uint32_t *counter = static_cast<uint32_t *>(device_bytes(t.info.randomCounterAddr, 16));
  Philox g;
  std::memcpy(g.counter, counter, 16);
  const uint64_t seed = param_bits(t.info.randomSeed), num = param_bits(t.info.randomNum);
  g.key[0] = (uint32_t)seed;
  g.key[1] = (uint32_t)(seed >> 32);
  if (t.info.randomNumFuncParaInfo.funcType == ACL_RT_RANDOM_NUM_FUNC_TYPE_DROPOUT_BITMASK) {
    const double ratio = param_value(t.info.randomNumFuncParaInfo.paramInfo.dropoutBitmaskInfo.dropoutRation, t.type);
    std::vector<uint8_t> mask((num + 7) / 8, 0);
    for (uint64_t i = 0; i < num; ++i)
      if (g.unit() >= ratio) mask[i / 8] |= (uint8_t)(1u << (i % 8));
    std::memcpy(device_bytes(t.info.randomResultAddr, mask.size()), mask.data(), mask.size());
  } else {
    draw_values(t, g, num, device_bytes(t.info.randomResultAddr, num * kTypeSize[t.type]));
  }
  std::memcpy(counter, g.counter, 16);
}

aclError invalid(const std::string &why) {
  set_error_message("aclrtRandomNumAsync: " + why);
  return rt_error(ACL_ERROR_RT_PARAM_INVALID);
}

// random_num_task.cc CheckRandomNumTaskInfo.
aclError check_task(const aclrtRandomNumTaskInfo &info, int type) {
  const int fn = info.randomNumFuncParaInfo.funcType;
  if (fn < ACL_RT_RANDOM_NUM_FUNC_TYPE_DROPOUT_BITMASK || fn > ACL_RT_RANDOM_NUM_FUNC_TYPE_TRUNCATED_NORMAL_DIS)
    return invalid("funcType must be in [0, 4)");
  if (fn != ACL_RT_RANDOM_NUM_FUNC_TYPE_UNIFORM_DIS && type < kBf16)
    return invalid("this function draws bf16, fp16 or fp32 only");
  if (info.randomCounterAddr == nullptr || info.randomResultAddr == nullptr)
    return invalid("randomCounterAddr and randomResultAddr must not be NULL");
  if (!param_ok(info.randomSeed, 8) || !param_ok(info.randomNum, 8))
    return invalid("randomSeed and randomNum: isAddr 0 or 1, size in [1, 8]");
  const auto &pi = info.randomNumFuncParaInfo.paramInfo;
  const size_t size = kTypeSize[type];
  bool ok;
  if (fn == ACL_RT_RANDOM_NUM_FUNC_TYPE_DROPOUT_BITMASK)
    ok = param_ok(pi.dropoutBitmaskInfo.dropoutRation, size);
  else if (fn == ACL_RT_RANDOM_NUM_FUNC_TYPE_UNIFORM_DIS)
    ok = param_ok(pi.uniformDisInfo.min, size) && param_ok(pi.uniformDisInfo.max, size);
  else
    ok = param_ok(pi.normalDisInfo.mean, size) && param_ok(pi.normalDisInfo.stddev, size);
  return ok ? ACL_SUCCESS : invalid("a distribution parameter's isAddr or size is invalid for its type");
}

}  // namespace

extern "C" {

aclError aclrtRandomNumAsync(const aclrtRandomNumTaskInfo *taskInfo, const aclrtStream stream, void *reserve) {
  if (taskInfo == nullptr) return ACL_ERROR_INVALID_PARAM;
  const int type = random_type(taskInfo->dataType);
  if (type < 0) {
    set_error_message("aclrtRandomNumAsync: taskInfo->dataType is not a type random numbers are drawn in");
    return ACL_ERROR_INVALID_PARAM;
  }
  // CANN's ACL hands the caller's struct to the runtime with the runtime's type number written into it.
  const_cast<aclrtRandomNumTaskInfo *>(taskInfo)->dataType = static_cast<aclDataType>(type);
  if (reserve != nullptr) return invalid("reserve must be NULL");
  if (aclError e = check_task(*taskInfo, type)) return e;
  RandomTask t{*taskInfo, type};
  return enqueue_device_task(
      stream, [t] { run_random(t); }, "RANDOM_NUM");
}

}  // extern "C"
