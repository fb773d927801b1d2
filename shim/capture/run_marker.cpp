#include "shim/capture/run_marker.h"

#include <fcntl.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <ctime>
#include <filesystem>
#include <fstream>
#include <map>
#include <mutex>
#include <nlohmann/json.hpp>
#include <set>
#include <sstream>
#include <vector>

#include "format/dump_json.h"
#include "format/io.h"
#include "shim/base/log.h"

namespace msprobe::shim::run_marker {
namespace fs = std::filesystem;
namespace key = format::json_key;

namespace {

int64_t now_us() {
  return std::chrono::duration_cast<std::chrono::microseconds>(std::chrono::system_clock::now().time_since_epoch())
      .count();
}

// When this process started: /proc/self/stat's starttime (clock ticks since boot) after the boot, known to the
// microsecond from the realtime and boottime clocks (/proc/stat's btime is whole seconds); else now.
int64_t process_start_us() {
  std::ifstream stat("/proc/self/stat");
  std::string text((std::istreambuf_iterator<char>(stat)), {});
  const size_t paren = text.rfind(')');  // the command name may hold spaces and parentheses
  long long start_ticks = -1, btime = -1;
  if (paren != std::string::npos) {
    std::istringstream rest(text.substr(paren + 2));
    std::string field;
    for (int i = 3; i <= 22 && rest >> field; ++i)
      if (i == 22) start_ticks = std::atoll(field.c_str());
  }
  struct timespec real {
  }, boot{};
  if (clock_gettime(CLOCK_REALTIME, &real) == 0 && clock_gettime(CLOCK_BOOTTIME, &boot) == 0)
    btime = (real.tv_sec - boot.tv_sec) * 1000000LL + (real.tv_nsec - boot.tv_nsec) / 1000;
  const long hz = sysconf(_SC_CLK_TCK);
  if (start_ticks < 0 || btime < 0 || hz <= 0) return now_us();
  return btime + start_ticks * 1000000LL / hz;
}

int64_t start_resolution_us() {
  const long hz = sysconf(_SC_CLK_TCK);
  return hz > 0 ? 1000000 / hz : 10000;
}

std::string command_line() {
  std::ifstream in("/proc/self/cmdline", std::ios::binary);
  std::string raw((std::istreambuf_iterator<char>(in)), {});
  for (char &c : raw)
    if (c == '\0') c = ' ';
  while (!raw.empty() && raw.back() == ' ') raw.pop_back();
  return raw.size() > 512 ? raw.substr(0, 509) + "..." : raw;
}

std::string run_id(int64_t start_us, int64_t pid) {
  const std::time_t t = static_cast<std::time_t>(start_us / 1000000);
  std::tm tm{};
  gmtime_r(&t, &tm);
  char buf[48];
  std::snprintf(buf, sizeof buf, "%04d%02d%02d-%02d%02d%02d-%lld", tm.tm_year + 1900, tm.tm_mon + 1, tm.tm_mday,
                tm.tm_hour, tm.tm_min, tm.tm_sec, (long long)pid);
  return buf;
}

struct Written {
  std::string root, rank_dir;
  format::Task task;
};

std::mutex g_mu;
auto *g_written = new std::vector<Written>;  // immortal: used at exit
RunIdentity *g_this = nullptr;               // under g_mu

std::string marker_text(const RunIdentity &r, format::Task task, std::optional<int64_t> end_us,
                        std::string_view outcome) {
  std::string s = "{";
  const auto member = [&](std::string_view k) {
    if (s.size() > 1) s += ", ";
    format::append_json_string(s, k);
    s += ": ";
  };
  member(key::kRunId), format::append_json_string(s, r.id);
  member(key::kRunPid), format::append_json_integer(s, r.pid);
  member(key::kRunStart), format::append_json_integer(s, r.start_us);
  member(key::kRunEnd);
  end_us ? format::append_json_integer(s, *end_us) : void(s += "null");
  member(key::kTask), format::append_json_string(s, format::task_name(task));
  member(key::kRunCommand), format::append_json_string(s, r.command);
  member(key::kRunOutcome), format::append_json_string(s, outcome);
  return s + "}\n";
}

// Whether a process holds the lock of `rank_dir` under `root` (its rank is being written now).
bool being_written(const fs::path &root, const std::string &rank_dir) {
  const int fd = ::open((root / format::rank_lock_name(rank_dir)).c_str(), O_RDONLY | O_CLOEXEC | O_NOFOLLOW);
  if (fd < 0) return false;
  const bool held = ::flock(fd, LOCK_SH | LOCK_NB) != 0;
  ::close(fd);
  return held;
}

// An earlier run found in the root: its rank folders' names, and its marker files.
struct EarlierRun {
  std::set<std::string> rank_dirs;
  std::vector<fs::path> markers;
};

// The runs whose markers say they are over before this process started (or were killed); `peers` gets the rank
// folders of this run's other processes, and of runs still being written, which stay.
std::map<std::string, EarlierRun> earlier_runs(const fs::path &root, const RunIdentity &me, const std::string &mine,
                                               std::set<std::string> &staying) {
  std::map<std::string, EarlierRun> out;
  std::error_code ec;
  for (fs::directory_iterator it(root, ec), end; !ec && it != end; it.increment(ec)) {
    const std::string name = it->path().filename().string();
    if (!format::is_run_marker_name(name)) continue;
    const std::string rank_dir = format::rank_dir_of_run_marker(name);
    std::ifstream in(it->path());
    const nlohmann::json m = nlohmann::json::parse(in, nullptr, false);
    const int64_t pid = m.is_object() ? m.value(std::string(key::kRunPid), (int64_t)0) : 0;
    const auto end_field = m.is_object() ? m.find(std::string(key::kRunEnd)) : m.end();
    // A peer of this run (another rank, a forked child) ends after this process started: they run together. The
    // start is known to a clock tick (it may read up to one tick early), so a run that ended just before this one
    // started is not taken for a peer.
    const bool ended_after_i_started = m.is_object() && end_field != m.end() && end_field->is_number_integer() &&
                                       end_field->get<int64_t>() > me.start_us + start_resolution_us();
    // The rank this process just claimed is locked by this process: any other run's marker for it is an earlier run's.
    if (pid == me.pid || ended_after_i_started || (rank_dir != mine && being_written(root, rank_dir))) {
      staying.insert(rank_dir);
      continue;
    }
    const std::string id = m.is_object() ? m.value(std::string(key::kRunId), std::string("unknown")) : "unknown";
    out[id].rank_dirs.insert(rank_dir);
    out[id].markers.push_back(it->path());
  }
  return out;
}

// The step folders' rank folders that hold a dump.json no marker names and that nobody writes: an unknown earlier run's
// (an older version's, or msprobe's own).
void unmarked_folders(const fs::path &root, const std::string &mine, const std::set<std::string> &staying,
                      std::map<std::string, EarlierRun> &runs) {
  std::set<std::string> marked = staying;
  for (const auto &[id, run] : runs) marked.insert(run.rank_dirs.begin(), run.rank_dirs.end());
  std::error_code ec;
  for (fs::directory_iterator s(root, ec), end; !ec && s != end; s.increment(ec)) {
    if (!s->is_directory(ec) || s->path().filename().string().rfind("step", 0) != 0) continue;
    std::error_code ec2;
    for (fs::directory_iterator r(s->path(), ec2), end2; !ec2 && r != end2; r.increment(ec2)) {
      const std::string rank_dir = r->path().filename().string();
      if (rank_dir.rfind("rank", 0) != 0 || marked.count(rank_dir) || !fs::exists(r->path() / format::kDumpJson, ec2) ||
          (rank_dir != mine && being_written(root, rank_dir)))
        continue;
      runs["unknown"].rank_dirs.insert(rank_dir);
    }
  }
}

// Moves one earlier run's rank folders (every step) and its markers to root/earlier_runs/<id>/. Another rank of this
// run may be moving the same folders right now: a folder gone meanwhile is its business.
std::string move_aside(const fs::path &root, const std::string &id, const EarlierRun &run, std::set<uint64_t> &steps) {
  const fs::path dest = root / format::kEarlierRunsDir / id;
  std::error_code ec;
  for (fs::directory_iterator s(root, ec), end; !ec && s != end; s.increment(ec)) {
    const std::string step = s->path().filename().string();
    if (step.rfind("step", 0) != 0 || !s->is_directory(ec)) continue;
    bool moved = false;
    for (const std::string &rank_dir : run.rank_dirs) {
      std::error_code e;
      if (fs::is_symlink(s->path(), e) || !fs::exists(s->path() / rank_dir, e)) continue;
      fs::create_directories(dest / step, e);
      fs::rename(s->path() / rank_dir, dest / step / rank_dir, e);
      if (e) continue;
      moved = true;
      steps.insert(std::strtoull(step.c_str() + 4, nullptr, 10));
    }
    std::error_code e;
    if (moved && fs::is_empty(s->path(), e)) fs::remove(s->path(), e);  // only a step folder this emptied
  }
  for (const fs::path &m : run.markers) {
    std::error_code e;
    fs::create_directories(dest, e);
    fs::rename(m, dest / m.filename(), e);
  }
  return dest.string();
}

std::string step_span(const std::set<uint64_t> &steps) {
  if (steps.empty()) return "no step folder";
  const std::string lo = std::to_string(*steps.begin()), hi = std::to_string(*steps.rbegin());
  return steps.size() == 1 ? "step " + lo : "steps " + lo + "-" + hi;
}

// `mine`: the rank folder this process holds the lock of (none: "").
void move_earlier_runs(const fs::path &root, const RunIdentity &me, const std::string &mine) {
  std::set<std::string> staying;
  std::map<std::string, EarlierRun> runs = earlier_runs(root, me, mine, staying);
  unmarked_folders(root, mine, staying, runs);
  for (const auto &[id, run] : runs) {
    std::set<uint64_t> steps;
    const std::string dest = move_aside(root, id, run, steps);
    if (steps.empty() && run.markers.empty()) continue;
    std::string ranks;
    for (const std::string &r : run.rank_dirs) ranks += (ranks.empty() ? "" : ", ") + r;
    log_note("%s held the folders of an earlier run (%s: %s, %s): moved to %s, so that the two runs do not mix",
             root.c_str(), id.c_str(), step_span(steps).c_str(), ranks.c_str(), dest.c_str());
  }
}

void write_marker(const std::string &root, const std::string &rank_dir, format::Task task,
                  std::optional<int64_t> end_us, std::string_view outcome) {
  format::write_file_atomic(fs::path(root) / format::run_marker_name(rank_dir),
                            marker_text(this_run(), task, end_us, outcome));
}

}  // namespace

const RunIdentity &this_run() {
  std::lock_guard<std::mutex> lk(g_mu);
  if (g_this == nullptr || g_this->pid != (int64_t)::getpid()) {
    auto *r = new RunIdentity;  // one per process; a fork child's replaces its parent's copy
    r->pid = ::getpid();
    r->start_us = process_start_us();
    r->id = run_id(r->start_us, r->pid);
    r->command = command_line();
    g_this = r;
  }
  return *g_this;
}

void claimed(const std::string &root, const std::string &rank_dir, format::Task task) noexcept {
  try {
    move_earlier_runs(root, this_run(), rank_dir);
    write_marker(root, rank_dir, task, std::nullopt, "");
    std::lock_guard<std::mutex> lk(g_mu);
    g_written->push_back({root, rank_dir, task});
  } catch (const std::exception &e) {
    log_warn("cannot mark the run in %s (%s): a later run into it will not know this one's folders", root.c_str(),
             e.what());
  }
}

void renamed(const std::string &root, const std::string &from, const std::string &to) noexcept {
  std::lock_guard<std::mutex> lk(g_mu);
  if (std::none_of(g_written->begin(), g_written->end(),
                   [&](const Written &w) { return w.root == root && w.rank_dir == to; }))
    return;  // `to` was not claimed here: keep what says where the folders are
  std::erase_if(*g_written, [&](const Written &w) { return w.root == root && w.rank_dir == from; });
  std::error_code ec;
  fs::remove(fs::path(root) / format::run_marker_name(from), ec);
}

void ended(const std::string &root, const std::string &rank_dir, format::Task task, std::string_view outcome) noexcept {
  try {
    std::vector<Written> mine;
    {
      std::lock_guard<std::mutex> lk(g_mu);
      for (const Written &w : *g_written)
        if (w.root == root) mine.push_back(w);
    }
    if (mine.empty() && !rank_dir.empty()) {
      fs::create_directories(root);
      move_earlier_runs(root, this_run(), "");
      mine.push_back({root, rank_dir, task});
    }
    for (const Written &w : mine) write_marker(w.root, w.rank_dir, w.task, now_us(), outcome);
  } catch (const std::exception &e) {
    log_warn("cannot finish the run's marker in %s (%s)", root.c_str(), e.what());
  }
}

}  // namespace msprobe::shim::run_marker
