#include "shim/capture/selection_tally.h"

#include "shim/base/log.h"
#include "shim/config/config.h"

namespace msprobe::shim {

void SelectionTally::launched(std::string_view op_type, uint64_t step, bool step_selected, bool keep_type) {
  ++launches_;
  if (step_selected) ++in_selected_steps_;
  last_step_ = step;
  if (!keep_type || more_op_types_ || op_types_.find(op_type) != op_types_.end()) return;
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

void SelectionTally::say_if_nothing_selected(const Config &c) const {
  if (selected_ > 0 || launches_ == 0) return;
  const std::string steps_seen = last_step_ == 0 ? "step 0 only" : "steps 0-" + std::to_string(last_step_);
  if (!c.steps.all() && in_selected_steps_ == 0) {
    std::string why = "this run had " + steps_seen;
    if (last_step_ == 0)
      why +=
          " (no step ended: no optimizer kernel ran, as in an inference loop; set MSPROBE_STEP_MARKER to the op "
          "type that ends a step, or call msprobe_shim_step())";
    log_note("MSPROBE_STEP=%s selected none of the %llu kernels: %s", c.steps.to_string().c_str(),
             (unsigned long long)launches_, why.c_str());
    return;
  }
  if (!c.ranks.all() && rank_ && !c.ranks.contains(*rank_)) {
    log_note("MSPROBE_RANK=%s selected none of the %llu kernels: this process is rank %u", c.ranks.to_string().c_str(),
             (unsigned long long)launches_, *rank_);
    return;
  }
  if (!c.ranks.all() && !rank_) {
    log_note(
        "MSPROBE_RANK=%s selected none of the %llu kernels: this process has no rank (no RANK_ID, RANK or HCCL "
        "communicator)",
        c.ranks.to_string().c_str(), (unsigned long long)launches_);
    return;
  }
  if (!c.list.empty())
    log_note("0 of %llu kernels matched MSPROBE_LIST=%s; op types seen: %s", (unsigned long long)launches_,
             c.list.to_string().c_str(), joined(op_types_, more_op_types_).c_str());
  if (c.scope)
    log_note("MSPROBE_SCOPE=%s,%s selected none of the %llu kernels (its first item never matched); op types seen: %s",
             c.scope->first.to_string().c_str(), c.scope->second.to_string().c_str(), (unsigned long long)launches_,
             joined(op_types_, more_op_types_).c_str());
}

}  // namespace msprobe::shim
