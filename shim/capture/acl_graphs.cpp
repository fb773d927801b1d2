#include "shim/capture/acl_graphs.h"

#include "shim/base/log.h"

namespace msprobe::shim {
namespace {

class DescribedOnly final : public LaunchStaging {
 public:
  explicit DescribedOnly(std::string note) : note_(std::move(note)) {}
  void take(const TensorMeta &, TensorSide, size_t, int64_t, record::TensorCapture &) override {}
  std::shared_ptr<record::Completion> finish() override { return nullptr; }
  void abandon() override {}
  format::EntryNotes notes() override { return {{"acl_graph", note_}}; }

 private:
  std::string note_;
};

}  // namespace

void AclGraphs::capture_began(const void *stream) {
  std::lock_guard<std::mutex> lk(mu_);
  Graph g;
  g.name = "acl_graph_" + std::to_string(next_++);
  if (by_stream_.insert_or_assign(stream, std::move(g)).second) capturing_.fetch_add(1);
}

void AclGraphs::capture_ended(const void *stream, const void *model_ri) {
  std::lock_guard<std::mutex> lk(mu_);
  auto it = by_stream_.find(stream);
  if (it == by_stream_.end()) return;
  by_model_[model_ri] = std::move(it->second);
  by_stream_.erase(it);
  capturing_.fetch_sub(1);
}

void AclGraphs::replaying(const void *model_ri) {
  std::lock_guard<std::mutex> lk(mu_);
  auto it = by_model_.find(model_ri);
  if (it == by_model_.end() || it->second.said) return;
  it->second.said = true;
  const Graph &g = it->second;
  log_warn(
      "ACL graph %s (%llu kernels captured at step %llu, aclmdlRICaptureBegin ... aclmdlRICaptureEnd) is replayed "
      "with aclmdlRIExecuteAsync: its replays run on the device with no host call per kernel and are not captured "
      "kernel by kernel; its kernels are in the dump once, from the capture, described without data",
      g.name.c_str(), (unsigned long long)g.kernels, (unsigned long long)g.step);
}

void AclGraphs::destroyed(const void *model_ri) {
  std::lock_guard<std::mutex> lk(mu_);
  by_model_.erase(model_ri);
}

std::optional<std::string> AclGraphs::capturing_stream(const void *stream, uint64_t step) {
  std::lock_guard<std::mutex> lk(mu_);
  auto it = by_stream_.find(stream);
  if (it == by_stream_.end()) return std::nullopt;
  if (it->second.kernels++ == 0) it->second.step = step;
  return it->second.name;
}

std::unique_ptr<LaunchStaging> AclGraphs::staging_for(const std::string &graph) {
  return std::make_unique<DescribedOnly>(
      "launched into ACL graph " + graph +
      " while it was being captured: recorded there, not run; no data taken (a copy on the capturing stream would be "
      "captured too)");
}

}  // namespace msprobe::shim
