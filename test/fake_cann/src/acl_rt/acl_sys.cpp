// ACL runtime: what describes the install and the device, as CANN's runtime answers it:
// - package versions from <ASCEND_HOME_PATH>/share/info/<package>/version.info, its "Version=" line
//   (src/acl/aclrt_impl/acl.cpp GetPkgVersionContent, CalculateVersionNum);
// - the CANN attributes (utils/cann_info_utils.cpp): each available when the runtime's version.info, found from the
//   library's own install, is at least the version config/swFeatureList.json asks and the SoC supports it;
// - the SoC (fakecann/soc.h: Ascend910B1 unless FAKE_CANN_SOC names Ascend950PR_9599), its NPU architecture, core
//   counts and L2 size, from its platform config;
// - the host fp16 conversions (aclrt_impl/types/fp16_impl.cpp), which saturate rather than keep Inf and NaN;
// - the thread's last runtime error and device fault information (context.cpp, event.cpp).
#include <dlfcn.h>

#include <cctype>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <string>

#include "acl/acl.h"
#include "fakecann/soc.h"
#include "fakecann/stream.h"

using namespace fakecann;

namespace {

aclError refuse(aclError code, const std::string &why) {
  set_error_message(why);
  return code;
}

// The "Version=" value of a version.info file, trimmed; empty if the file or the line is missing.
std::string read_version_file(const std::string &path) {
  std::ifstream f(path);
  std::string line;
  while (std::getline(f, line)) {
    const size_t at = line.find("Version=");
    if (at == std::string::npos) continue;
    std::string v = line.substr(at + 8);
    while (!v.empty() && std::isspace((unsigned char)v.back())) v.pop_back();
    while (!v.empty() && std::isspace((unsigned char)v.front())) v.erase(0, 1);
    return v;
  }
  return "";
}

// A package's version string: <ASCEND_HOME_PATH>/share/info/<name>/version.info, else with '-' and '_' swapped.
aclError package_version(const char *pkg, std::string *out) {
  const char *home = std::getenv("ASCEND_HOME_PATH");
  if (home == nullptr) return refuse(ACL_ERROR_INVALID_FILE, "ASCEND_HOME_PATH is not set");
  std::string names[2] = {pkg, pkg};
  for (char &c : names[1]) c = c == '-' ? '_' : c == '_' ? '-' : c;
  for (const std::string &name : names) {
    std::string v = read_version_file(std::string(home) + "/share/info/" + name + "/version.info");
    if (!v.empty()) {
      *out = v;
      return ACL_SUCCESS;
    }
  }
  return refuse(ACL_ERROR_INVALID_FILE, std::string("no version.info with a Version= line for package ") + pkg);
}

// A pre-release suffix: "alpha", "beta" or "rc" (at most one '.' or '-' before it), then at most one separator and a
// number; it lowers the version by 300, 200 or 100 and adds the number.
bool prerelease_adjustment(const std::string &raw, int32_t *adjust) {
  std::string s = raw;
  for (char &c : s) c = (char)std::tolower((unsigned char)c);
  static const struct {
    const char *word;
    int32_t weight;
  } kWords[] = {{"alpha", 300}, {"beta", 200}, {"rc", 100}};
  for (const auto &w : kWords) {
    const size_t at = s.find(w.word);
    if (at == std::string::npos) continue;
    if (at > 1) return false;
    std::string num = raw.substr(at + std::strlen(w.word));
    size_t digit = 0;
    while (digit < num.size() && (num[digit] == '.' || num[digit] == '-')) ++digit;
    if (num.empty()) {
      *adjust = -w.weight;
      return true;
    }
    if (digit > 1 || digit == num.size()) return false;
    for (size_t i = digit; i < num.size(); ++i)
      if (!std::isdigit((unsigned char)num[i])) return false;
    *adjust = -w.weight + std::atoi(num.c_str() + digit);
    return true;
  }
  return false;
}

// major * 10^7 + minor * 10^5 + patch * 10^3, adjusted by a pre-release suffix.
aclError version_number(const std::string &v, int32_t *out) {
  const size_t dot1 = v.find('.');
  const size_t dot2 = dot1 == std::string::npos ? dot1 : v.find('.', dot1 + 1);
  if (dot1 == std::string::npos || dot1 == 0 || dot2 == std::string::npos || dot2 == dot1 + 1)
    return refuse(ACL_ERROR_INTERNAL_ERROR, "version " + v + " is not major.minor.patch");
  size_t end = dot2 + 1;
  while (end < v.size() && std::isdigit((unsigned char)v[end])) ++end;
  if (end == dot2 + 1) return refuse(ACL_ERROR_INTERNAL_ERROR, "version " + v + " has no patch number");
  for (size_t i = 0; i < dot2; ++i)
    if (i != dot1 && !std::isdigit((unsigned char)v[i]))
      return refuse(ACL_ERROR_INTERNAL_ERROR, "version " + v + " is not numeric");
  int32_t adjust = 0;
  if (end < v.size() && !prerelease_adjustment(v.substr(end), &adjust))
    return refuse(ACL_ERROR_INTERNAL_ERROR, "version " + v + " has an unknown suffix");
  *out = std::atoi(v.c_str()) * 10000000 + std::atoi(v.c_str() + dot1 + 1) * 100000 +
         std::atoi(v.c_str() + dot2 + 1) * 1000 + adjust;
  return ACL_SUCCESS;
}

// The runtime version of the install this library belongs to: <lib64>/../share/info/runtime/version.info.
std::string own_runtime_version() {
  Dl_info info{};
  if (dladdr(reinterpret_cast<void *>(&own_runtime_version), &info) == 0 || info.dli_fname == nullptr) return "";
  std::string lib = info.dli_fname;
  const size_t slash = lib.rfind('/');
  const std::string dir = slash == std::string::npos ? "." : lib.substr(0, slash);
  return read_version_file(dir + "/../share/info/runtime/version.info");
}

// Round to nearest even of `m` shifted right by `shift` bits (shift >= 2).
uint32_t shift_round_even(uint64_t m, unsigned shift) {
  const uint64_t kept = m >> shift, rest = m & ((1ull << shift) - 1), halfway = 1ull << (shift - 1);
  return (uint32_t)(kept + ((rest > halfway || (rest == halfway && (kept & 1))) ? 1 : 0));
}

}  // namespace

extern "C" {

// fp32 -> fp16 rounding to nearest even, saturating: a value too large for fp16, Inf and NaN all become the largest
// finite half of their sign (0x7BFF, 65504), never Inf.
aclFloat16 aclFloatToFloat16(float value) {
  uint32_t u;
  std::memcpy(&u, &value, 4);
  const uint16_t sign = (uint16_t)((u >> 16) & 0x8000u);
  const uint32_t exp = (u >> 23) & 0xFFu, man = u & 0x7FFFFFu;
  if (exp > 142) return sign | 0x7BFF;  // 2^16 and beyond, Inf, NaN
  if (exp <= 112) {                     // a subnormal half or zero
    if (exp < 102) return sign;
    if (exp == 102) return man != 0 ? (uint16_t)(sign | 1) : sign;  // below the smallest subnormal: it or zero
    const uint32_t m = shift_round_even((uint64_t)(man | 0x800000u) << (exp - 103), 23);
    return (uint16_t)(sign | m);  // a carry into 0x400 is the smallest normal half
  }
  uint32_t e = exp - 112, m = shift_round_even(man, 13);
  if (m == 0x400) e += 1, m = 0;
  if (e >= 31) return sign | 0x7BFF;  // rounded past the largest finite half
  return (uint16_t)(sign | (e << 10) | m);
}

// fp16 -> fp32 exactly, with no Inf or NaN: exponent 31 is an ordinary exponent (0x7C00 is 65536, 0x7E00 98304).
float aclFloat16ToFloat(aclFloat16 value) {
  const uint32_t sign = (uint32_t)(value & 0x8000u) << 16;
  int32_t exp = (value >> 10) & 0x1F;
  uint32_t man = value & 0x3FFu;
  uint32_t bits = sign;
  if (exp == 0 && man == 0) {
    // signed zero
  } else {
    if (exp == 0) {  // subnormal: normalize
      exp = 1;
      while ((man & 0x400u) == 0) man <<= 1, --exp;
      man &= 0x3FFu;
    }
    bits |= (uint32_t)(exp + 112) << 23 | man << 13;
  }
  float f;
  std::memcpy(&f, &bits, 4);
  return f;
}

aclError aclsysGetVersionStr(char *pkgName, char *versionStr) {
  if (pkgName == nullptr || versionStr == nullptr) return ACL_ERROR_INVALID_PARAM;
  std::string v;
  if (aclError e = package_version(pkgName, &v)) return e;
  if (v.size() >= ACL_PKG_VERSION_MAX_SIZE) return refuse(ACL_ERROR_INTERNAL_ERROR, "version string too long");
  std::memcpy(versionStr, v.c_str(), v.size() + 1);
  return ACL_SUCCESS;
}

aclError aclsysGetVersionNum(char *pkgName, int32_t *versionNum) {
  if (pkgName == nullptr || versionNum == nullptr) return ACL_ERROR_INVALID_PARAM;
  std::string v;
  if (aclError e = package_version(pkgName, &v)) return e;
  return version_number(v, versionNum);
}

const char *aclrtGetSocName(void) { return soc().name; }

aclError aclrtCheckArchCompatibility(const char *socVersion, int32_t *canCompatible) {
  if (socVersion == nullptr || canCompatible == nullptr || socVersion[0] == '\0')
    return rt_error(ACL_ERROR_RT_PARAM_INVALID);
  const int32_t arch = npu_arch_of(socVersion);
  if (arch == 0) {
    set_error_message(std::string("SoC version ") + socVersion + " is invalid");
    return rt_error(ACL_ERROR_RT_PARAM_INVALID);
  }
  *canCompatible = arch == soc().npu_arch ? 1 : 0;
  return ACL_SUCCESS;
}

// TSCPU task update: the stand-in updates captured task groups (ACL_DEV_FEATURE_SUPPORT); memory queue events across
// devices: it has no memory queues.
aclError aclrtGetDeviceCapability(int32_t deviceId, aclrtDevFeatureType devFeatureType, int32_t *value) {
  if (value == nullptr) return ACL_ERROR_INVALID_PARAM;
  if (deviceId < 0 || deviceId >= device_count()) return rt_error(ACL_ERROR_RT_INVALID_DEVICEID);
  switch (devFeatureType) {
    case ACL_FEATURE_TSCPU_TASK_UPDATE_SUPPORT_AIC_AIV: *value = ACL_DEV_FEATURE_SUPPORT; return ACL_SUCCESS;
    case ACL_FEATURE_SYSTEM_MEMQ_EVENT_CROSS_DEV: *value = ACL_DEV_FEATURE_NOT_SUPPORT; return ACL_SUCCESS;
    default:
      set_error_message("devFeatureType " + std::to_string((int)devFeatureType) + " is not a device feature");
      return rt_error(ACL_ERROR_RT_PARAM_INVALID);
  }
}

aclError aclGetDeviceCapability(uint32_t deviceId, aclDeviceInfo deviceInfo, int64_t *value) {
  if (value == nullptr || deviceId >= (uint32_t)device_count()) return ACL_ERROR_INVALID_PARAM;
  switch (deviceInfo) {
    case ACL_DEVICE_INFO_AI_CORE_NUM: *value = soc().ai_cores; return ACL_SUCCESS;
    case ACL_DEVICE_INFO_VECTOR_CORE_NUM: *value = soc().vector_cores; return ACL_SUCCESS;
    case ACL_DEVICE_INFO_L2_SIZE: *value = soc().l2_bytes; return ACL_SUCCESS;
    default: return ACL_ERROR_INVALID_PARAM;
  }
}

// Both SoCs support inf/nan and bf16 (support_inf_nan, support_bf16); the runtime must be at least 7.1 for both, 6.4
// for JIT compilation.
aclError aclGetCannAttributeList(const aclCannAttr **cannAttrList, size_t *num) {
  static const aclCannAttr kAll[] = {ACL_CANN_ATTR_INF_NAN, ACL_CANN_ATTR_BF16, ACL_CANN_ATTR_JIT_COMPILE};
  static const int32_t kSince[] = {70100000, 70100000, 60400000};
  static aclCannAttr available[3];
  if (cannAttrList == nullptr || num == nullptr) return ACL_ERROR_INVALID_PARAM;
  int32_t runtime = 0;
  const std::string v = own_runtime_version();
  if (v.empty() || version_number(v, &runtime) != ACL_SUCCESS)
    return refuse(ACL_ERROR_INTERNAL_ERROR, "cannot read the runtime's share/info/runtime/version.info");
  size_t n = 0;
  for (size_t i = 0; i < 3; ++i)
    if (runtime >= kSince[i]) available[n++] = kAll[i];
  *cannAttrList = available;
  *num = n;
  return ACL_SUCCESS;
}

aclError aclGetCannAttribute(aclCannAttr cannAttr, int32_t *value) {
  if (value == nullptr) return ACL_ERROR_INVALID_PARAM;
  const aclCannAttr *list = nullptr;
  size_t n = 0;
  if (aclError e = aclGetCannAttributeList(&list, &n)) return e;
  if (cannAttr != ACL_CANN_ATTR_INF_NAN && cannAttr != ACL_CANN_ATTR_BF16 && cannAttr != ACL_CANN_ATTR_JIT_COMPILE)
    return ACL_ERROR_INVALID_PARAM;
  *value = 0;
  for (size_t i = 0; i < n; ++i)
    if (list[i] == cannAttr) *value = 1;
  return ACL_SUCCESS;
}

aclError aclrtPeekAtLastError(aclrtLastErrLevel level) {
  if (level != ACL_RT_THREAD_LEVEL) return ACL_ERROR_INVALID_PARAM;
  return last_rt_error(false);
}

aclError aclrtGetLastError(aclrtLastErrLevel level) {
  if (level != ACL_RT_THREAD_LEVEL) return ACL_ERROR_INVALID_PARAM;
  return last_rt_error(true);
}

// The stand-in's devices never fault: any device reads "no error" (as CANN's does for a device without a context).
aclError aclrtGetErrorVerbose(int32_t deviceId, aclrtErrorInfo *errorInfo) {
  (void)deviceId;
  if (errorInfo == nullptr) return ACL_ERROR_INVALID_PARAM;
  errorInfo->tryRepair = 0;
  errorInfo->hasDetail = 0;
  errorInfo->errorType = ACL_RT_NO_ERROR;
  errorInfo->detail.aicoreErrType = ACL_RT_AICORE_ERROR_UNKNOWN;
  return ACL_SUCCESS;
}

// Repairing "no error" succeeds; a memory fault the device does not have, or another type, is an invalid value.
aclError aclrtRepairError(int32_t deviceId, const aclrtErrorInfo *errorInfo) {
  if (errorInfo == nullptr) return ACL_ERROR_INVALID_PARAM;
  if (deviceId < 0 || deviceId >= device_count()) return rt_error(ACL_ERROR_RT_DEV_SETUP_ERROR);
  if (errorInfo->errorType == ACL_RT_NO_ERROR) return ACL_SUCCESS;
  set_error_message("aclrtRepairError: the device has no fault of type " + std::to_string((int)errorInfo->errorType));
  return rt_error(ACL_ERROR_RT_PARAM_INVALID);
}

}  // extern "C"
