#include "shim/capture/graph_capture.h"

#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include <atomic>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <mutex>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <unordered_map>
#include <vector>

#include "shim/base/bounded_call.h"
#include "shim/base/log.h"
#include "shim/base/reentry.h"
#include "shim/capture/kernel_launch.h"
#include "shim/config/config.h"
#include "shim/device/runtime_api.h"
#include "shim/graph/chunk_assembler.h"
#include "shim/graph/dump_file.h"
#include "shim/graph/stats_csv.h"

namespace msprobe::shim {
namespace {

constexpr int32_t kAclSuccess = 0, kRepeatInitialize = 100002;
constexpr int32_t kDataDump = 4;                     // acldumpType DATA_DUMP
constexpr uintmax_t kMaxAclConfigBytes = 16u << 20;  // aclInit's config: a few KiB in practice
constexpr uint64_t kMaxReports = 10;                 // bad files reported one by one, then counted

// A tensor's bytes, copied out of its dump file (the file's offsets are not aligned for typed reads).
class OwnedBytes final : public record::HostBlock {
 public:
  explicit OwnedBytes(std::span<const unsigned char> b) : bytes_(b.begin(), b.end()) {}
  const void *data() const override { return bytes_.data(); }
  uint64_t size() const override { return bytes_.size(); }

 private:
  std::vector<unsigned char> bytes_;
};

// Statistics CANN computed on the device (stats mode): written as they are; no tensor crosses.
class DumpedStats final : public record::PrecomputedStats {
 public:
  explicit DumpedStats(format::TensorStats s) : s_(s) {}
  std::optional<format::TensorStats> stats() const override { return s_; }

 private:
  format::TensorStats s_;
};

// CANN's statistics of one tensor as msprobe writes them (Mean is CANN's Avg, Norm its l2norm); absent values stay
// null.
format::TensorStats stats_of(const graph::StatsRow &r) {
  format::TensorStats s;
  // The CSV prints each value with 9 significant digits, which name one float32 (and one fp16/bf16) exactly: rounded
  // back to the tensor's dtype they are the values the device computed (msprobe's "low" precision).
  const format::DType stat_dtype = format::is_floating(r.dtype) ? r.dtype : format::DType::F32;
  auto set = [&](format::StatValue &v, const std::optional<double> &x) {
    if (x) v = format::StatValue::of_real(format::round_to_dtype(*x, stat_dtype));
  };
  // Max and Min are elements: an integer tensor's are integers, as msprobe writes them.
  auto element = [&](format::StatValue &v, const std::optional<double> &x) {
    if (x && !format::is_floating(r.dtype) && r.dtype != format::DType::Raw)
      v = format::StatValue::of_integer((int64_t)*x);
    else
      set(v, x);
  };
  element(s.max, r.max);
  element(s.min, r.min);
  set(s.mean, r.avg);
  set(s.norm, r.l2norm);
  s.count = r.count.value_or(0);
  s.nan_count = (uint64_t)std::max<int64_t>(r.nan.value_or(0), 0);
  s.neg_inf_count = (uint64_t)std::max<int64_t>(r.neg_inf.value_or(0), 0);
  s.pos_inf_count = (uint64_t)std::max<int64_t>(r.pos_inf.value_or(0), 0);
  return s;
}

std::vector<int64_t> contiguous_strides(const std::vector<int64_t> &shape) {
  std::vector<int64_t> st(shape.size(), 1);
  for (size_t i = shape.size(); i-- > 1;) st[i - 1] = st[i] * (shape[i] > 0 ? shape[i] : 1);
  return st;
}

record::TensorCapture describe(format::DType dtype, const std::string &dtype_name, const std::vector<int64_t> &shape,
                               const std::string &format) {
  record::TensorCapture t;
  t.dtype = dtype;
  if (dtype == format::DType::Raw) t.dtype_name = dtype_name;
  t.shape = shape;
  t.format = format;
  t.block_strides = contiguous_strides(shape);
  t.stride = t.block_strides;
  t.offset = 0;
  return t;
}

}  // namespace

struct GraphCapture::Impl {
  Session &session;
  std::mutex mu;             // the state below, and the shim's calls into the dump API
  bool ours_on = false;      // the shim's aclmdlInitDump is in force
  bool callback_on = false;  // the shim's callback is registered
  bool host_owns = false;    // the host turned the dump on itself: the shim configures nothing
  bool owner_said = false;   // which graph kernels a host-owned dump gives the shim, said at the first model load
  bool unavailable = false;  // no dump API, or the shim's config refused: said once, graph kernels left alone
  // Steps and stacks, read on CANN's record thread: their own lock (the record thread must never wait for `mu`,
  // which turn_off holds while aclmdlFinalizeDump waits for that thread).
  std::mutex state_mu;
  std::optional<uint64_t> hook_step;  // the step MindSpore's hook opened; steps come from the hook once it runs
  uint64_t hook_steps = 0;
  StackId hook_stack = kEmptyStack;
  std::unordered_map<uint64_t, StackId> execution_stacks;  // model id -> the stack of its last aclmdlExecute
  std::string work_dir;  // the config's dump_path (CANN writes nothing there while a callback is registered)
  std::atomic<ChunkCallback> host_callback{nullptr};

  std::mutex chunks_mu;             // CANN's record thread: reassembly and decoding (and drain's final flush)
  graph::ChunkAssembler assembler;  // bounded: files, bytes per file and in all (shim/graph/chunk_assembler.h)
  graph::StatsAssembler stats;
  std::optional<graph::StatsFile> stats_pending;  // a stats CSV arrives in pieces of at most 10 tensors
  uint64_t bad_files = 0;
  // What the dump cost the host: chunks and bytes received, files, kernels submitted, CPU time in the callback.
  uint64_t chunks = 0, bytes = 0, files = 0, kernels = 0, cpu_ns = 0;

  explicit Impl(Session &s) : session(s) {}

  bool turn_on();
  void turn_off();
  std::string config_json();
  void on_chunk(const void *chunk, int32_t len);
  void on_file(graph::AssembledFile &&file);
  bool begin_kernel(const graph::DumpName &name, std::string_view op_name, const graph::DumpPlace &place,
                    LaunchTicket &t, record::KernelCapture &k);
  void capture(const graph::DumpFile &f);
  void flush_stats();
  void report(std::string what);
  void say_owner();
  StackId stack_for(std::optional<uint64_t> model_id);
  uint64_t step_for(std::optional<uint64_t> dump_number);
  bool hook_mode() {
    std::lock_guard<std::mutex> lk(state_mu);
    return hook_step.has_value();
  }
};

namespace {

constinit std::atomic<GraphCapture *> g_capture{nullptr};
constinit std::atomic<GraphCapture::Impl *> g_impl{nullptr};

// CANN's record thread calls this for every chunk of every dump file, in order.
int32_t on_dump_chunk(const void *chunk, int32_t len) {
  GraphCapture::Impl *m = g_impl.load(std::memory_order_acquire);
  if (m == nullptr) return 0;
  ReentryGuard guard;
  try {
    m->on_chunk(chunk, len);
  } catch (...) {  // never into CANN's thread
  }
  GraphCapture::ChunkCallback host = m->host_callback.load(std::memory_order_acquire);
  return host ? host(chunk, len) : 0;
}

}  // namespace

GraphCapture *active_graph_capture() noexcept { return g_capture.load(std::memory_order_acquire); }
void activate_graph_capture(GraphCapture *capture) noexcept {
  g_impl.store(capture ? capture->impl_ : nullptr, std::memory_order_release);
  g_capture.store(capture, std::memory_order_release);
}

GraphCapture::GraphCapture(Session &session) : impl_(new Impl(session)) {}
GraphCapture::~GraphCapture() { delete impl_; }

// ---- the dump's configuration --------------------------------------------------------------------------------------

std::string GraphCapture::Impl::config_json() {
  const Config &c = session.config();
  const char *mode = c.data_mode == DataMode::Input ? "input" : c.data_mode == DataMode::Output ? "output" : "all";
  // Statistics (and names only, for the structure task) come from CANN's stats CSV: no tensor reaches the host.
  const bool stats = session.task_policy().graph_dump == GraphDump::Statistics;
  std::string j = "{\"dump\": {\"dump_path\": \"" + work_dir + "\", \"dump_list\": [{}], \"dump_mode\": \"" + mode +
                  "\", \"dump_data\": \"" + (stats ? "stats" : "tensor") + "\"";
  if (stats)
    j += ", \"dump_stats\": [\"Max\", \"Min\", \"Avg\", \"L2norm\", \"Nan\", \"Negative Inf\", \"Positive Inf\"]";
  // Without the step hook a model's n-th execution is step n: CANN skips the steps not asked for.
  if (!hook_mode() && !c.steps.all()) {
    std::string steps;
    for (auto [lo, hi] : c.steps.ranges())
      steps += (steps.empty() ? "" : "|") + std::to_string(lo) + (lo == hi ? "" : "-" + std::to_string(hi));
    j += ", \"dump_step\": \"" + steps + "\"";
  }
  return j + "}}\n";
}

// Caller holds mu. aclmdlInitDump + aclmdlSetDump(the shim's config) + the callback; false when it cannot be had.
bool GraphCapture::Impl::turn_on() {
  if (ours_on) return true;
  if (host_owns || unavailable) return false;
  auto init = runtime::aclmdlInitDump.get();
  auto set = runtime::aclmdlSetDump.get();
  auto fin = runtime::aclmdlFinalizeDump.get();
  auto reg = runtime::acldumpRegCallback.get();
  const bool off = session.task_policy().graph_dump == GraphDump::Off;
  if (off || !init || !set || !fin || !reg) {
    unavailable = true;
    if (off)
      log_info("graph-sunk kernels are not recorded by this task (the flight ring keeps no copy of a model's tensors)");
    else
      log_info("the runtime has no data dump API: graph-sunk kernels are not captured");
    return false;
  }
  if (work_dir.empty()) {
    // Written into the config's JSON as it is: a TMPDIR that would need escaping is not used.
    const char *tmp = std::getenv("TMPDIR");
    const bool plain = tmp && *tmp && std::strpbrk(tmp, "\"\\\n\r\t") == nullptr;
    std::string dir = std::string(plain ? tmp : "/tmp") + "/msprobe_shim_graph_XXXXXX";
    if (::mkdtemp(dir.data()) == nullptr) {
      unavailable = true;
      log_error("graph-sunk kernels are not captured: no private folder for CANN's dump config (%s)", dir.c_str());
      return false;
    }
    work_dir = dir;
  }
  const std::string config = work_dir + "/acl_dump.json";
  {
    std::ofstream f(config, std::ios::trunc);
    f << config_json();
  }
  ReentryGuard guard;
  int32_t rc = init();
  if (rc == kRepeatInitialize) {  // the host's own dump is on (turned on before the shim saw it)
    host_owns = true;
    log_warn("the program turned CANN's data dump on itself: graph-sunk kernels are left to its dump, not captured");
    return false;
  }
  if (rc == kAclSuccess) rc = set(config.c_str());
  if (rc != kAclSuccess) {
    fin();
    unavailable = true;
    log_error("graph-sunk kernels are not captured: the runtime refused the shim's dump config (error %d)", rc);
    return false;
  }
  if (!callback_on) callback_on = reg(on_dump_chunk, 0) == kAclSuccess;
  ours_on = true;
  return true;
}

// Caller holds mu. Every queued chunk delivered (aclmdlFinalizeDump returns after CANN's record thread drained them).
// The record thread also runs the host's own dump callback (the shim feeds it), which may never return: the wait is
// bounded, and after a drain that did not end the dump stays off for good.
void GraphCapture::Impl::turn_off() {
  if (!ours_on) return;
  ReentryGuard guard;
  ours_on = false;
  if (auto fin = runtime::aclmdlFinalizeDump.get();
      fin &&
      !call_with_deadline([fin] { fin(); }, std::chrono::milliseconds(session.config().graph_drain_timeout_ms))) {
    unavailable = true;
    log_warn(
        "graph dump: CANN's record thread did not finish delivering the dump within %.1f s (a dump callback of the "
        "program's that does not return?); the shim stops waiting for it, graph-sunk kernels not delivered by then "
        "are missing, and no later model's kernels are captured",
        (double)session.config().graph_drain_timeout_ms / 1e3);
    return;  // the record thread may be in the middle of a file: chunks_mu is not waited for either
  }
  std::lock_guard<std::mutex> lk(chunks_mu);
  flush_stats();
}

// ---- the hooks ---------------------------------------------------------------------------------------------------

void GraphCapture::before_model_load() {
  if (!impl_->session.captures_ahead()) return;  // every selected step is past, or this rank is not selected
  std::lock_guard<std::mutex> lk(impl_->mu);
  if (impl_->host_owns) return impl_->say_owner();
  impl_->turn_on();
}

void GraphCapture::model_executing(uint32_t model_id) {
  StackId stack = launch_stack(impl_->session);
  std::lock_guard<std::mutex> lk(impl_->state_mu);
  impl_->execution_stacks[model_id] = stack;
}

void GraphCapture::step_begin(bool kbyk) {
  if (kbyk) return;
  Impl &m = *impl_;
  StackId stack = launch_stack(m.session);
  uint64_t step;
  {
    std::lock_guard<std::mutex> lk(m.state_mu);
    step = *(m.hook_step = m.hook_steps++);
    m.hook_stack = stack;
  }
  std::lock_guard<std::mutex> lk(m.mu);
  if (m.session.config().steps.contains((int64_t)step)) m.turn_on();
}

void GraphCapture::step_end() {
  Impl &m = *impl_;
  {
    std::lock_guard<std::mutex> lk(m.mu);
    if (!m.hook_mode()) return;
    {
      ReentryGuard guard;
      if (auto sync = runtime::aclrtSynchronizeDevice.get()) sync();
    }
    m.turn_off();  // this step's files are all delivered, under this step
  }
  m.session.end_step();  // the session's own steps (kernels launched one by one) follow the hook's
}

void GraphCapture::host_init_dump() {
  Impl &m = *impl_;
  std::lock_guard<std::mutex> lk(m.mu);
  if (m.host_owns) return;
  m.turn_off();  // the host's aclmdlInitDump would fail while the shim's is in force
  m.host_owns = true;
  // Without a callback of its own the host wants CANN's files: the shim's callback would take them away.
  if (m.callback_on && m.host_callback.load() == nullptr) {
    ReentryGuard guard;
    if (auto unreg = runtime::acldumpUnregCallback.get()) unreg();
    m.callback_on = false;
  }
  log_warn(
      "the program turns CANN's data dump on itself: its dump is left as it configures it; graph-sunk kernels "
      "are captured only from what it dumps to a callback of its own");
}

// A section that enables nothing leaves no path at the first aclInit; a stale path of an earlier configuration counts
// as the program's too: leaving a dump alone is the safe mistake.
bool acl_init_turned_dump_on(const char *config_path) {
  if (config_path == nullptr || config_path[0] == '\0') return false;
  ReentryGuard guard;
  std::error_code ec;
  const uintmax_t size = std::filesystem::file_size(config_path, ec);
  if (ec || size > kMaxAclConfigBytes) return false;
  std::ifstream in(config_path, std::ios::binary);
  const nlohmann::json j = nlohmann::json::parse(in, nullptr, /*allow_exceptions=*/false);
  if (!j.is_object()) return false;
  auto dump = j.find("dump");
  if (dump == j.end() || !dump->is_object() || dump->empty()) return false;
  auto path = runtime::acldumpGetPath.get();
  return path == nullptr || path(kDataDump) != nullptr;
}

void GraphCapture::host_acl_init(const char *config_path) {
  Impl &m = *impl_;
  std::lock_guard<std::mutex> lk(m.mu);
  if (m.host_owns) return;
  m.host_owns = true;
  log_warn(
      "the program turned CANN's data dump on in aclInit's config (%s): its dump settings are left as they are; "
      "graph-sunk kernels are captured only from what its dump gives a callback of its own",
      config_path);
}

// Caller holds mu. Once, at the first model load under a dump the host owns: what the shim gets from it.
void GraphCapture::Impl::say_owner() {
  if (owner_said) return;
  owner_said = true;
  if (host_callback.load(std::memory_order_acquire) != nullptr)
    log_info("graph dump: the program's own dump callback receives the dump; graph-sunk kernels are captured from it");
  else
    log_warn(
        "graph dump: the program's own dump writes its files (no callback of its own): graph-sunk kernels are not "
        "captured");
}

int32_t GraphCapture::host_register_callback(ChunkCallback callback, int32_t flag,
                                             int32_t (*real)(ChunkCallback, int32_t)) {
  Impl &m = *impl_;
  if (callback == nullptr || flag != 0) return real(callback, flag);  // the runtime's own refusal
  std::lock_guard<std::mutex> lk(m.mu);
  m.host_callback.store(callback, std::memory_order_release);
  if (m.callback_on) return kAclSuccess;  // the shim's callback feeds the host's too
  ReentryGuard guard;
  int32_t rc = real(on_dump_chunk, 0);
  m.callback_on = rc == kAclSuccess;
  return rc;
}

void GraphCapture::host_unregister_callback(void (*real)()) {
  Impl &m = *impl_;
  std::lock_guard<std::mutex> lk(m.mu);
  m.host_callback.store(nullptr, std::memory_order_release);
  if (m.ours_on) return;  // the shim's capture goes on
  ReentryGuard guard;
  real();
  m.callback_on = false;
}

void GraphCapture::finish(bool drain) {
  Impl &m = *impl_;
  std::unique_lock<std::mutex> lk(m.mu, std::defer_lock);
  if (drain) {
    lk.lock();
    m.turn_off();
  }
  std::unique_lock<std::mutex> ck(m.chunks_mu, std::defer_lock);
  if (!ck.try_lock()) return;  // the record thread is in the middle of a file (a dying process): nothing to add
  m.flush_stats();
  for (const std::string &name : m.assembler.abandon_pending())
    m.report("dump file " + name + ": the dump ended before the file's last chunk; the kernel is not recorded");
  if (m.chunks > 0)
    log_info(
        "graph dump: %llu chunks (%llu bytes) made %llu files, %llu kernels recorded; %.3f ms of CPU in the "
        "callback (%.1f us per kernel)",
        (unsigned long long)m.chunks, (unsigned long long)m.bytes, (unsigned long long)m.files,
        (unsigned long long)m.kernels, (double)m.cpu_ns / 1e6,
        m.files ? (double)m.cpu_ns / 1e3 / (double)m.files : 0.0);
  if (m.bad_files > kMaxReports)
    log_error("graph dump: %llu files could not be read in all (the first %llu were reported)",
              (unsigned long long)m.bad_files, (unsigned long long)kMaxReports);
  if (drain && !m.work_dir.empty()) {
    std::error_code ec;
    std::filesystem::remove_all(m.work_dir, ec);
    m.work_dir.clear();  // made again if a model is loaded after this (a device opened again)
  }
}

// ---- chunks to kernels -------------------------------------------------------------------------------------------

// `what` names its file. Paths are shown below the shim's private dump folder (CANN's own layout: time stamp,
// device, model, model id, step, file), which is gone after the run.
void GraphCapture::Impl::report(std::string what) {
  if (++bad_files > kMaxReports) return;
  if (!work_dir.empty())
    for (size_t at; (at = what.find(work_dir + "/")) != std::string::npos;) what.erase(at, work_dir.size() + 1);
  log_error("graph dump: %s", what.c_str());
}

namespace {
uint64_t thread_cpu_ns() {
  timespec ts{};
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
  return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}
}  // namespace

void GraphCapture::Impl::on_chunk(const void *chunk, int32_t len) {
  std::lock_guard<std::mutex> lk(chunks_mu);
  const uint64_t t0 = thread_cpu_ns();
  ++chunks;
  bytes += len > (int32_t)graph::kChunkHeaderBytes ? (uint64_t)len - graph::kChunkHeaderBytes : 0;
  graph::ChunkResult r = assembler.feed(chunk, len);
  if (!r.error.empty()) report(r.error);
  if (r.file) {
    ++files;
    on_file(std::move(*r.file));
  }
  cpu_ns += thread_cpu_ns() - t0;
}

void GraphCapture::Impl::on_file(graph::AssembledFile &&file) {
  std::string error;
  if (file.name.ends_with(".csv")) {
    std::string_view text(reinterpret_cast<const char *>(file.bytes.data()), file.bytes.size());
    std::optional<graph::StatsFile> s = stats.feed(file.name, text, &error);
    if (!s) return report(error);
    // A later piece of the same kernel (more than 10 tensors) continues it; another kernel's ends the pending one.
    if (stats_pending && stats_pending->path == s->path && !s->had_header) {
      stats_pending->rows.insert(stats_pending->rows.end(), s->rows.begin(), s->rows.end());
      return;
    }
    flush_stats();
    stats_pending = std::move(s);
    return;
  }
  flush_stats();
  auto bytes = std::make_shared<const std::vector<unsigned char>>(std::move(file.bytes));
  std::optional<graph::DumpFile> f = graph::decode_dump_file(file.name, std::move(bytes), &error);
  if (!f) return report(error);
  capture(*f);
}

StackId GraphCapture::Impl::stack_for(std::optional<uint64_t> model_id) {
  std::lock_guard<std::mutex> lk(state_mu);
  if (hook_step) return hook_stack;
  auto it = model_id ? execution_stacks.find(*model_id) : execution_stacks.end();
  return it != execution_stacks.end() ? it->second : kEmptyStack;
}

uint64_t GraphCapture::Impl::step_for(std::optional<uint64_t> dump_number) {
  std::lock_guard<std::mutex> lk(state_mu);
  return hook_step ? *hook_step : dump_number.value_or(0);
}

// A dumped kernel's ticket (named, numbered and selected by the session like any launch) and its header and stack;
// false when the configuration does not select it.
bool GraphCapture::Impl::begin_kernel(const graph::DumpName &name, std::string_view op_name,
                                      const graph::DumpPlace &place, LaunchTicket &t, record::KernelCapture &k) {
  // A single-op dump's file ({time}/{device}/file: a host's dump_op_switch): the hooks captured that kernel already.
  if (place.device_id && place.model_name.empty() && !place.model_id) return false;
  t = session.begin_graph_kernel(name.op_type, op_name, step_for(place.dump_number), name.stream_id, name.task_id);
  if (!t.capture) return false;
  static_cast<format::KernelHeader &>(k) = t;
  k.stack_id = stack_for(place.model_id);
  return true;
}

void GraphCapture::Impl::capture(const graph::DumpFile &f) {
  // The dump's op name as the graph spells it (the file name's has '/' and '.' replaced): run-stable either way.
  const std::string &op_name = f.op_name.empty() ? f.name.op_name : f.op_name;
  LaunchTicket t;
  record::KernelCapture k;
  if (!begin_kernel(f.name, op_name, f.place, t, k)) return;
  std::string notes;
  auto convert = [&](const std::vector<graph::DumpTensor> &ts) {
    record::CapturedList list;
    for (const graph::DumpTensor &d : ts) {
      record::TensorCapture c = describe(d.dtype, d.dtype_name, d.shape, d.format_name);
      if (t.with_data && d.decodable) c.block = std::make_shared<OwnedBytes>(d.bytes);
      if (!d.decodable && !d.note.empty()) notes += (notes.empty() ? "" : "; ") + d.note;
      list.push_back(record::CapturedArg{std::move(c)});
    }
    return list;
  };
  if (t.with_inputs) k.inputs = convert(f.inputs);
  if (t.with_outputs) k.outputs = convert(f.outputs);
  if (!notes.empty()) k.notes.emplace_back(format::json_key::kGraphNote, notes);  // tensors described but not decoded
  ++kernels;
  session.submit(std::move(k));
}

// Caller holds chunks_mu. The pending stats kernel, complete now, to the session.
void GraphCapture::Impl::flush_stats() {
  if (!stats_pending) return;
  graph::StatsFile s = std::move(*stats_pending);
  stats_pending.reset();
  LaunchTicket t;
  record::KernelCapture k;
  if (!begin_kernel(s.name, s.name.op_name, s.place, t, k)) return;
  record::CapturedList inputs, outputs;
  for (const graph::StatsRow &r : s.rows) {
    record::CapturedList &side = r.io == format::IoKind::Output ? outputs : inputs;
    if (side.size() <= (size_t)r.index) side.resize((size_t)r.index + 1);
    record::TensorCapture c = describe(r.dtype, r.dtype_name, r.shape, r.format_name);
    if (t.with_data) c.device_stats = std::make_shared<DumpedStats>(stats_of(r));
    side[(size_t)r.index] = record::CapturedArg{std::move(c)};
  }
  if (t.with_inputs) k.inputs = std::move(inputs);
  if (t.with_outputs) k.outputs = std::move(outputs);
  ++kernels;
  session.submit(std::move(k));
}

}  // namespace msprobe::shim
