// The SoC the stand-in plays, and the device's saturation mode: shared by the ACL (aclrtGetSocName,
// aclrtCheckArchCompatibility, aclGetDeviceCapability, aclrtSetDeviceSatMode) and the operators whose dtype support
// depends on the NPU architecture (aclnnCast) or whose conversions on the mode (fp8 overflow).
#pragma once
#include <cstdint>

#include "fakecann/export.h"

namespace fakecann {

struct SocInfo {
  const char *name;
  int32_t npu_arch;  // the platform config's NpuArch: 2201 (Atlas A2), 3510 (Ascend 950)
  int64_t ai_cores, vector_cores, l2_bytes;
};

// FAKE_CANN_SOC (Ascend910B1, the default, or Ascend950PR_9599), read once; another value is reported on stderr and
// the default played.
FAKECANN_API const SocInfo &soc();
// The NpuArch of a SoC name the platform configs list, 0 for an unknown one.
FAKECANN_API int32_t npu_arch_of(const char *soc_name);
// Ascend 950's register-based architecture (NpuArch 35xx), whose operators take the 8- and 4-bit float types.
inline bool regbase(int32_t npu_arch) { return npu_arch / 100 == 35; }

// aclrtSetDeviceSatMode's mode: 0 SATURATION (the default), 1 INFNAN.
FAKECANN_API int saturation_mode();
FAKECANN_API void set_saturation_mode(int mode);

}  // namespace fakecann
