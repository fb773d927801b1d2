// The report's marks from the cross-rank analyses of first-nan and first-diff (ranks.h): the primary origin in causal
// order, its stack and verdict, and its route (the next kernels on its rank that took its values, then the collectives
// that carried them to other ranks, then any other origin), as the seam (report_marks.h) draws them.
#include "tools/inspect/report_marks.h"

#include <algorithm>
#include <cmath>
#include <string>
#include <tuple>
#include <vector>

#include "format/format.h"
#include "tools/inspect/ranks.h"
#include "tools/reader/dump_reader.h"
#include "tools/reader/partial_read.h"

namespace msprobe::tools::report {

namespace {

MarkedKernel marked(const std::optional<uint32_t> &rank, uint64_t step, const std::string &kernel,
                    uint64_t launch_index, std::string note) {
  return {format::rank_dir_name(rank), step, kernel, launch_index, std::move(note)};
}

constexpr size_t kRouteLength = 8;  // kernels of the origin's own rank listed on its route

bool non_finite(const TensorInfo &t) {
  return std::any_of(t.stats.begin(), t.stats.end(), [](const format::StatValue &v) {
    return v.kind == format::StatValue::Kind::Real && !std::isfinite(v.real);
  });
}

// The route on the origin's own rank: the next kernels, in launch order, that took non-finite inputs (first-nan judges
// a rank by its first anomaly only; the picture shows where the values went next on it).
std::vector<MarkedKernel> local_route(const std::filesystem::path &root, const ranks::Origin &o) {
  std::vector<std::tuple<uint64_t, uint64_t, std::string>> after;  // (step, launch_index, kernel)
  for (const RankDir &d : find_rank_dirs(root)) {
    if (d.rank != o.rank || d.step.value_or(0) < o.a.step) continue;
    DumpCallbacks cb;
    cb.on_record = [&](KernelRecord &&k) {
      const uint64_t li = k.launch_index.value_or(UINT64_MAX);
      if (d.step.value_or(0) == o.a.step && li <= o.a.launch_index) return true;
      if (std::any_of(k.tensors.begin(), k.tensors.end(),
                      [](const TensorInfo &t) { return t.io == format::IoKind::Input && non_finite(t); }))
        after.emplace_back(d.step.value_or(0), li, std::move(k.name));
      return true;
    };
    read_dump_json_partial(d, cb);  // a folder read in part: its kernels so far (report_model says which)
  }
  std::sort(after.begin(), after.end());
  std::vector<MarkedKernel> route;
  for (auto &[step, li, name] : after) {
    if (route.size() == kRouteLength) break;
    route.push_back(marked(o.rank, step, name, li, "its inputs were non-finite"));
  }
  return route;
}

std::optional<Mark> mark_of(const ranks::Finding &f, const std::filesystem::path *root) {
  if (f.origins.empty()) return std::nullopt;
  const ranks::Origin &o = f.origins.front();
  Mark m;
  m.at = marked(o.rank, o.a.step, o.a.kernel, o.a.launch_index, "");
  if (root) m.spread = local_route(*root, o);
  m.stack = o.a.stack;
  m.verdict = ranks::origin_kind(o, f.question);
  if (!o.a.detail.empty()) m.verdict += "; " + o.a.detail;
  if (!o.a.verdict.empty()) m.verdict += "; verdict " + o.a.verdict + ": " + o.a.verdict_reason;
  for (const ranks::Hop &h : o.spread) {
    const std::optional<uint32_t> receiver =
        h.to.empty() ? std::nullopt
                     : std::optional<uint32_t>(h.to.front());  // the hop's kernel is its first receiver's
    m.spread.push_back(marked(receiver, h.step, h.kernel, h.launch_index,
                              ranks::hop_instance(h) + ": " + ranks::ranks_phrase(h.from) + " -> " +
                                  ranks::ranks_phrase(h.to) + (h.presumed ? " (presumed)" : "")));
  }
  // Other origins no values connect with this one.
  for (size_t i = 1; i < f.origins.size(); ++i) {
    const ranks::Origin &other = f.origins[i];
    m.spread.push_back(marked(other.rank, other.a.step, other.a.kernel, other.a.launch_index,
                              "another origin: " + ranks::origin_kind(other, f.question)));
  }
  return m;
}

}  // namespace

std::optional<Mark> first_nan(const std::filesystem::path &root) {
  ranks::ScanOptions o;
  o.question = ranks::Question::Nan;
  o.replay = false;  // the verdict needs tensors and time: `msprobe-inspect first-nan` gives it
  return mark_of(ranks::analyze_here(root, nullptr, o), &root);
}

std::optional<Mark> first_diff(const std::filesystem::path &a, const std::filesystem::path &b, const Thresholds &th) {
  ranks::ScanOptions o;
  o.question = ranks::Question::Diff;
  o.thresholds = th;
  return mark_of(ranks::analyze_here(a, &b, o), nullptr);
}

}  // namespace msprobe::tools::report
