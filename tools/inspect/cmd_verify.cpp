// verify DIR: every claim dump.json makes about the files is checked against the files.
#include <algorithm>
#include <array>
#include <cmath>
#include <cstdio>
#include <optional>
#include <set>
#include <string>
#include <system_error>
#include <unordered_map>
#include <unordered_set>
#include <vector>

#include "format/format.h"
#include "format/naming.h"
#include "tools/inspect/cli.h"
#include "tools/inspect/commands.h"
#include "tools/reader/dump_reader.h"
#include "tools/reader/partial_read.h"
#include "tools/reader/tensor_data.h"

namespace msprobe::tools {

const std::string_view kVerifyHelp = R"(usage: msprobe-inspect verify DIR [--precision auto|low|high]

Checks a dump against itself and lists every mismatch, one per line:
  - dump.json, construct.json and stack.json are valid JSON (NaN/Infinity allowed); dump.json has task, level,
    framework; no kernel name appears twice; construct.json names exactly the kernels of dump.json;
  - every data_name is a plain file name that exists in dump_tensor_data/, loads (npy header valid, file exactly
    as long as the header says; .bin exactly elements x dtype size), and matches the entry's shape and dtype
    (a bfloat16 tensor is stored as float32); an .lz4 file (MSPROBE_COMPRESS=lz4) must be a complete LZ4 frame
    with a matching checksum, and its content is checked as the npy or bin file it holds;
  - the statistics (Max, Min, Mean, Norm) recomputed from the file equal the recorded ones, and so does the
    md5 (CRC-32) when the dump has one;
  - every mapping.csv row names a file that exists, and no file in dump_tensor_data/ is unaccounted for.

  --precision   which statistics precision the dump was written with (MSPROBE_PRECISION; dump.json does not
                record it). auto (default): a tensor passes when its statistics equal either.

Exit status 0 when the dump is intact, 1 with the list of problems, 2 when DIR is not a dump.
)";

namespace {

enum class PrecisionChoice { Auto, Low, High };

struct Counts {
  uint64_t folders = 0, kernels = 0, tensors = 0, files = 0, problems = 0, being_written = 0;
};

class Reporter {
 public:
  explicit Reporter(Counts &c) : counts_(c) {}
  void add(const std::string &line) {
    ++counts_.problems;
    std::printf("%s\n", line.c_str());
  }
  // A folder checked in part because a run is still writing it: said, not a problem.
  void note(const std::string &line) {
    ++counts_.being_written;
    std::printf("%s\n", line.c_str());
  }

 private:
  Counts &counts_;
};

bool same_stat(const format::StatValue &recorded, const format::StatValue &computed) {
  using K = format::StatValue::Kind;
  if (recorded.is_null() || computed.is_null()) return recorded.is_null() && computed.is_null();
  if ((recorded.kind == K::Bool) != (computed.kind == K::Bool)) return false;
  if (recorded.kind == K::Bool) return recorded.boolean == computed.boolean;
  if (recorded.kind == K::Unsigned && computed.kind == K::Unsigned) return recorded.uinteger == computed.uinteger;
  if (recorded.kind == K::Integer && computed.kind == K::Integer) return recorded.integer == computed.integer;
  const double a = recorded.as_double(), b = computed.as_double();
  return a == b || (std::isnan(a) && std::isnan(b));
}

const char *const kStatNames[] = {"Max", "Min", "Mean", "Norm"};

std::vector<std::string> stat_mismatches(const std::array<format::StatValue, 4> &recorded,
                                         const format::TensorStats &s) {
  const format::StatValue computed[4] = {s.max, s.min, s.mean, s.norm};
  std::vector<std::string> out;
  for (int i = 0; i < 4; ++i)
    if (!same_stat(recorded[i], computed[i]))
      out.push_back(std::string(kStatNames[i]) + " is " + stat_text(recorded[i]) + " in dump.json, " +
                    stat_text(computed[i]) + " recomputed from the file");
  return out;
}

class FolderVerifier {
 public:
  FolderVerifier(const RankDir &dir, PrecisionChoice precision, Counts &counts, Reporter &report, Progress &progress,
                 uint64_t progress_base)
      : dir_(dir),
        precision_(precision),
        counts_(counts),
        report_(report),
        progress_(progress),
        base_(progress_base),
        tensor_dir_(dir.path / format::kTensorDir) {}

  void run() {
    ++counts_.folders;
    DumpCallbacks cb;
    cb.on_header = [&](const DumpHeaderRead &h) { header_ = h; };
    cb.on_progress = [&](size_t at) { progress_.update(base_ + at); };
    cb.on_record = [&](KernelRecord &&k) {
      kernel(k);
      return true;
    };
    const std::optional<Shortfall> partial = read_dump_json_partial(dir_, cb);
    check_header();
    if (partial && !partial->damage()) {
      // A run still writing the folder: its kernels so far are checked, not files the writer has not finished.
      report_.note(dir_.label() + ": " + partial->what() +
                   "; their files are checked, construct.json, stack.json, mapping.csv and orphans after the run ends");
      return;
    }
    if (partial) problem(partial->what());
    check_construct();
    check_stack();
    check_mapping();
    if (!partial) check_orphans();
  }

 private:
  void problem(const std::string &what) { report_.add(dir_.label() + ": " + what); }

  void check_header() {
    if (header_.task.empty())
      problem("dump.json: no \"task\"");
    else if (!format::parse_task(header_.task))
      problem("dump.json: unknown task \"" + header_.task + "\"");
    if (header_.level != format::kLevel)
      problem("dump.json: level is \"" + header_.level + "\", expected \"" + std::string(format::kLevel) + "\"");
    if (!format::parse_framework(header_.framework))
      problem("dump.json: framework \"" + header_.framework + "\" is not one msprobe accepts (pytorch, mindspore)");
  }

  void kernel(const KernelRecord &k) {
    ++counts_.kernels;
    if (!names_.insert(k.name).second) problem("dump.json: kernel " + k.name + " appears twice");
    for (const TensorInfo &t : k.tensors) {
      ++counts_.tensors;
      if (t.data_name) tensor_file(k.name, t);
    }
  }

  void tensor_file(const std::string &kernel, const TensorInfo &t) {
    const std::string &name = *t.data_name;
    const std::string where = kernel + " " + t.row_suffix() + ": ";
    if (!format::is_safe_file_name(name)) {
      problem(where + "data_name \"" + name + "\" is not a plain file name");
      return;
    }
    const std::string shown = std::string(format::kTensorDir) + "/" + name;
    if (name.size() > format::kMaxBasename)
      problem(where + shown + ": name longer than " + std::to_string(format::kMaxBasename) +
              " characters (the collector renames those and records them in mapping.csv)");
    if (auto [it, fresh] = referenced_.emplace(name, kernel + " " + t.row_suffix()); !fresh)
      problem(where + shown + ": also the data_name of " + it->second);
    ++counts_.files;
    TensorFile f;
    try {
      f = open_tensor_file(tensor_dir_ / name, t);
    } catch (const TensorFileError &e) {
      problem(where + shown + ": " + e.what());
      return;
    }
    if (f.file_dtype == format::DType::Raw) return;  // raw bytes: a type without statistics (complex, fp8...)
    if (!t.dtype) {
      problem(where + shown + ": dtype \"" + t.dtype_text + "\" in dump.json is not one the dump format knows");
      return;
    }
    bool layout_ok = true;
    if (f.kind == TensorFileKind::Npy) {
      const format::DType want = format::npy_storage_dtype(*t.dtype);
      if (f.file_dtype != want) {
        problem(where + shown + ": the file holds " + std::string(format::dtype_id(f.file_dtype)) +
                ", dump.json says " + t.dtype_text + " (stored as " + std::string(format::dtype_id(want)) + ")");
        layout_ok = false;
      }
      if (!t.shape_ok || f.shape != t.shape) {
        problem(where + shown + ": the file's shape is " + shape_text(f.shape) + ", dump.json says " +
                (t.shape_ok ? shape_text(t.shape) : std::string("no valid shape")));
        layout_ok = false;
      }
      if (f.fortran_order) {
        problem(where + shown + ": Fortran order (the collector writes C order)");
        layout_ok = false;
      }
    }
    if (!layout_ok) return;
    Recomputed r;
    try {
      r = recompute(f, *t.dtype, t.shape.empty(), header_.framework_kind);
    } catch (const TensorFileError &e) {
      problem(where + shown + ": " + e.what());
      return;
    }
    const auto low = stat_mismatches(t.stats, r.low), high = stat_mismatches(t.stats, r.high);
    const std::vector<std::string> *bad = nullptr;
    switch (precision_) {
      case PrecisionChoice::Auto: bad = low.empty() || high.empty() ? nullptr : &low; break;
      case PrecisionChoice::Low: bad = low.empty() ? nullptr : &low; break;
      case PrecisionChoice::High: bad = high.empty() ? nullptr : &high; break;
    }
    if (bad)
      for (const std::string &m : *bad) problem(where + shown + ": " + m);
    if (t.md5 && *t.md5 != r.crc)
      problem(where + shown + ": md5 (CRC-32) is " + *t.md5 + " in dump.json, " + r.crc + " computed from the file");
  }

  void check_construct() {
    const fs::path path = dir_.path / format::kConstructJson;
    std::error_code ec;
    if (!fs::is_regular_file(path, ec)) {
      problem(std::string(format::kConstructJson) + ": missing");
      return;
    }
    std::vector<std::string> names;
    try {
      names = read_construct_names(path);
    } catch (const JsonError &e) {
      std::string what = e.what();
      const std::string prefix = path.string() + ": ";
      if (what.rfind(prefix, 0) == 0) what.erase(0, prefix.size());
      problem(std::string(format::kConstructJson) + ": " + what);
      return;
    }
    std::unordered_set<std::string> in_construct(names.begin(), names.end());
    std::vector<std::string> missing, extra;
    for (const std::string &n : names)
      if (!names_.count(n)) extra.push_back(n);
    for (const std::string &n : names_)
      if (!in_construct.count(n)) missing.push_back(n);
    std::sort(missing.begin(), missing.end());
    auto list = [](const std::vector<std::string> &v) {
      std::string s;
      for (size_t i = 0; i < v.size() && i < 5; ++i) s += (i ? ", " : "") + v[i];
      if (v.size() > 5) s += ", ...";
      return s;
    };
    if (!missing.empty())
      problem(std::string(format::kConstructJson) + ": " + std::to_string(missing.size()) +
              " kernel(s) of dump.json missing: " + list(missing));
    if (!extra.empty())
      problem(std::string(format::kConstructJson) + ": " + std::to_string(extra.size()) +
              " kernel(s) not in dump.json: " + list(extra));
  }

  void check_stack() {
    const fs::path path = dir_.path / format::kStackJson;
    std::error_code ec;
    if (!fs::is_regular_file(path, ec)) return;  // optional
    MappedFile f(path);
    std::string why;
    if (!is_valid_json(f.text(), &why)) problem(std::string(format::kStackJson) + ": invalid JSON: " + why);
  }

  void check_mapping() {
    for (const MappingRow &r : read_mapping_csv(tensor_dir_)) {
      const std::string where = std::string(format::kTensorDir) + "/" + std::string(format::kMappingCsv) + " line " +
                                std::to_string(r.line) + ": ";
      if (r.original_name.empty()) {
        problem(where + "expected new_name,original_name");
        continue;
      }
      std::error_code ec;
      if (!format::is_safe_file_name(r.new_name) || !fs::is_regular_file(tensor_dir_ / r.new_name, ec)) {
        problem(where + "stale row: " + r.new_name + " does not exist (for " + r.original_name + ")");
        continue;
      }
      mapped_.insert(r.new_name);
      if (!referenced_.count(r.new_name)) problem(where + r.new_name + " is named by no data_name in dump.json");
    }
  }

  void check_orphans() {
    std::error_code ec;
    std::vector<std::string> orphans;
    for (fs::directory_iterator it(tensor_dir_, ec), end; !ec && it != end; it.increment(ec)) {
      const std::string name = it->path().filename().string();
      // Files a mapping.csv row names were reported by check_mapping() already.
      if (name == format::kMappingCsv || referenced_.count(name) || mapped_.count(name)) continue;
      orphans.push_back(name);
    }
    std::sort(orphans.begin(), orphans.end());
    for (const std::string &n : orphans)
      problem(std::string(format::kTensorDir) + "/" + n + ": orphan file (no data_name in dump.json names it)");
  }

  const RankDir &dir_;
  PrecisionChoice precision_;
  Counts &counts_;
  Reporter &report_;
  Progress &progress_;
  uint64_t base_;
  fs::path tensor_dir_;
  DumpHeaderRead header_;
  std::unordered_set<std::string> names_;
  std::unordered_map<std::string, std::string> referenced_;  // data_name -> "kernel row"
  std::unordered_set<std::string> mapped_;
};

}  // namespace

int run_verify(std::span<char *const> argv) {
  static const OptionSpec kOptions[] = {{"--precision", true}};
  const Args args = parse_args(argv, kOptions);
  expect_positional(args, 1, "DIR");
  PrecisionChoice precision = PrecisionChoice::Auto;
  if (auto p = args.value("--precision")) {
    if (*p == "auto")
      precision = PrecisionChoice::Auto;
    else if (*p == "low")
      precision = PrecisionChoice::Low;
    else if (*p == "high")
      precision = PrecisionChoice::High;
    else
      throw UsageError("--precision '" + *p + "': expected auto, low or high");
  }
  const std::vector<RankDir> dirs = find_rank_dirs(args.positional[0]);
  uint64_t total = 0;
  for (const RankDir &d : dirs) {
    std::error_code ec;
    total += fs::file_size(d.path / format::kDumpJson, ec);
  }
  Counts counts;
  Reporter report(counts);
  Progress progress("verify", total);
  uint64_t base = 0;
  for (const RankDir &d : dirs) {
    FolderVerifier(d, precision, counts, report, progress, base).run();
    std::error_code ec;
    base += fs::file_size(d.path / format::kDumpJson, ec);
  }
  progress.finish();
  const std::string live = counts.being_written ? " (" + std::to_string(counts.being_written) +
                                                      " folder(s) still being written, checked so far)"
                                                : "";
  std::printf("verify: %llu folder(s), %llu kernels, %llu tensors, %llu tensor files checked: %s%s\n",
              static_cast<unsigned long long>(counts.folders), static_cast<unsigned long long>(counts.kernels),
              static_cast<unsigned long long>(counts.tensors), static_cast<unsigned long long>(counts.files),
              counts.problems ? (std::to_string(counts.problems) + " problem(s)").c_str() : "OK", live.c_str());
  return counts.problems ? kExitFindings : kExitOk;
}

}  // namespace msprobe::tools
