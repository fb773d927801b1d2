// Which object called the runtime (see fakecann/caller.h), and the copy-counter report written at exit.
#include "fakecann/caller.h"

#include <dlfcn.h>
#include <execinfo.h>
#include <fcntl.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <map>
#include <mutex>
#include <string>

#include "fakecann/device.h"

namespace fakecann {
namespace {

thread_local int t_depth = 0;
thread_local const void *t_return_address = nullptr;  // of the outermost scope
thread_local int t_preloaded = -1;                    // -1: not decided yet

// Only the copy-counter report asks who called: without it, a scope costs two thread-local stores, as the
// real runtime's entry points cost nothing of the kind (the check walks the stack and calls dladdr).
bool counters_requested() {
  static const bool on = [] {
    const char *p = std::getenv("FAKE_CANN_COPY_COUNTERS");
    return p != nullptr && *p != '\0';
  }();
  return on;
}

std::string base_name(const char *path) {
  const char *slash = std::strrchr(path, '/');
  return slash ? slash + 1 : path;
}

bool preloaded_name(const std::string &base) {
  const char *list = std::getenv("LD_PRELOAD");
  if (list == nullptr || base.empty()) return false;
  std::string all(list);
  size_t start = 0;
  while (start <= all.size()) {
    size_t end = all.find_first_of(": ", start);
    if (end == std::string::npos) end = all.size();
    if (end > start && base_name(all.substr(start, end - start).c_str()) == base) return true;
    start = end + 1;
  }
  return false;
}

}  // namespace

bool address_in_preloaded_object(const void *address) {
  Dl_info info;
  if (address == nullptr || dladdr(address, &info) == 0 || info.dli_fname == nullptr) return false;
  static std::mutex mu;
  static auto *known = new std::map<const void *, bool>;  // object base -> preloaded
  std::lock_guard<std::mutex> lk(mu);
  auto [it, fresh] = known->try_emplace(info.dli_fbase, false);
  if (fresh) it->second = preloaded_name(base_name(info.dli_fname));
  return it->second;
}

bool call_from_preloaded_code(const void *return_address) {
  if (!address_in_preloaded_object(return_address)) return false;
  // A tool forwards the host's own calls from its hooks: there the preloaded caller was itself called by
  // the host (or by a trampoline outside any object). The frame above the caller tells the two apart.
  void *frames[24];
  int n = backtrace(frames, 24);
  for (int i = 0; i + 1 < n; ++i)
    if (frames[i] == return_address) return address_in_preloaded_object(frames[i + 1]);
  return true;  // the caller's frame was not found (a tail call): the direct caller decides
}

CallerScope::CallerScope(const void *return_address) : outermost_(t_depth++ == 0) {
  if (outermost_) {
    t_return_address = return_address;
    t_preloaded = -1;
  }
}

CallerScope::~CallerScope() { --t_depth; }

// Decided on first use, while the caller's frames are still on the stack (the scope is open).
bool CallerScope::preloaded() {
  if (t_depth == 0 || !counters_requested()) return false;
  if (t_preloaded < 0) t_preloaded = call_from_preloaded_code(t_return_address) ? 1 : 0;
  return t_preloaded == 1;
}

namespace {

int open_log(const char *suffix) {
  const char *path = std::getenv("FAKE_CANN_LAUNCH_LOG");
  if (path == nullptr || *path == '\0') return -1;
  return ::open((std::string(path) + suffix).c_str(), O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644);
}

}  // namespace

void log_model_kernel(const char *op_type, const char *node_name) {
  static int fd = open_log(".model");
  if (fd < 0) return;
  std::string line = std::string(op_type) + " " + node_name + "\n";
  ssize_t n = ::write(fd, line.data(), line.size());
  (void)n;
}

void log_kernel_launch(const char *op, const void *caller) {
  static int host_fd = open_log("");
  // Without a log, no caller check either: it walks the stack, which real CANN never does on a launch.
  static const bool logging = std::getenv("FAKE_CANN_LAUNCH_LOG") && *std::getenv("FAKE_CANN_LAUNCH_LOG");
  if (!logging) return;
  bool tool = caller != nullptr && call_from_preloaded_code(caller);
  int fd = host_fd;
  if (tool) {
    static int tool_fd = open_log(".preloaded");
    fd = tool_fd;
  }
  if (fd < 0) return;
  std::string line = std::string(op) + "\n";
  ssize_t n = ::write(fd, line.data(), line.size());  // one write with O_APPEND: lines never interleave
  (void)n;
}

namespace {

// FAKE_CANN_COPY_COUNTERS=<file>: at exit, the bytes copied across the host link as JSON, in total and for
// the calls made from preloaded objects ("%p" in the name becomes the process id, for multi-rank runs).
void write_copy_counters() {
  const char *path = std::getenv("FAKE_CANN_COPY_COUNTERS");
  if (path == nullptr || *path == '\0') return;
  std::string p(path);
  if (size_t at = p.find("%p"); at != std::string::npos) p.replace(at, 2, std::to_string(getpid()));
  FILE *f = std::fopen(p.c_str(), "w");
  if (f == nullptr) return;
  const CopyCounters &c = copy_counters();
  std::fprintf(
      f,
      "{\"h2d\": %llu, \"d2h\": %llu, \"d2d\": %llu, \"h2h\": %llu, "
      "\"preloaded\": {\"h2d\": %llu, \"d2h\": %llu, \"d2d\": %llu, \"h2h\": %llu}}\n",
      (unsigned long long)c.host_to_device.load(), (unsigned long long)c.device_to_host.load(),
      (unsigned long long)c.device_to_device.load(), (unsigned long long)c.host_to_host.load(),
      (unsigned long long)c.preloaded_host_to_device.load(), (unsigned long long)c.preloaded_device_to_host.load(),
      (unsigned long long)c.preloaded_device_to_device.load(), (unsigned long long)c.preloaded_host_to_host.load());
  std::fclose(f);
}

// Registered when libruntime loads, i.e. before any tool's own exit handler, so it runs after them (their
// final copies are counted).
__attribute__((constructor)) void register_counter_report() { std::atexit(write_copy_counters); }

}  // namespace
}  // namespace fakecann
