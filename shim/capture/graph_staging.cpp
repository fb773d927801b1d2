// The staging of a kernel launched into an ACL graph being captured (acl_graphs.h): each tensor is copied
// device-to-device, on the capturing stream, into device memory the graph owns, so the copy is part of the graph and
// runs at every replay; the replay's readback takes the snapshots to the host.
#include <utility>

#include "acl/acl.h"
#include "shim/capture/acl_graphs.h"
#include "shim/device/acl_types.h"
#include "shim/device/runtime_api.h"

namespace msprobe::shim {
namespace {

class GraphStaging final : public LaunchStaging {
 public:
  GraphStaging(AclGraphs &graphs, void *stream, bool with_data)
      : graphs_(graphs), stream_(stream), with_data_(with_data) {}

  void take(const TensorMeta &m, TensorSide, size_t, int64_t, record::TensorCapture &t) override {
    AclGraphs::Kernel::Snapshot snap;
    int64_t lo = 0, hi = 0;
    const size_t es = acl_dtype_size(m.dtype);
    if (with_data_ && t.dtype != format::DType::Raw && es != 0 && m.data != nullptr && m.extent(&lo, &hi)) {
      const uint64_t bytes = (uint64_t)(hi - lo + 1) * es;
      const void *first = static_cast<const char *>(m.data) + lo * (int64_t)es;
      if (void *dev = graphs_.snapshot_buffer(stream_, bytes)) {
        if (graphs_.copy_or_defer(stream_, {dev, first, bytes})) snap = {dev, bytes, m.offset - lo};
      } else {
        over_budget_ = true;
      }
    }
    snapshots_.push_back(snap);
  }
  std::shared_ptr<record::Completion> finish() override { return nullptr; }
  void abandon() override {}  // the copies recorded stay in the graph (it owns their memory)
  std::vector<AclGraphs::Kernel::Snapshot> take_snapshots() { return std::move(snapshots_); }
  bool over_budget() const { return over_budget_; }

 private:
  AclGraphs &graphs_;
  void *stream_;
  bool with_data_;
  bool over_budget_ = false;
  std::vector<AclGraphs::Kernel::Snapshot> snapshots_;
};

}  // namespace

std::unique_ptr<LaunchStaging> AclGraphs::staging_for(void *stream, bool with_data, uint64_t budget) {
  {
    std::lock_guard<std::mutex> lk(mu_);
    budget_ = budget;
  }
  return std::make_unique<GraphStaging>(*this, stream, with_data);
}

// The snapshots of a GraphStaging, for kernel_captured().
std::vector<AclGraphs::Kernel::Snapshot> graph_snapshots(LaunchStaging *staging, bool *over_budget) {
  auto *g = dynamic_cast<GraphStaging *>(staging);
  if (g == nullptr) return {};
  *over_budget = g->over_budget();
  return g->take_snapshots();
}

bool AclGraphs::copy_or_defer(void *stream, const Copy &c) {
  {
    std::lock_guard<std::mutex> lk(mu_);
    auto open = open_groups_.find(stream);
    if (open != open_groups_.end()) {  // a task group takes kernels only: copied when it ends
      deferred_[stream].push_back(c);
      return true;
    }
  }
  auto memcpy_async = runtime::aclrtMemcpyAsync.get();
  return memcpy_async != nullptr &&
         memcpy_async(c.device, c.bytes, c.source, c.bytes, ACL_MEMCPY_DEVICE_TO_DEVICE, stream) == ACL_SUCCESS;
}

}  // namespace msprobe::shim
