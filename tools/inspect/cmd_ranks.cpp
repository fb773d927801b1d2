// first-nan ROOT and first-diff A B: the driver of the multi-rank analysis (ranks.h). Each process lists the rank
// folders it sees, the processes agree who reads which rank (every rank once), each reads its ranks into digests
// (map), process 0 gathers them and answers (reduce). Alone, the one process does all of it.
#include <algorithm>
#include <atomic>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <map>
#include <mutex>
#include <set>
#include <sstream>
#include <thread>

#include "format/format.h"
#include "tools/inspect/cli.h"
#include "tools/inspect/commands.h"
#include "tools/inspect/compare.h"
#include "tools/inspect/ranks.h"
#include "tools/inspect/transport.h"

namespace msprobe::tools {

const std::string_view kFirstNanHelp =
    R"(usage: msprobe-inspect first-nan ROOT [--json] [--nan-only] [--no-replay] [-j N]
       mpirun -n P msprobe-inspect first-nan ROOT [...]

Where the non-finite values began: the first kernel, in causal order, whose finite inputs gave a non-finite output,
over the statistics, tensor or flight dumps of any number of ranks and steps. Causal order is each rank's launch
order, joined at collectives by (communicator, seq) and at send/recv by (communicator, sender, receiver, pair_seq),
from the "comm" object of each HCCL kernel. Prints the rank, step, kernel and stack of the origin, the route by
which its values spread (which collective carried them to which ranks), other independent origins, each rank's
first anomalous kernel, and missing or damaged rank folders (the answer is over the rest).

With tensor files on disk, the origin is replayed against its CPU reference (msprobe-inspect replay's): verdict
"kernel" when the reference is finite where the kernel wrote NaN/Inf (the kernel computed wrongly from good
inputs), "data" when the reference, rounded to the output's dtype, is non-finite too (the values left the range).

  ROOT         the dump root (step*/rank*/), one step folder, or one rank folder
  --json       one JSON document: {"rank", "step", "kernel", "stack", "verdict", "spread", "origins", ...}
  --nan-only   only NaN is anomalous, infinities are not (models whose attention masks hold -inf)
  --no-replay  do not replay the origin (no verdict)
  -j N         rank folders read at a time (default: the cores, shared by the processes of this node)

Under mpirun (Open MPI) every process reads the rank folders it sees on its node (a folder seen by several,
e.g. on a shared filesystem, is read by one of them) and process 0 prints the answer, the same for any number of
processes. Exit status: 0 no non-finite value and every folder read, 1 an origin found or a folder damaged,
2 bad usage or nothing readable.
)";

const std::string_view kFirstDiffHelp =
    R"(usage: msprobe-inspect first-diff A B [--json] [--atol 1e-4] [--cos 0.99] [--stat-rtol 1e-4] [-j N]
       mpirun -n P msprobe-inspect first-diff A B [...]

Where two runs of the same program first part: the first kernel, in causal order (as first-nan), whose inputs agree
with run B's and whose outputs do not, per rank and across ranks, and how the difference spread through the
collectives. Ranks are paired by global rank, steps by number, kernels by name (a name without its .forward token
pairs with one that has it), tensors by slot. A tensor pair departs by compare's rules and thresholds: tensor data
when both runs saved it (Cosine <= --cos or MaxAbsErr >= --atol), else md5, else a statistic whose relative
difference exceeds --stat-rtol.

  A, B         the two dumps (root, step folder or rank folder); A is the run under suspicion
  --json       one JSON document, as first-nan's
  --atol X     tensor mode: MaxAbsErr must be below X (default 1e-4)
  --cos X      tensor mode: Cosine must be above X (default 0.99)
  --stat-rtol X  statistics mode: a relative difference above X departs (default 1e-4)
  -j N         rank folders read at a time

Under mpirun a process reads the ranks whose folders of both runs it sees. Exit status: 0 the runs agree within
the tolerances and every folder was read, 1 a departure found or a folder damaged or unpaired, 2 bad usage.
)";

namespace {

using namespace ranks;
using RankKey = std::optional<uint32_t>;
using Layout = std::map<RankKey, std::vector<RankDir>>;
using Steps = std::map<RankKey, std::set<uint64_t>>;

std::string key_text(const RankKey &r) { return r ? std::to_string(*r) : "-"; }
std::string key_label(const RankKey &r) { return format::rank_dir_name(r); }

// The rank folders of `root` this process sees; `why` says why there are none.
Layout local_layout(const fs::path &root, std::string *why) {
  Layout l;
  try {
    for (RankDir &d : find_rank_dirs(root)) l[d.rank].push_back(std::move(d));
  } catch (const InputError &e) {
    *why = e.what();
  }
  return l;
}

// What a process sees, as text: "A <rank> <step>...\n" lines (rank "-": the folder "rank"), "E <error>\n".
std::string view_text(const Layout &a, const Layout &b, const std::string &why) {
  std::string s;
  for (auto [tag, l] : {std::pair{'A', &a}, std::pair{'B', &b}})
    for (const auto &[r, dirs] : *l) {
      s += tag;
      s += ' ' + key_text(r);
      for (const RankDir &d : dirs) s += ' ' + std::to_string(d.step.value_or(0));
      s += '\n';
    }
  if (!why.empty()) s += "E " + why + "\n";
  return s;
}

struct ProcessView {
  Steps a, b;
  std::string why;
};

ProcessView parse_view(const std::string &text) {
  ProcessView v;
  std::istringstream in(text);
  std::string line;
  while (std::getline(in, line)) {
    if (line.size() < 2) continue;
    if (line[0] == 'E') {
      v.why = line.substr(2);
      continue;
    }
    std::istringstream words(line.substr(2));
    std::string rank;
    words >> rank;
    const RankKey key = rank == "-" ? RankKey() : RankKey(static_cast<uint32_t>(std::stoul(rank)));
    Steps &s = line[0] == 'A' ? v.a : v.b;
    auto &steps = s[key];
    for (uint64_t step; words >> step;) steps.insert(step);
  }
  return v;
}

// Who reads each rank: among the processes that see it (in both runs, for first-diff), the (rank mod viewers)-th:
// a shared filesystem is read once and the work spreads; a node's own folders stay with it.
std::map<RankKey, int> owners(const std::vector<ProcessView> &views, bool both) {
  std::map<RankKey, std::vector<int>> viewers;
  for (size_t p = 0; p < views.size(); ++p)
    for (const auto &[r, steps] : views[p].a)
      if (!both || views[p].b.count(r)) viewers[r].push_back(static_cast<int>(p));
  std::map<RankKey, int> out;
  for (const auto &[r, v] : viewers) out[r] = v[r.value_or(0) % v.size()];
  return out;
}

// Gaps in what all processes together see: a rank number below the largest with no folder at all, a step folder
// that other ranks have and this one lacks.
std::vector<std::string> gaps(const std::vector<ProcessView> &views, bool b_side, const std::string &prefix) {
  Steps all;
  for (const ProcessView &v : views)
    for (const auto &[r, steps] : b_side ? v.b : v.a) all[r].insert(steps.begin(), steps.end());
  std::vector<std::string> out;
  std::set<uint64_t> every_step;
  std::optional<uint32_t> max_rank;
  for (const auto &[r, steps] : all) {
    every_step.insert(steps.begin(), steps.end());
    if (r) max_rank = std::max(max_rank.value_or(0), *r);
  }
  if (max_rank)
    for (uint32_t r = 0; r < *max_rank; ++r)
      if (!all.count(r)) out.push_back(prefix + "rank" + std::to_string(r) + ": no folder in any step");
  for (const auto &[r, steps] : all)
    for (uint64_t s : every_step)
      if (!steps.count(s)) out.push_back(prefix + format::step_dir_name(s) + "/" + key_label(r) + ": no folder");
  return out;
}

std::string pack(const std::vector<std::string> &parts) {
  std::string s;
  for (const std::string &p : parts) {
    const uint64_t n = p.size();
    s.append(reinterpret_cast<const char *>(&n), sizeof n);
    s += p;
  }
  return s;
}

std::vector<std::string> unpack(const std::string &s) {
  std::vector<std::string> parts;
  for (size_t at = 0; at + sizeof(uint64_t) <= s.size();) {
    uint64_t n = 0;
    std::memcpy(&n, s.data() + at, sizeof n);
    at += sizeof n;
    if (n > s.size() - at) throw std::runtime_error("a process sent a cut digest list");
    parts.push_back(s.substr(at, n));
    at += n;
  }
  return parts;
}

size_t default_jobs() {
  size_t cores = std::max(1u, std::thread::hardware_concurrency());
  // Processes that mpirun put on this node share its cores.
  if (const char *local = std::getenv("OMPI_COMM_WORLD_LOCAL_SIZE"))
    cores /= std::max(1ul, std::strtoul(local, nullptr, 10));
  return std::max<size_t>(1, cores);
}

struct RunOptions {
  Question question = Question::Nan;
  fs::path a, b;
  bool json = false;
  size_t jobs = 1;
  ScanOptions scan;
};

// Reads the ranks this process owns, `jobs` at a time; their digests, serialized.
std::vector<std::string> read_mine(const std::vector<RankKey> &mine, const Layout &la, const Layout &lb,
                                   const RunOptions &o) {
  uint64_t total = 0;
  for (const RankKey &r : mine)
    for (const RankDir &d : la.at(r)) total += compare::dump_json_size(d);
  Progress progress(o.question == Question::Nan ? "first-nan: reading" : "first-diff: reading", total);
  std::mutex mu;
  uint64_t done = 0;
  auto advance = [&](uint64_t n) {
    std::lock_guard<std::mutex> lk(mu);
    done += n;
    progress.update(done);
  };
  std::vector<std::string> out(mine.size());
  std::atomic<size_t> next{0};
  auto work = [&] {
    for (size_t i = next++; i < mine.size(); i = next++) {
      const RankKey &r = mine[i];
      RankDigest d;
      try {
        d = o.question == Question::Nan ? scan_nan(la.at(r), o.scan, advance)
                                        : scan_diff(la.at(r), lb.at(r), o.scan, advance);
      } catch (const std::exception &e) {
        d = RankDigest{};
        d.problems.push_back(key_label(r) + ": could not be read: " + e.what());
      }
      d.rank = r;
      out[i] = serialize(d);
    }
  };
  std::vector<std::thread> threads;
  for (size_t t = 1; t < std::min(o.jobs, mine.size()); ++t) threads.emplace_back(work);
  work();
  for (std::thread &t : threads) t.join();
  progress.finish();
  return out;
}

int run(const RunOptions &o) {
  Transport &t = transport();
  const bool diff = o.question == Question::Diff;
  std::string why_a, why_b;
  const Layout la = local_layout(o.a, &why_a);
  const Layout lb = diff ? local_layout(o.b, &why_b) : Layout{};
  std::string why = why_a;
  if (diff && !why_b.empty()) why += (why.empty() ? "" : "; ") + why_b;

  // Everyone's view, on every process: the same decisions everywhere.
  std::vector<ProcessView> views;
  for (const std::string &v : t.all_gather(view_text(la, lb, why))) views.push_back(parse_view(v));
  const bool nothing = std::all_of(views.begin(), views.end(),
                                   [&](const ProcessView &v) { return v.a.empty() || (diff && v.b.empty()); });
  if (nothing) {
    std::string reason = views.front().why.empty() ? "no rank folder" : views.front().why;
    if (t.rank() == 0) throw InputError(reason);
    return kExitUsage;
  }
  const std::map<RankKey, int> owner = owners(views, diff);
  std::vector<RankKey> mine;
  for (const auto &[r, p] : owner)
    if (p == t.rank()) mine.push_back(r);

  const std::vector<std::string> gathered = t.gather(pack(read_mine(mine, la, lb, o)));
  int code = kExitOk;
  if (t.rank() == 0) {
    std::vector<RankDigest> digests;
    std::vector<std::string> problems;
    for (size_t p = 0; p < gathered.size(); ++p) {
      try {
        for (const std::string &bytes : unpack(gathered[p])) digests.push_back(deserialize(bytes));
      } catch (const std::exception &e) {
        problems.push_back("process " + std::to_string(p) + ": " + e.what());
      }
    }
    Finding f = reduce(std::move(digests), o.question);
    f.problems.insert(f.problems.begin(), problems.begin(), problems.end());
    std::vector<std::string> missing = gaps(views, false, diff ? "A " : "");
    if (diff) {
      for (std::string &g : gaps(views, true, "B ")) missing.push_back(std::move(g));
      // Ranks no process could pair.
      std::set<RankKey> in_a, in_b;
      for (const ProcessView &v : views) {
        for (const auto &[r, s] : v.a) in_a.insert(r);
        for (const auto &[r, s] : v.b) in_b.insert(r);
      }
      for (const RankKey &r : in_a)
        if (!owner.count(r))
          f.problems.push_back(key_label(r) + (in_b.count(r) ? ": no process sees its folders of both runs"
                                                             : ": in A only, not compared"));
      for (const RankKey &r : in_b)
        if (!in_a.count(r)) f.problems.push_back(key_label(r) + ": in B only, not compared");
    }
    f.missing.insert(f.missing.begin(), missing.begin(), missing.end());
    const std::string out = o.json ? report_json(f) : report_text(f);
    std::fwrite(out.data(), 1, out.size(), stdout);
    std::fflush(stdout);
    code = f.origins.empty() && f.problems.empty() ? kExitOk : kExitFindings;
  }
  return t.broadcast(code);
}

RunOptions parse_common(const Args &args, Question q) {
  RunOptions o;
  o.question = q;
  o.scan.question = q;
  o.json = args.flag("--json");
  o.jobs = default_jobs();
  if (auto j = args.count("-j")) {
    if (*j == 0) throw UsageError("-j must be at least 1");
    o.jobs = static_cast<size_t>(*j);
  }
  return o;
}

}  // namespace

int run_first_nan(std::span<char *const> argv) {
  static const OptionSpec options[] = {{"--json", false}, {"--nan-only", false}, {"--no-replay", false}, {"-j", true}};
  const Args args = parse_args(argv, options);
  expect_positional(args, 1, "ROOT");
  RunOptions o = parse_common(args, Question::Nan);
  o.a = args.positional[0];
  o.scan.nan_only = args.flag("--nan-only");
  o.scan.replay = !args.flag("--no-replay");
  return run(o);
}

int run_first_diff(std::span<char *const> argv) {
  static const OptionSpec options[] = {
      {"--json", false}, {"--atol", true}, {"--cos", true}, {"--stat-rtol", true}, {"-j", true}};
  const Args args = parse_args(argv, options);
  expect_positional(args, 2, "A and B");
  RunOptions o = parse_common(args, Question::Diff);
  o.a = args.positional[0];
  o.b = args.positional[1];
  o.scan.thresholds.atol = args.number("--atol", o.scan.thresholds.atol, 0, 1e300);
  o.scan.thresholds.cosine = args.number("--cos", o.scan.thresholds.cosine, -1, 1);
  o.scan.thresholds.stat_rtol = args.number("--stat-rtol", o.scan.thresholds.stat_rtol, 0, 1e300);
  return run(o);
}

}  // namespace msprobe::tools
