// replay DIR: msprobe's accuracy pre-check at kernel level. Each captured kernel whose op type has a CPU reference
// (tools/replay/refs*.cpp) is re-run on its dumped inputs in float64 and its dumped outputs are judged by the
// pre-check's rule (tools/replay/precheck.h). Writes msprobe's accuracy_checking_result / details CSVs, a row at a
// time so that a killed run leaves a valid prefix that --csv-path resumes.
#include <algorithm>
#include <condition_variable>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <system_error>
#include <thread>
#include <vector>

#include "format/format.h"
#include "format/stack_text.h"
#include "tools/inspect/cli.h"
#include "tools/inspect/commands.h"
#include "tools/inspect/replay.h"
#include "tools/reader/csv.h"
#include "tools/reader/dump_reader.h"

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

On a flight record (MSPROBE_TASK=flight: a tensor dump of the kernels kept before a trigger), then per record (per
rank and trigger): the first recorded kernel, in launch order, whose status is error or warning (step/rank folder,
launch_index); or, when none departs, the first kernel whose output is NaN/Inf although its input tensors are
finite: every kernel computed correctly, so the values ran out of range (data or scale, not a kernel bug); and the
recorded kernels that could not be judged (no CPU reference, no tensor data, ...).

Exit status 0 when every compared kernel passes, 1 when one has an error or a warning, 2 on bad usage or input
(including a dump without tensor data).
)";

namespace replay {
namespace {

// ---- Options and plan -----------------------------------------------------------------------------------------------
struct ReplayOptions {
  bool list_ops = false;
  std::string dir;
  PrecheckThresholds th;
  size_t jobs = 1;
  std::optional<uint64_t> max_kernels;
  std::optional<std::string> csv_path;  // resume
  fs::path out_dir;                     // new files
};

ReplayOptions parse_options(std::span<char *const> argv) {
  static const OptionSpec kOptions[] = {{"--out", true}, {"--csv-path", true},    {"-csv_path", true},
                                        {"-j", true},    {"--jobs", true},        {"--atol", true},
                                        {"--cos", true}, {"--max-kernels", true}, {"--list-ops", false}};
  const Args args = parse_args(argv, kOptions);
  ReplayOptions o;
  o.list_ops = args.flag("--list-ops");
  if (o.list_ops) {
    expect_positional(args, 0, "no DIR with --list-ops");
    return o;
  }
  expect_positional(args, 1, "DIR (a tensor dump)");
  o.dir = args.positional[0];
  o.th.atol = args.number("--atol", o.th.atol, 0, 1e308);
  o.th.cosine = args.number("--cos", o.th.cosine, -1, 1);
  std::optional<uint64_t> jobs = args.count("-j");
  if (!jobs) jobs = args.count("--jobs");
  if (jobs && *jobs == 0) throw UsageError("-j '0': at least one job is needed");
  const unsigned cores = std::max(1u, std::thread::hardware_concurrency());
  o.jobs = static_cast<size_t>(std::min<uint64_t>(jobs.value_or(cores), 256));
  o.max_kernels = args.count("--max-kernels");
  o.csv_path = args.value("--csv-path");
  if (!o.csv_path) o.csv_path = args.value("-csv_path");
  o.out_dir = args.value("--out").value_or(".");
  return o;
}

struct ReplayPlan {
  std::vector<RankDir> dirs;
  std::vector<Folder> folders;  // one per dir
  fs::path result_path, details_path;
  bool resuming = false;  // the files exist: append to them
  Resume resume;
};

// Every folder must hold tensor data: the headers are checked before anything is written.
std::vector<Folder> read_headers(const std::vector<RankDir> &dirs) {
  std::vector<Folder> folders(dirs.size());
  for (size_t i = 0; i < dirs.size(); ++i) {
    Folder &f = folders[i];
    f.dir = &dirs[i];
    f.step = dirs[i].step ? std::to_string(*dirs[i].step) : "";
    f.rank = dirs[i].rank_label();
    DumpCallbacks cb;
    cb.on_header = [&](const DumpHeaderRead &h) { f.header = h; };
    cb.on_kernel = [](EntryRead &&) { return false; };
    read_dump_json_partial(dirs[i], cb);  // the header, also of a folder still being written
    const std::string tensor(format::task_name(format::Task::Tensor));
    if (f.header.task != tensor)
      throw InputError((dirs[i].path / format::kDumpJson).string() + ": task '" + f.header.task +
                       "': replay needs tensor data (a dump made with MSPROBE_TASK=tensor)");
  }
  return folders;
}

// --csv-path: the files of the earlier run, their rows taken up.
void plan_resumed_files(const fs::path &result_path, ReplayPlan &p) {
  std::error_code ec;
  if (!fs::exists(result_path, ec)) throw InputError(result_path.string() + ": no such file");
  if (!fs::is_regular_file(result_path, ec)) throw InputError(result_path.string() + ": not a regular file");
  p.resuming = true;
  p.result_path = result_path;
  p.details_path = details_path_for(result_path);
  p.resume = load_resume(p.result_path, p.details_path);
}

ReplayPlan make_plan(const ReplayOptions &o) {
  ReplayPlan p;
  p.dirs = find_rank_dirs(o.dir);
  p.folders = read_headers(p.dirs);
  (void)reference_op_types();  // builds the table before the workers start
  if (o.csv_path) {
    plan_resumed_files(*o.csv_path, p);
  } else {
    const ResultFiles files = new_result_files(o.out_dir, "accuracy_checking_result_", "accuracy_checking_details_");
    p.result_path = files.result;
    p.details_path = files.details;
  }
  return p;
}

// ---- Run ------------------------------------------------------------------------------------------------------------
// Collectives: a kernel's members in the folders of its step. Each folder's collective kernels are read once per step
// and each instance's members decoded once (every member's kernel asks for the same ones); the step replayed last is
// kept, the folders being replayed in step order.
class MemberIndex {
 public:
  explicit MemberIndex(const std::vector<Folder> &folders) : folders_(folders) {}

  Members of(const Folder &f, const EntryRead &k) {
    std::lock_guard<std::mutex> lock(mu_);
    if (f.step != step_) index_step(f.step);
    const std::optional<format::CommInfo> comm = comm_of(k.entry);
    const bool by_comm = comm && comm->seq;
    // The op type is part of the key: an instance is one collective, whatever numbering the communicator uses.
    const std::string key =
        by_comm ? std::string(op_type_of(k.name)) + "|" + comm->name + "#" + std::to_string(*comm->seq) : k.name;
    std::shared_ptr<Decoded> &d = decoded_[key];
    if (!d) d = by_comm ? decode(k.name, matching_comm(*comm, k.name)) : decode(k.name, matching_name(k.name));
    Members m;
    m.owner = d;
    for (const Call &c : d->calls) m.calls.push_back(&c);
    const size_t here = static_cast<size_t>(&f - folders_.data());
    for (size_t i = 0; i < d->folders.size(); ++i)
      if (d->folders[i] == here) m.self = i;
    return m;
  }

 private:
  struct Kept {
    size_t folder = 0;
    EntryRead kernel;
    std::optional<format::CommInfo> comm;
  };
  // The members' calls, their tensors, and the folder of each.
  struct Decoded {
    std::vector<std::unique_ptr<Tensor>> store;
    std::vector<Call> calls;
    std::vector<size_t> folders;
  };

  static std::optional<format::CommInfo> comm_of(const Json &entry) {
    auto it = entry.find(std::string(format::comm_key::kComm));
    return it == entry.end() ? std::nullopt : comm_from_json(*it);
  }

  void index_step(const std::string &step) {
    step_ = step;
    kept_.clear();
    decoded_.clear();
    for (size_t i = 0; i < folders_.size(); ++i) {
      if (folders_[i].step != step) continue;
      DumpCallbacks cb;
      cb.on_kernel = [&](EntryRead &&k) {
        const RefEntry *ref = find_reference(op_type_of(k.name));
        if (ref && ref->collective) {
          std::optional<format::CommInfo> comm = comm_of(k.entry);
          kept_.push_back({i, std::move(k), std::move(comm)});
        }
        return true;
      };
      read_dump_json_partial(*folders_[i].dir, cb);
    }
  }

  // The instance (name, seq) of the communicator of op type `name`'s, one kernel per comm rank, in comm-rank order.
  std::vector<const Kept *> matching_comm(const format::CommInfo &comm, const std::string &name) const {
    std::vector<const Kept *> by_rank(comm.size, nullptr);
    for (const Kept &k : kept_)
      if (k.comm && k.comm->name == comm.name && k.comm->seq == comm.seq && k.comm->rank < comm.size &&
          op_type_of(k.kernel.name) == op_type_of(name))
        by_rank[k.comm->rank] = &k;
    std::string missing;
    for (size_t r = 0; r < by_rank.size(); ++r)
      if (!by_rank[r]) missing += (missing.empty() ? "" : ", ") + std::to_string(r);
    if (!missing.empty())
      throw RefError(std::string(op_type_of(name)) + ": communicator " + comm.name + ", seq " +
                     std::to_string(*comm.seq) + ": no kernel of comm rank(s) " + missing + " in step " + step_ +
                     " (every member's rank folder must be in the dump)");
    return by_rank;
  }

  // The kernel of the same name in every folder of the step (kernels without a "comm" object), in rank order.
  std::vector<const Kept *> matching_name(const std::string &name) const {
    std::vector<const Kept *> out;
    for (const Kept &k : kept_)
      if (k.kernel.name == name) out.push_back(&k);
    return out;
  }

  std::shared_ptr<Decoded> decode(const std::string &name, const std::vector<const Kept *> &members) const {
    auto d = std::make_shared<Decoded>();
    const std::string_view op = op_type_of(name);
    for (const Kept *k : members) {
      if (op_type_of(k->kernel.name) != op)
        throw RefError(std::string(op) + ": its instance on another rank is a " +
                       std::string(op_type_of(k->kernel.name)));
      const Folder &f = folders_[k->folder];
      const std::vector<TensorInfo> tensors = entry_tensors(k->kernel.entry, f.header);
      std::unordered_map<std::string, const TensorInfo *> inputs;
      for (const TensorInfo &t : tensors)
        if (t.io == format::IoKind::Input) inputs.emplace(t.slot, &t);
      Call c;
      c.op = find_reference(op)->op_type;
      auto it = k->kernel.entry.find(std::string(format::json_key::kInputArgs));
      if (it != k->kernel.entry.end() && it->is_array())
        for (size_t i = 0; i < it->size(); ++i)
          c.args.push_back(make_arg(f, (*it)[i], std::to_string(i), inputs, d->store));
      d->calls.push_back(std::move(c));
      d->folders.push_back(k->folder);
    }
    return d;
  }

  const std::vector<Folder> &folders_;
  std::mutex mu_;
  std::string step_ = "\n";  // no step indexed yet
  std::vector<Kept> kept_;
  std::map<std::string, std::shared_ptr<Decoded>> decoded_;
};

// A kernel as the report lists it.
struct Listed {
  size_t folder = 0;
  uint64_t launch = UINT64_MAX;
  std::string folder_label, name, status, message;
  std::vector<std::string> lines;  // failing outputs with metrics (kernels replayed in this run)
};

struct ReplayTally {
  std::map<Status, uint64_t> statuses;
  std::map<std::string, uint64_t> no_ref_ops;
  std::vector<Listed> failing, skipped_other;
  uint64_t resumed = 0, replayed = 0;
  bool stopped = false;              // --max-kernels left kernels undone
  std::vector<FlightKernel> flight;  // kernels written by a flight record, as their folders are read
  Outcomes outcomes;                 // every kernel judged, for the flight report
  std::vector<Shortfall> partial;    // folders read only in part: their kernels so far are replayed
};

// Kernels from the resumed file count as they were recorded.
void count_resumed(const ReplayPlan &p, ReplayTally &t) {
  std::map<std::pair<std::string, std::string>, size_t> folder_index;
  for (size_t i = 0; i < p.folders.size(); ++i) folder_index[{p.folders[i].step, p.folders[i].rank}] = i;
  for (const auto &row : p.resume.rows) {
    const std::string &st = row[1];
    const Status s = st == "pass"      ? Status::Pass
                     : st == "warning" ? Status::Warning
                     : st == "error"   ? Status::Error
                                       : Status::Skip;
    ++t.statuses[s];
    const bool no_reference = s == Status::Skip && row[3].rfind("No CPU reference for op type ", 0) == 0;
    t.outcomes[Key{row[kResultStep], row[kResultRank], row[0]}] = {s, no_reference};
    if (s == Status::Error || s == Status::Warning) {
      Listed l;
      auto it = folder_index.find({row[kResultStep], row[kResultRank]});
      l.folder = it == folder_index.end() ? SIZE_MAX : it->second;
      l.folder_label = it == folder_index.end() ? "step" + row[kResultStep] + "/" + row[kResultRank]
                                                : p.folders[it->second].dir->label();
      char *end = nullptr;
      const unsigned long long li = std::strtoull(row[kResultLaunch].c_str(), &end, 10);
      l.launch = end && *end == '\0' && !row[kResultLaunch].empty() ? li : UINT64_MAX;
      l.name = row[0];
      l.status = st;
      l.message = row[3] + " (from the resumed CSV)";
      t.failing.push_back(std::move(l));
    } else if (no_reference) {
      ++t.no_ref_ops[std::string(op_type_of(row[0]))];
    }
  }
  t.resumed = p.resume.rows.size();
}

// Replays f's kernels `todo` on up to `jobs` threads; `take(i, result)` receives them in order on this thread, as
// they complete.
void replay_in_order(const Folder &f, const std::vector<size_t> &todo, const Context &ctx, size_t jobs,
                     const std::function<void(size_t, KernelResult &&)> &take) {
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
  for (size_t t = 0; t < std::min(jobs, todo.size()); ++t) pool.emplace_back(worker);
  for (size_t i = 0; i < todo.size(); ++i) {
    KernelResult r;
    {
      std::unique_lock<std::mutex> lock(mu);
      cv.wait(lock, [&] { return results[i].has_value(); });
      r = std::move(*results[i]);
      results[i].reset();
    }
    try {
      take(i, std::move(r));
    } catch (...) {
      for (std::thread &t : pool) t.join();
      throw;
    }
  }
  for (std::thread &t : pool) t.join();
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

// dump.json bytes, for the progress line (each folder's share split by its kernels).
uint64_t progress_bytes(const Folder &f) {
  std::error_code ec;
  const uint64_t n = fs::file_size(f.dir->path / format::kDumpJson, ec);
  return ec ? uint64_t{1} : std::max<uint64_t>(n, 1);
}

// The folders replayed in order, each kernel's rows written as it completes (details first, then the result row: a
// kernel is done once its result row is on disk).
class ReplayRun {
 public:
  ReplayRun(ReplayPlan &p, const ReplayOptions &o, ReplayTally &tally)
      : plan_(p), jobs_(o.jobs), budget_(o.max_kernels.value_or(UINT64_MAX)), tally_(tally), members_(p.folders) {
    const CsvAppender::Open how = p.resuming ? CsvAppender::Open::Existing : CsvAppender::Open::New;
    open_csv(result_csv_, p.result_path, how);
    open_csv(details_csv_, p.details_path, how);
    if (!p.resuming) {
      append_csv(*result_csv_, csv_row(kResultColumns));
      append_csv(*details_csv_, csv_row(kDetailColumns));
    }
    ctx_.th = o.th;
    ctx_.members = [this](const Folder &f, const EntryRead &k) { return members_.of(f, k); };
  }

  void run() {
    uint64_t total_bytes = 0;
    for (const Folder &f : plan_.folders) total_bytes += progress_bytes(f);
    Progress progress("replay", total_bytes);
    uint64_t done_bytes = 0;
    for (size_t fi = 0; fi < plan_.folders.size() && budget_ > 0; ++fi) {
      Folder &f = plan_.folders[fi];
      read_kernels(f);
      note_flight_kernels(fi);
      const std::vector<size_t> todo = pick_kernels(fi);
      const uint64_t folder_bytes = progress_bytes(f);
      replay_in_order(f, todo, ctx_, jobs_, [&](size_t i, KernelResult &&r) {
        const EntryRead &k = f.kernels[todo[i]];
        append_csv(*details_csv_, detail_rows(f, k, r));
        append_csv(*result_csv_, result_row(f, k, r));
        record(fi, k, r);
        progress.update(done_bytes + folder_bytes * (i + 1) / todo.size());
      });
      done_bytes += folder_bytes;
      if (fi + 1 < plan_.folders.size()) std::vector<EntryRead>().swap(f.kernels);
    }
    progress.finish();
  }

 private:
  void read_kernels(Folder &f) {
    DumpCallbacks cb;
    cb.on_kernel = [&](EntryRead &&k) {
      f.kernels.push_back(std::move(k));
      return true;
    };
    if (std::optional<Shortfall> s = read_dump_json_partial(*f.dir, cb)) tally_.partial.push_back(std::move(*s));
    std::stable_sort(f.kernels.begin(), f.kernels.end(), [](const EntryRead &a, const EntryRead &b) {
      return a.launch_index.value_or(UINT64_MAX) < b.launch_index.value_or(UINT64_MAX);
    });
  }

  void note_flight_kernels(size_t fi) {
    const Folder &f = plan_.folders[fi];
    for (const EntryRead &k : f.kernels) {
      const FlightFields fields = flight_fields(k.entry);
      if (!fields.recorded()) continue;  // the tensors are read only for a flight record's kernels
      const std::vector<TensorInfo> tensors = entry_tensors(k.entry, f.header);
      if (auto fk = flight_kernel(fi, *f.dir, k.name, k.launch_index, fields, tensors))
        tally_.flight.push_back(std::move(*fk));
    }
  }

  // The folder's kernels not done yet, as many as --max-kernels leaves.
  std::vector<size_t> pick_kernels(size_t fi) {
    const Folder &f = plan_.folders[fi];
    std::vector<size_t> todo;
    for (size_t i = 0; i < f.kernels.size(); ++i) {
      if (plan_.resume.done.count(Key{f.step, f.rank, f.kernels[i].name})) continue;
      if (todo.size() == budget_) {
        tally_.stopped = true;
        break;
      }
      todo.push_back(i);
    }
    budget_ -= std::min<uint64_t>(budget_, todo.size());
    if (budget_ == 0 && fi + 1 < plan_.folders.size()) tally_.stopped = true;  // a later folder may be all done
    return todo;
  }

  void record(size_t fi, const EntryRead &k, const KernelResult &r) {
    const Folder &f = plan_.folders[fi];
    ++tally_.replayed;
    ++tally_.statuses[r.status];
    tally_.outcomes[Key{f.step, f.rank, k.name}] = {r.status, r.no_reference};
    if (r.no_reference) {
      ++tally_.no_ref_ops[std::string(op_type_of(k.name))];
    } else if (r.status == Status::Skip) {
      tally_.skipped_other.push_back(
          {fi, k.launch_index.value_or(UINT64_MAX), f.dir->label(), k.name, "SKIP", r.message, {}});
    } else if (r.status != Status::Pass) {
      Listed l{fi, k.launch_index.value_or(UINT64_MAX), f.dir->label(), k.name, status_text(r.status), r.message, {}};
      for (const OutputRow &row : r.rows) {
        if (row.status != Status::Error && row.status != Status::Warning) continue;
        l.lines.push_back("output." + row.slot + ": " + status_text(row.status) + " (Cosine " +
                          metric_text(row.m.cosine) + ", MaxAbsErr " + metric_text(row.m.max_abs_err) +
                          ", within 0.1% " + metric_text(row.m.thousandth) + ", MaxRelErr " +
                          metric_text(row.m.max_rel_err) + ") " + one_line(row.m.message));
      }
      tally_.failing.push_back(std::move(l));
    }
  }

  ReplayPlan &plan_;
  size_t jobs_;
  uint64_t budget_;  // kernels --max-kernels still allows
  ReplayTally &tally_;
  MemberIndex members_;
  Context ctx_;
  std::optional<CsvAppender> result_csv_, details_csv_;
};

// ---- Report ---------------------------------------------------------------------------------------------------------
void print_counts(const ReplayPlan &p, const ReplayOptions &o, ReplayTally &t) {
  const uint64_t compared = t.statuses[Status::Pass] + t.statuses[Status::Warning] + t.statuses[Status::Error];
  std::printf(
      "replay: %zu folder(s), %llu kernels%s: %llu compared (%llu pass, %llu warning, %llu error), "
      "%llu skipped\n",
      p.folders.size(), static_cast<unsigned long long>(t.replayed + t.resumed),
      t.resumed ? (" (" + std::to_string(t.resumed) + " already in " + p.result_path.string() + ", " +
                   std::to_string(t.replayed) + " replayed now)")
                      .c_str()
                : "",
      static_cast<unsigned long long>(compared), static_cast<unsigned long long>(t.statuses[Status::Pass]),
      static_cast<unsigned long long>(t.statuses[Status::Warning]),
      static_cast<unsigned long long>(t.statuses[Status::Error]),
      static_cast<unsigned long long>(t.statuses[Status::Skip]));
  for (const Shortfall &s : t.partial) std::printf("read in part: %s\n", s.text().c_str());
  if (t.stopped) {
    std::printf("stopped after --max-kernels %llu; resume with --csv-path %s\n",
                static_cast<unsigned long long>(*o.max_kernels), p.result_path.string().c_str());
  }
  if (!t.no_ref_ops.empty()) {
    std::string s;
    for (const auto &[op, n] : t.no_ref_ops) s += (s.empty() ? "" : ", ") + op + " (" + std::to_string(n) + ")";
    std::printf("skipped op types (no CPU reference): %s\n", s.c_str());
  }
  for (size_t i = 0; i < t.skipped_other.size() && i < 20; ++i)
    std::printf("skipped: %s %s: %s\n", t.skipped_other[i].folder_label.c_str(), t.skipped_other[i].name.c_str(),
                t.skipped_other[i].message.c_str());
  if (t.skipped_other.size() > 20)
    std::printf("... and %zu more skipped kernels (see the CSV)\n", t.skipped_other.size() - 20);
}

void print_failing(const ReplayPlan &p, std::vector<Listed> &failing) {
  std::stable_sort(failing.begin(), failing.end(), [](const Listed &a, const Listed &b) {
    return std::pair(a.folder, a.launch) < std::pair(b.folder, b.launch);
  });
  if (failing.empty()) {
    std::printf("every compared kernel passes\n");
    return;
  }
  std::printf("failing kernels (launch order):\n");
  for (size_t i = 0; i < failing.size() && i < 50; ++i) {
    const Listed &l = failing[i];
    std::printf("  %s %s (launch_index %s): %s\n", l.folder_label.c_str(), l.name.c_str(),
                l.launch == UINT64_MAX ? "?" : std::to_string(l.launch).c_str(), l.status.c_str());
    for (const std::string &line : l.lines) std::printf("    %s\n", line.c_str());
    if (l.lines.empty() && !l.message.empty()) std::printf("    %s\n", l.message.c_str());
    if (i < 10 && l.folder < p.folders.size()) {
      if (const auto frames = find_stack(*p.folders[l.folder].dir, l.name)) {
        std::printf("    stack:\n%s", format::stack_text(*frames, "      ").c_str());
      }
    }
  }
  if (failing.size() > 50) std::printf("  ... and %zu more (see the CSV)\n", failing.size() - 50);
}

}  // namespace
}  // namespace replay

int run_replay(std::span<char *const> argv) {
  const replay::ReplayOptions options = replay::parse_options(argv);
  if (options.list_ops) {
    for (std::string_view op : replay::reference_op_types())
      std::printf("%.*s\n", static_cast<int>(op.size()), op.data());
    return kExitOk;
  }
  replay::ReplayPlan plan = replay::make_plan(options);
  replay::ReplayTally tally;
  replay::count_resumed(plan, tally);
  replay::ReplayRun(plan, options, tally).run();
  replay::print_counts(plan, options, tally);
  replay::print_failing(plan, tally.failing);
  std::printf("results: %s\n         %s\n", plan.result_path.string().c_str(), plan.details_path.string().c_str());
  replay::print_flight_report(plan.folders, std::move(tally.flight), tally.outcomes);
  using replay::Status;
  const bool damage =
      std::any_of(tally.partial.begin(), tally.partial.end(), [](const Shortfall &s) { return s.damage(); });
  return tally.statuses[Status::Error] + tally.statuses[Status::Warning] || damage ? kExitFindings : kExitOk;
}

}  // namespace msprobe::tools
