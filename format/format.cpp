#include "format/format.h"

#include <array>

namespace msprobe::format {
std::optional<DType> parse_dtype_id(std::string_view s) {
  for (int i = 0; i < kDTypeCount; ++i)
    if (kDTypeSpellings[i].id == s) return static_cast<DType>(i);
  return std::nullopt;
}

std::string_view framework_name(Framework f) { return f == Framework::PyTorch ? "pytorch" : "mindspore"; }

std::optional<Framework> parse_framework(std::string_view s) {
  if (s == "pytorch") return Framework::PyTorch;
  if (s == "mindspore") return Framework::MindSpore;
  return std::nullopt;
}

std::string_view host_framework_name(HostFramework f) {
  switch (f) {
    case HostFramework::PyTorch: return "pytorch";
    case HostFramework::MindSpore: return "mindspore";
    case HostFramework::Acl: return "acl";
  }
  return "acl";
}

std::optional<DType> parse_dtype_name(std::string_view s, Framework f) {
  for (int i = 0; i < kDTypeCount - 1; ++i) {  // "unknown" does not name Raw back
    const auto &sp = kDTypeSpellings[i];
    if ((f == Framework::PyTorch ? sp.torch : sp.mindspore) == s) return static_cast<DType>(i);
  }
  return std::nullopt;
}

std::optional<Task> parse_task(std::string_view s) {
  for (Task t : {Task::Statistics, Task::Tensor, Task::OverflowCheck, Task::Structure, Task::Flight})
    if (task_name(t) == s) return t;
  return std::nullopt;
}

std::string step_dir_name(uint64_t step) { return "step" + std::to_string(step); }

std::string rank_dir_name(std::optional<uint32_t> rank) {
  return rank ? "rank" + std::to_string(*rank) : std::string("rank");
}

namespace {
constexpr std::string_view kRankLockPrefix = ".msprobe_shim.", kRankLockSuffix = ".lock";
}

std::string rank_lock_name(std::string_view rank_dir) {
  return std::string(kRankLockPrefix).append(rank_dir).append(kRankLockSuffix);
}

bool is_rank_lock_name(std::string_view name) {
  return name.size() > kRankLockPrefix.size() + kRankLockSuffix.size() && name.starts_with(kRankLockPrefix) &&
         name.ends_with(kRankLockSuffix);
}

namespace {
constexpr std::string_view kRunMarkerSuffix = ".run.json";
}

std::string run_marker_name(std::string_view rank_dir) {
  return std::string(kRankLockPrefix).append(rank_dir).append(kRunMarkerSuffix);
}

bool is_run_marker_name(std::string_view name) {
  return name.size() > kRankLockPrefix.size() + kRunMarkerSuffix.size() && name.starts_with(kRankLockPrefix) &&
         name.ends_with(kRunMarkerSuffix);
}

std::string rank_dir_of_run_marker(std::string_view name) {
  if (!is_run_marker_name(name)) return {};
  return std::string(
      name.substr(kRankLockPrefix.size(), name.size() - kRankLockPrefix.size() - kRunMarkerSuffix.size()));
}

}  // namespace msprobe::format
