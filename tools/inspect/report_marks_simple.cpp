// The report's marks in their simple single-rank form, until the cross-rank analyses (first-nan, first-diff) take
// their place: see report_marks.h for the seam. Each rank is read on its own, in launch order; ranks are put in order
// by step, then launch_index, then rank (launch indexes of two ranks are not a clock: this is the simple form).
#include <algorithm>
#include <cmath>
#include <map>
#include <string>
#include <tuple>
#include <unordered_map>
#include <vector>

#include "format/naming.h"
#include "tools/inspect/cli.h"
#include "tools/inspect/compare.h"
#include "tools/inspect/report_marks.h"
#include "tools/reader/dump_reader.h"

namespace msprobe::tools::report {

namespace {

constexpr size_t kRouteLength = 8;  // kernels of the origin's own rank listed on its route

bool non_finite(const TensorInfo &t) {
  return std::any_of(t.stats.begin(), t.stats.end(), [](const format::StatValue &v) {
    return v.kind == format::StatValue::Kind::Real && !std::isfinite(v.real);
  });
}

// A kernel of one rank, as the first-NaN search needs it.
struct Seen {
  const RankDir *dir = nullptr;
  std::string name;
  uint64_t launch_index = UINT64_MAX;
  bool inputs_finite = true, output_non_finite = false;
};

MarkedKernel marked(const Seen &k, std::string note) {
  return {k.dir->rank_label(), k.dir->step, k.name,
          k.launch_index == UINT64_MAX ? std::nullopt : std::optional<uint64_t>(k.launch_index), std::move(note)};
}

// Every rank's kernels, in step order, then launch order.
std::map<std::string, std::vector<Seen>> kernels_by_rank(const std::vector<RankDir> &dirs,
                                                         std::vector<std::string> &rank_order) {
  std::map<std::string, std::vector<Seen>> by_rank;
  for (const RankDir &d : dirs) {
    std::vector<Seen> folder;
    DumpCallbacks cb;
    cb.on_record = [&](KernelRecord &&k) {
      Seen s{&d, std::move(k.name), k.launch_index.value_or(UINT64_MAX)};
      for (const TensorInfo &t : k.tensors) {
        if (!non_finite(t)) continue;
        if (t.io == format::IoKind::Input)
          s.inputs_finite = false;
        else
          s.output_non_finite = true;
      }
      folder.push_back(std::move(s));
      return true;
    };
    read_dump_json(d, cb);
    std::stable_sort(folder.begin(), folder.end(),
                     [](const Seen &a, const Seen &b) { return a.launch_index < b.launch_index; });
    const std::string rank = d.rank_label();
    if (!by_rank.count(rank)) rank_order.push_back(rank);
    auto &all = by_rank[rank];
    all.insert(all.end(), std::make_move_iterator(folder.begin()), std::make_move_iterator(folder.end()));
  }
  return by_rank;
}

// A collective's output turning non-finite from finite local inputs came from a peer: it is on the route, not an
// origin.
bool is_collective(std::string_view kernel) { return format::op_type_of(kernel).starts_with("Hccl"); }

}  // namespace

std::optional<Mark> first_nan(const std::filesystem::path &root) {
  const std::vector<RankDir> dirs = find_rank_dirs(root);
  std::vector<std::string> rank_order;
  const auto by_rank = kernels_by_rank(dirs, rank_order);
  auto order = [&](const Seen &k, size_t rank_index) {
    return std::tuple(k.dir->step.value_or(0), k.launch_index, rank_index);
  };
  // Per rank: its origin (finite inputs, non-finite output, not a collective) and its first non-finite output.
  struct RankHits {
    size_t rank_index = 0;
    const std::vector<Seen> *kernels = nullptr;
    std::optional<size_t> origin, first;
  };
  std::vector<RankHits> hits;
  for (size_t r = 0; r < rank_order.size(); ++r) {
    RankHits h{r, &by_rank.at(rank_order[r]), std::nullopt, std::nullopt};
    for (size_t i = 0; i < h.kernels->size(); ++i) {
      const Seen &k = (*h.kernels)[i];
      if (!k.output_non_finite) continue;
      if (!h.first) h.first = i;
      if (k.inputs_finite && !is_collective(k.name)) {
        h.origin = i;
        break;
      }
    }
    if (h.first) hits.push_back(h);
  }
  if (hits.empty()) return std::nullopt;
  const bool any_origin = std::any_of(hits.begin(), hits.end(), [](const RankHits &h) { return h.origin.has_value(); });
  auto at_of = [&](const RankHits &h) { return any_origin ? h.origin : h.first; };
  const RankHits *best = nullptr;
  for (const RankHits &h : hits)
    if (at_of(h) && (!best || order((*h.kernels)[*at_of(h)], h.rank_index) <
                                  order((*best->kernels)[*at_of(*best)], best->rank_index)))
      best = &h;
  const size_t at = *at_of(*best);
  const Seen &origin = (*best->kernels)[at];
  Mark m;
  m.at = marked(origin, "");
  m.verdict = any_origin ? "its outputs hold NaN/Inf while its inputs are finite (the origin, on this rank)"
                         : "no kernel turned finite inputs into NaN/Inf: the first non-finite output, its inputs "
                           "already non-finite";
  m.stack = find_stack(*origin.dir, origin.name).value_or(std::vector<std::string>{});
  // The route on its own rank: the next kernels that took non-finite inputs.
  for (size_t i = at + 1; i < best->kernels->size() && m.spread.size() < kRouteLength; ++i)
    if (!(*best->kernels)[i].inputs_finite)
      m.spread.push_back(marked((*best->kernels)[i], "its inputs were non-finite"));
  // The other ranks: where NaN/Inf first came out of a kernel there.
  std::vector<std::pair<std::tuple<uint64_t, uint64_t, size_t>, MarkedKernel>> others;
  for (const RankHits &h : hits) {
    if (&h == best) continue;
    const Seen &k = (*h.kernels)[*h.first];
    std::string note = "first non-finite output on " + rank_order[h.rank_index];
    if (k.inputs_finite && is_collective(k.name)) note += " (a collective: from a peer)";
    others.emplace_back(order(k, h.rank_index), marked(k, note));
  }
  std::sort(others.begin(), others.end(), [](const auto &a, const auto &b) { return a.first < b.first; });
  for (auto &[key, k] : others) m.spread.push_back(std::move(k));
  return m;
}

std::optional<Mark> first_diff(const std::filesystem::path &a, const std::filesystem::path &b, const Thresholds &th) {
  const std::vector<RankDir> dirs_a = find_rank_dirs(a), dirs_b = find_rank_dirs(b);
  const compare::FolderPairs pairs = compare::pair_folders(dirs_a, dirs_b);
  uint64_t total = 0, done = 0;
  for (const auto &[da, db] : pairs.pairs) total += compare::dump_json_size(*da) + compare::dump_json_size(*db);
  Progress progress("report: first divergence", total);
  // Per folder pair: its diverging kernels of A, in launch order (at most kRouteLength + 1 kept).
  struct Diverging {
    const RankDir *dir;
    std::string kernel, verdict;
    uint64_t launch_index;
  };
  std::vector<std::vector<Diverging>> found;
  for (const auto &[da, db] : pairs.pairs) {
    const compare::Side A = compare::load_side(*da, progress, done), B = compare::load_side(*db, progress, done);
    std::vector<Diverging> here;
    for (const compare::KernelInfo &ka : A.kernels) {
      if (here.size() > kRouteLength) break;
      auto it = B.index.find(std::string(format::kernel_stem(ka.name)));
      if (it == B.index.end()) continue;
      std::unordered_map<std::string, const TensorInfo *> b_tensors;
      for (const TensorInfo &t : B.kernels[it->second].tensors) b_tensors.emplace(t.row_suffix(), &t);
      std::string failing;
      compare::Verdict worst = compare::Verdict::Pass;
      for (const TensorInfo &ta : ka.tensors) {
        auto bt = b_tensors.find(ta.row_suffix());
        if (bt == b_tensors.end()) continue;
        const compare::RowResult r = compare::compare_tensor(A, ta, B, *bt->second, th);
        if (!compare::diverges(r.verdict)) continue;
        worst = std::max(worst, r.verdict);
        failing += (failing.empty() ? "" : ", ") + ta.row_suffix();
      }
      if (!failing.empty())
        here.push_back({da, ka.name, std::string(compare::verdict_text(worst)) + ": " + failing, ka.launch_index});
    }
    if (!here.empty()) found.push_back(std::move(here));
  }
  progress.finish();
  if (found.empty()) return std::nullopt;
  auto key = [](const Diverging &d) { return std::pair(d.dir->step.value_or(0), d.launch_index); };
  std::stable_sort(found.begin(), found.end(),
                   [&](const auto &x, const auto &y) { return key(x.front()) < key(y.front()); });
  auto mk = [](const Diverging &d, std::string note) {
    return MarkedKernel{d.dir->rank_label(), d.dir->step, d.kernel,
                        d.launch_index == UINT64_MAX ? std::nullopt : std::optional<uint64_t>(d.launch_index),
                        std::move(note)};
  };
  const Diverging &first = found.front().front();
  Mark m;
  m.at = mk(first, "");
  m.verdict = first.verdict;
  m.stack = find_stack(*first.dir, first.kernel).value_or(std::vector<std::string>{});
  for (size_t i = 1; i < found.front().size(); ++i) m.spread.push_back(mk(found.front()[i], found.front()[i].verdict));
  for (size_t f = 1; f < found.size(); ++f)
    m.spread.push_back(
        mk(found[f].front(), "first divergence in " + found[f].front().dir->label() + ": " + found[f].front().verdict));
  return m;
}

}  // namespace msprobe::tools::report
