// compare: one dump folder's kernels, and the verdict on one tensor pair (msprobe's rules, docs/inspect.md).
#include <algorithm>
#include <limits>
#include <map>
#include <system_error>

#include "format/format.h"
#include "format/naming.h"
#include "tools/inspect/compare.h"
#include "tools/reader/tensor_data.h"

namespace msprobe::tools::compare {

const char *verdict_text(Verdict v) {
  switch (v) {
    case Verdict::Pass: return "pass";
    case Verdict::Diff: return "diff";
    case Verdict::Warning: return "Warning";
    case Verdict::Different: return "Different";
    case Verdict::Error: return "error";
    case Verdict::Unmatched: return "unmatched";
  }
  return "?";
}

FolderPairs pair_folders(const std::vector<RankDir> &a, const std::vector<RankDir> &b) {
  FolderPairs out;
  if (a.size() == 1 && b.size() == 1) {
    out.pairs.emplace_back(&a[0], &b[0]);
    return out;
  }
  auto key = [](const RankDir &d) { return std::pair(d.step ? static_cast<int64_t>(*d.step) : -1, d.rank_label()); };
  std::map<std::pair<int64_t, std::string>, const RankDir *> by_key;
  for (const RankDir &d : b) by_key[key(d)] = &d;
  for (const RankDir &d : a) {
    auto it = by_key.find(key(d));
    if (it == by_key.end()) {
      out.only_a.push_back(d.label());
      continue;
    }
    out.pairs.emplace_back(&d, it->second);
    by_key.erase(it);
  }
  for (const auto &[k, d] : by_key) out.only_b.push_back(d->label());
  return out;
}

uint64_t dump_json_size(const RankDir &d) {
  std::error_code ec;
  const uint64_t n = fs::file_size(d.path / format::kDumpJson, ec);
  return ec ? 0 : n;
}

Side load_side(const RankDir &d, Progress &progress, uint64_t &done) {
  Side s;
  s.dir = &d;
  DumpCallbacks cb;
  cb.on_header = [&](const DumpHeaderRead &h) { s.header = h; };
  cb.on_progress = [&](size_t at) { progress.update(done + at); };
  cb.on_record = [&](KernelRecord &&k) {
    KernelInfo info;
    info.tensors = std::move(k.tensors);
    info.launch_index = k.launch_index.value_or(UINT64_MAX);
    info.name = std::move(k.name);
    s.index.emplace(format::kernel_stem(info.name), s.kernels.size());
    s.kernels.push_back(std::move(info));
    return true;
  };
  s.partial = read_dump_json_partial(d, cb);
  done += dump_json_size(d);
  std::stable_sort(s.kernels.begin(), s.kernels.end(),
                   [](const KernelInfo &a, const KernelInfo &b) { return a.launch_index < b.launch_index; });
  s.index.clear();
  for (size_t i = 0; i < s.kernels.size(); ++i) s.index.emplace(format::kernel_stem(s.kernels[i].name), i);
  return s;
}

namespace {

void add_message(std::string &m, const std::string &s) {
  if (s.empty()) return;
  m += (m.empty() ? "" : "; ") + s;
}

std::vector<double> load_values(const Side &side, const TensorInfo &t) {
  const TensorFile f = open_tensor_file(side.dir->path / format::kTensorDir / *t.data_name, t);
  if (f.file_dtype == format::DType::Raw) throw TensorFileError("raw bytes of an unknown dtype");
  if (f.shape != t.shape)
    throw TensorFileError("the file's shape " + shape_text(f.shape) + " is not the entry's " + shape_text(t.shape));
  return read_tensor_values(f);
}

}  // namespace

RowResult compare_tensor(const Side &A, const TensorInfo &a, const Side &B, const TensorInfo &b, const Thresholds &th) {
  RowResult r;
  for (int i = 0; i < 4; ++i) r.stats[i] = stat_diff(a.stats[i], b.stats[i]);
  if (a.dtype_text != b.dtype_text) add_message(r.message, "dtype differs");
  if (!a.shape_ok || !b.shape_ok || a.shape != b.shape) {
    r.verdict = Verdict::Error;
    add_message(r.message, "shape differs: " + shape_text(a.shape) + " vs " + shape_text(b.shape));
    return r;
  }
  if (a.data_name && b.data_name) {
    try {
      const std::vector<double> va = load_values(A, a), vb = load_values(B, b);
      r.metrics = tensor_metrics(va, vb, relative_zero_eps(b.dtype));
      add_message(r.message, r.metrics->message);
      r.verdict = tensor_passes(*r.metrics, th) ? Verdict::Pass : Verdict::Error;
      return r;
    } catch (const TensorFileError &e) {
      add_message(r.message, std::string("tensor data not compared (") + e.what() + "): statistics compared");
    }
  }
  if (a.md5 && b.md5) {
    r.verdict = *a.md5 == *b.md5 ? Verdict::Pass : Verdict::Different;
    return r;
  }
  double worst = 0;
  for (int i = 0; i < 4; ++i) {
    const bool a_null = a.stats[i].is_null(), b_null = b.stats[i].is_null();
    if (a_null != b_null) {
      worst = std::numeric_limits<double>::infinity();
      add_message(r.message, "a statistic is null on one side only");
    } else if (r.stats[i].rel) {
      worst = std::max(worst, *r.stats[i].rel);
    }
  }
  if (worst > th.warning) {
    r.verdict = Verdict::Warning;
    add_message(r.message, "Need double check api accuracy.");
  } else if (worst > th.stat_rtol) {
    r.verdict = Verdict::Diff;
  }
  return r;
}

}  // namespace msprobe::tools::compare
