#include "shim/capture/session.h"

#include <link.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <mutex>
#include <unordered_map>

#include "collector/msprobe_writer.h"
#include "format/naming.h"
#include "races/clocks.h"
#include "shim/base/log.h"
#include "shim/base/problems.h"
#include "shim/capture/acl_graphs.h"
#include "shim/capture/lifecycle.h"
#include "shim/capture/rank_map.h"
#include "shim/capture/run_marker.h"
#include "shim/capture/selection_tally.h"
#include "shim/config/config.h"
#include "shim/stacks/stacks.h"

namespace msprobe::shim {

struct Session::Impl {
  Config config;
  TaskPolicy policy;

  std::mutex mu;  // launch order: everything below
  std::unique_ptr<collector::Collector> collector;
  uint64_t step = 0;
  uint64_t launch_index = 0;
  bool explicit_steps = false;  // msprobe_shim_step() was called: markers no longer end steps
  bool in_marker_run = false;
  bool scope_open = false, scope_done = false;
  RankMap ranks;  // which rank folder each launch goes to (rank_map.h)
  std::unordered_map<const void *, std::pair<uint64_t, uint64_t>> streams;  // stream -> (id, tasks launched)
  format::KernelOrdinals ordinals;  // {n} of {OpType}.{OpName}.{n}.forward, per step and rank
  bool closed = false;
  std::atomic<void (*)()> before_flush{nullptr};
  AclGraphs acl_graphs;
  std::atomic<bool> ahead{true};  // captures_ahead(), updated under mu
  SelectionTally tally;           // under mu: what the filters let through, said at exit when it is nothing
  // Under mu: the rank whose folders the last submitted kernel's claim gave this process (the next kernel of that rank
  // needs no claim); forgotten when the unranked folders are adopted. A flag beside the rank, not an optional of an
  // optional: comparing that with the kernel's optional rank takes "no rank" for "nothing claimed yet".
  bool claimed_any = false;
  std::optional<uint32_t> claimed_rank;
  std::unique_ptr<races::StreamClocks> clocks;  // MSPROBE_RACECHECK=1; its own lock (no launch waits for mu for it)

  // The collector once the first capture made it, or null; used outside mu (it lives as long as the session).
  collector::Collector *current_collector() {
    std::lock_guard<std::mutex> lk(mu);
    return collector.get();
  }
};

namespace {

void update_ahead(Session::Impl &m);

// Which framework drives the process, from the file names of the libraries it has loaded (not their directories: a
// checkout or a home directory named after a framework says nothing).
format::HostFramework detect_host_framework() {
  int found = 0;  // 1 torch_npu, 2 mindspore
  dl_iterate_phdr(
      [](dl_phdr_info *info, size_t, void *data) {
        const char *n = info->dlpi_name ? info->dlpi_name : "";
        if (const char *slash = std::strrchr(n, '/')) n = slash + 1;
        int *f = static_cast<int *>(data);
        if (std::strstr(n, "torch_npu"))
          *f = 1;
        else if (*f == 0 && std::strstr(n, "mindspore"))
          *f = 2;
        return 0;
      },
      &found);
  return found == 1   ? format::HostFramework::PyTorch
         : found == 2 ? format::HostFramework::MindSpore
                      : format::HostFramework::Acl;
}

uint64_t now_us() {
  timespec ts;
  clock_gettime(CLOCK_REALTIME, &ts);
  return (uint64_t)ts.tv_sec * 1000000u + (uint64_t)ts.tv_nsec / 1000u;
}

// stack.json for the collector: groups and frames from the process's stack table, in MSPROBE_STACK's mode.
class StackTableRenderer final : public record::StackRenderer {
 public:
  explicit StackTableRenderer(StackMode mode) : mode_(mode) {}
  uint64_t group(uint64_t id) override { return StackTable::global().group((StackId)id, mode_); }
  // Each group is rendered once and kept: every step folder's stack.json lists its groups again, and symbolizing a
  // native frame costs thousands of instructions (at exit, a run of many steps rendered the same frames per folder).
  // A group's frames never change (its id names fixed addresses and code objects; source lines are read once per
  // file). Up to kKeptBytes (strings and their containers) is kept; beyond, groups are rendered each time.
  std::vector<std::string> frames(uint64_t group_id) override {
    {
      std::lock_guard<std::mutex> lock(mu_);
      if (auto it = rendered_.find(group_id); it != rendered_.end()) return it->second;
    }
    std::vector<std::string> f = StackTable::global().frames((StackId)group_id, mode_);
    size_t bytes = sizeof(f) + 64;  // the vector and its map node
    for (const std::string &s : f) bytes += sizeof(std::string) + s.size();
    std::lock_guard<std::mutex> lock(mu_);
    if (kept_bytes_ + bytes <= kKeptBytes && rendered_.emplace(group_id, f).second) kept_bytes_ += bytes;
    return f;
  }

 private:
  static constexpr size_t kKeptBytes = size_t{64} << 20;
  StackMode mode_;
  std::mutex mu_;  // the writer thread and, past its deadline, the flushing thread may render at once
  std::unordered_map<uint64_t, std::vector<std::string>> rendered_;
  size_t kept_bytes_ = 0;
};

}  // namespace

// Constant-initialized: hooks may ask before any constructor has run.
constinit std::atomic<Session *> g_active{nullptr};

Session *active_session() noexcept { return g_active.load(std::memory_order_acquire); }
void activate_session(Session *session) noexcept { g_active.store(session, std::memory_order_release); }

Session::Session(Config config) : impl_(new Impl), config_(&impl_->config), acl_graphs_(&impl_->acl_graphs) {
  impl_->config = std::move(config);
  if (impl_->config.race_check) impl_->clocks = std::make_unique<races::StreamClocks>();
  // A full flight ring lets the oldest kept kernel go (the collector keeps them, in order), or waits for the kernels
  // being checked when MSPROBE_FLIGHT_KERNELS asks for that one to stay.
  impl_->policy = make_task_policy(impl_->config, [m = impl_] {
    collector::Collector *col = m->current_collector();
    return col != nullptr && col->drop_oldest_kept();
  });
  update_ahead(*impl_);  // MSPROBE_RANK against a rank known from the environment is decided at the first launch
}

races::StreamClocks *Session::stream_clocks() noexcept { return impl_->clocks.get(); }

Session::~Session() {
  shutdown();
  delete impl_;
}

Stager &Session::stager() { return *impl_->policy.stager; }
const TaskPolicy &Session::task_policy() const { return impl_->policy; }

namespace {

// With a scope or full kernel names in the list, any op type can be inside; only a list of op types with nothing else
// rules types out up front.
bool type_may_be_selected(const Config &c, std::string_view op_type) {
  return c.list.empty() || c.list.may_match_type(op_type) || c.scope.has_value();
}

}  // namespace

bool Session::may_capture(std::string_view op_type) const { return type_may_be_selected(impl_->config, op_type); }

namespace {

// Whether a kernel launched from the current step on, on this rank, can still be selected.
void update_ahead(Session::Impl &m) {
  const Config &c = m.config;
  const std::optional<uint32_t> rank = m.ranks.process_rank();
  bool rank_out = rank && !c.ranks.contains((int64_t)*rank);
  bool steps_left = c.steps.all() || (!c.steps.ranges().empty() && c.steps.ranges().back().second >= (int64_t)m.step);
  m.ahead.store(steps_left && !rank_out, std::memory_order_relaxed);
}

// Under m.mu, for every launch in launch order: the rank, step markers, launch index, stream and task id.
[[gnu::always_inline]] inline void count_launch(Session::Impl &m, std::string_view op_type, const void *stream,
                                                LaunchTicket &t, std::optional<bool> is_marker = std::nullopt) {
  const Config &c = m.config;
  // A step ends after a run of optimizer kernels (unless the host marks steps itself).
  // Casts and copies inside the run (mixed precision: the master weights are cast back after each
  // optimizer kernel) belong to it and do not end it.
  bool marker = !m.explicit_steps && (is_marker ? *is_marker : c.step_marker.matches(op_type));
  bool inside_run = m.in_marker_run && (op_type == "Cast" || op_type == "InplaceCopy");
  if (!marker && !inside_run && m.in_marker_run) {
    ++m.step;
    m.scope_open = m.scope_done = false;
    update_ahead(m);
  }
  if (!inside_run) m.in_marker_run = marker;
  t.step = m.step;
  const bool rank_was_known = m.ranks.process_rank().has_value();
  t.rank = m.ranks.of_launch();
  if (!rank_was_known && m.ranks.process_rank()) update_ahead(m);  // RANK_ID, read at the first launch
  m.tally.launched(op_type, m.step, c.steps.contains((int64_t)m.step), !c.list.empty() || c.scope.has_value());
  if (t.rank) m.tally.rank_known(*t.rank);
  t.launch_index = m.launch_index++;
  auto [it, fresh] = m.streams.try_emplace(stream, std::make_pair((uint64_t)m.streams.size(), (uint64_t)0));
  t.stream_id = it->second.first;
  t.task_id = it->second.second++;
}

}  // namespace

bool Session::captures_ahead() const noexcept { return impl_->ahead.load(std::memory_order_relaxed); }

bool Session::is_step_marker(std::string_view op_type) const { return impl_->config.step_marker.matches(op_type); }

void Session::skip_launch(std::string_view op_type, const void *stream, bool marker) {
  LaunchTicket t;
  std::lock_guard<std::mutex> lk(impl_->mu);
  count_launch(*impl_, op_type, stream, t, marker);
}

namespace {

// Under m.mu: the selection by what a launch is counted with (open dump, step, rank).
[[gnu::always_inline]] inline bool selected_by_step_and_rank(const Session::Impl &m, const LaunchTicket &t) {
  const Config &c = m.config;
  return !m.closed && c.steps.contains((int64_t)t.step) && (!t.rank || c.ranks.contains((int64_t)*t.rank)) &&
         (c.ranks.all() || t.rank.has_value());
}

bool selected_before_name(Session::Impl &m, std::string_view op_type, const LaunchTicket &t) {
  return selected_by_step_and_rank(m, t) && type_may_be_selected(m.config, op_type);
}

// Under m.mu, after the ticket's step and rank are known: its name ({n} per step, rank and base name) and whether the
// configuration selects it (closed, step, rank, scope, list, the overflow limit), and what of it to take.
[[gnu::always_inline]] inline void name_and_select(Session::Impl &m, std::string_view op_type, std::string_view op_name,
                                                   LaunchTicket &t) {
  const Config &c = m.config;
  if (!t.name_pending) t.timestamp_us = now_us();
  t.name_pending = false;
  std::string base = format::kernel_base_name(op_type, op_name);
  t.name = format::kernel_name(base, m.ordinals.next(t.step, t.rank, base));

  bool selected = selected_by_step_and_rank(m, t);
  if (selected && c.scope) {
    if (!m.scope_open && !m.scope_done && c.scope->first.matches(op_type, t.name)) m.scope_open = true;
    selected = m.scope_open;
    if (m.scope_open && c.scope->second.matches(op_type, t.name)) {
      m.scope_open = false;
      m.scope_done = true;
    }
  }
  if (selected && !c.list.empty()) selected = c.list.matches(op_type, t.name);
  // Copying stops once the collector will write nothing more (overflow_check has found MSPROBE_OVERFLOW_NUMS
  // overflows: it finds them after the kernels ran, so a few more may be copied; it writes only the first N).
  if (selected) m.tally.selected();
  if (selected && m.collector && m.collector->write_limit_reached()) selected = false;
  t.capture = selected;
  t.with_inputs = c.data_mode != DataMode::Output;
  t.with_outputs = c.data_mode != DataMode::Input;
  t.with_data = m.policy.takes_data;
}

}  // namespace

LaunchTicket Session::begin_launch(std::string_view op_type, std::string_view op_name, const void *stream,
                                   std::optional<bool> is_marker) {
  Impl &m = *impl_;
  LaunchTicket t;
  std::lock_guard<std::mutex> lk(m.mu);
  count_launch(m, op_type, stream, t, is_marker);
  name_and_select(m, op_type, op_name, t);
  return t;
}

LaunchTicket Session::begin_unnamed_launch(std::string_view op_type, const void *stream,
                                           std::optional<bool> is_marker) {
  Impl &m = *impl_;
  LaunchTicket t;
  std::lock_guard<std::mutex> lk(m.mu);
  count_launch(m, op_type, stream, t, is_marker);
  t.timestamp_us = now_us();
  t.name_pending = true;
  t.capture = selected_before_name(m, op_type, t) && !(m.collector && m.collector->write_limit_reached());
  t.with_inputs = m.config.data_mode != DataMode::Output;
  t.with_outputs = m.config.data_mode != DataMode::Input;
  t.with_data = m.policy.takes_data;
  return t;
}

void Session::name_launch(LaunchTicket &t, std::string_view op_type, std::string_view op_name) {
  Impl &m = *impl_;
  std::lock_guard<std::mutex> lk(m.mu);
  const bool could = t.capture;
  name_and_select(m, op_type, op_name, t);
  t.capture = t.capture && could;  // copied from the start, or never
}

void Session::set_before_flush(void (*before_flush)()) { impl_->before_flush.store(before_flush); }

LaunchTicket Session::begin_graph_kernel(std::string_view op_type, std::string_view op_name, uint64_t step,
                                         uint64_t stream_id, uint64_t task_id) {
  Impl &m = *impl_;
  LaunchTicket t;
  std::lock_guard<std::mutex> lk(m.mu);
  t.step = step;
  t.rank = m.ranks.of_launch();
  t.launch_index = m.launch_index++;
  t.stream_id = stream_id;
  t.task_id = task_id;
  name_and_select(m, op_type, op_name, t);
  return t;
}

namespace {

// msprobe's layout for the task's retention, made at the first captured kernel.
std::unique_ptr<collector::Collector> make_collector(Session::Impl &m) {
  const Config &c = m.config;
  collector::MsprobeWriterOptions o;
  o.dump_path = c.dump_path;
  o.dump_task = m.policy.dump_task;
  o.md5 = c.summary_mode == SummaryMode::Md5;
  o.file_format = c.file_format;
  o.host_framework = detect_host_framework();
  // msprobe reads two conventions only: pytorch's for torch_npu hosts, mindspore's for the rest.
  o.framework =
      o.host_framework == format::HostFramework::PyTorch ? format::Framework::PyTorch : format::Framework::MindSpore;
  o.precision = c.precision;
  o.save_tensors = m.policy.saves_tensors;
  o.compress = c.compress;
  o.stacks = std::make_shared<StackTableRenderer>(c.stack);
  o.journal_gap_us = c.test_journal_gap_us;
  o.run_id = run_marker::this_run().id;
  o.run_pid = run_marker::this_run().pid;
  collector::CollectorParts parts;
  parts.write_wait = std::chrono::seconds(c.write_wait_s);
  parts.retention = m.policy.make_retention(o.stacks);
  parts.writer = collector::msprobe_writer(std::move(o));
  return std::make_unique<collector::Collector>(std::move(parts));
}

}  // namespace

void Session::submit(record::KernelCapture kernel) {
  Impl &m = *impl_;
  collector::Collector *col;
  {
    std::lock_guard<std::mutex> lk(m.mu);
    if (!kernel.rank) kernel.rank = m.ranks.adopted();  // begun before the rank was adopted (rank_map.h)
    // Another live process (a fork+exec child with the same rank) may own this rank's folders: never both.
    if (!m.claimed_any || m.claimed_rank != kernel.rank) {
      if (!lifecycle::claim_rank_output(m.config.dump_path, format::rank_dir_name(kernel.rank), m.config.task)) return;
      m.claimed_any = true;
      m.claimed_rank = kernel.rank;
    }
    if (!m.collector) m.collector = make_collector(m);
    col = m.collector.get();
  }
  col->submit(std::move(kernel));
}

void Session::host_marks_steps() {
  std::lock_guard<std::mutex> lk(impl_->mu);
  impl_->explicit_steps = true;
  impl_->in_marker_run = false;
}

void Session::end_step() {
  std::lock_guard<std::mutex> lk(impl_->mu);
  impl_->explicit_steps = true;
  impl_->in_marker_run = false;
  ++impl_->step;
  impl_->scope_open = impl_->scope_done = false;
  update_ahead(*impl_);
}

void Session::set_rank_hint(uint32_t rank, int32_t device) {
  bool adopt;
  {
    std::lock_guard<std::mutex> lk(impl_->mu);
    adopt = impl_->ranks.communicator_rank(rank, device);
    if (adopt) impl_->ordinals.adopt_rank(rank);  // names go on counting where the kernels without a rank left off
    update_ahead(*impl_);
  }
  if (adopt) adopt_unranked(rank);
}

void Session::thread_device(int32_t device) {
  std::lock_guard<std::mutex> lk(impl_->mu);
  impl_->ranks.thread_device(device);
}

// The kernels recorded without a rank (a process on one device, before its communicator existed) are the rank's: the
// rank folder is claimed, what was written is moved into it, and later kernels without a rank go there too.
void Session::adopt_unranked(uint32_t rank) {
  Impl &m = *impl_;
  collector::Collector *col = m.current_collector();
  if (col == nullptr) return;  // nothing written yet: every later kernel has the rank
  const std::string to = format::rank_dir_name(rank), from = format::rank_dir_name(std::nullopt);
  if (!lifecycle::claim_rank_output(m.config.dump_path, to, m.config.task)) return;  // another process has the rank
  col->adopt_rank(rank);
  {
    std::lock_guard<std::mutex> lk(m.mu);
    m.claimed_any = false;
  }
  lifecycle::release_rank_output(m.config.dump_path, from);
  run_marker::renamed(m.config.dump_path, from, to);
  log_info("the kernels recorded before the communicator gave this process its rank moved from %s to %s folders",
           from.c_str(), to.c_str());
}

void Session::flush() {
  if (auto before = impl_->before_flush.load()) before();
  if (collector::Collector *col = impl_->current_collector()) col->flush();
}

void Session::device_ending(const char *call) {
  flush();
  if (collector::Collector *col = impl_->current_collector()) {
    if (impl_->config.flight_on_exit) col->write_kept(call);
    while (col->drop_oldest_kept()) {
    }
  }
  impl_->policy.stager->device_ending();
}

namespace {

// The flight task's outcome, said at exit whatever the level: a run with no NaN/Inf writes nothing, and the user must
// be able to tell a quiet run from a broken one.
std::string flight_outcome(const Config &c, const collector::CollectorCounters &n, uint64_t steps) {
  std::string outcome = "no NaN/Inf: nothing written";
  if (n.overflows > 0)
    outcome = "NaN/Inf found: " + std::to_string(n.overflows) + " record(s) written to " + c.dump_path;
  else if (n.written > 0)
    outcome = "no NaN/Inf; the last " + std::to_string(n.written) + " kernels written to " + c.dump_path +
              " at exit (MSPROBE_FLIGHT_ON_EXIT)";
  return "flight: watched " + std::to_string(n.submitted) + " kernels over " + std::to_string(steps) +
         " steps with a ring of " + std::to_string(c.buffer_bytes >> 20) + " MiB (at most " +
         std::to_string(n.kept_high_water) + " kernels kept): " + outcome;
}

// What the run leaves in its marker and says at the end (run_marker.h).
std::string run_outcome(const Config &c, const collector::CollectorCounters &n, uint64_t steps,
                        const std::string &unselected) {
  if (c.task == Task::Flight) return flight_outcome(c, n, steps);
  if (!unselected.empty()) return unselected;
  return std::to_string(n.written) + " kernels written over " + std::to_string(steps) + " steps";
}

void log_written(const Config &c, const collector::CollectorCounters &n) {
  log_info("%llu kernels written to %s (%llu tensor files, %llu bytes, %llu on disk)", (unsigned long long)n.written,
           c.dump_path.c_str(), (unsigned long long)n.tensor_files, (unsigned long long)n.tensor_bytes,
           (unsigned long long)n.file_bytes);
  if (n.kept_high_water + n.overflows > 0)
    log_info("%llu kernels kept at most; %llu overflows found (flight: records written)",
             (unsigned long long)n.kept_high_water, (unsigned long long)n.overflows);
  if (n.write_errors) log_error("%llu write errors: the dump is incomplete", (unsigned long long)n.write_errors);
}

}  // namespace

void Session::shutdown() {
  if (auto before = impl_->before_flush.load()) before();
  const Config &c = impl_->config;
  collector::Collector *col;
  uint64_t steps;
  SelectionTally tally;
  std::optional<uint32_t> rank;
  {
    std::lock_guard<std::mutex> lk(impl_->mu);
    if (impl_->closed) return;
    impl_->closed = true;
    col = impl_->collector.get();
    steps = impl_->step + 1;
    tally = impl_->tally;
    rank = impl_->ranks.process_rank();
  }
  const std::string unselected = tally.nothing_selected(c);
  if (!unselected.empty()) log_note("%s", unselected.c_str());
  collector::CollectorCounters n;
  if (col) {
    // MSPROBE_FLIGHT_ON_EXIT: the kept kernels are the record of how the process ended.
    if (c.flight_on_exit) {
      const char *sig = lifecycle::ending_signal_name();
      col->write_kept(sig ? std::string("signal ") + sig : std::string("exit"));
    }
    col->close(/*join_writers=*/!lifecycle::process_is_dying());
    n = col->counters();
  }
  const std::string outcome = run_outcome(c, n, steps, unselected);
  if (c.task == Task::Flight) log_note("%s", outcome.c_str());
  // Before the rank locks go: peers starting meanwhile see this run alive until its marker says it ended.
  // A flight run that wrote nothing leaves its marker for its rank all the same: `msprobe-inspect summary` on the root
  // then says what it watched instead of "no dump found".
  const bool quiet_flight = !col && c.task == Task::Flight && tally.launches() > 0;
  if (col || quiet_flight)
    run_marker::ended(c.dump_path, quiet_flight ? format::rank_dir_name(rank) : "", c.task, outcome);
  if (!col) return;
  lifecycle::release_rank_outputs(/*as_crashed=*/!col->complete());
  log_written(c, n);
  impl_->policy.stager->log_summary();
  if (const std::string problems = problem_summary(); !problems.empty())
    log_warn("problems met and gone past this run (each said when first met): %s", problems.c_str());
}

}  // namespace msprobe::shim
