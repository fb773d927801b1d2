// The runtime's built-in device tasks and peer access, against CANN's runtime (hicann/runtime): aclrtValueWrite /
// aclrtValueWait, aclrtReduceAsync, aclrtRandomNumAsync, aclrtDeviceCanAccessPeer / Enable / DisablePeerAccess (the
// samples 9_multistream_sync_memory, built_in_task/0_reduce_task and 1_random_num_task, device/2_device_P2P). Each
// test names the source it states; expected values are computed here, independently of the stand-in.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <thread>
#include <vector>

#include "acl/acl.h"
#include "half_ref.h"

namespace {

class BuiltinTasks : public ::testing::Test {
 protected:
  void SetUp() override {
    ASSERT_EQ(aclrtSetDevice(0), ACL_SUCCESS);
    ASSERT_EQ(aclrtCreateStream(&s_), ACL_SUCCESS);
    ASSERT_EQ(aclrtCreateStream(&other_), ACL_SUCCESS);
  }
  void TearDown() override {
    for (void *d : allocs_) aclrtFree(d);
    aclrtDestroyStream(s_);
    aclrtDestroyStream(other_);
    aclrtResetDevice(0);
  }
  void *device(const void *host, size_t bytes) {
    void *d = nullptr;
    EXPECT_EQ(aclrtMalloc(&d, bytes, ACL_MEM_MALLOC_HUGE_FIRST), ACL_SUCCESS);
    if (host != nullptr) {
      EXPECT_EQ(aclrtMemcpy(d, bytes, host, bytes, ACL_MEMCPY_HOST_TO_DEVICE), ACL_SUCCESS);
    }
    allocs_.push_back(d);
    return d;
  }
  template <typename T>
  std::vector<T> read(const void *d, size_t n) {
    std::vector<T> v(n);
    EXPECT_EQ(aclrtMemcpy(v.data(), n * sizeof(T), d, n * sizeof(T), ACL_MEMCPY_DEVICE_TO_HOST), ACL_SUCCESS);
    return v;
  }
  aclrtStream s_ = nullptr, other_ = nullptr;
  std::vector<void *> allocs_;
};

uint16_t half_bits(float f) {
  _Float16 h = (_Float16)f;
  uint16_t b;
  std::memcpy(&b, &h, 2);
  return b;
}

// ---- value write / wait ----

// api_error.cc MemWaitValue / MemWriteValue: flag in [0, 4) for a wait, 0 for a write, device memory only
// (RT_ERROR_INVALID_VALUE, 107000); the ACL refuses a null address (100000).
TEST_F(BuiltinTasks, ValueTaskArguments) {
  void *d = device(nullptr, 8);
  uint64_t host = 0;
  EXPECT_EQ(aclrtValueWait(d, 1, 4, s_), ACL_ERROR_RT_PARAM_INVALID);
  EXPECT_EQ(aclrtValueWrite(d, 1, 1, s_), ACL_ERROR_RT_PARAM_INVALID);
  EXPECT_EQ(aclrtValueWrite(&host, 1, 0, s_), ACL_ERROR_RT_PARAM_INVALID);
  EXPECT_EQ(aclrtValueWait(&host, 1, ACL_STREAM_WAIT_VALUE_EQ, s_), ACL_ERROR_RT_PARAM_INVALID);
  EXPECT_EQ(aclrtValueWrite(nullptr, 1, 0, s_), ACL_ERROR_INVALID_PARAM);
  EXPECT_EQ(aclrtValueWait(nullptr, 1, 0, s_), ACL_ERROR_INVALID_PARAM);
}

// stars_cond_isa_helper.cc ConvertConditionToOpAndBranchFunc: GEQ is (*addr | 0) >= value by BGE (signed), EQ ==,
// AND (*addr & value) != 0, NOR (*addr | value) != ~0. A wait holds its stream until a write on another stream meets
// it (the 9_multistream_sync_memory sample).
TEST_F(BuiltinTasks, ValueWaitHoldsItsStreamUntilTheConditionHolds) {
  const struct {
    uint32_t flag;
    uint64_t value, unmet, met;
  } cases[] = {{ACL_STREAM_WAIT_VALUE_GEQ, 5, (uint64_t)-7, 6},  // -7 < 5 signed (unsigned it would be larger)
               {ACL_STREAM_WAIT_VALUE_EQ, 100, 99, 100},
               {ACL_STREAM_WAIT_VALUE_AND, 0x0F0, 0x00F, 0x010},
               {ACL_STREAM_WAIT_VALUE_NOR, 0x0F, ~0ull, 0xF0}};
  for (const auto &c : cases) {
    void *flag = device(&c.unmet, 8);
    ASSERT_EQ(aclrtValueWait(flag, c.value, c.flag, s_), ACL_SUCCESS);
    EXPECT_EQ(aclrtSynchronizeStreamWithTimeout(s_, 50), ACL_ERROR_RT_STREAM_SYNC_TIMEOUT) << c.flag;
    ASSERT_EQ(aclrtValueWrite(flag, c.met, 0, other_), ACL_SUCCESS);
    EXPECT_EQ(aclrtSynchronizeStreamWithTimeout(s_, 5000), ACL_SUCCESS) << c.flag;
    ASSERT_EQ(aclrtSynchronizeStream(other_), ACL_SUCCESS);
    EXPECT_EQ(read<uint64_t>(flag, 1)[0], c.met);
  }
}

// A write is a task like any: it lands when its stream reaches it, and a capture records it (api_impl.cc
// MemWriteValue on a capturing stream); aclrtDestroyStreamForce ends a wait that nothing will meet.
TEST_F(BuiltinTasks, ValueWriteIsCapturedAndForceDestroyEndsAWait) {
  uint64_t zero = 0;
  void *flag = device(&zero, 8);
  ASSERT_EQ(aclmdlRICaptureBegin(s_, ACL_MODEL_RI_CAPTURE_MODE_RELAXED), ACL_SUCCESS);
  ASSERT_EQ(aclrtValueWrite(flag, 42, 0, s_), ACL_SUCCESS);
  aclmdlRI model = nullptr;
  ASSERT_EQ(aclmdlRICaptureEnd(s_, &model), ACL_SUCCESS);
  EXPECT_EQ(read<uint64_t>(flag, 1)[0], 0u);  // recorded, not run
  ASSERT_EQ(aclmdlRIExecuteAsync(model, s_), ACL_SUCCESS);
  ASSERT_EQ(aclrtSynchronizeStream(s_), ACL_SUCCESS);
  EXPECT_EQ(read<uint64_t>(flag, 1)[0], 42u);
  ASSERT_EQ(aclmdlRIDestroy(model), ACL_SUCCESS);

  aclrtStream doomed = nullptr;
  ASSERT_EQ(aclrtCreateStream(&doomed), ACL_SUCCESS);
  ASSERT_EQ(aclrtValueWait(flag, 7, ACL_STREAM_WAIT_VALUE_EQ, doomed), ACL_SUCCESS);
  EXPECT_EQ(aclrtSynchronizeStreamWithTimeout(doomed, 20), ACL_ERROR_RT_STREAM_SYNC_TIMEOUT);
  EXPECT_EQ(aclrtDestroyStreamForce(doomed), ACL_SUCCESS);
}

// ---- reduce ----

// memory.cpp aclrtReduceAsyncImpl + docs 12_execution_control.md: dst = dst op src over `count` bytes; the
// 0_reduce_task sample's SUM doubles {1, 2, 3, 4}.
TEST_F(BuiltinTasks, ReduceSumMaxMin) {
  const float a[4] = {1, 2, 3, 4};
  void *src = device(a, 16), *dst = device(a, 16);
  ASSERT_EQ(aclrtReduceAsync(dst, src, 16, ACL_RT_MEMCPY_SDMA_AUTOMATIC_SUM, ACL_FLOAT, s_, nullptr), ACL_SUCCESS);
  ASSERT_EQ(aclrtSynchronizeStream(s_), ACL_SUCCESS);
  EXPECT_EQ(read<float>(dst, 4), (std::vector<float>{2, 4, 6, 8}));

  const int32_t x[4] = {5, -3, 7, 0}, y[4] = {-1, 4, 7, 9};
  void *dmax = device(x, 16), *dmin = device(x, 16), *dy = device(y, 16);
  ASSERT_EQ(aclrtReduceAsync(dmax, dy, 16, ACL_RT_MEMCPY_SDMA_AUTOMATIC_MAX, ACL_INT32, s_, nullptr), ACL_SUCCESS);
  ASSERT_EQ(aclrtReduceAsync(dmin, dy, 16, ACL_RT_MEMCPY_SDMA_AUTOMATIC_MIN, ACL_INT32, s_, nullptr), ACL_SUCCESS);
  ASSERT_EQ(aclrtSynchronizeStream(s_), ACL_SUCCESS);
  EXPECT_EQ(read<int32_t>(dmax, 4), (std::vector<int32_t>{5, 4, 7, 9}));
  EXPECT_EQ(read<int32_t>(dmin, 4), (std::vector<int32_t>{-1, -3, 7, 0}));

  // fp16: the sum rounded to nearest even (the compiler's _Float16 is the reference); int8 wraps.
  const float hv[3] = {1.0f, 1000.0f, 0.1f}, hw[3] = {0.0009765625f, 0.4f, 0.2f};
  uint16_t h1[3], h2[3], want[3];
  for (int i = 0; i < 3; ++i) {
    h1[i] = half_bits(hv[i]);
    h2[i] = half_bits(hw[i]);
    want[i] = half_bits((float)(_Float16)hv[i] + (float)(_Float16)hw[i]);
  }
  void *dh = device(h1, 6), *sh = device(h2, 6);
  const int8_t i8a[2] = {127, -100}, i8b[2] = {1, -100};
  void *d8 = device(i8a, 2), *s8 = device(i8b, 2);
  ASSERT_EQ(aclrtReduceAsync(dh, sh, 6, ACL_RT_MEMCPY_SDMA_AUTOMATIC_SUM, ACL_FLOAT16, s_, nullptr), ACL_SUCCESS);
  ASSERT_EQ(aclrtReduceAsync(d8, s8, 2, ACL_RT_MEMCPY_SDMA_AUTOMATIC_SUM, ACL_INT8, s_, nullptr), ACL_SUCCESS);
  ASSERT_EQ(aclrtSynchronizeStream(s_), ACL_SUCCESS);
  EXPECT_EQ(read<uint16_t>(dh, 3), std::vector<uint16_t>(want, want + 3));
  EXPECT_EQ(read<int8_t>(d8, 2), (std::vector<int8_t>{-128, 56}));
}

// memory.cpp kMapDataType (other types: the ACL's 100000), memory_stars.cc CheckReduceCapability (a type or kind the
// device does not reduce: 207000; Atlas A2: int8/int16/int32/fp16/fp32/bf16), a reserve that is not NULL (100000).
TEST_F(BuiltinTasks, ReduceRefusals) {
  void *d = device(nullptr, 16), *s = device(nullptr, 16);
  int reserve = 0;
  EXPECT_EQ(aclrtReduceAsync(d, s, 16, ACL_RT_MEMCPY_SDMA_AUTOMATIC_SUM, ACL_DOUBLE, s_, nullptr),
            ACL_ERROR_INVALID_PARAM);
  EXPECT_EQ(aclrtReduceAsync(d, s, 16, ACL_RT_MEMCPY_SDMA_AUTOMATIC_SUM, ACL_UINT8, s_, nullptr),
            ACL_ERROR_RT_FEATURE_NOT_SUPPORT);
  EXPECT_EQ(aclrtReduceAsync(d, s, 16, ACL_RT_MEMCPY_SDMA_AUTOMATIC_EQUAL, ACL_FLOAT, s_, nullptr),
            ACL_ERROR_RT_FEATURE_NOT_SUPPORT);
  EXPECT_EQ(aclrtReduceAsync(d, s, 16, ACL_RT_MEMCPY_SDMA_AUTOMATIC_SUM, ACL_FLOAT, s_, &reserve),
            ACL_ERROR_INVALID_PARAM);
  EXPECT_EQ(aclrtReduceAsync(nullptr, s, 16, ACL_RT_MEMCPY_SDMA_AUTOMATIC_SUM, ACL_FLOAT, s_, nullptr),
            ACL_ERROR_INVALID_PARAM);
}

// ---- random numbers ----

void set_param(aclrtRandomParaInfo *p, const void *value, uint8_t size) {
  std::memset(p, 0, sizeof(*p));
  std::memcpy(p->valueOrAddr, value, size);
  p->size = size;
}

aclrtRandomNumTaskInfo random_task(aclDataType type, aclrtRandomNumFuncType fn, void *counter, void *out, uint64_t seed,
                                   uint64_t num) {
  aclrtRandomNumTaskInfo t;
  std::memset(&t, 0, sizeof(t));
  t.dataType = type;
  t.randomNumFuncParaInfo.funcType = fn;
  t.randomCounterAddr = counter;
  t.randomResultAddr = out;
  set_param(&t.randomSeed, &seed, 8);
  set_param(&t.randomNum, &num, 8);
  return t;
}

// random_num_task.cc: uniform draws stay in [min, max) (ints and floats); the 16-byte counter advances, so the next
// task draws anew while the same counter and seed draw the same numbers; the ACL writes the runtime's type number
// (rts_stars.h: INT32 0 ... FP32 6) into the caller's taskInfo (kernel.cpp const_cast).
TEST_F(BuiltinTasks, RandomUniformAndTheCounter) {
  const uint8_t zero16[16] = {};
  void *counter = device(zero16, 16), *out = device(nullptr, 4096 * 4);
  int32_t lo = 1, hi = 100;
  aclrtRandomNumTaskInfo t = random_task(ACL_INT32, ACL_RT_RANDOM_NUM_FUNC_TYPE_UNIFORM_DIS, counter, out, 7, 4096);
  set_param(&t.randomNumFuncParaInfo.paramInfo.uniformDisInfo.min, &lo, 4);
  set_param(&t.randomNumFuncParaInfo.paramInfo.uniformDisInfo.max, &hi, 4);
  const aclrtRandomNumTaskInfo again = t;
  ASSERT_EQ(aclrtRandomNumAsync(&t, s_, nullptr), ACL_SUCCESS);
  EXPECT_EQ((int)t.dataType, 0);  // RT_RANDOM_NUM_DATATYPE_INT32
  ASSERT_EQ(aclrtSynchronizeStream(s_), ACL_SUCCESS);
  const std::vector<int32_t> first = read<int32_t>(out, 4096);
  std::vector<int> seen(100, 0);
  for (int32_t v : first) {
    ASSERT_GE(v, 1);
    ASSERT_LT(v, 100);
    seen[v]++;
  }
  for (int v = 1; v < 100; ++v) EXPECT_GT(seen[v], 10) << v;  // 4096 draws over 99 values: about 41 each
  EXPECT_NE(read<uint64_t>(counter, 2), (std::vector<uint64_t>{0, 0}));

  aclrtRandomNumTaskInfo t2 = again;
  ASSERT_EQ(aclrtRandomNumAsync(&t2, s_, nullptr), ACL_SUCCESS);
  ASSERT_EQ(aclrtSynchronizeStream(s_), ACL_SUCCESS);
  EXPECT_NE(read<int32_t>(out, 4096), first);
  ASSERT_EQ(aclrtMemcpy(counter, 16, zero16, 16, ACL_MEMCPY_HOST_TO_DEVICE), ACL_SUCCESS);
  t2 = again;
  ASSERT_EQ(aclrtRandomNumAsync(&t2, s_, nullptr), ACL_SUCCESS);
  ASSERT_EQ(aclrtSynchronizeStream(s_), ACL_SUCCESS);
  EXPECT_EQ(read<int32_t>(out, 4096), first);

  // Floats, with min and max given by device address (isAddr 1).
  const float fmin = -2.0f, fmax = 3.0f;
  void *dmin = device(&fmin, 4), *dmax = device(&fmax, 4);
  aclrtRandomNumTaskInfo f = random_task(ACL_FLOAT, ACL_RT_RANDOM_NUM_FUNC_TYPE_UNIFORM_DIS, counter, out, 1, 4096);
  for (auto [p, addr] : {std::pair{&f.randomNumFuncParaInfo.paramInfo.uniformDisInfo.min, dmin},
                         std::pair{&f.randomNumFuncParaInfo.paramInfo.uniformDisInfo.max, dmax}}) {
    set_param(p, &addr, 8);
    p->isAddr = 1;
    p->size = 4;
  }
  ASSERT_EQ(aclrtRandomNumAsync(&f, s_, nullptr), ACL_SUCCESS);
  ASSERT_EQ(aclrtSynchronizeStream(s_), ACL_SUCCESS);
  double sum = 0;
  for (float v : read<float>(out, 4096)) {
    ASSERT_GE(v, -2.0f);
    ASSERT_LT(v, 3.0f);
    sum += v;
  }
  EXPECT_NEAR(sum / 4096, 0.5, 0.15);
}

// Normal (the 1_random_num_task sample: mean 3, stddev 2), truncated normal within two standard deviations, and the
// dropout bitmask: one bit per element, set for a kept one (about 1 - ratio of them).
TEST_F(BuiltinTasks, RandomNormalTruncatedAndDropout) {
  const uint8_t zero16[16] = {};
  void *counter = device(zero16, 16), *out = device(nullptr, 8192 * 4);
  const float mean = 3.0f, stddev = 2.0f;
  aclrtRandomNumTaskInfo n = random_task(ACL_FLOAT, ACL_RT_RANDOM_NUM_FUNC_TYPE_NORMAL_DIS, counter, out, 0, 8192);
  set_param(&n.randomNumFuncParaInfo.paramInfo.normalDisInfo.mean, &mean, 4);
  set_param(&n.randomNumFuncParaInfo.paramInfo.normalDisInfo.stddev, &stddev, 4);
  ASSERT_EQ(aclrtRandomNumAsync(&n, s_, nullptr), ACL_SUCCESS);
  ASSERT_EQ(aclrtSynchronizeStream(s_), ACL_SUCCESS);
  double s = 0, ss = 0, far = 0;
  for (float v : read<float>(out, 8192)) s += v, ss += (double)v * v, far += std::fabs(v - 3.0f) > 4.0f ? 1 : 0;
  const double m = s / 8192, sd = std::sqrt(ss / 8192 - m * m);
  EXPECT_NEAR(m, 3.0, 0.1);
  EXPECT_NEAR(sd, 2.0, 0.1);
  EXPECT_GT(far, 100);  // about 4.6% lie beyond two standard deviations

  const uint16_t bmean = 0x3F80, bstd = 0x4000;  // bf16 1.0 and 2.0 (the sample's)
  aclrtRandomNumTaskInfo tr =
      random_task(ACL_BF16, ACL_RT_RANDOM_NUM_FUNC_TYPE_TRUNCATED_NORMAL_DIS, counter, out, 0, 4096);
  set_param(&tr.randomNumFuncParaInfo.paramInfo.normalDisInfo.mean, &bmean, 2);
  set_param(&tr.randomNumFuncParaInfo.paramInfo.normalDisInfo.stddev, &bstd, 2);
  ASSERT_EQ(aclrtRandomNumAsync(&tr, s_, nullptr), ACL_SUCCESS);
  ASSERT_EQ(aclrtSynchronizeStream(s_), ACL_SUCCESS);
  for (uint16_t b : read<uint16_t>(out, 4096)) {
    const uint32_t bits = (uint32_t)b << 16;
    float v;
    std::memcpy(&v, &bits, 4);
    ASSERT_LE(std::fabs(v - 1.0f), 4.0f * 1.01f);
  }

  const float ratio = 0.4f;
  aclrtRandomNumTaskInfo dr =
      random_task(ACL_FLOAT, ACL_RT_RANDOM_NUM_FUNC_TYPE_DROPOUT_BITMASK, counter, out, 0, 8000);
  set_param(&dr.randomNumFuncParaInfo.paramInfo.dropoutBitmaskInfo.dropoutRation, &ratio, 4);
  ASSERT_EQ(aclrtRandomNumAsync(&dr, s_, nullptr), ACL_SUCCESS);
  ASSERT_EQ(aclrtSynchronizeStream(s_), ACL_SUCCESS);
  int kept = 0;
  for (uint8_t byte : read<uint8_t>(out, 1000)) kept += __builtin_popcount(byte);
  EXPECT_NEAR(kept / 8000.0, 0.6, 0.03);
}

// kernel.cpp kMapDataType (INT8: the ACL's 100000, the struct untouched); random_num_task.cc CheckRandomNumTaskInfo
// (107000): a type the function does not draw, a null counter, a seed of 9 bytes, a parameter wider than its type, a
// reserve that is not NULL.
TEST_F(BuiltinTasks, RandomRefusals) {
  void *counter = device(nullptr, 16), *out = device(nullptr, 64);
  const float one = 1.0f;
  aclrtRandomNumTaskInfo t = random_task(ACL_INT8, ACL_RT_RANDOM_NUM_FUNC_TYPE_UNIFORM_DIS, counter, out, 0, 4);
  EXPECT_EQ(aclrtRandomNumAsync(&t, s_, nullptr), ACL_ERROR_INVALID_PARAM);
  EXPECT_EQ(t.dataType, ACL_INT8);
  t = random_task(ACL_INT32, ACL_RT_RANDOM_NUM_FUNC_TYPE_NORMAL_DIS, counter, out, 0, 4);
  EXPECT_EQ(aclrtRandomNumAsync(&t, s_, nullptr), ACL_ERROR_RT_PARAM_INVALID);
  t = random_task(ACL_FLOAT, ACL_RT_RANDOM_NUM_FUNC_TYPE_DROPOUT_BITMASK, nullptr, out, 0, 4);
  set_param(&t.randomNumFuncParaInfo.paramInfo.dropoutBitmaskInfo.dropoutRation, &one, 4);
  EXPECT_EQ(aclrtRandomNumAsync(&t, s_, nullptr), ACL_ERROR_RT_PARAM_INVALID);
  t = random_task(ACL_FLOAT, ACL_RT_RANDOM_NUM_FUNC_TYPE_DROPOUT_BITMASK, counter, out, 0, 4);
  set_param(&t.randomNumFuncParaInfo.paramInfo.dropoutBitmaskInfo.dropoutRation, &one, 4);
  t.randomSeed.size = 9;
  EXPECT_EQ(aclrtRandomNumAsync(&t, s_, nullptr), ACL_ERROR_RT_PARAM_INVALID);
  t = random_task(ACL_FLOAT16, ACL_RT_RANDOM_NUM_FUNC_TYPE_DROPOUT_BITMASK, counter, out, 0, 4);
  set_param(&t.randomNumFuncParaInfo.paramInfo.dropoutBitmaskInfo.dropoutRation, &one, 4);  // 4 bytes for fp16
  EXPECT_EQ(aclrtRandomNumAsync(&t, s_, nullptr), ACL_ERROR_RT_PARAM_INVALID);
  int reserve = 0;
  t = random_task(ACL_FLOAT, ACL_RT_RANDOM_NUM_FUNC_TYPE_DROPOUT_BITMASK, counter, out, 0, 4);
  set_param(&t.randomNumFuncParaInfo.paramInfo.dropoutBitmaskInfo.dropoutRation, &one, 4);
  EXPECT_EQ(aclrtRandomNumAsync(&t, s_, &reserve), ACL_ERROR_RT_PARAM_INVALID);
  EXPECT_EQ(aclrtRandomNumAsync(nullptr, s_, nullptr), ACL_ERROR_INVALID_PARAM);
}

// ---- peer access ----

// memory.cpp aclrtDeviceCanAccessPeerImpl / EnablePeerAccessImpl / DisablePeerAccessImpl: a device and itself is the
// ACL's 100000, an unknown peer 107001 (rtGetDevicePhyIdByIndex), flags other than 0 ACL_ERROR_FEATURE_UNSUPPORTED,
// no current device 107002 (rtGetDevice). The 2_device_P2P sample's copy from device 0 to device 1.
TEST_F(BuiltinTasks, PeerAccess) {
  int32_t can = -1;
  ASSERT_EQ(aclrtDeviceCanAccessPeer(&can, 0, 1), ACL_SUCCESS);
  EXPECT_EQ(can, 1);
  EXPECT_EQ(aclrtDeviceCanAccessPeer(&can, 0, 0), ACL_ERROR_INVALID_PARAM);
  EXPECT_EQ(aclrtDeviceCanAccessPeer(&can, 0, 99), ACL_ERROR_RT_INVALID_DEVICEID);
  EXPECT_EQ(aclrtDeviceEnablePeerAccess(1, 1), ACL_ERROR_FEATURE_UNSUPPORTED);
  EXPECT_EQ(aclrtDeviceEnablePeerAccess(0, 0), ACL_ERROR_INVALID_PARAM);
  EXPECT_EQ(aclrtDeviceEnablePeerAccess(99, 0), ACL_ERROR_RT_INVALID_DEVICEID);
  aclError no_device = ACL_SUCCESS;
  std::thread([&] { no_device = aclrtDeviceEnablePeerAccess(1, 0); }).join();
  EXPECT_EQ(no_device, ACL_ERROR_RT_CONTEXT_NULL);

  ASSERT_EQ(aclrtDeviceEnablePeerAccess(1, 0), ACL_SUCCESS);
  const uint8_t bytes[10] = {9, 8, 7, 6, 5, 4, 3, 2, 1, 0};
  void *d0 = device(bytes, 10);
  ASSERT_EQ(aclrtSetDevice(1), ACL_SUCCESS);
  ASSERT_EQ(aclrtDeviceEnablePeerAccess(0, 0), ACL_SUCCESS);
  void *d1 = nullptr;
  ASSERT_EQ(aclrtMalloc(&d1, 10, ACL_MEM_MALLOC_HUGE_FIRST_P2P), ACL_SUCCESS);
  ASSERT_EQ(aclrtMemcpy(d1, 10, d0, 10, ACL_MEMCPY_DEVICE_TO_DEVICE), ACL_SUCCESS);
  EXPECT_EQ(read<uint8_t>(d1, 10), std::vector<uint8_t>(bytes, bytes + 10));
  EXPECT_EQ(aclrtDeviceDisablePeerAccess(0), ACL_SUCCESS);
  EXPECT_EQ(aclrtFree(d1), ACL_SUCCESS);
  EXPECT_EQ(aclrtResetDevice(1), ACL_SUCCESS);
  ASSERT_EQ(aclrtSetDevice(0), ACL_SUCCESS);
  EXPECT_EQ(aclrtDeviceDisablePeerAccess(1), ACL_SUCCESS);
  EXPECT_EQ(aclrtDeviceDisablePeerAccess(0), ACL_ERROR_INVALID_PARAM);
  aclrtResetDevice(0);  // the extra set above
}

}  // namespace
