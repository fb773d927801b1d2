// What the runtime says about itself and about errors, against CANN's runtime (hicann/runtime, src/acl/aclrt_impl/):
// the thread's last error, device fault information, package versions, the CANN attributes, the SoC and its
// architecture, device capabilities and the host fp16 conversions. Each test names the source it states.
#include <gtest/gtest.h>

#include <cmath>
#include <cstddef>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <random>
#include <string>
#include <thread>

#include "acl/acl.h"
#include "half_ref.h"

namespace {

class RuntimeInfo : public ::testing::Test {
 protected:
  void SetUp() override {
    ASSERT_EQ(aclrtSetDevice(0), ACL_SUCCESS);
    (void)aclrtGetLastError(ACL_RT_THREAD_LEVEL);  // a clean slate
  }
  void TearDown() override { aclrtResetDevice(0); }
};

uint16_t bits_of(_Float16 h) {
  uint16_t b;
  std::memcpy(&b, &h, 2);
  return b;
}

// context.cpp aclrtGetLastErrorImpl / aclrtPeekAtLastErrorImpl over runtime inner_thread_local.cpp: the runtime records
// its own failures (api_global_err.cc); the ACL layer's null checks (log_inner.h ACL_REQUIRES_NOT_NULL...) return
// before the runtime is called and leave the last error as it was. Get clears it, Peek does not.
TEST_F(RuntimeInfo, LastErrorIsTheRuntimesNotTheAclChecks) {
  EXPECT_EQ(aclrtGetRunMode(nullptr), ACL_ERROR_INVALID_PARAM);  // the 1_error_handling sample's failure
  EXPECT_EQ(aclrtPeekAtLastError(ACL_RT_THREAD_LEVEL), ACL_SUCCESS);
  EXPECT_EQ(aclrtGetLastError(ACL_RT_THREAD_LEVEL), ACL_SUCCESS);

  EXPECT_EQ(aclrtSetDevice(99), ACL_ERROR_RT_INVALID_DEVICEID);
  EXPECT_EQ(aclrtPeekAtLastError(ACL_RT_THREAD_LEVEL), ACL_ERROR_RT_INVALID_DEVICEID);
  EXPECT_EQ(aclrtPeekAtLastError(ACL_RT_THREAD_LEVEL), ACL_ERROR_RT_INVALID_DEVICEID);  // peek keeps it
  EXPECT_EQ(aclrtGetLastError(ACL_RT_THREAD_LEVEL), ACL_ERROR_RT_INVALID_DEVICEID);
  EXPECT_EQ(aclrtGetLastError(ACL_RT_THREAD_LEVEL), ACL_SUCCESS);  // get cleared it

  // A success does not clear it; a later failure replaces it.
  void *d = nullptr;
  EXPECT_EQ(aclrtSetDevice(99), ACL_ERROR_RT_INVALID_DEVICEID);
  ASSERT_EQ(aclrtMalloc(&d, 64, ACL_MEM_MALLOC_HUGE_FIRST), ACL_SUCCESS);
  EXPECT_EQ(aclrtPeekAtLastError(ACL_RT_THREAD_LEVEL), ACL_ERROR_RT_INVALID_DEVICEID);
  int32_t host = 0;
  EXPECT_EQ(aclrtMemcpy(&host, 4, d, 8, ACL_MEMCPY_DEVICE_TO_HOST), ACL_ERROR_RT_PARAM_INVALID);  // count > destMax
  EXPECT_EQ(aclrtGetLastError(ACL_RT_THREAD_LEVEL), ACL_ERROR_RT_PARAM_INVALID);
  EXPECT_EQ(aclrtFree(d), ACL_SUCCESS);

  // The level must be ACL_RT_THREAD_LEVEL (ACL_REQUIRES_PARAM_EQUAL_REPORT).
  EXPECT_EQ(aclrtGetLastError(static_cast<aclrtLastErrLevel>(1)), ACL_ERROR_INVALID_PARAM);
  EXPECT_EQ(aclrtPeekAtLastError(static_cast<aclrtLastErrLevel>(1)), ACL_ERROR_INVALID_PARAM);
}

// The last error is the thread's own (InnerThreadLocalContainer::globalError_ is thread_local).
TEST_F(RuntimeInfo, LastErrorIsPerThread) {
  EXPECT_EQ(aclrtSetDevice(99), ACL_ERROR_RT_INVALID_DEVICEID);
  aclError other = -1;
  std::thread([&] { other = aclrtPeekAtLastError(ACL_RT_THREAD_LEVEL); }).join();
  EXPECT_EQ(other, ACL_SUCCESS);
  EXPECT_EQ(aclrtGetLastError(ACL_RT_THREAD_LEVEL), ACL_ERROR_RT_INVALID_DEVICEID);
}

// acl.cpp aclGetRecentErrMsgImpl: nullptr when nothing was ever reported on the thread.
TEST_F(RuntimeInfo, RecentErrMsgIsNullBeforeAnyError) {
  const char *msg = "unset";
  std::thread([&] { msg = aclGetRecentErrMsg(); }).join();
  EXPECT_EQ(msg, nullptr);
}

// event.cpp aclrtGetErrorVerboseImpl over api_impl.cc GetErrorVerbose (910B has RT_FEATURE_DFX_ERR_GET_AND_REPAIR):
// a device without a fault reads ACL_RT_NO_ERROR with no detail; a null errorInfo is refused. RepairError of
// "no error" succeeds; another type the device does not have is RT_ERROR_INVALID_VALUE (107000).
TEST_F(RuntimeInfo, ErrorVerboseOfAHealthyDevice) {
  aclrtErrorInfo info;
  std::memset(&info, 0x5a, sizeof(info));
  ASSERT_EQ(aclrtGetErrorVerbose(0, &info), ACL_SUCCESS);
  EXPECT_EQ(info.errorType, ACL_RT_NO_ERROR);
  EXPECT_EQ(info.tryRepair, 0);
  EXPECT_EQ(info.hasDetail, 0);
  EXPECT_EQ(aclrtGetErrorVerbose(0, nullptr), ACL_ERROR_INVALID_PARAM);
  EXPECT_EQ(aclrtRepairError(0, &info), ACL_SUCCESS);
  info.errorType = ACL_RT_ERROR_LINK;
  EXPECT_EQ(aclrtRepairError(0, &info), ACL_ERROR_RT_PARAM_INVALID);
  EXPECT_EQ(aclrtRepairError(0, nullptr), ACL_ERROR_INVALID_PARAM);
  // The layout CANN's header gives: reserved bytes, then the type at offset 4, the detail union after it.
  EXPECT_EQ(offsetof(aclrtErrorInfo, errorType), 4u);
  EXPECT_EQ(sizeof(aclrtMemUceInfo), 16u + 8u * UCE_INFO_RESERVED_SIZE);
}

// acl.cpp GetPkgVersionContent: <ASCEND_HOME_PATH>/share/info/<pkg>/version.info, "Version=" (the runtime package is
// 9.1.0: runtime version.cmake); CalculateVersionNum: major*10^7 + minor*10^5 + patch*10^3.
TEST_F(RuntimeInfo, PackageVersionsFromTheInstall) {
  char pkg[] = "runtime";
  char version[ACL_PKG_VERSION_MAX_SIZE] = {};
  ASSERT_EQ(aclsysGetVersionStr(pkg, version), ACL_SUCCESS);
  EXPECT_STREQ(version, "9.1.0");
  int32_t num = 0;
  ASSERT_EQ(aclsysGetVersionNum(pkg, &num), ACL_SUCCESS);
  EXPECT_EQ(num, 90100000);
  char hccl[] = "hccl";
  ASSERT_EQ(aclsysGetVersionNum(hccl, &num), ACL_SUCCESS);
  EXPECT_EQ(num, 90200000);
  char ops_math[] = "ops-math";  // not found as named: retried with '-' and '_' swapped
  ASSERT_EQ(aclsysGetVersionStr(ops_math, version), ACL_SUCCESS);
  EXPECT_STREQ(version, "9.1.0");
  char missing[] = "no-such-package";
  EXPECT_EQ(aclsysGetVersionStr(missing, version), ACL_ERROR_INVALID_FILE);
  EXPECT_EQ(aclsysGetVersionNum(pkg, nullptr), ACL_ERROR_INVALID_PARAM);
}

// ParseBaseVersion needs major.minor.patch; ParsePrereleasePart: alpha -300, beta -200, rc -100, plus the number
// after it. A package installed elsewhere is found through ASCEND_HOME_PATH only.
TEST_F(RuntimeInfo, PrereleaseVersionNumbers) {
  char dir_template[] = "/tmp/fake_cann_home_XXXXXX";
  const char *dir = mkdtemp(dir_template);
  ASSERT_NE(dir, nullptr);
  const std::string info = std::string(dir) + "/share/info/";
  const struct {
    const char *version;
    int32_t num;
    aclError ret;
  } cases[] = {{"8.0.0.RC3", 80000000 - 100 + 3, ACL_SUCCESS},
               {"8.0.RC3", 0, ACL_ERROR_INTERNAL_ERROR},  // no patch number (ParseBaseVersion)
               {"8.5.0-beta.1", 80500000 - 200 + 1, ACL_SUCCESS},
               {"9.0.0alpha", 90000000 - 300, ACL_SUCCESS},
               {"9.0.0.rc..1", 0, ACL_ERROR_INTERNAL_ERROR},
               {"9.0", 0, ACL_ERROR_INTERNAL_ERROR},
               {"9.0.0-gamma", 0, ACL_ERROR_INTERNAL_ERROR}};
  const std::string saved = std::getenv("ASCEND_HOME_PATH");
  setenv("ASCEND_HOME_PATH", dir, 1);
  for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); ++i) {
    const std::string pkg = "pkg" + std::to_string(i);
    ASSERT_EQ(std::system(("mkdir -p " + info + pkg).c_str()), 0);
    std::ofstream(info + pkg + "/version.info") << "Version=" << cases[i].version << "\nversion_dir=x\n";
    std::string name = pkg;
    int32_t num = 0;
    EXPECT_EQ(aclsysGetVersionNum(name.data(), &num), cases[i].ret) << cases[i].version;
    if (cases[i].ret == ACL_SUCCESS) {
      EXPECT_EQ(num, cases[i].num) << cases[i].version;
    }
  }
  unsetenv("ASCEND_HOME_PATH");
  char runtime[] = "runtime";
  char version[ACL_PKG_VERSION_MAX_SIZE];
  EXPECT_EQ(aclsysGetVersionStr(runtime, version), ACL_ERROR_INVALID_FILE);
  setenv("ASCEND_HOME_PATH", saved.c_str(), 1);
  std::system(("rm -rf " + std::string(dir)).c_str());
}

// cann_info_utils.cpp over config/swFeatureList.json (BF16 and INF_NAN from runtime 7.1, JIT_COMPILE from 6.4) and
// Ascend910B1.ini (support_bf16=1, support_inf_nan=1): all three available, in enum order, each 1.
TEST_F(RuntimeInfo, CannAttributes) {
  const aclCannAttr *list = nullptr;
  size_t n = 0;
  ASSERT_EQ(aclGetCannAttributeList(&list, &n), ACL_SUCCESS);
  ASSERT_EQ(n, 3u);
  EXPECT_EQ(list[0], ACL_CANN_ATTR_INF_NAN);
  EXPECT_EQ(list[1], ACL_CANN_ATTR_BF16);
  EXPECT_EQ(list[2], ACL_CANN_ATTR_JIT_COMPILE);
  for (size_t i = 0; i < n; ++i) {
    int32_t v = -1;
    ASSERT_EQ(aclGetCannAttribute(list[i], &v), ACL_SUCCESS);
    EXPECT_EQ(v, 1);
  }
  int32_t v = 0;
  EXPECT_EQ(aclGetCannAttribute(ACL_CANN_ATTR_UNDEFINED, &v), ACL_ERROR_INVALID_PARAM);
  EXPECT_EQ(aclGetCannAttributeList(nullptr, &n), ACL_ERROR_INVALID_PARAM);
}

// The SoC (Ascend910B1.ini: NpuArch 2201, ai_core_cnt 24, vector_core_cnt 48, l2_size 201326592);
// api_impl.cc CheckArchCompatibility: 1 for a SoC of the same NpuArch, 0 for another, an unknown name 107000;
// api_c_device.cc rtsDeviceGetCapability: the two features of aclrtDevFeatureType, anything else 107000.
TEST_F(RuntimeInfo, SocArchitectureAndCapabilities) {
  EXPECT_STREQ(aclrtGetSocName(), "Ascend910B1");
  int32_t ok = -1;
  ASSERT_EQ(aclrtCheckArchCompatibility("Ascend910B1", &ok), ACL_SUCCESS);
  EXPECT_EQ(ok, 1);
  ASSERT_EQ(aclrtCheckArchCompatibility("Ascend910_9391", &ok), ACL_SUCCESS);  // A3: the same NpuArch 2201
  EXPECT_EQ(ok, 1);
  ASSERT_EQ(aclrtCheckArchCompatibility("Ascend310P3", &ok), ACL_SUCCESS);
  EXPECT_EQ(ok, 0);
  EXPECT_EQ(aclrtCheckArchCompatibility("Ascend999", &ok), ACL_ERROR_RT_PARAM_INVALID);
  EXPECT_EQ(aclrtCheckArchCompatibility("", &ok), ACL_ERROR_RT_PARAM_INVALID);

  int32_t cap = -1;
  ASSERT_EQ(aclrtGetDeviceCapability(0, ACL_FEATURE_TSCPU_TASK_UPDATE_SUPPORT_AIC_AIV, &cap), ACL_SUCCESS);
  EXPECT_EQ(cap, ACL_DEV_FEATURE_SUPPORT);
  ASSERT_EQ(aclrtGetDeviceCapability(0, ACL_FEATURE_SYSTEM_MEMQ_EVENT_CROSS_DEV, &cap), ACL_SUCCESS);
  EXPECT_EQ(cap, ACL_DEV_FEATURE_NOT_SUPPORT);
  EXPECT_EQ(aclrtGetDeviceCapability(0, static_cast<aclrtDevFeatureType>(7), &cap), ACL_ERROR_RT_PARAM_INVALID);

  int64_t value = 0;
  ASSERT_EQ(aclGetDeviceCapability(0, ACL_DEVICE_INFO_AI_CORE_NUM, &value), ACL_SUCCESS);
  EXPECT_EQ(value, 24);
  ASSERT_EQ(aclGetDeviceCapability(0, ACL_DEVICE_INFO_VECTOR_CORE_NUM, &value), ACL_SUCCESS);
  EXPECT_EQ(value, 48);
  ASSERT_EQ(aclGetDeviceCapability(0, ACL_DEVICE_INFO_L2_SIZE, &value), ACL_SUCCESS);
  EXPECT_EQ(value, 201326592);
  uint32_t count = 0;
  ASSERT_EQ(aclrtGetDeviceCount(&count), ACL_SUCCESS);
  EXPECT_EQ(aclGetDeviceCapability(count, ACL_DEVICE_INFO_AI_CORE_NUM, &value), ACL_ERROR_INVALID_PARAM);
}

// types/fp16_impl.cpp FloatToFp16: round to nearest even (checked against the compiler's _Float16), saturating:
// beyond the largest half, Inf and NaN give 0x7BFF / 0xFBFF. Fp16ToFloat is exact and has no Inf or NaN: 0x7C00
// reads 65536, 0x7E00 98304.
TEST(HostFp16, ConversionsAsCanns) {
  std::mt19937 rng(7);
  std::uniform_real_distribution<float> mag(-24.0f, 15.9f);
  for (int i = 0; i < 20000; ++i) {
    const float f = std::ldexp(1.0f + (float)(rng() % 8388608) / 8388608.0f, (int)std::floor(mag(rng))) *
                    ((rng() & 1) ? -1.0f : 1.0f);
    const _Float16 ref = (_Float16)f;
    if (std::isinf((float)ref)) continue;  // the saturated range is checked below
    ASSERT_EQ(aclFloatToFloat16(f), bits_of(ref)) << f;
    ASSERT_EQ(aclFloat16ToFloat(bits_of(ref)), (float)ref);
  }
  EXPECT_EQ(aclFloatToFloat16(1.625f), 0x3E80);  // the 2_system_info sample's value
  EXPECT_EQ(aclFloatToFloat16(65504.0f), 0x7BFF);
  EXPECT_EQ(aclFloatToFloat16(65520.0f), 0x7BFF);  // _Float16 rounds this to Inf
  EXPECT_EQ(aclFloatToFloat16(1e9f), 0x7BFF);
  EXPECT_EQ(aclFloatToFloat16(INFINITY), 0x7BFF);
  EXPECT_EQ(aclFloatToFloat16(-INFINITY), 0xFBFF);
  EXPECT_EQ(aclFloatToFloat16(NAN), 0x7BFF);
  EXPECT_EQ(aclFloatToFloat16(-0.0f), 0x8000);
  EXPECT_EQ(aclFloatToFloat16(std::ldexp(1.0f, -25)), 0x0000);             // exactly half the smallest: to even
  EXPECT_EQ(aclFloatToFloat16(std::ldexp(1.5f, -25)), 0x0001);             // above it: the smallest subnormal
  EXPECT_EQ(aclFloatToFloat16(std::ldexp(1.0f, -14) * 0.99999f), 0x0400);  // rounds up to the smallest normal
  EXPECT_EQ(aclFloat16ToFloat(0x7C00), 65536.0f);
  EXPECT_EQ(aclFloat16ToFloat(0xFC00), -65536.0f);
  EXPECT_EQ(aclFloat16ToFloat(0x7E00), 98304.0f);
  EXPECT_EQ(aclFloat16ToFloat(0x0001), std::ldexp(1.0f, -24));
  EXPECT_TRUE(std::signbit(aclFloat16ToFloat(0x8000)));
}

}  // namespace
