#include "shim/capture/rank_map.h"

#include <cstdlib>

#include "shim/base/log.h"

namespace msprobe::shim {
namespace {

// The calling thread's current device, as its aclrtSetDevice (or context) last set it; -1: none seen.
thread_local int32_t t_device __attribute__((tls_model("initial-exec"))) = -1;

}  // namespace

std::optional<uint32_t> rank_from_environment() {
  for (const char *var : {"RANK_ID", "RANK"}) {
    const char *v = std::getenv(var);
    if (v == nullptr || *v == '\0') continue;
    char *end = nullptr;
    unsigned long r = std::strtoul(v, &end, 10);
    if (*end == '\0' && r < (1ul << 31)) return (uint32_t)r;
    log_warn("%s=\"%.32s\" is not a rank number; ignored", var, v);
  }
  return std::nullopt;
}

void RankMap::resolve_environment() {
  if (environment_read_) return;
  environment_read_ = true;  // at the first launch: a launcher may set the variable after the process started
  env_rank_ = rank_from_environment();
}

void RankMap::thread_device(int32_t device) {
  t_device = device;
  if (device >= 0) devices_.insert(device);
}

std::optional<uint32_t> RankMap::of_thread_launch() {
  resolve_environment();
  if (!env_rank_ && t_device >= 0) {
    if (auto it = device_rank_.find(t_device); it != device_rank_.end()) return it->second;
    if (devices_.size() > 1) return (uint32_t)t_device;
  }
  return without_thread_device();
}

bool RankMap::communicator_rank(uint32_t rank, int32_t device) {
  resolve_environment();
  if (device < 0) device = t_device;
  if (device >= 0) device_rank_[device] = rank;
  if (env_rank_ || devices_.size() > 1 || single_rank_) return false;
  single_rank_ = rank;
  if (!unranked_launches_) return false;
  adopted_ = rank;
  return true;
}

}  // namespace msprobe::shim
