// replay on a flight record: which of the kernels kept before the trigger first computed a wrong result from its
// inputs. When every one computed correctly, the first output that turned non-finite from finite inputs is where
// the values ran out of range: a data or scale problem rather than a kernel bug.
#include <cstdio>
#include <string>
#include <vector>

#include "tools/inspect/cli.h"
#include "tools/inspect/replay.h"

namespace msprobe::tools::replay {

namespace {

// "step1/rank0 Gelu.TinyModel.act.0 (launch_index 45)"
std::string kernel_text(const std::vector<Folder> &folders, const FlightKernel &k) {
  return folders[k.folder].dir->label() + " " + k.name + " (launch_index " +
         (k.launch_index ? std::to_string(*k.launch_index) : std::string("?")) + ")";
}

// Null when replay did not reach the kernel (--max-kernels).
const Outcome *outcome_of(const std::vector<Folder> &folders, const Outcomes &outcomes, const FlightKernel &k) {
  const Folder &f = folders[k.folder];
  auto it = outcomes.find(Key{f.step, f.rank, k.name});
  return it == outcomes.end() ? nullptr : &it->second;
}

bool departs(const Outcome *o) { return o && (o->status == Status::Error || o->status == Status::Warning); }

// The kernels not judged, by reason, each list cut after a few names.
struct NotJudged {
  std::vector<std::string> no_reference, skipped, not_replayed;

  void add(const Outcome *o, const std::string &name) {
    if (!o)
      not_replayed.push_back(name);
    else if (o->status == Status::Skip)
      (o->no_reference ? no_reference : skipped).push_back(name);
  }
  size_t size() const { return no_reference.size() + skipped.size() + not_replayed.size(); }

  void print() const {
    if (size() == 0) return;
    std::printf("  not judged: %zu kernel(s)\n", size());
    list("no CPU reference", no_reference);
    list("skipped (see the CSV for why)", skipped);
    list("not replayed in this run", not_replayed);
  }

 private:
  static void list(const char *why, const std::vector<std::string> &names) {
    if (names.empty()) return;
    std::string text;
    for (size_t i = 0; i < names.size() && i < 5; ++i) text += (i ? ", " : "") + names[i];
    if (names.size() > 5) text += ", ... (" + std::to_string(names.size() - 5) + " more)";
    std::printf("    %s: %s\n", why, text.c_str());
  }
};

void print_none_departs(const std::vector<Folder> &folders, const FlightRecord &r, size_t compared) {
  if (compared)
    std::printf("  no recorded kernel departs from its CPU reference (%zu compared, all pass)\n", compared);
  else
    std::printf("  no recorded kernel could be compared with a CPU reference\n");
  for (const FlightKernel &k : r.kernels) {
    if (!k.output_non_finite || !k.inputs_finite) continue;
    std::printf(
        "  first non-finite output from finite inputs: %s\n"
        "    the kernels computed correctly: the values ran out of range (a data or scale problem, not a kernel "
        "bug)\n",
        kernel_text(folders, k).c_str());
    return;
  }
  std::printf("  no recorded kernel turns finite inputs into a non-finite output\n");
}

void print_record(const std::vector<Folder> &folders, const Outcomes &outcomes, const FlightRecord &r) {
  const std::vector<uint64_t> steps = r.steps();
  const std::string where = steps.empty() ? "" : (steps.size() == 1 ? "step " : "steps ") + ranges_text(steps) + ", ";
  std::printf("\nflight record %s: %s (%zu kernel(s), %s%s)\n", r.rank.c_str(), r.trigger_text().c_str(),
              r.kernels.size(), where.c_str(), r.launch_range_text().c_str());
  NotJudged not_judged;
  size_t compared = 0;
  const FlightKernel *first = nullptr;
  const Outcome *first_outcome = nullptr;
  size_t not_judged_before = 0;  // kernels launched before the first departing one that replay could not judge
  for (const FlightKernel &k : r.kernels) {
    const Outcome *o = outcome_of(folders, outcomes, k);
    not_judged.add(o, k.name);
    if (o && o->status != Status::Skip) ++compared;
    if (!first && departs(o)) {
      first = &k;
      first_outcome = o;
      not_judged_before = not_judged.size();
    }
  }
  if (first) {
    std::printf("  first kernel departing from its CPU reference: %s: %s\n", kernel_text(folders, *first).c_str(),
                status_text(first_outcome->status));
    if (not_judged_before)
      std::printf("    (%zu kernel(s) before it could not be judged: one of them may have departed first)\n",
                  not_judged_before);
  } else {
    print_none_departs(folders, r, compared);
  }
  not_judged.print();
}

}  // namespace

void print_flight_report(const std::vector<Folder> &folders, std::vector<FlightKernel> kernels,
                         const Outcomes &outcomes) {
  if (kernels.empty()) return;
  for (const FlightRecord &r : group_flight_records(std::move(kernels))) print_record(folders, outcomes, r);
}

}  // namespace msprobe::tools::replay
