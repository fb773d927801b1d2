#include "shim/capture/acl_graphs.h"

#include <algorithm>
#include <variant>

#include "acl/acl.h"
#include "shim/base/log.h"
#include "shim/base/reentry.h"
#include "shim/device/runtime_api.h"
#include "shim/device/staging.h"

namespace msprobe::shim {

// graph_staging.cpp: the snapshots a GraphStaging took (and whether one was over the budget).
std::vector<AclGraphs::Kernel::Snapshot> graph_snapshots(LaunchStaging *staging, bool *over_budget);

struct AclGraphs::Graph {
  std::string name;
  std::vector<Kernel> captured;  // in launch order
  std::vector<void *> buffers;   // the snapshots' device memory
  uint64_t bytes = 0;            // ... their size
  std::vector<std::string> over_budget;
  uint64_t replays = 0;
  void *last_stream = nullptr;  // of the last readback, which `event` follows
  void *event = nullptr;
};

namespace {

using Snapshot = AclGraphs::Kernel::Snapshot;

// Points the tensors of `list` (a replay's copy of the capture's description) at the host copies of their snapshots,
// enqueued on `stream`; *missing: a tensor went without data.
void read_back(record::CapturedList &list, const std::vector<Snapshot> &snaps, size_t &next, Staging *staging,
               void *stream, bool *missing) {
  for (record::CapturedArg &arg : list) {
    if (auto *l = std::get_if<record::CapturedList>(&arg.v)) {
      read_back(*l, snaps, next, staging, stream, missing);
      continue;
    }
    auto *t = std::get_if<record::TensorCapture>(&arg.v);
    if (t == nullptr) continue;
    const Snapshot s = next < snaps.size() ? snaps[next] : Snapshot{};
    ++next;
    if (staging == nullptr) continue;  // described only (structure)
    if (s.device != nullptr) {
      t->block = staging->copy_async(s.device, s.bytes, stream);
      t->block_offset = s.block_offset;
    }
    *missing = *missing || t->block == nullptr;
  }
}

}  // namespace

AclGraphs::AclGraphs() = default;
AclGraphs::~AclGraphs() = default;

void AclGraphs::capture_began(const void *stream) {
  std::lock_guard<std::mutex> lk(mu_);
  auto g = std::make_unique<Graph>();
  g->name = "acl_graph_" + std::to_string(next_++);
  if (by_stream_.insert_or_assign(stream, std::move(g)).second) capturing_.fetch_add(1);
}

void AclGraphs::capture_ended(const void *stream, const void *model_ri) {
  std::lock_guard<std::mutex> lk(mu_);
  auto it = by_stream_.find(stream);
  if (it == by_stream_.end()) return;
  Graph &g = *it->second;
  if (!g.over_budget.empty()) say_over_budget(g);
  by_model_[model_ri] = std::move(it->second);
  by_stream_.erase(it);
  open_groups_.erase(stream);
  deferred_.erase(stream);
  capturing_.fetch_sub(1);
}

void AclGraphs::capture_failed(void *stream) {
  int32_t status = ACL_MODEL_RI_CAPTURE_STATUS_ACTIVE;
  void *model = nullptr;
  auto info = runtime::aclmdlRICaptureGetInfo.get();
  if (info == nullptr || info(stream, &status, &model) != ACL_SUCCESS || status != ACL_MODEL_RI_CAPTURE_STATUS_NONE)
    return;
  std::unique_ptr<Graph> g;
  {
    std::lock_guard<std::mutex> lk(mu_);
    auto it = by_stream_.find(stream);
    if (it == by_stream_.end()) return;
    g = std::move(it->second);
    by_stream_.erase(it);
    open_groups_.erase(stream);
    deferred_.erase(stream);
    capturing_.fetch_sub(1);
    snapshot_bytes_ -= std::min(snapshot_bytes_, g->bytes);
  }
  if (auto free_device = runtime::aclrtFree.get())
    for (void *b : g->buffers) free_device(b);  // the dropped graph's copies never run
}

void AclGraphs::say_over_budget(Graph &g) {
  std::string kernels;
  for (const std::string &k : g.over_budget) kernels += (kernels.empty() ? "" : ", ") + k;
  log_warn(
      "ACL graph %s: the copies of its kernels' tensors would hold more than MSPROBE_BUFFER_MB (%llu bytes) of device "
      "memory: at its replays these kernels are described without (some of) their tensors' data: %s",
      g.name.c_str(), (unsigned long long)budget_, kernels.c_str());
}

void AclGraphs::replaying(const void *model_ri, void *stream) {
  std::lock_guard<std::mutex> lk(mu_);
  auto it = by_model_.find(model_ri);
  if (it == by_model_.end()) return;
  Graph &g = *it->second;
  // The replay overwrites the snapshots: on another stream it must wait for the last readback of them.
  if (g.event != nullptr && g.last_stream != stream)
    if (auto wait = runtime::aclrtStreamWaitEvent.get()) wait(stream, g.event);
}

void AclGraphs::replayed(const void *model_ri, void *stream, const BeginLaunch &begin, const Submit &submit) {
  ReentryGuard guard;
  std::lock_guard<std::mutex> lk(mu_);
  auto it = by_model_.find(model_ri);
  if (it == by_model_.end()) return;
  Graph &g = *it->second;
  const uint64_t replay = g.replays++;
  if (!staging_) staging_ = std::make_unique<Staging>(budget_ != 0 ? budget_ : uint64_t{1024} << 20);
  std::vector<record::KernelCapture> kernels;
  for (const Kernel &gk : g.captured) {
    const bool named = gk.named && !gk.named->empty();
    const Ticket t = begin(gk.op_type, named ? *gk.named : gk.op_name);
    if (!t.capture) continue;
    record::KernelCapture k;
    static_cast<format::KernelHeader &>(k) = t.header;
    k.stack_id = gk.stack_id;
    record::CapturedList inputs = gk.inputs, outputs = gk.outputs;
    size_t next = 0;
    bool missing = false;
    Staging *staging = t.with_data ? staging_.get() : nullptr;
    read_back(inputs, gk.snapshots, next, staging, stream, &missing);
    read_back(outputs, gk.snapshots, next, staging, stream, &missing);
    if (t.with_inputs) k.inputs = std::move(inputs);
    if (t.with_outputs) k.outputs = std::move(outputs);
    std::string note = "replay " + std::to_string(replay) + " of ACL graph " + g.name + " (stack from the capture)";
    if (missing) note += "; some tensors without data (over MSPROBE_BUFFER_MB at capture, or not copyable)";
    k.notes = {{"acl_graph", std::move(note)}};
    kernels.push_back(std::move(k));
  }
  auto done = staging_->fence(stream);
  if (g.event == nullptr)
    if (auto create = runtime::aclrtCreateEvent.get()) create(&g.event);
  if (g.event != nullptr)
    if (auto record = runtime::aclrtRecordEvent.get()) record(g.event, stream);
  g.last_stream = stream;
  for (record::KernelCapture &k : kernels) {
    k.ready = done;
    submit(std::move(k));
  }
}

void AclGraphs::destroyed(const void *model_ri) {
  std::unique_ptr<Graph> g;
  {
    std::lock_guard<std::mutex> lk(mu_);
    auto it = by_model_.find(model_ri);
    if (it == by_model_.end()) return;
    g = std::move(it->second);
    by_model_.erase(it);
    for (auto gi = groups_.begin(); gi != groups_.end();)
      gi = gi->second.first == g.get() ? groups_.erase(gi) : std::next(gi);
  }
  ReentryGuard guard;
  // The last readback may still be copying the snapshots (the host destroyed the graph right after its replay).
  if (g->event != nullptr) {
    if (auto sync = runtime::aclrtSynchronizeEvent.get()) sync(g->event);
    if (auto destroy = runtime::aclrtDestroyEvent.get()) destroy(g->event);
  }
  auto free_device = runtime::aclrtFree.get();
  for (void *b : g->buffers)
    if (free_device != nullptr) free_device(b);
  std::lock_guard<std::mutex> lk(mu_);
  snapshot_bytes_ -= std::min(snapshot_bytes_, g->bytes);
}

std::optional<std::string> AclGraphs::capturing_stream(const void *stream) {
  std::lock_guard<std::mutex> lk(mu_);
  auto it = by_stream_.find(stream);
  if (it == by_stream_.end()) return std::nullopt;
  return it->second->name;
}

void *AclGraphs::snapshot_buffer(const void *stream, uint64_t bytes) {
  std::lock_guard<std::mutex> lk(mu_);
  auto it = by_stream_.find(stream);
  if (it == by_stream_.end() || snapshot_bytes_ + bytes > budget_) return nullptr;
  auto malloc_device = runtime::aclrtMalloc.get();
  void *dev = nullptr;
  if (malloc_device == nullptr || malloc_device(&dev, bytes, ACL_MEM_MALLOC_HUGE_FIRST) != ACL_SUCCESS) return nullptr;
  it->second->buffers.push_back(dev);
  it->second->bytes += bytes;
  snapshot_bytes_ += bytes;
  return dev;
}

void AclGraphs::kernel_captured(const void *stream, Kernel k, LaunchStaging *staging) {
  bool over = false;
  k.snapshots = graph_snapshots(staging, &over);
  std::lock_guard<std::mutex> lk(mu_);
  auto it = by_stream_.find(stream);
  if (it == by_stream_.end()) return;
  Graph &g = *it->second;
  if (over) g.over_budget.push_back(k.op_type + " (kernel " + std::to_string(g.captured.size()) + ")");
  auto open = open_groups_.find(stream);
  if (open != open_groups_.end()) open->second.second.push_back(g.captured.size());
  g.captured.push_back(std::move(k));
}

// ---- task groups and their update ----

void AclGraphs::group_began(const void *stream) {
  std::lock_guard<std::mutex> lk(mu_);
  auto it = by_stream_.find(stream);
  if (it != by_stream_.end()) open_groups_[stream] = {it->second.get(), {}};
}

void AclGraphs::group_ended(void *stream, const void *handle) {
  std::vector<Copy> copies;
  {
    std::lock_guard<std::mutex> lk(mu_);
    auto open = open_groups_.find(stream);
    if (open == open_groups_.end()) return;
    groups_[handle] = std::move(open->second);
    open_groups_.erase(open);
    copies = std::move(deferred_[stream]);
    deferred_.erase(stream);
  }
  ReentryGuard guard;
  auto memcpy_async = runtime::aclrtMemcpyAsync.get();
  for (const Copy &c : copies)  // still capturing: these copies are the graph's, after the group
    if (memcpy_async != nullptr)
      memcpy_async(c.device, c.bytes, c.source, c.bytes, ACL_MEMCPY_DEVICE_TO_DEVICE, stream);
}

void AclGraphs::update_began(const void *stream, const void *handle) {
  std::lock_guard<std::mutex> lk(mu_);
  if (groups_.count(handle) == 0) return;
  if (updates_.insert_or_assign(stream, std::make_pair(handle, size_t{0})).second) updating_.fetch_add(1);
}

void AclGraphs::update_ended(const void *stream) {
  std::lock_guard<std::mutex> lk(mu_);
  if (updates_.erase(stream) != 0) updating_.fetch_sub(1);
}

bool AclGraphs::updating_stream(const void *stream) {
  std::lock_guard<std::mutex> lk(mu_);
  return updates_.count(stream) != 0;
}

void AclGraphs::kernel_updated(const void *stream, Kernel k) {
  std::lock_guard<std::mutex> lk(mu_);
  auto u = updates_.find(stream);
  if (u == updates_.end()) return;
  auto grp = groups_.find(u->second.first);
  if (grp == groups_.end() || u->second.second >= grp->second.second.size()) return;
  Graph &g = *grp->second.first;
  Kernel &old = g.captured[grp->second.second[u->second.second++]];
  // The group's kernel holds these arguments from the next replay on; its tensors' copies stay the capture's.
  old.inputs = std::move(k.inputs);
  old.outputs = std::move(k.outputs);
}

}  // namespace msprobe::shim
