// The SoC the stand-in plays (fakecann/soc.h), from the platform configs of CANN's runtime
// (src/platform/platform_config/cann/Ascend910B1.ini, cann-dev/Ascend950PR_9599.ini): NpuArch, ai_core_cnt,
// vector_core_cnt, l2_size. The saturation mode is the process's (runtime.hpp Runtime::satMode_, SATURATION until set).
#include "fakecann/soc.h"

#include <atomic>
#include <cstdio>
#include <cstdlib>
#include <cstring>

namespace fakecann {

namespace {

constexpr SocInfo kPlayable[] = {{"Ascend910B1", 2201, 24, 48, 201326592},
                                 {"Ascend950PR_9599", 3510, 36, 72, 134217728}};

// The NpuArch of the SoCs the platform configs list (a compatibility check may name any of them).
constexpr struct {
  const char *name;
  int32_t arch;
} kArchs[] = {
    {"Ascend910A", 1001},        {"Ascend910B", 1001},      {"Ascend910ProA", 1001},    {"Ascend910ProB", 1001},
    {"Ascend910PremiumA", 1001}, {"Ascend310P1", 2002},     {"Ascend310P3", 2002},      {"Ascend310P5", 2002},
    {"Ascend310P7", 2002},       {"Ascend910B1", 2201},     {"Ascend910B2", 2201},      {"Ascend910B2C", 2201},
    {"Ascend910B3", 2201},       {"Ascend910B4", 2201},     {"Ascend910B4-1", 2201},    {"Ascend910_9362", 2201},
    {"Ascend910_9363", 2201},    {"Ascend910_9372", 2201},  {"Ascend910_9381", 2201},   {"Ascend910_9382", 2201},
    {"Ascend910_9391", 2201},    {"Ascend910_9392", 2201},  {"Ascend310B1", 3002},      {"Ascend310B2", 3002},
    {"Ascend310B3", 3002},       {"Ascend310B4", 3002},     {"Ascend950PR_9599", 3510}, {"Ascend950PR_9579", 3510},
    {"Ascend950DT_9591", 3510},  {"Ascend950DT_9592", 3510}};

std::atomic<int> g_sat_mode{0};

}  // namespace

const SocInfo &soc() {
  static const SocInfo &chosen = []() -> const SocInfo & {
    const char *want = std::getenv("FAKE_CANN_SOC");
    if (want == nullptr || *want == '\0') return kPlayable[0];
    for (const SocInfo &s : kPlayable)
      if (std::strcmp(s.name, want) == 0) return s;
    std::fprintf(stderr, "[fake_cann] FAKE_CANN_SOC=%s is not a SoC the stand-in plays; playing %s\n", want,
                 kPlayable[0].name);
    return kPlayable[0];
  }();
  return chosen;
}

int32_t npu_arch_of(const char *soc_name) {
  if (soc_name == nullptr) return 0;
  for (const auto &a : kArchs)
    if (std::strcmp(a.name, soc_name) == 0) return a.arch;
  return 0;
}

int saturation_mode() { return g_sat_mode.load(); }
void set_saturation_mode(int mode) { g_sat_mode = mode; }

}  // namespace fakecann
