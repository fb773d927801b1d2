#include "tools/reader/flight.h"

#include <algorithm>
#include <cmath>
#include <map>
#include <set>
#include <tuple>

namespace msprobe::tools {

namespace {

// Any of Max, Min, Mean, Norm a NaN or an infinity (a tensor without statistics counts as finite: nothing known).
bool non_finite_stats(const TensorInfo &t) {
  return std::any_of(t.stats.begin(), t.stats.end(), [](const format::StatValue &v) {
    return v.kind == format::StatValue::Kind::Real && !std::isfinite(v.real);
  });
}

}  // namespace

std::optional<FlightKernel> flight_kernel(size_t folder, const RankDir &dir, std::string name,
                                          std::optional<uint64_t> launch_index, const FlightFields &fields,
                                          std::span<const TensorInfo> tensors) {
  if (!fields.recorded()) return std::nullopt;
  FlightKernel k;
  k.folder = folder;
  k.rank = dir.rank_label();
  k.step = dir.step;
  k.launch_index = launch_index;
  k.name = std::move(name);
  k.fields = fields;
  for (const TensorInfo &t : tensors) {
    if (!non_finite_stats(t)) continue;
    if (t.io == format::IoKind::Input) k.inputs_finite = false;
    if (t.io == format::IoKind::Output) k.output_non_finite = true;
  }
  return k;
}

const FlightKernel *FlightRecord::trigger_entry() const {
  if (trigger_kernel.empty()) return nullptr;
  for (const FlightKernel &k : kernels)
    if (k.name == trigger_kernel) return &k;
  return nullptr;
}

std::vector<uint64_t> FlightRecord::steps() const {
  std::set<uint64_t> s;
  for (const FlightKernel &k : kernels)
    if (k.step) s.insert(*k.step);
  return {s.begin(), s.end()};
}

size_t FlightRecord::notes() const {
  return std::count_if(kernels.begin(), kernels.end(), [](const FlightKernel &k) { return !k.fields.note.empty(); });
}

std::string FlightRecord::trigger_text() const {
  if (trigger_kernel.empty()) return trigger;
  return trigger + " in " + trigger_kernel;
}

std::string FlightRecord::launch_range_text() const {
  auto text = [](const std::optional<uint64_t> &li) { return li ? std::to_string(*li) : std::string("?"); };
  if (kernels.empty()) return "launch_index ?";
  const std::string first = text(kernels.front().launch_index), last = text(kernels.back().launch_index);
  return "launch_index " + (first == last ? first : first + "-" + last);
}

std::vector<FlightRecord> group_flight_records(std::vector<FlightKernel> kernels) {
  std::map<std::string, size_t> rank_order;
  for (const FlightKernel &k : kernels) rank_order.try_emplace(k.rank, rank_order.size());
  // Launch order within a rank; launch_index counts on across steps, the step breaks ties of unknown ones.
  auto key = [&](const FlightKernel &k) {
    return std::tuple(rank_order.at(k.rank), k.launch_index.value_or(UINT64_MAX), k.step.value_or(UINT64_MAX));
  };
  std::stable_sort(kernels.begin(), kernels.end(),
                   [&](const FlightKernel &a, const FlightKernel &b) { return key(a) < key(b); });
  std::vector<FlightRecord> out;
  std::map<std::tuple<std::string, std::string, std::string>, size_t> index;
  for (FlightKernel &k : kernels) {
    const auto id = std::tuple(k.rank, k.fields.trigger, k.fields.trigger_kernel);
    auto [it, fresh] = index.try_emplace(id, out.size());
    if (fresh) out.push_back({k.rank, k.fields.trigger, k.fields.trigger_kernel, {}});
    out[it->second].kernels.push_back(std::move(k));
  }
  return out;  // a record is opened at its earliest kernel: records come by rank, then launch order
}

}  // namespace msprobe::tools
