#include "shim/capture/selection_tally.h"

#include "shim/config/config.h"

namespace msprobe::shim {

void SelectionTally::keep(std::string_view op_type) {
  if (op_types_.find(op_type) != op_types_.end()) return;
  if (op_types_.size() < kOpTypesKept)
    op_types_.emplace(op_type);
  else
    more_op_types_ = true;
}

namespace {

std::string joined(const std::set<std::string, std::less<>> &words, bool more) {
  std::string out;
  for (const std::string &w : words) out += (out.empty() ? "" : ", ") + w;
  return more ? out + ", ..." : out;
}

}  // namespace

std::string SelectionTally::nothing_selected(const Config &c) const {
  if (selected_ > 0 || launches_ == 0) return {};
  const std::string n = std::to_string(launches_);
  const std::string steps_seen = last_step_ == 0 ? "step 0 only" : "steps 0-" + std::to_string(last_step_);
  if (!c.steps.all() && in_selected_steps_ == 0) {
    std::string why = "this run had " + steps_seen;
    if (last_step_ == 0)
      why +=
          " (no step ended: no optimizer kernel ran, as in an inference loop; set MSPROBE_STEP_MARKER to the op "
          "type that ends a step, or call msprobe_shim_step())";
    return "MSPROBE_STEP=" + c.steps.to_string() + " selected none of the " + n + " kernels: " + why;
  }
  if (!c.ranks.all() && rank_ && !c.ranks.contains(*rank_))
    return "MSPROBE_RANK=" + c.ranks.to_string() + " selected none of the " + n + " kernels: this process is rank " +
           std::to_string(*rank_);
  if (!c.ranks.all() && !rank_)
    return "MSPROBE_RANK=" + c.ranks.to_string() + " selected none of the " + n +
           " kernels: this process has no rank (no RANK_ID, RANK or HCCL communicator)";
  const std::string types = joined(op_types_, more_op_types_);
  if (!c.list.empty())
    return "0 of " + n + " kernels matched MSPROBE_LIST=" + c.list.to_string() + "; op types seen: " + types;
  if (c.scope)
    return "MSPROBE_SCOPE=" + c.scope->first.to_string() + "," + c.scope->second.to_string() +
           " selected none of the " + n + " kernels (its first item never matched); op types seen: " + types;
  return {};
}

}  // namespace msprobe::shim
