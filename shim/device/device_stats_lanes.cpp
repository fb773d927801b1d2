#include "shim/device/device_stats_lanes.h"

#include <algorithm>
#include <mutex>
#include <unordered_map>

#include "shim/base/reentry.h"

namespace msprobe::shim::device_stats_internal {

void destroy(Exec &e) {
  if (e.ex) runtime::aclDestroyAclOpExecutor.get()(e.ex);
  e.ex = nullptr;
}

bool rebind(const Exec &e, void *tensor, void *addr) {
  return runtime::aclSetInputTensorAddr.get()(e.ex, 0, tensor, addr) == 0;
}

Node::~Node() {
  for (auto &g : groups) destroy(g->exec);
  for (Exec *e : {&aminmax, &mean, &norm}) destroy(*e);
}

Lane::~Lane() {
  root.children.clear();  // executors first, then the memory they point at
  device_free(block);
}

namespace {

// Lanes not in use, by stream; and how many exist.
struct Lanes {
  std::mutex mu;
  std::unordered_map<void *, std::vector<Lane *>> idle;
  size_t live = 0;
};

Lanes &lanes() {
  static auto *l = new Lanes;  // immortal, as the pool
  return *l;
}

}  // namespace

Lane *check_out(void *stream) {
  {
    Lanes &l = lanes();
    std::lock_guard<std::mutex> lk(l.mu);
    auto it = l.idle.find(stream);
    if (it != l.idle.end() && !it->second.empty()) {
      Lane *lane = it->second.back();
      it->second.pop_back();
      return lane;
    }
  }
  void *block = device_alloc(kBlockBytes);
  if (block == nullptr) return nullptr;
  auto *lane = new Lane;
  lane->stream = stream;
  lane->block = block;
  std::lock_guard<std::mutex> lk(lanes().mu);
  ++lanes().live;
  return lane;
}

void check_in(Lane *lane) {
  if (lane == nullptr) return;
  if (lane->nodes > kMaxNodesPerLane) {
    // Too many places seen (a model of ever-changing shapes): start over. Its last kernels may still be queued:
    // the executors can go (the runtime took what it needed at phase 2), the memory waits for the stream.
    lane->root.children.clear();
    lane->nodes = 0;
  }
  std::lock_guard<std::mutex> lk(lanes().mu);
  lanes().idle[lane->stream].push_back(lane);
}

void release_idle_lanes() {
  std::vector<Lane *> gone;
  {
    std::lock_guard<std::mutex> lk(lanes().mu);
    for (auto &[stream, idle] : lanes().idle) gone.insert(gone.end(), idle.begin(), idle.end());
    lanes().idle.clear();
    lanes().live -= gone.size();
  }
  ReentryGuard guard;
  for (auto *lane : gone) delete lane;
}

Node *node_for(Lane &lane, Node &parent, const NodeKey &key, const TensorMeta &m, const ResultSlots &slots,
               bool *refused) {
  *refused = false;
  for (auto &c : parent.children)
    if (c->key == key) return c.get();
  auto n = std::make_unique<Node>();
  n->key = key;
  n->slots = slots;
  Args &a = n->args;
  const int32_t dt = key.dtype, mean_dt = key.mean_dtype;
  n->view = view_of_host_tensor(a, m, dt);
  n->bound = n->norm_bound = m.data;
  void *out[2];
  for (int i = 0; i < 2; ++i) out[i] = result_slot(a, lane.block, dt, slots.stats[i]);
  bool ok = n->view && out[0] && out[1] && make_repeatable(n->aminmax, op_aminmax, n->view, out[1], out[0]);
  if (ok && !key.extremes_only()) {
    void *dims = all_dims(a, m);
    void *ord = order_two(a);
    void *mean_out = result_slot(a, lane.block, mean_dt, slots.stats[2]);
    void *norm_out = result_slot(a, lane.block, mean_dt, slots.stats[3]);
    ok = dims && ord && mean_out && norm_out &&
         make_repeatable(n->mean, op_mean, n->view, dims, false, mean_dt, mean_out);
    // The tensor's own norm: what serves when no aclnnForeachNorm does (made now, so that a refusal still leaves the
    // host path open for this tensor).
    ok = ok && make_repeatable(n->norm, op_norm, n->view, ord, dims, false, mean_dt, norm_out);
  }
  if (!ok) {
    *refused = true;
    return nullptr;  // the node's destructor lets go of whatever was made
  }
  ++lane.nodes;
  parent.children.push_back(std::move(n));
  return parent.children.back().get();
}

// One aclnnForeachNorm per dtype, up to 256 tensors each, of the tensors whose norm is in their own dtype (with
// MSPROBE_PRECISION=high an fp16 tensor's norm is a float32: aclnnForeachNorm writes x's dtype). Without
// aclnnForeachNorm, or if the runtime refuses one, each tensor's own norm serves.
void make_norm_groups(Lane &lane, Node &end, const Side &side) {
  if (!op_foreach_norm.phase1.resolve() || !op_foreach_norm.phase2.resolve()) return;
  std::vector<std::unique_ptr<NormGroup>> groups;
  for (size_t i = 0; i < side.size(); ++i) {
    const NodeKey &k = side[i].first->key;
    if (k.mean_dtype != k.dtype || k.extremes_only()) continue;
    NormGroup *g = nullptr;
    for (auto &c : groups)
      if (side[c->members.front()].first->key.dtype == k.dtype && c->members.size() < kForeachMax) g = c.get();
    if (g == nullptr) g = groups.emplace_back(std::make_unique<NormGroup>()).get();
    g->members.push_back(i);
  }
  for (auto &g : groups) {
    if (g->members.size() < 2) continue;  // one tensor: its own norm is one launch all the same
    Args &a = g->args;
    std::vector<void *> views, outs;
    for (size_t i : g->members) {
      const Node &n = *side[i].first;
      // The layout the node was made for, at the address its view holds. Format ND: aclnnForeachNorm wants each
      // output's format to be its x's, and the NCHW/NHWC views this path takes are laid out as ND ones.
      TensorMeta m;
      m.dtype = n.key.dtype, m.format = kFormatNd, m.ndim = n.key.ndim, m.storage_ndim = n.key.storage_ndim;
      m.offset = n.key.offset, m.shape = n.key.shape, m.strides = n.key.strides, m.storage = n.key.storage;
      m.data = n.bound;
      views.push_back(view_of_host_tensor(a, m, m.dtype));
      g->nodes.push_back(&n);
      g->bound.push_back(n.bound);
    }
    bool ok = std::find(views.begin(), views.end(), nullptr) == views.end();
    void *x = ok ? a.keep_list(runtime::aclCreateTensorList.get()(views.data(), views.size()), views.size()) : nullptr;
    for (size_t i : g->members) {
      const Node &n = *side[i].first;
      if (x) outs.push_back(result_slot(a, lane.block, n.key.dtype, n.slots.stats[3]));
    }
    ok = x && std::find(outs.begin(), outs.end(), nullptr) == outs.end();
    void *out = ok ? a.keep_list(runtime::aclCreateTensorList.get()(outs.data(), outs.size()), outs.size()) : nullptr;
    void *ord = out ? order_two(a) : nullptr;
    g->list = x;
    if (!ord || !make_repeatable(g->exec, op_foreach_norm, x, ord, out)) return;  // refused: own norms serve
  }
  for (auto &g : groups)
    if (g->members.size() >= 2) end.groups.push_back(std::move(g));
}

}  // namespace msprobe::shim::device_stats_internal
