// summary DIR [--json]: one streaming pass over every dump.json; tensors are never opened.
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <system_error>
#include <vector>

#include "format/dump_json.h"
#include "format/format.h"
#include "format/stack_text.h"
#include "tools/inspect/cli.h"
#include "tools/inspect/commands.h"
#include "tools/reader/dump_reader.h"
#include "tools/reader/flight.h"
#include "tools/reader/partial_read.h"
#include "tools/reader/races.h"

namespace msprobe::tools {

const std::string_view kSummaryHelp = R"(usage: msprobe-inspect summary DIR [--json]

What a dump holds: steps, ranks, kernels per op type, tensor files and their bytes, the task, the summary mode
(md5 when the tensors carry their CRC-32: MSPROBE_SUMMARY_MODE=md5), and for each rank
the first kernel (by step, then launch_index) whose statistics hold a NaN or an infinity (Max, Min, Mean or Norm),
with its stack when stack.json records one.

A flight record (MSPROBE_TASK=flight: kernels carrying flight_trigger) is named as one, with each record (per rank
and trigger): the trigger (overflow in KERNEL at step S with its overflow text; with MSPROBE_FLIGHT_ON_EXIT=1 also
exit, signal NAME, or the call that took the device back: aclFinalize, aclrtResetDevice...), how many kernels it kept
(the trigger kernel among them), the steps and launch_index range they span, and the kernels with a flight_note.

  DIR        the dump root (step*/rank*/), one step folder, or one rank folder
  --json     print one JSON object instead of text

A folder whose dump.json is still being written by a running process, or was cut by a killed run, is read up to
its last complete kernel and named at the end (exit status 1 for a killed run's, 0 for one still being written).

A dump made with MSPROBE_RACECHECK=1 (races.json beside dump.json) lists its races between streams per folder: the
kind, the two kernels with their streams, access and tensors, the bytes they share and how many times it happened.

Reads dump.json and races.json only (streamed; tensor files are counted, never opened). A progress line is drawn
on stderr for long scans when stderr is a terminal.
)";

namespace {

struct NanHit {
  std::string kernel, tensor, stat;
  double value = 0;
  uint64_t step = 0, launch_index = 0;
  const RankDir *where = nullptr;
  std::optional<std::vector<std::string>> stack;
};

struct FolderSummary {
  const RankDir *dir = nullptr;
  std::string task, framework, host_framework;
  uint64_t kernels = 0, tensors = 0, files = 0, bytes = 0, md5 = 0;  // md5: tensors with a CRC (summary mode md5)
  std::optional<NanHit> first_nan;
  std::optional<Shortfall> shortfall;  // dump.json read only in part: being written, not closed, damaged
};

const char *const kStatNames[] = {"Max", "Min", "Mean", "Norm"};

void count_files(const RankDir &r, FolderSummary &s) {
  std::error_code ec;
  const fs::path dir = r.path / format::kTensorDir;
  for (fs::directory_iterator it(dir, ec), end; !ec && it != end; it.increment(ec)) {
    std::error_code e2;
    if (!it->is_regular_file(e2) || it->path().filename() == format::kMappingCsv) continue;
    ++s.files;
    s.bytes += it->file_size(e2);
  }
}

std::string json_str(std::string_view s) {
  std::string out;
  format::append_json_string(out, s);
  return out;
}

// One streaming pass over each folder's dump.json.
struct Scan {
  std::vector<FolderSummary> folders;
  std::map<std::string, uint64_t> op_counts;
  std::vector<FlightKernel> flight;  // kernels written by a flight record, in folder order
};

FolderSummary scan_folder(const RankDir &d, size_t index, Progress &progress, uint64_t done_bytes, Scan &out) {
  FolderSummary s;
  s.dir = &d;
  DumpHeaderRead header;
  DumpCallbacks cb;
  cb.on_header = [&](const DumpHeaderRead &h) { header = h; };
  cb.on_progress = [&](size_t at) { progress.update(done_bytes + at); };
  cb.on_record = [&](KernelRecord &&k) {
    ++s.kernels;
    ++out.op_counts[std::string(op_type_of(k.name))];
    const std::vector<TensorInfo> &tensors = k.tensors;
    s.tensors += tensors.size();
    for (const TensorInfo &t : tensors) s.md5 += t.md5.has_value();
    if (auto fk = flight_kernel(index, d, k.name, k.launch_index, k.flight, tensors)) out.flight.push_back(*fk);
    const uint64_t li = k.launch_index.value_or(UINT64_MAX);
    if (s.first_nan && s.first_nan->launch_index <= li) return true;
    for (const TensorInfo &t : tensors) {
      for (int i = 0; i < 4; ++i) {
        const auto &v = t.stats[i];
        if (v.kind != format::StatValue::Kind::Real || std::isfinite(v.real)) continue;
        s.first_nan = NanHit{k.name, t.row_suffix(), kStatNames[i], v.real, d.step.value_or(0), li, &d, {}};
        return true;
      }
    }
    return true;
  };
  s.shortfall = read_dump_json_partial(d, cb, &header);
  s.task = header.task;
  s.framework = header.framework;
  s.host_framework = header.host_framework;
  count_files(d, s);
  return s;
}

Scan scan(const std::vector<RankDir> &dirs) {
  uint64_t total_bytes = 0;
  for (const RankDir &d : dirs) {
    std::error_code ec;
    total_bytes += fs::file_size(d.path / format::kDumpJson, ec);
  }
  Progress progress("summary", total_bytes);
  uint64_t done_bytes = 0;
  Scan out;
  for (const RankDir &d : dirs) {
    out.folders.push_back(scan_folder(d, out.folders.size(), progress, done_bytes, out));
    std::error_code ec;
    done_bytes += fs::file_size(d.path / format::kDumpJson, ec);
  }
  progress.finish();
  return out;
}

// The whole dump: the folders' counts summed, and per rank the first hit over all steps.
struct Totals {
  std::map<std::string, std::optional<NanHit>> per_rank;  // keyed by rank label
  std::vector<std::string> rank_order;                    // as the folders come (by rank within a step)
  std::vector<uint64_t> steps, ranks;
  uint64_t kernels = 0, tensors = 0, files = 0, bytes = 0, md5 = 0;
  std::set<std::string> tasks, frameworks, hosts;
};

// MSPROBE_SUMMARY_MODE as the tensors show it: "md5" when every tensor has its CRC beside its statistics.
std::string summary_mode(uint64_t md5, uint64_t tensors) {
  if (md5 == 0) return "statistics";
  return md5 == tensors ? "md5" : "mixed";
}

Totals totals_of(const std::vector<FolderSummary> &folders) {
  Totals t;
  std::set<uint64_t> steps_set, ranks_set;
  for (const FolderSummary &s : folders) {
    const std::string rl = s.dir->rank_label();
    if (!t.per_rank.count(rl)) {
      t.per_rank[rl] = std::nullopt;
      t.rank_order.push_back(rl);
    }
    auto &best = t.per_rank[rl];
    if (s.first_nan &&
        (!best || std::pair(s.first_nan->step, s.first_nan->launch_index) < std::pair(best->step, best->launch_index)))
      best = s.first_nan;
    if (s.dir->step) steps_set.insert(*s.dir->step);
    if (s.dir->rank) ranks_set.insert(*s.dir->rank);
    t.kernels += s.kernels;
    t.tensors += s.tensors;
    t.md5 += s.md5;
    t.files += s.files;
    t.bytes += s.bytes;
    if (!s.task.empty()) t.tasks.insert(s.task);
    if (!s.framework.empty()) t.frameworks.insert(s.framework);
    if (!s.host_framework.empty()) t.hosts.insert(s.host_framework);
  }
  for (auto &[rl, hit] : t.per_rank)
    if (hit) hit->stack = find_stack(*hit->where, hit->kernel);
  t.steps.assign(steps_set.begin(), steps_set.end());
  t.ranks.assign(ranks_set.begin(), ranks_set.end());
  return t;
}

// ---- Report ---------------------------------------------------------------------------------------------------------
std::string folder_json(const FolderSummary &s) {
  return "{\"folder\": " + json_str(s.dir->label()) + ", \"path\": " + json_str(s.dir->path.string()) +
         ", \"step\": " + (s.dir->step ? std::to_string(*s.dir->step) : "null") +
         ", \"rank\": " + (s.dir->rank ? std::to_string(*s.dir->rank) : "null") + ", \"task\": " + json_str(s.task) +
         ", \"framework\": " + json_str(s.framework) + ", \"host_framework\": " + json_str(s.host_framework) +
         ", \"summary_mode\": " + json_str(summary_mode(s.md5, s.tensors)) +
         ", \"kernels\": " + std::to_string(s.kernels) + ", \"tensors\": " + std::to_string(s.tensors) +
         ", \"tensor_files\": " + std::to_string(s.files) + ", \"tensor_bytes\": " + std::to_string(s.bytes) + "}";
}

std::string race_side_json(const RaceSide &s) {
  std::string tensors;
  for (const std::string &t : s.tensors) tensors += (tensors.empty() ? "" : ", ") + json_str(t);
  return "{\"kernel\": " + json_str(s.kernel) +
         ", \"stream_id\": " + (s.stream_id ? std::to_string(*s.stream_id) : std::string("\"host\"")) +
         ", \"access\": " + json_str(s.access) + ", \"tensors\": [" + tensors + "]}";
}

// A folder's races.json, read: nullopt when the check was off there.
struct FolderRaces {
  const RankDir *dir = nullptr;
  std::vector<RaceEntry> races;
};

std::vector<FolderRaces> races_of(const std::vector<RankDir> &dirs) {
  std::vector<FolderRaces> out;
  for (const RankDir &d : dirs)
    if (auto r = read_races(d)) out.push_back({&d, std::move(*r)});
  return out;
}

std::string stream_text(const RaceSide &s) {
  return s.stream_id ? "stream " + std::to_string(*s.stream_id) : std::string("the host");
}

// "Adds.main_adds.0.forward (stream 1, read input.0)"
std::string side_text(const RaceSide &s) {
  std::string tensors;
  for (const std::string &t : s.tensors) tensors += (tensors.empty() ? "" : "+") + t;
  return s.kernel + " (" + stream_text(s) + ", " + s.access + " " + tensors + ")";
}

void print_races(const std::vector<FolderRaces> &folders) {
  size_t n = 0;
  for (const FolderRaces &f : folders) n += f.races.size();
  std::printf("\nraces between streams (MSPROBE_RACECHECK): %zu distinct in %zu checked folder(s)\n", n,
              folders.size());
  for (const FolderRaces &f : folders)
    for (const RaceEntry &r : f.races)
      std::printf("  %-16s %s, %llu byte(s), %llu time(s): %s then %s\n", f.dir->label().c_str(), r.kind.c_str(),
                  static_cast<unsigned long long>(r.end - r.begin), static_cast<unsigned long long>(r.count),
                  side_text(r.first).c_str(), side_text(r.second).c_str());
}

std::string races_json(const std::vector<FolderRaces> &folders) {
  std::string o = "[";
  bool first = true;
  for (const FolderRaces &f : folders)
    for (const RaceEntry &r : f.races) {
      o += std::string(first ? "" : ", ") + "{\"folder\": " + json_str(f.dir->label()) +
           ", \"kind\": " + json_str(r.kind) + ", \"bytes\": " + std::to_string(r.end - r.begin) +
           ", \"count\": " + std::to_string(r.count) + ", \"first\": " + race_side_json(r.first) +
           ", \"second\": " + race_side_json(r.second) + "}";
      first = false;
    }
  return o + "]";
}

std::string hit_json(const std::optional<NanHit> &hit) {
  if (!hit) return "null";
  std::string o =
      "{\"folder\": " + json_str(hit->where->label()) + ", \"kernel\": " + json_str(hit->kernel) +
      ", \"launch_index\": " + (hit->launch_index == UINT64_MAX ? "null" : std::to_string(hit->launch_index)) +
      ", \"tensor\": " + json_str(hit->tensor) + ", \"stat\": " + json_str(hit->stat) +
      ", \"value\": " + json_str(metric_text(hit->value)) + ", \"stack\": ";
  if (!hit->stack) return o + "null}";
  o += "[";
  for (size_t i = 0; i < hit->stack->size(); ++i) o += (i ? ", " : "") + json_str((*hit->stack)[i]);
  return o + "]}";
}

std::string shortfall_json(const Shortfall &s) {
  const char *why = s.why == Shortfall::Why::BeingWritten ? "being written"
                    : s.why == Shortfall::Why::Killed     ? "killed"
                    : s.why == Shortfall::Why::NotClosed  ? "not closed"
                                                          : "damaged";
  return "{\"folder\": " + json_str(s.folder) + ", \"state\": " + json_str(why) +
         ", \"kernels_read\": " + std::to_string(s.kernels) + ", \"byte\": " + std::to_string(s.at) +
         ", \"owner\": " + (s.owner.empty() ? "null" : json_str(s.owner)) + ", \"text\": " + json_str(s.text()) + "}";
}

std::string optional_json(const std::optional<uint64_t> &v) { return v ? std::to_string(*v) : "null"; }
std::string optional_json(const std::string &v) { return v.empty() ? "null" : json_str(v); }

std::string flight_json(const FlightRecord &r) {
  const FlightKernel *t = r.trigger_entry();
  std::string steps;
  for (uint64_t s : r.steps()) steps += (steps.empty() ? "" : ", ") + std::to_string(s);
  return "{\"rank\": " + json_str(r.rank) + ", \"trigger\": " + json_str(r.trigger) +
         ", \"trigger_kernel\": " + optional_json(r.trigger_kernel) +
         ", \"trigger_step\": " + (t ? optional_json(t->step) : "null") +
         ", \"trigger_launch_index\": " + (t ? optional_json(t->launch_index) : "null") +
         ", \"overflow\": " + (t ? optional_json(t->fields.overflow) : "null") +
         ", \"kernels\": " + std::to_string(r.kernels.size()) + ", \"steps\": [" + steps +
         "], \"first_launch_index\": " + optional_json(r.kernels.front().launch_index) +
         ", \"last_launch_index\": " + optional_json(r.kernels.back().launch_index) +
         ", \"flight_notes\": " + std::to_string(r.notes()) + "}";
}

void print_json(const fs::path &root, const Scan &scan, const Totals &t, const std::vector<FlightRecord> &flight,
                const std::vector<FolderRaces> &races) {
  std::string o = "{";
  o += "\"dump\": " + json_str(root.string());
  o += ", \"tasks\": [";
  bool first = true;
  for (const std::string &task : t.tasks) o += (first ? "" : ", ") + json_str(task), first = false;
  o += "], \"steps\": [";
  for (size_t i = 0; i < t.steps.size(); ++i) o += (i ? ", " : "") + std::to_string(t.steps[i]);
  o += "], \"ranks\": [";
  first = true;
  for (const std::string &rl : t.rank_order) o += (first ? "" : ", ") + json_str(rl), first = false;
  o += "], \"summary_mode\": " + json_str(summary_mode(t.md5, t.tensors));
  o += ", \"kernels\": " + std::to_string(t.kernels) + ", \"tensors\": " + std::to_string(t.tensors) +
       ", \"tensor_files\": " + std::to_string(t.files) + ", \"tensor_bytes\": " + std::to_string(t.bytes);
  o += ", \"op_types\": {";
  first = true;
  for (const auto &[op, n] : scan.op_counts)
    o += (first ? "" : ", ") + json_str(op) + ": " + std::to_string(n), first = false;
  o += "}, \"folders\": [";
  for (size_t i = 0; i < scan.folders.size(); ++i) o += (i ? ", " : "") + folder_json(scan.folders[i]);
  o += "], \"first_nan_inf\": {";
  first = true;
  for (const std::string &rl : t.rank_order) {
    o += (first ? "" : ", ") + json_str(rl) + ": " + hit_json(t.per_rank.at(rl));
    first = false;
  }
  o += "}";
  o += ", \"incomplete\": [";
  first = true;
  for (const FolderSummary &s : scan.folders)
    if (s.shortfall) o += (first ? "" : ", ") + shortfall_json(*s.shortfall), first = false;
  o += "]";
  if (!flight.empty()) {  // only for a flight record: other dumps print what they always did
    o += ", \"flight_records\": [";
    for (size_t i = 0; i < flight.size(); ++i) o += (i ? ", " : "") + flight_json(flight[i]);
    o += "]";
  }
  if (!races.empty()) o += ", \"races\": " + races_json(races);  // only when the check was on
  o += "}\n";
  std::fwrite(o.data(), 1, o.size(), stdout);
}

std::string joined(const std::set<std::string> &s) {
  std::string out;
  for (const std::string &x : s) out += (out.empty() ? "" : ", ") + x;
  return out.empty() ? std::string("?") : out;
}

void print_first_nans(const Totals &t) {
  std::printf("\nfirst NaN/Inf per rank (by step, then launch_index)\n");
  for (const std::string &rl : t.rank_order) {
    const auto &hit = t.per_rank.at(rl);
    if (!hit) {
      std::printf("  %-8s none\n", rl.c_str());
      continue;
    }
    std::printf("  %-8s %s %s (launch_index %s): %s %s=%s\n", rl.c_str(), hit->where->label().c_str(),
                hit->kernel.c_str(), hit->launch_index == UINT64_MAX ? "?" : std::to_string(hit->launch_index).c_str(),
                hit->tensor.c_str(), hit->stat.c_str(), metric_text(hit->value).c_str());
    if (!hit->stack) {
      std::printf("           stack: not recorded\n");
    } else {
      std::printf("           stack:\n%s", format::stack_text(*hit->stack, "             ").c_str());
    }
  }
}

// "overflow in Muls.TinyModel.blow_up.0 at step 1 (launch_index 52): output.0: 0 NaN, 512 +Inf, 0 -Inf"
std::string trigger_line(const FlightRecord &r) {
  std::string line = r.trigger_text();
  if (const FlightKernel *t = r.trigger_entry()) {
    if (t->step) line += " at step " + std::to_string(*t->step);
    if (t->launch_index) line += " (launch_index " + std::to_string(*t->launch_index) + ")";
    if (!t->fields.overflow.empty()) line += ": " + t->fields.overflow;
  }
  return line;
}

void print_flight(const std::vector<FlightRecord> &records) {
  std::printf("\nflight records (per rank, kernels in launch order)\n");
  for (const FlightRecord &r : records) {
    std::printf("  %-8s %s\n", r.rank.c_str(), trigger_line(r).c_str());
    const std::vector<uint64_t> steps = r.steps();
    const std::string where = steps.empty() ? "" : (steps.size() == 1 ? "step " : "steps ") + ranges_text(steps) + ", ";
    std::printf("           %zu kernel(s) recorded, %s%s\n", r.kernels.size(), where.c_str(),
                r.launch_range_text().c_str());
    if (const size_t n = r.notes()) {
      const auto noted = std::find_if(r.kernels.begin(), r.kernels.end(),
                                      [](const FlightKernel &k) { return !k.fields.note.empty(); });
      std::printf("           flight_note on %zu kernel(s), first %s: %s\n", n, noted->name.c_str(),
                  noted->fields.note.c_str());
    }
  }
}

void print_text(const fs::path &root, const Scan &scan, const Totals &t, const std::vector<FlightRecord> &flight,
                const std::vector<FolderRaces> &races) {
  std::printf("dump        %s\n", root.string().c_str());
  std::printf("task        %s (framework %s, host %s)\n", joined(t.tasks).c_str(), joined(t.frameworks).c_str(),
              joined(t.hosts).c_str());
  const std::string mode = summary_mode(t.md5, t.tensors);
  if (mode == "md5")
    std::printf("mode        md5: each tensor's CRC-32 beside its statistics (MSPROBE_SUMMARY_MODE=md5)\n");
  else if (mode == "mixed")
    std::printf("mode        md5 for %llu of %llu tensors, statistics only for the rest\n",
                static_cast<unsigned long long>(t.md5), static_cast<unsigned long long>(t.tensors));
  else
    std::printf("mode        statistics (MSPROBE_SUMMARY_MODE=statistics: no CRC)\n");
  if (!flight.empty())
    std::printf("flight      a flight record (MSPROBE_TASK=flight): %zu record(s), listed below\n", flight.size());
  std::printf("steps       %zu%s%s\n", t.steps.size(), t.steps.empty() ? "" : ": ", ranges_text(t.steps).c_str());
  std::string rank_list;
  for (const std::string &rl : t.rank_order) rank_list += (rank_list.empty() ? "" : ", ") + rl;
  std::printf("ranks       %zu: %s\n", t.rank_order.size(), rank_list.c_str());
  std::printf("kernels     %llu in %zu folder(s)\n", static_cast<unsigned long long>(t.kernels), scan.folders.size());
  std::printf("tensors     %llu recorded, %llu file(s), %s\n", static_cast<unsigned long long>(t.tensors),
              static_cast<unsigned long long>(t.files), human_bytes(t.bytes).c_str());
  std::printf("\nkernels per op type\n");
  size_t width = 8;
  for (const auto &[op, n] : scan.op_counts) width = std::max(width, op.size());
  for (const auto &[op, n] : scan.op_counts)
    std::printf("  %-*s %llu\n", static_cast<int>(width), op.c_str(), static_cast<unsigned long long>(n));
  if (scan.folders.size() > 1) {
    std::printf("\nper folder\n");
    for (const FolderSummary &s : scan.folders)
      std::printf("  %-16s %-10s kernels %-8llu files %-8llu %s\n", s.dir->label().c_str(), s.task.c_str(),
                  static_cast<unsigned long long>(s.kernels), static_cast<unsigned long long>(s.files),
                  human_bytes(s.bytes).c_str());
  }
  if (!flight.empty()) print_flight(flight);
  print_first_nans(t);
  if (!races.empty()) print_races(races);
  bool heading = false;
  for (const FolderSummary &s : scan.folders) {
    if (!s.shortfall) continue;
    if (!heading) std::printf("\nfolders read in part (the counts above are of what was read)\n");
    heading = true;
    std::printf("  %s\n", s.shortfall->text().c_str());
  }
}

}  // namespace

int run_summary(std::span<char *const> argv) {
  const auto [root, json] = parse_dir_and_flag(argv, "--json");
  const std::vector<RankDir> dirs = find_rank_dirs(root);
  const Scan s = scan(dirs);
  const Totals totals = totals_of(s.folders);
  const std::vector<FlightRecord> flight = group_flight_records(s.flight);
  const std::vector<FolderRaces> races = races_of(dirs);
  if (json)
    print_json(root, s, totals, flight, races);
  else
    print_text(root, s, totals, flight, races);
  const bool damage = std::any_of(s.folders.begin(), s.folders.end(),
                                  [](const FolderSummary &f) { return f.shortfall && f.shortfall->damage(); });
  return damage ? kExitFindings : kExitOk;
}

}  // namespace msprobe::tools
