// Contexts (docs/zh/dev_guide/06_context_management.md, api_ref/05_context_management.md of CANN's runtime): every
// device has a default context, made by the first aclrtSetDevice on it and reference-counted by the sets and resets;
// aclrtCreateContext makes more, each current on the thread that made it until another is set. A thread runs on one
// context at a time; a context has a default stream (what a NULL stream means there). Also the per-thread error text.
#include <pthread.h>

#include <array>
#include <atomic>
#include <cstdlib>
#include <mutex>
#include <set>
#include <string>

#include "fakecann/stream.h"
#include "stream_impl.h"

namespace fakecann {

struct Context {
  int32_t device = 0;
  bool primary = false;
  std::atomic<bool> live{true};
  std::mutex mu;
  Stream *default_stream = nullptr;  // made on first use
};

namespace {

constexpr int kMaxDevices = 64;

std::mutex g_mu;
std::set<Context *> *g_contexts = new std::set<Context *>;  // leaked: a thread may name one after exit handlers ran
std::array<Context *, kMaxDevices> g_primary{};
std::array<int64_t, kMaxDevices> g_set_count{};  // aclrtSetDevice references of each default context

thread_local Context *t_context = nullptr;
thread_local std::string t_error_message;
// The last runtime failure of this thread (runtime inner_thread_local.cpp globalError_).
thread_local int t_last_rt_error = 0;

void hold_across_fork() {
  static const int once = pthread_atfork([] { g_mu.lock(); }, [] { g_mu.unlock(); }, [] { g_mu.unlock(); });
  (void)once;
}

}  // namespace

int32_t device_count() {
  static int32_t n = [] {
    const char *s = std::getenv("FAKE_CANN_DEVICE_COUNT");
    long v = s ? std::strtol(s, nullptr, 10) : 8;
    return (int32_t)((v >= 1 && v <= kMaxDevices) ? v : 8);
  }();
  return n;
}

Context *primary_context(int32_t dev) {
  if (dev < 0 || dev >= device_count()) return nullptr;
  hold_across_fork();
  std::lock_guard<std::mutex> lk(g_mu);
  if (g_primary[dev] == nullptr) {
    auto *c = new Context;
    c->device = dev;
    c->primary = true;
    g_primary[dev] = c;
    g_contexts->insert(c);
  }
  g_primary[dev]->live = true;
  return g_primary[dev];
}

Context *context_create(int32_t dev) {
  if (dev < 0 || dev >= device_count()) return nullptr;
  hold_across_fork();
  auto *c = new Context;
  c->device = dev;
  std::lock_guard<std::mutex> lk(g_mu);
  g_contexts->insert(c);
  return c;
}

bool context_destroy(Context *c) {
  {
    std::lock_guard<std::mutex> lk(g_mu);
    if (c == nullptr || g_contexts->count(c) == 0 || c->primary || !c->live) return false;
    c->live = false;
  }
  if (t_context == c) t_context = nullptr;
  return true;
}

bool context_live(Context *c) {
  std::lock_guard<std::mutex> lk(g_mu);
  return c != nullptr && g_contexts->count(c) != 0 && c->live;
}

int32_t context_device(Context *c) { return c->device; }

Stream *context_default_stream(Context *c) {
  std::lock_guard<std::mutex> lk(c->mu);
  if (c->default_stream == nullptr) c->default_stream = make_default_stream(c);
  return c->default_stream;
}

Context *current_context() {
  Context *c = t_context;
  return c != nullptr && c->live ? c : nullptr;
}

void set_current_context(Context *c) { t_context = c; }

void device_retain(int32_t dev) {
  std::lock_guard<std::mutex> lk(g_mu);
  if (dev >= 0 && dev < kMaxDevices) ++g_set_count[dev];
}

void device_release(int32_t dev, bool force) {
  Context *primary;
  {
    std::lock_guard<std::mutex> lk(g_mu);
    if (dev < 0 || dev >= kMaxDevices) return;
    if (g_set_count[dev] > 0) --g_set_count[dev];
    if (force) g_set_count[dev] = 0;
    if (g_set_count[dev] != 0) return;
    primary = g_primary[dev];
  }
  if (primary != nullptr && t_context == primary) t_context = nullptr;
}

int32_t current_device() {
  Context *c = current_context();
  return c != nullptr ? c->device : -1;
}

void set_current_device(int32_t dev) { t_context = dev < 0 ? nullptr : primary_context(dev); }

void set_error_message(const std::string &msg) { t_error_message = msg; }
const char *error_message() { return t_error_message.empty() ? nullptr : t_error_message.c_str(); }

int rt_error(int code) {
  if (code != 0) t_last_rt_error = code;
  return code;
}

int last_rt_error(bool clear) {
  const int code = t_last_rt_error;
  if (clear) t_last_rt_error = 0;
  return code;
}

}  // namespace fakecann
