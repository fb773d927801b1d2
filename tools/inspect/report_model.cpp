// report: the dump read into what the page plots (report.h). One streaming pass over each dump.json, B's folder held
// in memory while its partner in A is read (as compare does), then the folder's stack.json.
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <system_error>
#include <unordered_map>
#include <utility>

#include "format/dump_json.h"
#include "format/format.h"
#include "format/naming.h"
#include "format/stack_text.h"
#include "tools/inspect/cli.h"
#include "tools/inspect/compare.h"
#include "tools/inspect/report.h"
#include "tools/reader/partial_read.h"

namespace msprobe::tools::report {

uint32_t Interner::id(std::string_view s) {
  auto it = index_.find(std::string(s));
  if (it != index_.end()) return it->second;
  const auto id = static_cast<uint32_t>(items_.size());
  items_.emplace_back(s);
  index_.emplace(items_.back(), id);
  return id;
}

int32_t Strings::stack_id(const std::vector<std::string> &stack) {
  std::vector<uint32_t> ids;
  ids.reserve(stack.size());
  for (const std::string &f : stack) ids.push_back(frames.id(format::frame_line(f)));
  auto [it, fresh] = stack_index.try_emplace(std::move(ids), static_cast<int32_t>(stacks.size()));
  if (fresh) {
    stacks.push_back(it->first);
    const std::optional<size_t> user = format::user_frame(stack);
    stack_user.push_back(user ? static_cast<int32_t>(*user) : -1);
  }
  return it->second;
}

std::string FolderData::name_of(size_t pos, const Strings &s) const {
  return s.stems.items()[kernels[pos].stem] + s.tails.items()[kernels[pos].tail];
}

void append_page_number(std::string &out, double v) {
  if (std::isnan(v))
    out += "\"NaN\"";
  else if (std::isinf(v))
    out += v > 0 ? "\"Inf\"" : "\"-Inf\"";
  else
    format::append_json_number(out, v);
}

void append_page_stat(std::string &out, const format::StatValue &v) {
  using K = format::StatValue::Kind;
  switch (v.kind) {
    case K::Null: out += "null"; return;
    case K::Real: append_page_number(out, v.real); return;
    case K::Integer: format::append_json_integer(out, v.integer); return;
    case K::Unsigned: format::append_json_integer(out, v.uinteger); return;
    case K::Bool: out += v.boolean ? "true" : "false"; return;
  }
}

namespace {

const char *const kStatNames[] = {"Max", "Min", "Mean", "Norm"};

bool numeric(const format::StatValue &v) {
  return v.kind != format::StatValue::Kind::Null && v.kind != format::StatValue::Kind::Bool;
}

// Folds one statistic of every output into one value: `better(a, b)` says a replaces b; NaN wins over everything.
template <typename Better>
void fold(std::optional<double> &acc, const format::StatValue &v, Better better) {
  if (!numeric(v)) return;
  const double d = v.as_double();
  if (!acc || std::isnan(d) || (!std::isnan(*acc) && better(d, *acc))) acc = d;
}

std::string tensor_rows(const std::vector<TensorInfo> &tensors) {
  std::string o = "[";
  for (size_t i = 0; i < tensors.size(); ++i) {
    const TensorInfo &t = tensors[i];
    if (i) o += ',';
    o += '[';
    format::append_json_string(o, t.row_suffix());
    o += ',';
    format::append_json_string(o, t.dtype_text);
    o += ',';
    format::append_json_string(o, t.shape_ok ? shape_text(t.shape) : std::string("?"));
    for (const format::StatValue &v : t.stats) {
      o += ',';
      append_page_stat(o, v);
    }
    o += ']';
  }
  return o + "]";
}

KernelPoint point_of(const std::vector<TensorInfo> &tensors) {
  KernelPoint p;
  bool any_output_stat = false;
  for (const TensorInfo &t : tensors) {
    for (const format::StatValue &v : t.stats) {
      if (v.kind != format::StatValue::Kind::Real || std::isfinite(v.real)) continue;
      if (t.io == format::IoKind::Input)
        p.flags |= kInputNonFinite;
      else
        p.flags |= std::isnan(v.real) ? kOutputNan : kOutputInf;
    }
    if (t.io != format::IoKind::Output) continue;
    fold(p.max, t.stats[0], [](double a, double b) { return a > b; });
    fold(p.min, t.stats[1], [](double a, double b) { return a < b; });
    fold(p.norm, t.stats[3], [](double a, double b) { return a > b; });
    any_output_stat = any_output_stat || std::any_of(t.stats.begin(), t.stats.end(), numeric);
  }
  if (!any_output_stat) p.flags |= kNoOutputStatistics;
  p.tensors = tensor_rows(tensors);
  return p;
}

// The largest relative difference of the kernel's outputs from B's, over its output tensors (paired by slot) and
// their four statistics; a statistic null on one side only counts as infinitely different (as compare rules).
KernelDiff diff_of(const std::vector<TensorInfo> &a, const compare::KernelInfo *kb) {
  KernelDiff d;
  if (kb == nullptr) return d;
  d.matched = true;
  std::unordered_map<std::string, const TensorInfo *> b_outputs;
  for (const TensorInfo &t : kb->tensors)
    if (t.io == format::IoKind::Output) b_outputs.emplace(t.row_suffix(), &t);
  for (const TensorInfo &ta : a) {
    if (ta.io != format::IoKind::Output) continue;
    auto it = b_outputs.find(ta.row_suffix());
    if (it == b_outputs.end()) continue;
    for (int i = 0; i < 4; ++i) {
      const format::StatValue &va = ta.stats[i], &vb = it->second->stats[i];
      std::optional<double> rel;
      if (va.is_null() != vb.is_null())
        rel = INFINITY;
      else
        rel = stat_diff(va, vb).rel;
      if (!rel || (d.rel && !(*rel > *d.rel))) continue;
      d.rel = rel;
      d.where = ta.row_suffix() + " " + kStatNames[i];
      d.a = va;
      d.b = vb;
    }
  }
  return d;
}

std::vector<std::string> frames_of(const Json &list) {
  std::vector<std::string> out;
  if (!list.is_array()) return out;
  for (const Json &f : list) out.push_back(f.is_string() ? f.get<std::string>() : to_json_text(f));
  return out;
}

// Every kernel's stack from the folder's stack.json (grouped {"0": [[names], [frames]]} or flat {name: [frames]}).
// A stack.json that cannot be read leaves the stacks out, with a line on stderr: the rest of the page still helps.
void read_stacks(FolderData &f, Strings &s) {
  const fs::path path = f.dir.path / format::kStackJson;
  std::error_code ec;
  if (!fs::is_regular_file(path, ec)) return;
  try {
    MappedFile file(path);
    JsonStream js(file.text());
    js.members([&](std::string &&key) {
      const Json v = js.value();
      if (v.is_array() && v.size() == 2 && v[0].is_array() && v[1].is_array()) {
        const int32_t id = s.stack_id(frames_of(v[1]));
        for (const Json &n : v[0]) {
          if (!n.is_string()) continue;
          auto it = f.by_name.find(n.get_ref<const std::string &>());
          if (it != f.by_name.end()) f.kernels[it->second].stack = id;
        }
      } else if (auto it = f.by_name.find(key); it != f.by_name.end()) {
        f.kernels[it->second].stack = s.stack_id(frames_of(v));
      }
    });
  } catch (const std::exception &e) {
    std::fprintf(stderr, "msprobe-inspect report: %s: %s: stacks left out\n", path.string().c_str(), e.what());
  }
}

// One kernel while its folder is read.
struct Read {
  KernelPoint point;
  KernelDiff diff;
  std::optional<uint64_t> launch_index;
  size_t file_pos = 0;
};

FolderData read_folder(const RankDir &d, size_t index, const compare::Side *B, Report &r,
                       std::vector<FlightKernel> &flight, Progress &progress, uint64_t &done) {
  FolderData f;
  f.dir = d;
  std::vector<Read> kernels;
  std::unordered_map<std::string, bool> b_seen;  // B's kernel stems met in A
  DumpCallbacks cb;
  cb.on_header = [&](const DumpHeaderRead &h) { f.task = h.task; };
  cb.on_progress = [&](size_t at) { progress.update(done + at); };
  cb.on_record = [&](KernelRecord &&k) {
    Read rd;
    rd.point = point_of(k.tensors);
    const std::string_view base = format::kernel_base_of(k.name);
    rd.point.stem = r.strings.stems.id(base);
    rd.point.tail = r.strings.tails.id(std::string_view(k.name).substr(base.size()));
    rd.launch_index = k.launch_index;
    rd.file_pos = kernels.size();
    if (B != nullptr) {
      const std::string stem(format::kernel_stem(k.name));
      auto it = B->index.find(stem);
      rd.diff = diff_of(k.tensors, it == B->index.end() ? nullptr : &B->kernels[it->second]);
      if (it != B->index.end())
        b_seen[stem] = true;
      else
        ++r.kernels_only_a;
    }
    if (auto fk = flight_kernel(index, d, k.name, k.launch_index, k.flight, k.tensors)) flight.push_back(*fk);
    kernels.push_back(std::move(rd));
    return true;
  };
  if (const std::optional<Shortfall> s = read_dump_json_partial(d, cb)) {
    r.partial.push_back(s->text());
    r.damaged = r.damaged || s->damage();
  }
  done += compare::dump_json_size(d);
  if (B != nullptr) r.kernels_only_b += B->kernels.size() - b_seen.size();
  // Launch order; an entry without launch_index keeps its place in the file.
  std::stable_sort(kernels.begin(), kernels.end(), [](const Read &a, const Read &b) {
    return a.launch_index.value_or(UINT64_MAX) < b.launch_index.value_or(UINT64_MAX);
  });
  f.kernels.reserve(kernels.size());
  for (Read &rd : kernels) {
    rd.point.x = rd.launch_index.value_or(rd.file_pos);
    if (rd.point.flags & kOutputNan) ++f.nan;
    if (rd.point.flags & kOutputInf) ++f.inf;
    if ((rd.point.flags & (kOutputNan | kOutputInf)) && !f.first_bad) f.first_bad = f.kernels.size();
    f.by_name.emplace(r.strings.stems.items()[rd.point.stem] + r.strings.tails.items()[rd.point.tail],
                      f.kernels.size());
    f.kernels.push_back(std::move(rd.point));
    if (B != nullptr) f.diffs.push_back(std::move(rd.diff));
  }
  read_stacks(f, r.strings);
  return f;
}

}  // namespace

Report read_report(const fs::path &root, const std::optional<fs::path> &against, const Thresholds &th) {
  Report r;
  r.root = root;
  r.against = against;
  r.th = th;
  const std::vector<RankDir> dirs = find_rank_dirs(root);
  std::vector<RankDir> dirs_b;
  std::unordered_map<const RankDir *, const RankDir *> partner;
  uint64_t total = 0, done = 0;
  for (const RankDir &d : dirs) total += compare::dump_json_size(d);
  if (against) {
    dirs_b = find_rank_dirs(*against);
    compare::FolderPairs pairs = compare::pair_folders(dirs, dirs_b);
    for (const auto &[a, b] : pairs.pairs) {
      partner[a] = b;
      total += compare::dump_json_size(*b);
    }
    r.only_a = std::move(pairs.only_a);
    r.only_b = std::move(pairs.only_b);
  }
  Progress progress("report", total);
  std::vector<FlightKernel> flight;
  for (const RankDir &d : dirs) {
    auto it = partner.find(&d);
    std::optional<compare::Side> B;
    if (it != partner.end()) B = compare::load_side(*it->second, progress, done);
    if (B && B->partial) {
      r.partial.push_back("against: " + B->partial->text());
      r.damaged = r.damaged || B->partial->damage();
    }
    r.folders.push_back(read_folder(d, r.folders.size(), B ? &*B : nullptr, r, flight, progress, done));
    if (B) r.folders.back().against = it->second->label();
    try {
      if (auto races = read_races(d))
        for (RaceEntry &e : *races) r.races.emplace_back(r.folders.size() - 1, std::move(e));
    } catch (const std::exception &e) {
      r.partial.push_back(d.label() + ": " + e.what());  // said on the page; the kernels are drawn all the same
    }
  }
  progress.finish();
  r.flight = group_flight_records(std::move(flight));
  return r;
}

}  // namespace msprobe::tools::report
