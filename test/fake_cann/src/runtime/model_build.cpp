// Models built from bound streams and their labels (runtime api_c_model.cc, feature/model/model.cc, launch/label.cc):
// aclmdlRIBuildBegin makes an empty model; a persistent stream bound to it (aclmdlRIBindStream) no longer runs what it
// receives: each task becomes part of the model, on that stream's lane. aclrtSetLabel marks a place on a bound stream
// (a LABEL_SET task), aclrtSwitchLabelByIndex jumps to a label of a list by a uint32 index read from device memory when
// the switch runs (beyond the list: its last label), aclmdlRIEndTask ends the stream's part, aclmdlRIBuildEnd completes
// the model. aclmdlRIExecuteAsync runs the head streams' lanes at once (flag ACL_MODEL_STREAM_FLAG_HEAD, 0); the
// others wait for an activation the stand-in does not offer. A switch jumps within its own stream only.
#include <cstring>
#include <exception>
#include <mutex>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "acl/acl_base.h"
#include "fakecann/stream.h"
#include "fakecann/tensor_io.h"
#include "stream_impl.h"

namespace fakecann {

namespace {

std::set<Label *> *g_labels = new std::set<Label *>;  // live labels (under registry_mutex())

constexpr uint32_t kHeadFlag = 0x0, kDefaultFlag = 0x7FFFFFFF;
constexpr uint32_t kPersistent = 0x4, kFastLaunch = 0x1;  // ACL_STREAM_PERSISTENT, ACL_STREAM_FAST_LAUNCH

int refuse(int code, const std::string &why) {
  set_error_message(why);
  return rt_error(code);
}

// Under registry_mutex(): a live model made by aclmdlRIBuildBegin.
bool live_built(CapturedModel *m) { return model_live(m) && m->built; }

void run_lane(CapturedModel *m, size_t lane) {
  for (size_t i = 0;;) {
    Task t;
    {
      std::lock_guard<std::mutex> mk(m->mu);
      if (i >= m->lanes[lane].tasks.size()) return;
      t = m->lanes[lane].tasks[i];
    }
    if (!t.jump) {
      t.run();
      ++i;
      continue;
    }
    i = t.jump(i);
    if (i == kLaneEnd) return;
  }
}

// The label a switch lands on: the list's entry for the index at `index_ptr`, clamped to the list.
size_t switch_target(const void *index_ptr, uint32_t count, const void *list, CapturedModel *m, size_t lane) {
  uint32_t idx;
  std::memcpy(&idx, device_bytes(index_ptr, 4), 4);
  if (idx >= count) idx = count - 1;
  Label *l;
  std::memcpy(&l, static_cast<const char *>(device_bytes(list, 8ull * count)) + 8ull * idx, 8);
  {
    std::lock_guard<std::mutex> rk(registry_mutex());
    if (g_labels->count(l) == 0) throw KernelError("label switch: label " + std::to_string(idx) + " was destroyed");
  }
  if (l->model != m || l->lane != lane)
    throw KernelError("label switch: label " + std::to_string(idx) + " is not set on this stream of the model");
  return l->index;
}

}  // namespace

int model_build_begin(uint32_t flag, CapturedModel **out) {
  if (flag != 0) return refuse(ACL_ERROR_RT_PARAM_INVALID, "aclmdlRIBuildBegin: flag must be 0");
  auto *m = new CapturedModel;
  m->built = true;
  std::lock_guard<std::mutex> rk(registry_mutex());
  register_model(m);
  *out = m;
  return 0;
}

int model_bind_stream(CapturedModel *m, Stream *s, uint32_t flag) {
  if (flag != kHeadFlag && flag != kDefaultFlag)
    return refuse(ACL_ERROR_RT_PARAM_INVALID, "aclmdlRIBindStream: flag must be HEAD (0) or DEFAULT (0x7FFFFFFF)");
  if ((stream_flags(s) & kPersistent) == 0)
    return refuse(ACL_ERROR_RT_PARAM_INVALID, "aclmdlRIBindStream: a non-persistent stream cannot be bound");
  std::lock_guard<std::mutex> rk(registry_mutex());
  if (!live_built(m) || m->ended)
    return refuse(ACL_ERROR_RT_PARAM_INVALID, "aclmdlRIBindStream: not a model being built by aclmdlRIBuildBegin");
  std::lock_guard<std::mutex> lk(s->mu);
  if (s->bound != nullptr) return refuse(ACL_ERROR_RT_STREAM_MODEL, "aclmdlRIBindStream: the stream is bound already");
  if (s->capture != nullptr) return refuse(ACL_ERROR_RT_STREAM_CAPTURED, "aclmdlRIBindStream: the stream captures");
  if (s->failure_mode != 0 || (s->flags & kFastLaunch) != 0)
    return refuse(ACL_ERROR_RT_FEATURE_NOT_SUPPORT, "aclmdlRIBindStream: stop mode or ACL_STREAM_FAST_LAUNCH");
  std::lock_guard<std::mutex> mk(m->mu);
  m->lanes.push_back(Lane{s, flag == kHeadFlag, {}});
  s->bound = m;
  s->lane = m->lanes.size() - 1;
  return 0;
}

int model_unbind_stream(CapturedModel *m, Stream *s) {
  std::lock_guard<std::mutex> rk(registry_mutex());
  std::lock_guard<std::mutex> lk(s->mu);
  if (!live_built(m) || s->bound != m)
    return refuse(ACL_ERROR_RT_STREAM_MODEL, "aclmdlRIUnbindStream: the stream is not bound to this model");
  std::lock_guard<std::mutex> mk(m->mu);
  m->lanes[s->lane].stream = nullptr;
  s->bound = nullptr;
  return 0;
}

void release_bound_streams(CapturedModel *m) {
  for (Lane &l : m->lanes) {
    if (l.stream == nullptr) continue;
    std::lock_guard<std::mutex> lk(l.stream->mu);
    l.stream->bound = nullptr;
    l.stream = nullptr;
  }
}

int model_end_task(CapturedModel *m, Stream *s) {
  {
    std::lock_guard<std::mutex> rk(registry_mutex());
    std::lock_guard<std::mutex> lk(s->mu);
    if (!live_built(m) || s->bound != m)
      return refuse(ACL_ERROR_RT_STREAM_MODEL, "aclmdlRIEndTask: the stream is not bound to this model");
  }
  Task t;
  t.what = "END_GRAPH";
  t.jump = [](size_t) { return kLaneEnd; };
  stream_enqueue_task(s, std::move(t));
  return 0;
}

int model_build_end(CapturedModel *m) {
  std::lock_guard<std::mutex> rk(registry_mutex());
  if (!live_built(m)) return refuse(ACL_ERROR_RT_PARAM_INVALID, "aclmdlRIBuildEnd: not a model being built");
  m->ended = true;
  return 0;
}

void run_built_model(CapturedModel *m) {
  std::vector<size_t> heads;
  {
    std::lock_guard<std::mutex> mk(m->mu);
    for (size_t i = 0; i < m->lanes.size(); ++i)
      if (m->lanes[i].head) heads.push_back(i);
  }
  if (heads.empty()) return;
  std::vector<std::thread> others;
  std::vector<std::exception_ptr> failed(heads.size());
  for (size_t k = 1; k < heads.size(); ++k)
    others.emplace_back([&, k] {
      try {
        run_lane(m, heads[k]);
      } catch (...) {
        failed[k] = std::current_exception();
      }
    });
  try {
    run_lane(m, heads[0]);
  } catch (...) {
    failed[0] = std::current_exception();
  }
  for (std::thread &t : others) t.join();
  for (std::exception_ptr &e : failed)
    if (e) std::rethrow_exception(e);
}

Label *label_create() {
  auto *l = new Label;
  std::lock_guard<std::mutex> rk(registry_mutex());
  g_labels->insert(l);
  return l;
}

bool label_destroy(Label *l) {
  {
    std::lock_guard<std::mutex> rk(registry_mutex());
    if (g_labels->erase(l) == 0) return false;
  }
  delete l;
  return true;
}

bool label_live(Label *l) {
  std::lock_guard<std::mutex> rk(registry_mutex());
  return g_labels->count(l) != 0;
}

int label_set(Label *l, Stream *s) {
  CapturedModel *m;
  size_t lane;
  {
    std::lock_guard<std::mutex> rk(registry_mutex());
    if (g_labels->count(l) == 0) return refuse(ACL_ERROR_RT_PARAM_INVALID, "aclrtSetLabel: not a live label");
    std::lock_guard<std::mutex> lk(s->mu);
    if (s->bound == nullptr) return refuse(ACL_ERROR_RT_STREAM_MODEL, "aclrtSetLabel: the stream is not bound");
    if (l->model != nullptr) return refuse(ACL_ERROR_RT_INTERNAL_ERROR, "aclrtSetLabel: the label is set already");
    m = s->bound;
    lane = s->lane;
    std::lock_guard<std::mutex> mk(m->mu);
    l->model = m;
    l->lane = lane;
    l->index = m->lanes[lane].tasks.size();
  }
  stream_enqueue(
      s, [] {}, "LABEL_SET");
  return 0;
}

int label_switch_by_index(const void *index_ptr, uint32_t count, const void *list, Stream *s) {
  CapturedModel *m;
  size_t lane;
  {
    std::lock_guard<std::mutex> lk(s->mu);
    if (s->bound == nullptr)
      return refuse(ACL_ERROR_RT_STREAM_MODEL, "aclrtSwitchLabelByIndex: the stream is not bound to a model");
    m = s->bound;
    lane = s->lane;
  }
  if (count == 0) return refuse(ACL_ERROR_RT_PARAM_INVALID, "aclrtSwitchLabelByIndex: maxValue must not be 0");
  Task t;
  t.what = "LABEL_SWITCH_BY_INDEX";
  t.jump = [=](size_t) { return switch_target(index_ptr, count, list, m, lane); };
  stream_enqueue_task(s, std::move(t));
  return 0;
}

}  // namespace fakecann
