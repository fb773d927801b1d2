// replay DIR: msprobe's accuracy pre-check at kernel level. Each captured kernel whose op type has a CPU reference
// (tools/replay/refs*.cpp) is re-run on its dumped inputs in float64 and its dumped outputs are judged by the
// pre-check's rule (tools/replay/precheck.h). Writes msprobe's accuracy_checking_result / details CSVs, a row at a
// time so that a killed run leaves a valid prefix that --csv-path resumes.
#include <algorithm>
#include <cerrno>
#include <condition_variable>
#include <cstdio>
#include <cstring>
#include <ctime>
#include <fstream>
#include <functional>
#include <limits>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <set>
#include <sstream>
#include <string>
#include <system_error>
#include <thread>
#include <tuple>
#include <unordered_map>
#include <vector>

#include "collector/format.h"
#include "tools/inspect/cli.h"
#include "tools/inspect/commands.h"
#include "tools/reader/csv.h"
#include "tools/reader/dump_reader.h"
#include "tools/reader/metrics.h"
#include "tools/reader/tensor_data.h"
#include "tools/replay/precheck.h"
#include "tools/replay/refs.h"

namespace msprobe::tools {

const std::string_view kReplayHelp =
    R"(usage: msprobe-inspect replay DIR [--out DIR] [--csv-path FILE] [-j N] [--atol X] [--cos X]
       msprobe-inspect replay --list-ops

msprobe's accuracy pre-check at kernel level, for dumps of the tensor task (MSPROBE_TASK=tensor). Every captured
kernel whose op type has a CPU reference is re-run on its dumped inputs, in float64, and each of its dumped
outputs is compared with the result (float16 / bfloat16 / integer outputs: with the result rounded to their dtype,
the value a correct kernel stores). Kernels of op types with no reference are skipped (listed, never passed).

Per output tensor (msprobe's run_ut rule): NaN/Inf at different positions, or a size that differs: error.
Integer and bool outputs: error if any element differs. Floats: error when Cosine <= --cos; pass when
MaxAbsErr < --atol; else by the shares of elements within a relative error |out - ref| / (|ref| + eps):
float16 / bfloat16 need > 99% within 0.01 (else error) and > 99.9% within 0.001 (else warning); float32 /
float64 need > 99.9% within 0.001 (else error) and > 99.99% within 0.0001 (else warning). A kernel takes the
worst status of its outputs.

  --out DIR         where new CSV files go (default: the current directory; created if missing)
  --csv-path FILE   resume: an accuracy_checking_result_*.csv of an earlier (e.g. interrupted) run on the same
                    DIR. Kernels already in it are not recomputed; new rows are appended to it and to its
                    accuracy_checking_details_*.csv. Also spelled -csv_path, as msprobe.
  -j N, --jobs N    kernels replayed in parallel (default: the number of cores); output order is launch order
  --atol X          MaxAbsErr below which a float output passes (default 0.001, msprobe's)
  --cos X           cosine similarity an output must exceed (default 0.99)
  --max-kernels N   stop after N kernels replayed (to test resuming)
  --list-ops        print the op types that have a CPU reference and exit

Writes accuracy_checking_result_{timestamp}.csv (one row per kernel: API name, Forward Test Success
(pass / warning / error / SKIP), Backward Test Success, Message, then Step, Rank, Launch Index) and
accuracy_checking_details_{timestamp}.csv (one row per output tensor with msprobe's columns, then Step, Rank).
Prints the counts, the op types skipped, and the failing kernels in launch order with their stacks.

Exit status 0 when every compared kernel passes, 1 when one has an error or a warning, 2 on bad usage or input
(including a dump without tensor data).
)";

namespace {

using replay::Status;
namespace fs = std::filesystem;

const std::vector<std::string> kResultColumns = {
    "API name", "Forward Test Success", "Backward Test Success", "Message", "Step", "Rank", "Launch Index"};
const std::vector<std::string> kDetailColumns = {"API Name",
                                                 "Bench Dtype",
                                                 "DEVICE Dtype",
                                                 "Shape",
                                                 "余弦相似度",
                                                 "最大绝对误差",
                                                 "双百指标",
                                                 "双千指标",
                                                 "双万指标",
                                                 "二进制一致错误率",
                                                 "误差均衡性",
                                                 "均方根误差",
                                                 "小值域错误占比",
                                                 "相对误差最大值",
                                                 "相对误差平均值",
                                                 "inf/nan错误率",
                                                 "相对误差错误率",
                                                 "绝对误差错误率",
                                                 "ULP误差最大值",
                                                 "ULP误差平均值",
                                                 "ULP误差大于阈值占比",
                                                 "Status",
                                                 "Message",
                                                 "Step",
                                                 "Rank"};
constexpr size_t kResultStep = 4, kResultRank = 5, kResultLaunch = 6;
constexpr size_t kDetailStatus = 21, kDetailStep = 23, kDetailRank = 24;

std::string one_line(std::string s) {
  std::replace(s.begin(), s.end(), '\n', ' ');
  std::replace(s.begin(), s.end(), '\r', ' ');
  return s;
}

// ---- CSV files ------------------------------------------------------------------------------------------------------
std::string read_file_text(const fs::path &p) {
  std::ifstream in(p, std::ios::binary);
  if (!in) throw InputError(p.string() + ": cannot open the file (" + std::strerror(errno) + ")");
  std::ostringstream ss;
  ss << in.rdbuf();
  if (in.bad()) throw InputError(p.string() + ": read failed");
  return ss.str();
}

// The result files grow by whole records (a kill leaves whole records behind); an error ends the run.
void open_csv(std::optional<CsvAppender> &csv, const fs::path &path, CsvAppender::Open how) {
  csv.emplace(path, how);
  if (csv->failed())
    throw InputError(path.string() + ": cannot open for writing (" + std::strerror(csv->error()) + ")");
}

void append_csv(CsvAppender &csv, const std::string &records) {
  csv.append(records);
  if (csv.failed()) throw InputError(csv.path().string() + ": write failed (" + std::strerror(csv.error()) + ")");
}

// ---- One kernel -----------------------------------------------------------------------------------------------------
struct Folder {
  const RankDir *dir = nullptr;
  std::string step, rank;  // CSV cells
  DumpHeader header;
  std::vector<KernelEntry> kernels;  // launch order
};

struct OutputRow {
  std::string slot;
  Status status = Status::Skip;
  std::string bench_dtype, device_dtype, shape;
  replay::PrecheckMetrics m;
};

struct KernelResult {
  Status status = Status::Skip;
  std::string message;
  std::vector<OutputRow> rows;
  bool no_reference = false;
};

replay::Tensor load_tensor(const Folder &f, const TensorInfo &t) {
  if (!t.data_name) throw replay::RefError(t.row_suffix() + ": tensor data not saved (no data_name)");
  if (!t.dtype) throw replay::RefError(t.row_suffix() + ": unknown dtype '" + t.dtype_text + "'");
  try {
    const TensorFile file = open_tensor_file(f.dir->path / collector::kTensorDir / *t.data_name, t);
    if (file.file_dtype == collector::DType::Raw) throw TensorFileError("raw bytes of an unknown dtype");
    replay::Tensor out;
    out.v = read_tensor_values(file);
    out.shape = t.shape_ok && static_cast<uint64_t>(replay::numel(t.shape)) == out.v.size() ? t.shape : file.shape;
    out.dtype = t.dtype;
    return out;
  } catch (const TensorFileError &e) {
    throw replay::RefError(t.row_suffix() + ": " + e.what());
  }
}

// One input_args element as the references see it; tensors are loaded into `store`.
replay::Arg make_arg(const Folder &f, const Json &v, const std::string &slot,
                     const std::unordered_map<std::string, const TensorInfo *> &inputs,
                     std::vector<std::unique_ptr<replay::Tensor>> &store) {
  using Kind = replay::Arg::Kind;
  replay::Arg a;
  auto tensor_at = [&](const std::string &s) -> const replay::Tensor * {
    auto it = inputs.find(s);
    if (it == inputs.end()) throw replay::RefError("input." + s + ": not a tensor the reader recognizes");
    store.push_back(std::make_unique<replay::Tensor>(load_tensor(f, *it->second)));
    return store.back().get();
  };
  if (v.is_null()) return a;
  if (v.is_array()) {
    // A non-empty list of scalar leaves is a sequence (aclIntArray...); an empty list stays an empty tensor list,
    // which Call::int_list / bool_list also accept as an empty array.
    if (auto seq = read_value_arg(v); !seq || seq->values.empty()) {
      a.kind = Kind::TensorList;
      for (size_t i = 0; i < v.size(); ++i) a.tensors.push_back(tensor_at(slot + "." + std::to_string(i)));
      return a;
    }
  } else if (!v.is_object()) {
    throw replay::RefError("input." + slot + ": not an object");
  } else if (inputs.count(slot)) {
    a.kind = Kind::Tensor;
    a.tensor = tensor_at(slot);
    return a;
  }
  const std::optional<ValueArgRead> read = read_value_arg(v);
  if (!read) throw replay::RefError("input." + slot + ": a non-tensor argument without a value");
  auto as_int = [](const Json &e) {
    // 2^64 - 1 wraps to -1, as the C argument
    return e.is_number_unsigned() ? static_cast<int64_t>(e.get<uint64_t>()) : e.get<int64_t>();
  };
  if (read->is_list) {
    const auto &xs = read->values;
    const bool bools = std::all_of(xs.begin(), xs.end(), [](const Json &e) { return e.is_boolean(); });
    const bool ints = std::all_of(xs.begin(), xs.end(), [](const Json &e) { return e.is_number_integer(); });
    if (bools && !xs.empty()) {
      a.kind = Kind::BoolList;
      for (const Json &e : xs) a.bools.push_back(e.get<bool>());
    } else if (ints) {
      a.kind = Kind::IntList;
      for (const Json &e : xs) a.ints.push_back(as_int(e));
    } else {
      throw replay::RefError("input." + slot + ": an array value the references do not use");
    }
    return a;
  }
  const Json &x = read->values.front();
  if (x.is_boolean()) {
    a.kind = Kind::Bool;
    a.b = x.get<bool>();
    a.i = a.b;
    a.f = a.b;
  } else if (x.is_number_integer()) {
    a.kind = Kind::Int;
    a.i = as_int(x);
    a.f = static_cast<double>(a.i);
    a.b = a.i != 0;
  } else if (x.is_number()) {
    a.kind = Kind::Float;
    a.f = x.get<double>();
  } else if (x.is_string()) {
    a.kind = Kind::Text;
    a.text = x.get<std::string>();
  } else {
    throw replay::RefError("input." + slot + ": a value the references do not use");
  }
  return a;
}

struct Context {
  replay::PrecheckThresholds th;
  // Collectives: (step, kernel name) -> input 0 of that kernel in every rank folder of the step.
  std::function<std::vector<const replay::Tensor *>(const Folder &, const std::string &)> peers;
};

KernelResult replay_kernel(const Folder &f, const KernelEntry &k, const Context &ctx) {
  KernelResult r;
  const std::string op(op_type_of(k.name));
  const replay::RefEntry *ref = replay::find_reference(op);
  const std::vector<TensorInfo> tensors = entry_tensors(k.entry, f.header);
  std::unordered_map<std::string, const TensorInfo *> inputs;
  std::vector<const TensorInfo *> outputs;  // by output slot; nested lists are not outputs of aclnn kernels
  for (const TensorInfo &t : tensors) {
    if (t.io == collector::IoKind::Input) inputs.emplace(t.slot, &t);
  }
  const Json *out_json = nullptr;
  if (auto it = k.entry.find(std::string(collector::json_key::kOutput)); it != k.entry.end() && it->is_array())
    out_json = &*it;
  const size_t n_out = out_json ? out_json->size() : 0;
  outputs.assign(n_out, nullptr);
  for (const TensorInfo &t : tensors)
    if (t.io == collector::IoKind::Output)
      for (size_t i = 0; i < n_out; ++i)
        if (t.slot == std::to_string(i)) outputs[i] = &t;

  auto skip_all = [&](const std::string &why) {
    r.status = Status::Skip;
    r.message = one_line(why);
    for (size_t i = 0; i < n_out; ++i) {
      if (!outputs[i]) continue;
      OutputRow row;
      row.slot = std::to_string(i);
      row.device_dtype = outputs[i]->dtype_text;
      row.shape = shape_text(outputs[i]->shape);
      row.bench_dtype = "N/A";
      row.m.message = r.message;
      r.rows.push_back(std::move(row));
    }
    return r;
  };
  if (!ref) {
    r.no_reference = true;
    return skip_all("No CPU reference for op type " + op + ".");
  }

  std::vector<std::unique_ptr<replay::Tensor>> store;
  replay::Outputs want;
  replay::Call call;
  call.op = ref->op_type;
  try {
    const Json *in_json = nullptr;
    if (auto it = k.entry.find(std::string(collector::json_key::kInputArgs)); it != k.entry.end() && it->is_array())
      in_json = &*it;
    if (in_json)
      for (size_t i = 0; i < in_json->size(); ++i)
        call.args.push_back(make_arg(f, (*in_json)[i], std::to_string(i), inputs, store));
    for (size_t i = 0; i < n_out; ++i) {
      replay::OutSpec s;
      if (outputs[i]) {
        s.present = true;
        s.shape = outputs[i]->shape;
        s.dtype = outputs[i]->dtype;
      }
      call.outputs.push_back(std::move(s));
    }
    if (ref->collective) call.peer_inputs = ctx.peers(f, k.name);
    want = ref->fn(call);
  } catch (const replay::RefError &e) {
    return skip_all(std::string("The reference could not run: ") + e.what());
  } catch (const std::exception &e) {
    return skip_all(std::string("The reference could not run: ") + e.what());
  }

  bool any = false;
  for (size_t i = 0; i < n_out; ++i) {
    const TensorInfo *t = outputs[i];
    if (!t) continue;
    OutputRow row;
    row.slot = std::to_string(i);
    row.device_dtype = t->dtype_text;
    row.shape = shape_text(t->shape);
    row.bench_dtype = "N/A";
    if (i >= want.size() || !want[i]) {
      row.m.message = "The reference computes nothing for this output.";
      r.rows.push_back(std::move(row));
      continue;
    }
    replay::Tensor bench = std::move(*want[i]);
    try {
      const replay::Tensor device = load_tensor(f, *t);
      const collector::DType dt = *t->dtype;
      // The benchmark: float64, or the value a correct kernel stores where the output dtype is coarser than the
      // reference's error (half types, integers, bool) or the op is a conversion (Cast).
      const bool round = ref->round_to_output || !(dt == collector::DType::F32 || dt == collector::DType::F64);
      double eps = relative_zero_eps(collector::DType::F64);
      row.bench_dtype = "Float64";
      if (round) {
        for (double &x : bench.v) x = replay::round_to_dtype(x, dt);
        eps = relative_zero_eps(dt);
        row.bench_dtype = t->dtype_text;
      }
      if (bench.size() != device.size()) {
        row.status = Status::Error;
        row.m.message =
            "The shape of bench" + shape_text(bench.shape) + " and npu" + shape_text(device.shape) + " not equal.";
      } else {
        row.status = replay::precheck(device.v, bench.v, dt, eps, ctx.th, row.m);
      }
      any = true;
      r.status = r.rows.empty() && r.status == Status::Skip ? row.status : replay::worse(r.status, row.status);
    } catch (const replay::RefError &e) {
      row.m.message = std::string("Output not compared: ") + e.what();
    }
    r.rows.push_back(std::move(row));
  }
  if (!any) {
    r.status = Status::Skip;
    r.message = "No output could be compared.";
  } else {
    std::string skipped;
    for (const OutputRow &row : r.rows)
      if (row.status == Status::Skip) skipped += (skipped.empty() ? "" : ", ") + std::string("output.") + row.slot;
    if (!skipped.empty()) r.message = "Not compared: " + skipped + ".";
  }
  // A kernel that fails names its failing outputs.
  if (r.status == Status::Error || r.status == Status::Warning) {
    std::string bad;
    for (const OutputRow &row : r.rows)
      if (row.status == Status::Error || row.status == Status::Warning)
        bad += (bad.empty() ? "" : ", ") + std::string("output.") + row.slot + " " + replay::status_text(row.status);
    r.message = bad + (r.message.empty() ? "" : ". " + r.message);
  }
  return r;
}

std::string result_row(const Folder &f, const KernelEntry &k, const KernelResult &r) {
  const std::vector<std::string> cells = {k.name,
                                          replay::status_text(r.status),
                                          r.status == Status::Skip ? "SKIP" : " ",
                                          one_line(r.message),
                                          f.step,
                                          f.rank,
                                          k.launch_index ? std::to_string(*k.launch_index) : "N/A"};
  return csv_row(cells);
}

std::string detail_rows(const Folder &f, const KernelEntry &k, const KernelResult &r) {
  std::string out;
  for (const OutputRow &row : r.rows) {
    const replay::PrecheckMetrics &m = row.m;
    const std::string na = "N/A";
    const std::vector<std::string> cells = {k.name + ".output." + row.slot,
                                            row.bench_dtype,
                                            row.device_dtype,
                                            row.shape,
                                            metric_text(m.cosine),
                                            metric_text(m.max_abs_err),
                                            metric_text(m.hundredth),
                                            metric_text(m.thousandth),
                                            metric_text(m.ten_thousandth),
                                            metric_text(m.error_rate),
                                            metric_text(m.error_balance),
                                            metric_text(m.rmse),
                                            metric_text(m.small_value_err_ratio),
                                            metric_text(m.max_rel_err),
                                            metric_text(m.mean_rel_err),
                                            na,
                                            na,
                                            na,
                                            na,
                                            na,
                                            na,
                                            replay::status_text(row.status),
                                            one_line(m.message),
                                            f.step,
                                            f.rank};
    out += csv_row(cells);
  }
  return out;
}

// A kernel as the summary lists it.
struct Listed {
  size_t folder = 0;
  uint64_t launch = UINT64_MAX;
  std::string folder_label, name, status, message;
  std::vector<std::string> lines;  // failing outputs with metrics (kernels replayed in this run)
};

using Key = std::tuple<std::string, std::string, std::string>;  // step, rank, kernel

// --csv-path: the kernels already done, the statuses they got, and the files to append to.
struct Resume {
  std::set<Key> done;
  std::vector<std::vector<std::string>> rows;  // the result rows kept
};

fs::path details_path_for(const fs::path &result) {
  const std::string name = result.filename().string();
  const std::string prefix = "accuracy_checking_result_";
  if (name.rfind(prefix, 0) != 0)
    throw InputError(result.string() +
                     ": not an accuracy_checking_result_*.csv file (its details file is found by "
                     "that name)");
  return result.parent_path() / ("accuracy_checking_details_" + name.substr(prefix.size()));
}

// Rewrites `path` as `text` atomically (temporary file + rename).
void replace_file(const fs::path &path, const std::string &text) {
  const fs::path tmp = path.string() + ".tmp";
  {
    std::ofstream out(tmp, std::ios::binary | std::ios::trunc);
    out << text;
    out.close();
    if (!out) throw InputError(tmp.string() + ": write failed");
  }
  std::error_code ec;
  fs::rename(tmp, path, ec);
  if (ec) throw InputError(path.string() + ": cannot replace the file (" + ec.message() + ")");
}

Resume load_resume(const fs::path &result_path, const fs::path &details_path) {
  Resume res;
  std::string text = read_file_text(result_path);
  const CsvRecords results = parse_csv(text);
  if (results.rows.empty() || results.rows[0] != kResultColumns)
    throw InputError(result_path.string() + ": not a result CSV of msprobe-inspect replay (the header differs)");
  bool dirty = results.complete != text.size();  // a record cut by a kill: dropped
  std::string kept = csv_row(kResultColumns);
  for (size_t i = 1; i < results.rows.size(); ++i) {
    const auto &row = results.rows[i];
    if (row.size() != kResultColumns.size()) {  // cannot be a record this tool wrote whole
      dirty = true;
      continue;
    }
    const Key key{row[kResultStep], row[kResultRank], row[0]};
    if (!res.done.insert(key).second) {
      dirty = true;
      continue;
    }
    kept += csv_row(row);
    res.rows.push_back(row);
  }
  if (dirty) replace_file(result_path, kept);

  // Details: keep the rows of kernels in the result file (a kill between a kernel's details and its result row
  // leaves details the resumed run writes again).
  std::error_code ec;
  if (!fs::exists(details_path, ec)) {
    replace_file(details_path, csv_row(kDetailColumns));
    return res;
  }
  text = read_file_text(details_path);
  const CsvRecords details = parse_csv(text);
  if (details.rows.empty() || details.rows[0] != kDetailColumns)
    throw InputError(details_path.string() + ": not a details CSV of msprobe-inspect replay (the header differs)");
  dirty = details.complete != text.size();
  std::string kept_details = csv_row(kDetailColumns);
  for (size_t i = 1; i < details.rows.size(); ++i) {
    const auto &row = details.rows[i];
    bool keep = row.size() == kDetailColumns.size();
    if (keep) {
      const std::string &api = row[0];
      const size_t cut = api.rfind(".output.");
      keep = cut != std::string::npos && res.done.count(Key{row[kDetailStep], row[kDetailRank], api.substr(0, cut)});
    }
    if (!keep) {
      dirty = true;
      continue;
    }
    kept_details += csv_row(row);
  }
  if (dirty) replace_file(details_path, kept_details);
  return res;
}

}  // namespace

int run_replay(std::span<char *const> argv) {
  static const OptionSpec kOptions[] = {{"--out", true}, {"--csv-path", true},    {"-csv_path", true},
                                        {"-j", true},    {"--jobs", true},        {"--atol", true},
                                        {"--cos", true}, {"--max-kernels", true}, {"--list-ops", false}};
  const Args args = parse_args(argv, kOptions);
  if (args.flag("--list-ops")) {
    expect_positional(args, 0, "no DIR with --list-ops");
    for (std::string_view op : replay::reference_op_types())
      std::printf("%.*s\n", static_cast<int>(op.size()), op.data());
    return kExitOk;
  }
  expect_positional(args, 1, "DIR (a tensor dump)");
  Context ctx;
  ctx.th.atol = args.number("--atol", ctx.th.atol, 0, 1e308);
  ctx.th.cosine = args.number("--cos", ctx.th.cosine, -1, 1);
  std::optional<uint64_t> jobs = args.count("-j");
  if (!jobs) jobs = args.count("--jobs");
  if (jobs && *jobs == 0) throw UsageError("-j '0': at least one job is needed");
  const unsigned cores = std::max(1u, std::thread::hardware_concurrency());
  const size_t n_jobs = static_cast<size_t>(std::min<uint64_t>(jobs.value_or(cores), 256));
  const std::optional<uint64_t> max_kernels = args.count("--max-kernels");
  std::optional<std::string> csv_path = args.value("--csv-path");
  if (!csv_path) csv_path = args.value("-csv_path");

  const std::vector<RankDir> dirs = find_rank_dirs(args.positional[0]);
  // Every folder must hold tensor data: check the headers before writing anything.
  std::vector<Folder> folders(dirs.size());
  for (size_t i = 0; i < dirs.size(); ++i) {
    Folder &f = folders[i];
    f.dir = &dirs[i];
    f.step = dirs[i].step ? std::to_string(*dirs[i].step) : "";
    f.rank = dirs[i].rank_label();
    DumpCallbacks cb;
    cb.on_header = [&](const DumpHeader &h) { f.header = h; };
    cb.on_kernel = [](KernelEntry &&) { return false; };
    read_dump_json(dirs[i], cb);
    const std::string tensor(collector::task_name(collector::Task::Tensor));
    if (f.header.task != tensor)
      throw InputError((dirs[i].path / collector::kDumpJson).string() + ": task '" + f.header.task +
                       "': replay needs tensor data (a dump made with MSPROBE_TASK=tensor)");
  }
  (void)replay::reference_op_types();  // builds the table before the workers start

  // The output files: new ones, or the ones --csv-path resumes.
  std::optional<CsvAppender> result_csv, details_csv;
  Resume resume;
  if (csv_path) {
    const fs::path result_path = *csv_path;
    std::error_code ec;
    if (!fs::exists(result_path, ec)) throw InputError(result_path.string() + ": no such file");
    if (!fs::is_regular_file(result_path, ec)) throw InputError(result_path.string() + ": not a regular file");
    const fs::path details_path = details_path_for(result_path);
    resume = load_resume(result_path, details_path);
    open_csv(result_csv, result_path, CsvAppender::Open::Existing);
    open_csv(details_csv, details_path, CsvAppender::Open::Existing);
  } else {
    const ResultFiles files =
        new_result_files(args.value("--out").value_or("."), "accuracy_checking_result_", "accuracy_checking_details_");
    const fs::path &rp = files.result, &dp = files.details;
    open_csv(result_csv, rp, CsvAppender::Open::New);
    open_csv(details_csv, dp, CsvAppender::Open::New);
    append_csv(*result_csv, csv_row(kResultColumns));
    append_csv(*details_csv, csv_row(kDetailColumns));
  }

  // Collectives read input 0 of the same kernel in the other rank folders of the step (loaded once per step).
  std::mutex peer_mu;
  std::map<std::pair<std::string, std::string>, std::vector<std::unique_ptr<replay::Tensor>>> peer_cache;
  ctx.peers = [&](const Folder &f, const std::string &name) {
    std::lock_guard<std::mutex> lock(peer_mu);
    auto &slot = peer_cache[{f.step, name}];
    if (slot.empty()) {
      for (const Folder &p : folders) {
        if (p.step != f.step) continue;
        DumpCallbacks cb;
        std::optional<KernelEntry> found;
        cb.on_kernel = [&](KernelEntry &&k) {
          if (k.name != name) return true;
          found = std::move(k);
          return false;
        };
        const Folder *src = &p;
        Folder loaded;
        if (&p == &f) {
          for (const KernelEntry &k : f.kernels)
            if (k.name == name) found = k;
        } else {
          loaded.dir = p.dir;
          loaded.header = read_dump_json(*p.dir, cb);
          src = &loaded;
        }
        if (!found) continue;
        for (const TensorInfo &t : entry_tensors(found->entry, src->header))
          if (t.io == collector::IoKind::Input && t.slot == "0") {
            slot.push_back(std::make_unique<replay::Tensor>(load_tensor(*src, t)));
            break;
          }
      }
    }
    std::vector<const replay::Tensor *> out;
    for (const auto &t : slot) out.push_back(t.get());
    return out;
  };

  std::map<Status, uint64_t> tally;
  std::map<std::string, uint64_t> no_ref_ops;
  std::vector<Listed> failing, skipped_other;
  // Kernels from the resumed file count as they were recorded.
  std::map<std::pair<std::string, std::string>, size_t> folder_index;
  for (size_t i = 0; i < folders.size(); ++i) folder_index[{folders[i].step, folders[i].rank}] = i;
  for (const auto &row : resume.rows) {
    const std::string &st = row[1];
    const Status s = st == "pass"      ? Status::Pass
                     : st == "warning" ? Status::Warning
                     : st == "error"   ? Status::Error
                                       : Status::Skip;
    ++tally[s];
    if (s == Status::Error || s == Status::Warning) {
      Listed l;
      auto it = folder_index.find({row[kResultStep], row[kResultRank]});
      l.folder = it == folder_index.end() ? SIZE_MAX : it->second;
      l.folder_label = it == folder_index.end() ? "step" + row[kResultStep] + "/" + row[kResultRank]
                                                : folders[it->second].dir->label();
      char *end = nullptr;
      const unsigned long long li = std::strtoull(row[kResultLaunch].c_str(), &end, 10);
      l.launch = end && *end == '\0' && !row[kResultLaunch].empty() ? li : UINT64_MAX;
      l.name = row[0];
      l.status = st;
      l.message = row[3] + " (from the resumed CSV)";
      failing.push_back(std::move(l));
    } else if (s == Status::Skip && row[3].rfind("No CPU reference for op type ", 0) == 0) {
      ++no_ref_ops[std::string(op_type_of(row[0]))];
    }
  }
  const uint64_t resumed = resume.rows.size();

  uint64_t budget = max_kernels.value_or(UINT64_MAX), replayed = 0;
  // One progress line over the whole run, measured in dump.json bytes (each folder's share split by its kernels).
  auto json_size = [](const Folder &f) {
    std::error_code ec;
    const uint64_t n = fs::file_size(f.dir->path / collector::kDumpJson, ec);
    return ec ? uint64_t{1} : std::max<uint64_t>(n, 1);
  };
  uint64_t total_bytes = 0, done_bytes = 0;
  for (const Folder &f : folders) total_bytes += json_size(f);
  Progress progress("replay", total_bytes);
  bool stopped = false;  // --max-kernels left kernels undone
  for (size_t fi = 0; fi < folders.size() && budget > 0; ++fi) {
    Folder &f = folders[fi];
    DumpCallbacks cb;
    cb.on_kernel = [&](KernelEntry &&k) {
      f.kernels.push_back(std::move(k));
      return true;
    };
    read_dump_json(*f.dir, cb);
    std::stable_sort(f.kernels.begin(), f.kernels.end(), [](const KernelEntry &a, const KernelEntry &b) {
      return a.launch_index.value_or(UINT64_MAX) < b.launch_index.value_or(UINT64_MAX);
    });
    std::vector<size_t> todo;
    for (size_t i = 0; i < f.kernels.size(); ++i) {
      if (resume.done.count(Key{f.step, f.rank, f.kernels[i].name})) continue;
      if (todo.size() == budget) {
        stopped = true;
        break;
      }
      todo.push_back(i);
    }
    budget -= std::min<uint64_t>(budget, todo.size());
    if (budget == 0 && fi + 1 < folders.size()) stopped = true;  // a later folder may be all done: close enough

    // Workers replay kernels in any order; this thread writes them in launch order as they complete.
    std::vector<std::optional<KernelResult>> results(todo.size());
    std::mutex mu;
    std::condition_variable cv;
    size_t next = 0;
    auto worker = [&] {
      for (;;) {
        size_t i;
        {
          std::lock_guard<std::mutex> lock(mu);
          if (next >= todo.size()) return;
          i = next++;
        }
        KernelResult r;
        try {
          r = replay_kernel(f, f.kernels[todo[i]], ctx);
        } catch (const std::exception &e) {
          r.status = Status::Skip;
          r.message = one_line(std::string("The kernel could not be replayed: ") + e.what());
        }
        {
          std::lock_guard<std::mutex> lock(mu);
          results[i] = std::move(r);
        }
        cv.notify_all();
      }
    };
    std::vector<std::thread> pool;
    for (size_t t = 0; t < std::min(n_jobs, todo.size()); ++t) pool.emplace_back(worker);
    const uint64_t folder_bytes = json_size(f);
    for (size_t i = 0; i < todo.size(); ++i) {
      KernelResult r;
      {
        std::unique_lock<std::mutex> lock(mu);
        cv.wait(lock, [&] { return results[i].has_value(); });
        r = std::move(*results[i]);
        results[i].reset();
      }
      const KernelEntry &k = f.kernels[todo[i]];
      // Details first, then the result row: a kernel is done once its result row is on disk.
      try {
        append_csv(*details_csv, detail_rows(f, k, r));
        append_csv(*result_csv, result_row(f, k, r));
      } catch (...) {
        for (std::thread &t : pool) t.join();
        throw;
      }
      ++replayed;
      ++tally[r.status];
      progress.update(done_bytes + folder_bytes * (i + 1) / todo.size());
      if (r.no_reference) {
        ++no_ref_ops[std::string(op_type_of(k.name))];
      } else if (r.status == Status::Skip) {
        skipped_other.push_back(
            {fi, k.launch_index.value_or(UINT64_MAX), f.dir->label(), k.name, "SKIP", r.message, {}});
      } else if (r.status != Status::Pass) {
        Listed l{fi,     k.launch_index.value_or(UINT64_MAX), f.dir->label(),
                 k.name, replay::status_text(r.status),       r.message,
                 {}};
        for (const OutputRow &row : r.rows) {
          if (row.status != Status::Error && row.status != Status::Warning) continue;
          l.lines.push_back("output." + row.slot + ": " + replay::status_text(row.status) + " (Cosine " +
                            metric_text(row.m.cosine) + ", MaxAbsErr " + metric_text(row.m.max_abs_err) +
                            ", within 0.1% " + metric_text(row.m.thousandth) + ", MaxRelErr " +
                            metric_text(row.m.max_rel_err) + ") " + one_line(row.m.message));
        }
        failing.push_back(std::move(l));
      }
    }
    for (std::thread &t : pool) t.join();
    done_bytes += folder_bytes;
    if (fi + 1 < folders.size()) std::vector<KernelEntry>().swap(f.kernels);  // peers re-read what they need
  }

  progress.finish();

  // ---- Summary ----
  const uint64_t compared = tally[Status::Pass] + tally[Status::Warning] + tally[Status::Error];
  std::printf(
      "replay: %zu folder(s), %llu kernels%s: %llu compared (%llu pass, %llu warning, %llu error), "
      "%llu skipped\n",
      folders.size(), static_cast<unsigned long long>(replayed + resumed),
      resumed ? (" (" + std::to_string(resumed) + " already in " + result_csv->path().string() + ", " +
                 std::to_string(replayed) + " replayed now)")
                    .c_str()
              : "",
      static_cast<unsigned long long>(compared), static_cast<unsigned long long>(tally[Status::Pass]),
      static_cast<unsigned long long>(tally[Status::Warning]), static_cast<unsigned long long>(tally[Status::Error]),
      static_cast<unsigned long long>(tally[Status::Skip]));
  if (stopped) {
    std::printf("stopped after --max-kernels %llu; resume with --csv-path %s\n",
                static_cast<unsigned long long>(*max_kernels), result_csv->path().string().c_str());
  }
  if (!no_ref_ops.empty()) {
    std::string s;
    for (const auto &[op, n] : no_ref_ops) s += (s.empty() ? "" : ", ") + op + " (" + std::to_string(n) + ")";
    std::printf("skipped op types (no CPU reference): %s\n", s.c_str());
  }
  for (size_t i = 0; i < skipped_other.size() && i < 20; ++i)
    std::printf("skipped: %s %s: %s\n", skipped_other[i].folder_label.c_str(), skipped_other[i].name.c_str(),
                skipped_other[i].message.c_str());
  if (skipped_other.size() > 20)
    std::printf("... and %zu more skipped kernels (see the CSV)\n", skipped_other.size() - 20);

  std::stable_sort(failing.begin(), failing.end(), [](const Listed &a, const Listed &b) {
    return std::pair(a.folder, a.launch) < std::pair(b.folder, b.launch);
  });
  if (failing.empty()) {
    std::printf("every compared kernel passes\n");
  } else {
    std::printf("failing kernels (launch order):\n");
    for (size_t i = 0; i < failing.size() && i < 50; ++i) {
      const Listed &l = failing[i];
      std::printf("  %s %s (launch_index %s): %s\n", l.folder_label.c_str(), l.name.c_str(),
                  l.launch == UINT64_MAX ? "?" : std::to_string(l.launch).c_str(), l.status.c_str());
      for (const std::string &line : l.lines) std::printf("    %s\n", line.c_str());
      if (l.lines.empty() && !l.message.empty()) std::printf("    %s\n", l.message.c_str());
      if (i < 10 && l.folder < folders.size()) {
        if (const auto frames = find_stack(*folders[l.folder].dir, l.name)) {
          std::printf("    stack:\n");
          for (const std::string &fr : *frames) std::printf("      %s\n", fr.c_str());
        }
      }
    }
    if (failing.size() > 50) std::printf("  ... and %zu more (see the CSV)\n", failing.size() - 50);
  }
  std::printf("results: %s\n         %s\n", result_csv->path().string().c_str(), details_csv->path().string().c_str());
  return tally[Status::Error] + tally[Status::Warning] ? kExitFindings : kExitOk;
}

}  // namespace msprobe::tools
