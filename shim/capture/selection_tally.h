// What the filters let through, counted as the session decides (under its lock), so that a run whose filters selected
// nothing says so at its end, at the default level: after an hour-long job, an empty folder and no word is the worst
// answer ("0 of 43 kernels matched MSPROBE_LIST=Matmull; op types seen: Add, Gelu, Matmul").
#pragma once
#include <cstdint>
#include <optional>
#include <set>
#include <string>
#include <string_view>

namespace msprobe::shim {

struct Config;

class SelectionTally {
 public:
  // Every launch, counted or named: its step, and whether MSPROBE_STEP selects that step; its op type is kept for the
  // message when `keep_type` (a list or scope is set).
  void launched(std::string_view op_type, uint64_t step, bool step_selected, bool keep_type) {
    ++launches_;
    if (step_selected) ++in_selected_steps_;
    last_step_ = step;
    if (keep_type && !more_op_types_) keep(op_type);
  }
  void selected() { ++selected_; }
  void rank_known(uint32_t rank) { rank_ = rank; }

  // What the filters that left nothing say (one line; empty when some kernel was selected or no filter is set).
  std::string nothing_selected(const Config &c) const;
  uint64_t launches() const { return launches_; }

 private:
  void keep(std::string_view op_type);
  static constexpr size_t kOpTypesKept = 64;
  uint64_t launches_ = 0, in_selected_steps_ = 0, selected_ = 0;
  uint64_t last_step_ = 0;
  std::optional<uint32_t> rank_;
  std::set<std::string, std::less<>> op_types_;  // the first kOpTypesKept seen
  bool more_op_types_ = false;
};

}  // namespace msprobe::shim
