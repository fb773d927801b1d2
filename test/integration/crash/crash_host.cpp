// A plain ACL host for the process-life tests (test_shim_crash.py, test_shim_process.py): it launches aclnn
// Mul/Add kernels (reached by dlopen + dlsym of libopapi, as frameworks do) with inputs the tests recompute, then
// ends or misbehaves the way `mode` says. It prints `launched N` once N kernels are launched (not synchronized:
// their data may still be in flight when the process dies), and checks every result it reads back itself.
//
//   crash_host MODE N
// Kernel k (counting from 0 in the process): Mul for even k, Add (alpha 1) for odd k, 16 float32 elements,
//   x[j] = 0.5 k + 0.25 j - 1,   y[j] = 1.5 - 0.125 j + 0.01 k.
#include <dlfcn.h>
#include <fcntl.h>
#include <pthread.h>
#include <signal.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <thread>
#include <vector>

#include "acl/acl.h"
#include "aclnn/acl_meta.h"

namespace {

// A real SIGSEGV. Not checked by UBSan, which would report the null store and exit(1) before the fault.
__attribute__((noinline, no_sanitize("undefined"))) void write_through_null() {
  int *volatile null = nullptr;  // not a constant: gcc -O2 would treat a store to a known null as unreachable
  *static_cast<volatile int *>(null) = 1;
}

constexpr int64_t kElems = 16;
using MulWs = aclnnStatus (*)(const aclTensor *, const aclTensor *, aclTensor *, uint64_t *, aclOpExecutor **);
using AddWs = aclnnStatus (*)(const aclTensor *, const aclTensor *, const aclScalar *, aclTensor *, uint64_t *,
                              aclOpExecutor **);
using Run = aclnnStatus (*)(void *, uint64_t, aclOpExecutor *, aclrtStream);

struct OpApi {
  void *handle = nullptr;
  MulWs mul_ws = nullptr;
  AddWs add_ws = nullptr;
  Run mul = nullptr, add = nullptr;
};

OpApi g_api;
int g_mode_flags = RTLD_NOW | RTLD_LOCAL;
std::atomic<int> g_next_kernel{0};

[[noreturn]] void die(const char *what) {
  std::fprintf(stderr, "crash_host: %s failed (%s)\n", what, aclGetRecentErrMsg() ? aclGetRecentErrMsg() : "");
  std::fflush(stderr);
  std::_Exit(90);
}

void check(long rc, const char *what) {
  if (rc != 0) die(what);
}

void open_opapi() {
  const char *home = std::getenv("ASCEND_HOME_PATH");
  std::string path = std::string(home ? home : ".") + "/lib64/libopapi.so";
  g_api.handle = dlopen(path.c_str(), g_mode_flags);
  if (!g_api.handle) die(dlerror());
  g_api.mul_ws = reinterpret_cast<MulWs>(dlsym(g_api.handle, "aclnnMulGetWorkspaceSize"));
  g_api.add_ws = reinterpret_cast<AddWs>(dlsym(g_api.handle, "aclnnAddGetWorkspaceSize"));
  g_api.mul = reinterpret_cast<Run>(dlsym(g_api.handle, "aclnnMul"));
  g_api.add = reinterpret_cast<Run>(dlsym(g_api.handle, "aclnnAdd"));
  if (!g_api.mul_ws || !g_api.add_ws || !g_api.mul || !g_api.add) die("dlsym of aclnnMul/aclnnAdd");
}

// One launched kernel whose output can be checked after a synchronization.
struct Launched {
  int k;
  void *x, *y, *z;
};

std::vector<float> input_x(int k) {
  std::vector<float> v(kElems);
  for (int j = 0; j < kElems; ++j) v[j] = 0.5f * (float)k + 0.25f * (float)j - 1.0f;
  return v;
}

std::vector<float> input_y(int k) {
  std::vector<float> v(kElems);
  for (int j = 0; j < kElems; ++j) v[j] = 1.5f - 0.125f * (float)j + 0.01f * (float)k;
  return v;
}

void *device_copy(const std::vector<float> &host) {
  void *p = nullptr;
  check(aclrtMalloc(&p, kElems * sizeof(float), ACL_MEM_MALLOC_HUGE_FIRST), "aclrtMalloc");
  check(aclrtMemcpy(p, kElems * sizeof(float), host.data(), kElems * sizeof(float), ACL_MEMCPY_HOST_TO_DEVICE),
        "aclrtMemcpy");
  return p;
}

aclTensor *tensor(void *p) {
  const int64_t dims[1] = {kElems}, strides[1] = {1}, storage[1] = {kElems};
  return aclCreateTensor(dims, 1, ACL_FLOAT, strides, 0, ACL_FORMAT_ND, storage, 1, p);
}

Launched launch_one(aclrtStream stream) {
  const int k = g_next_kernel++;
  Launched l{k, device_copy(input_x(k)), device_copy(input_y(k)), nullptr};
  check(aclrtMalloc(&l.z, kElems * sizeof(float), ACL_MEM_MALLOC_HUGE_FIRST), "aclrtMalloc");
  aclTensor *tx = tensor(l.x), *ty = tensor(l.y), *tz = tensor(l.z);
  uint64_t ws = 0;
  aclOpExecutor *ex = nullptr;
  if (k % 2 == 0) {
    check(g_api.mul_ws(tx, ty, tz, &ws, &ex), "aclnnMulGetWorkspaceSize");
    check(g_api.mul(nullptr, 0, ex, stream), "aclnnMul");
  } else {
    float one = 1.0f;
    aclScalar *alpha = aclCreateScalar(&one, ACL_FLOAT);
    check(g_api.add_ws(tx, ty, alpha, tz, &ws, &ex), "aclnnAddGetWorkspaceSize");
    check(g_api.add(nullptr, 0, ex, stream), "aclnnAdd");
    aclDestroyScalar(alpha);
  }
  if (ws != 0) die("unexpected workspace");
  aclDestroyTensor(tx);
  aclDestroyTensor(ty);
  aclDestroyTensor(tz);
  return l;
}

// After a synchronization: the output is what numpy computes; the buffers go.
void verify_and_free(const Launched &l) {
  std::vector<float> z(kElems), x = input_x(l.k), y = input_y(l.k);
  check(aclrtMemcpy(z.data(), kElems * sizeof(float), l.z, kElems * sizeof(float), ACL_MEMCPY_DEVICE_TO_HOST),
        "aclrtMemcpy(D2H)");
  for (int j = 0; j < kElems; ++j) {
    float want = l.k % 2 == 0 ? x[j] * y[j] : x[j] + y[j];
    if (z[j] != want) {
      std::fprintf(stderr, "crash_host: kernel %d element %d is %g, expected %g\n", l.k, j, z[j], want);
      std::_Exit(91);
    }
  }
  aclrtFree(l.x);
  aclrtFree(l.y);
  aclrtFree(l.z);
}

std::vector<Launched> launch_many(aclrtStream stream, int n) {
  std::vector<Launched> out;
  for (int i = 0; i < n; ++i) out.push_back(launch_one(stream));
  return out;
}

void sync_and_verify(aclrtStream stream, std::vector<Launched> &ls) {
  check(aclrtSynchronizeStream(stream), "aclrtSynchronizeStream");
  for (const Launched &l : ls) verify_and_free(l);
  ls.clear();
}

aclrtStream g_stream = nullptr;

void say(const char *fmt, int v) {
  std::printf(fmt, v);
  std::printf("\n");
  std::fflush(stdout);
}

void write_stderr(const char *s) {
  ssize_t n = ::write(2, s, std::strlen(s));
  (void)n;
}

// ---- host signal handlers ----------------------------------------------------------------------------------
void term_handler_exit(int) {
  write_stderr("crash_host: host SIGTERM handler\n");
  _exit(7);
}

std::atomic<int> g_usr1{0};
void usr1_handler(int) { g_usr1.fetch_add(1); }

// ---- late launches -----------------------------------------------------------------------------------------
void late_launch(const char *who) {
  std::vector<Launched> ls = launch_many(g_stream, 2);
  sync_and_verify(g_stream, ls);
  std::printf("late launches from %s ok\n", who);
  std::fflush(stdout);
}

void atexit_launch() { late_launch("an atexit handler"); }

struct LateInDestructor {
  bool armed = false;
  ~LateInDestructor() {
    if (armed) late_launch("a static destructor");
  }
};
LateInDestructor g_late_destructor;

// ---- threads -----------------------------------------------------------------------------------------------
void thread_body(int per_thread) {
  check(aclrtSetDevice(0), "aclrtSetDevice(thread)");
  aclrtStream s = nullptr;
  check(aclrtCreateStream(&s), "aclrtCreateStream(thread)");
  std::vector<Launched> ls;
  for (int i = 0; i < per_thread; ++i) {
    ls.push_back(launch_one(s));
    if (i % 5 == 4) sync_and_verify(s, ls);  // some verified mid-way, some only at the end
  }
  sync_and_verify(s, ls);
  check(aclrtDestroyStream(s), "aclrtDestroyStream(thread)");
}

}  // namespace

int main(int argc, char **argv) {
  if (argc < 3) {
    std::fprintf(stderr, "usage: crash_host MODE N\n");
    return 64;
  }
  const std::string mode = argv[1];
  const int n = std::atoi(argv[2]);
  if (mode == "handler-term-early") {
    struct sigaction sa {};
    sa.sa_handler = term_handler_exit;
    sigaction(SIGTERM, &sa, nullptr);
  }
  if (mode == "atexit-late") std::atexit(atexit_launch);  // before the first ACL call: before the shim's
  if (mode == "deepbind") g_mode_flags = RTLD_NOW | RTLD_LOCAL | RTLD_DEEPBIND;
  check(aclInit(nullptr), "aclInit");
  check(aclrtSetDevice(0), "aclrtSetDevice");
  check(aclrtCreateStream(&g_stream), "aclrtCreateStream");
  open_opapi();

  if (mode == "threads") {
    // Waves of threads, each with its own stream; a wave starts while the previous one still runs.
    const int waves = 3, per_wave = 8;
    std::vector<std::thread> running;
    for (int w = 0; w < waves; ++w) {
      std::vector<std::thread> wave;
      for (int t = 0; t < per_wave; ++t) wave.emplace_back(thread_body, n);
      for (auto &t : running) t.join();
      running = std::move(wave);
    }
    for (auto &t : running) t.join();
    say("launched %d", g_next_kernel.load());
    return 0;
  }
  if (mode == "dlclose") {
    std::vector<Launched> ls = launch_many(g_stream, n / 2);
    sync_and_verify(g_stream, ls);
    if (dlclose(g_api.handle) != 0) die("dlclose");
    g_api = OpApi{};
    open_opapi();
    ls = launch_many(g_stream, n - n / 2);
    sync_and_verify(g_stream, ls);
    say("launched %d", g_next_kernel.load());
    return 0;
  }
  if (mode == "usr1") {
    // A host handler for SIGUSR1 (no SA_RESTART: system calls see EINTR) and a thread that sends it 100 times
    // while kernels are launched and written (at least N, and on until the last signal was handled); each is sent
    // once the previous one was handled, so none coalesce and the count must be exact.
    struct sigaction sa {};
    sa.sa_handler = usr1_handler;
    sigaction(SIGUSR1, &sa, nullptr);
    constexpr int kSignals = 100;
    std::atomic<int> sent{0};
    std::thread sender([&] {
      for (int i = 0; i < kSignals; ++i) {
        int before = g_usr1.load();
        kill(getpid(), SIGUSR1);
        ++sent;
        while (g_usr1.load() == before) sched_yield();
      }
    });
    std::vector<Launched> ls;
    for (int i = 0; i < n || g_usr1.load() < kSignals; ++i) {
      ls.push_back(launch_one(g_stream));
      if (i % 10 == 9) sync_and_verify(g_stream, ls);
    }
    sync_and_verify(g_stream, ls);
    sender.join();
    std::printf("launched %d\nsignals sent %d handled %d\n", g_next_kernel.load(), sent.load(), g_usr1.load());
    std::fflush(stdout);
    return 0;
  }
  if (mode == "fork-orphan") {
    // The parent launches (its rank folder claimed), forks a child that launches nothing and outlives it, says the
    // child's pid and is killed (SIGKILL: no exit handler runs). The child, orphaned, waits to be killed in turn.
    std::vector<Launched> ls = launch_many(g_stream, n);
    sync_and_verify(g_stream, ls);
    std::fflush(stdout);
    pid_t pid = fork();
    if (pid == 0) {
      ::close(1);  // the test's pipes: it waits for the parent only
      ::close(2);
      for (int i = 0; i < 600; ++i) usleep(100000);
      _exit(0);
    }
    std::printf("child %d\n", static_cast<int>(pid));
    std::fflush(stdout);
    raise(SIGKILL);
  }
  if (mode == "fork") {
    // The parent launches, forks a child that launches on its own stream and exits, then launches again.
    std::vector<Launched> ls = launch_many(g_stream, n);
    const char *child_exit = std::getenv("CRASH_HOST_CHILD_EXIT");  // "exit" (default), "_exit", "return"
    std::fflush(stdout);
    pid_t pid = fork();
    if (pid == 0) {
      g_next_kernel = 1000;  // the child's kernels are told apart by their inputs
      aclrtStream s = nullptr;
      check(aclrtCreateStream(&s), "aclrtCreateStream(child)");
      std::vector<Launched> mine = launch_many(s, n);
      sync_and_verify(s, mine);
      std::printf("child launched %d\n", n);
      std::fflush(stdout);
      if (child_exit && std::strcmp(child_exit, "_exit") == 0) _exit(0);
      std::exit(0);
    }
    int status = 0;
    waitpid(pid, &status, 0);
    if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) {
      std::fprintf(stderr, "crash_host: child status %d\n", status);
      return 92;
    }
    sync_and_verify(g_stream, ls);
    ls = launch_many(g_stream, n);
    sync_and_verify(g_stream, ls);
    say("launched %d", g_next_kernel.load());
    return 0;
  }

  std::vector<Launched> ls = launch_many(g_stream, n);
  if (mode == "atexit-late" || mode == "static-dtor" || mode == "deepbind") {
    sync_and_verify(g_stream, ls);
    if (mode == "static-dtor") g_late_destructor.armed = true;
    say("launched %d", g_next_kernel.load());
    return 0;
  }
  if (mode == "handler-term-late") {
    struct sigaction sa {};
    sa.sa_handler = term_handler_exit;
    sigaction(SIGTERM, &sa, nullptr);
  }
  say("launched %d", g_next_kernel.load());
  // The event, with the kernels possibly still in flight.
  if (mode == "exit") std::exit(3);
  if (mode == "return") return 4;
  if (mode == "_exit") _exit(5);
  if (mode == "_Exit") std::_Exit(6);
  if (mode == "sigterm" || mode == "handler-term-early" || mode == "handler-term-late") kill(getpid(), SIGTERM);
  if (mode == "sigint") kill(getpid(), SIGINT);
  if (mode == "sighup") kill(getpid(), SIGHUP);
  if (mode == "abort") std::abort();
  if (mode == "segv") write_through_null();
  if (mode == "bus") {
    // Touching a page of a file mapping beyond the end of the file.
    char path[] = "/tmp/crash_host_bus_XXXXXX";
    int fd = mkstemp(path);
    unlink(path);
    auto *p = static_cast<volatile char *>(mmap(nullptr, 4096, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0));
    p[0] = 1;
  }
  if (mode == "sleep") {  // killed from outside
    for (;;) pause();
  }
  for (;;) pause();  // a signal that should have ended the process did not: the test's timeout says so
}
