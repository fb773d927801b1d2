// Cost of one aclnn op, both phases, on the launching thread: aclnnAddGetWorkspaceSize + aclnnAdd on 1-element
// fp32 tensors of the CANN stand-in, called directly (PLT calls, as a C++ host makes them; the shim redirects
// them to its wrappers). Run it without the shim, with the shim in some configuration (bench_passthrough.py runs
// them side by side); it prints one JSON line: per-op nanoseconds (median, p99, mean) over --iters ops, each timed
// alone with CLOCK_MONOTONIC (the clock's own cost, ~20-40 ns, is in every row and cancels in the differences).
//
//   bench_passthrough [--iters N] [--warmup N] [--next-step]
//
// --next-step: after the warm-up, tells the shim a step ended (msprobe_shim_step, looked up with dlsym when the
// shim is loaded), so that MSPROBE_STEP=0 leaves every timed op in an unselected step.
#include <dlfcn.h>
#include <time.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <vector>

#include "acl/acl.h"
#include "aclnn/acl_meta.h"
#include "aclnnop/aclnn_add.h"

// A no-op aclnn op pair exported by this program: looked up with dlsym, it gets the shim's wrappers like any aclnn
// op (header-less), while the direct calls below skip them. Timing both in the same loop isolates the shim's own
// cost from the stand-in's (~µs, allocation-heavy, with a device-thread hand-over).
static int g_nop_executor;
extern "C" __attribute__((visibility("default"), noinline)) int aclnnBenchNopGetWorkspaceSize(const void *self,
                                                                                              uint64_t *workspace,
                                                                                              void **executor) {
  *workspace = 0;
  *executor = self ? &g_nop_executor : nullptr;
  return 0;
}
extern "C" __attribute__((visibility("default"), noinline)) int aclnnBenchNop(void *, uint64_t, void *executor,
                                                                              void *) {
  return executor == &g_nop_executor ? 0 : 1;
}

namespace {

uint64_t now_ns() {
  timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

bool ok(long rc, const char *what) {
  if (rc == 0) return true;
  std::fprintf(stderr, "bench_passthrough: %s failed with %ld\n", what, rc);
  return false;
}

}  // namespace

int main(int argc, char **argv) {
  long iters = 20000, warmup = 2000;
  bool next_step = false;
  for (int i = 1; i < argc; ++i) {
    if (!std::strcmp(argv[i], "--iters") && i + 1 < argc)
      iters = std::atol(argv[++i]);
    else if (!std::strcmp(argv[i], "--warmup") && i + 1 < argc)
      warmup = std::atol(argv[++i]);
    else if (!std::strcmp(argv[i], "--next-step"))
      next_step = true;
    else {
      std::fprintf(stderr, "usage: bench_passthrough [--iters N] [--warmup N] [--next-step]\n");
      return 2;
    }
  }
  if (!ok(aclInit(nullptr), "aclInit") || !ok(aclrtSetDevice(0), "aclrtSetDevice")) return 2;
  aclrtStream stream = nullptr;
  if (!ok(aclrtCreateStream(&stream), "aclrtCreateStream")) return 2;
  void *x = nullptr, *y = nullptr, *z = nullptr;
  for (void **p : {&x, &y, &z})
    if (!ok(aclrtMalloc(p, 64, ACL_MEM_MALLOC_HUGE_FIRST), "aclrtMalloc")) return 2;
  const float one = 1.0f, two = 2.0f;
  ok(aclrtMemcpy(x, 64, &one, sizeof one, ACL_MEMCPY_HOST_TO_DEVICE), "aclrtMemcpy");
  ok(aclrtMemcpy(y, 64, &two, sizeof two, ACL_MEMCPY_HOST_TO_DEVICE), "aclrtMemcpy");
  const int64_t dims[1] = {1}, strides[1] = {1};
  aclTensor *tx = aclCreateTensor(dims, 1, ACL_FLOAT, strides, 0, ACL_FORMAT_ND, dims, 1, x);
  aclTensor *ty = aclCreateTensor(dims, 1, ACL_FLOAT, strides, 0, ACL_FORMAT_ND, dims, 1, y);
  aclTensor *tz = aclCreateTensor(dims, 1, ACL_FLOAT, strides, 0, ACL_FORMAT_ND, dims, 1, z);
  float alpha_value = 1.0f;
  aclScalar *alpha = aclCreateScalar(&alpha_value, ACL_FLOAT);

  std::vector<uint64_t> ns;
  ns.reserve((size_t)iters);
  int errors = 0;
  auto one_op = [&](bool timed) {
    uint64_t ws = 0;
    aclOpExecutor *executor = nullptr;
    uint64_t t0 = now_ns();
    int rc1 = aclnnAddGetWorkspaceSize(tx, ty, alpha, tz, &ws, &executor);
    int rc2 = rc1 == 0 ? aclnnAdd(nullptr, 0, executor, stream) : rc1;
    uint64_t t1 = now_ns();
    errors += rc2 != 0;
    if (timed) ns.push_back(t1 - t0);
  };
  // The stand-in runs kernels on a device thread: keep its queue short, outside the timed calls.
  for (long i = 0; i < warmup; ++i) {
    one_op(false);
    if (i % 256 == 255) aclrtSynchronizeStream(stream);
  }
  aclrtSynchronizeStream(stream);
  if (next_step)
    if (auto step = reinterpret_cast<void (*)()>(dlsym(RTLD_DEFAULT, "msprobe_shim_step"))) step();
  for (long i = 0; i < iters; ++i) {
    one_op(true);
    if (i % 256 == 255) aclrtSynchronizeStream(stream);
  }
  aclrtSynchronizeStream(stream);

  // The no-op pair, direct and through whatever dlsym hands out, alternating.
  using P1 = int (*)(const void *, uint64_t *, void **);
  using P2 = int (*)(void *, uint64_t, void *, void *);
  auto wrapped1 = reinterpret_cast<P1>(dlsym(RTLD_DEFAULT, "aclnnBenchNopGetWorkspaceSize"));
  auto wrapped2 = reinterpret_cast<P2>(dlsym(RTLD_DEFAULT, "aclnnBenchNop"));
  P1 direct1 = &aclnnBenchNopGetWorkspaceSize;
  P2 direct2 = &aclnnBenchNop;
  std::vector<uint64_t> nop_direct, nop_wrapped;
  if (wrapped1 && wrapped2) {
    nop_direct.reserve((size_t)iters);
    nop_wrapped.reserve((size_t)iters);
    auto nop = [&](P1 p1, P2 p2, std::vector<uint64_t> &out) {
      uint64_t ws = 1;
      void *executor = nullptr;
      uint64_t t0 = now_ns();
      int rc = p1(x, &ws, &executor);
      rc |= p2(nullptr, ws, executor, stream);
      uint64_t t1 = now_ns();
      errors += rc != 0;
      out.push_back(t1 - t0);
    };
    for (long i = 0; i < iters; ++i) {
      nop(direct1, direct2, nop_direct);
      nop(wrapped1, wrapped2, nop_wrapped);
    }
  }
  float result = 0;
  ok(aclrtMemcpy(&result, sizeof result, z, sizeof result, ACL_MEMCPY_DEVICE_TO_HOST), "aclrtMemcpy");

  aclDestroyScalar(alpha);
  for (aclTensor *t : {tx, ty, tz}) aclDestroyTensor(t);
  for (void *p : {x, y, z}) aclrtFree(p);
  aclrtDestroyStream(stream);
  aclrtResetDevice(0);
  aclFinalize();
  if (errors || result != 3.0f || ns.empty()) {
    std::fprintf(stderr, "bench_passthrough: %d failed ops, result %g (want 3)\n", errors, (double)result);
    return 1;
  }
  double mean = 0;
  for (uint64_t v : ns) mean += (double)v;
  mean /= (double)ns.size();
  auto q = [](std::vector<uint64_t> &v, int pct) -> unsigned long long {
    if (v.empty()) return 0;
    std::sort(v.begin(), v.end());
    return v[std::min(v.size() - 1, v.size() * (size_t)pct / 100)];
  };
  // Where the program's calls go: the stand-in's own aclnnAdd, or a wrapper inside the shim.
  auto object_of = [](const void *fn) -> const char * {
    Dl_info info;
    if (!fn || !dladdr(fn, &info) || !info.dli_fname) return "?";
    const char *slash = std::strrchr(info.dli_fname, '/');
    return slash ? slash + 1 : info.dli_fname;
  };
  void *add_fn = reinterpret_cast<void *>(&aclnnAdd);  // read from the GOT, which the shim patches
  std::printf("{\"add_in\": \"%s\", \"nop_in\": \"%s\", ", object_of(add_fn),
              object_of(reinterpret_cast<void *>(wrapped1)));
  std::printf(
      "\"iters\": %zu, \"median_ns\": %llu, \"p99_ns\": %llu, \"mean_ns\": %.1f, \"nop_direct_median_ns\": %llu, "
      "\"nop_direct_p99_ns\": %llu, \"nop_wrapped_median_ns\": %llu, \"nop_wrapped_p99_ns\": %llu, \"shim\": %s}\n",
      ns.size(), q(ns, 50), q(ns, 99), mean, q(nop_direct, 50), q(nop_direct, 99), q(nop_wrapped, 50),
      q(nop_wrapped, 99), dlsym(RTLD_DEFAULT, "msprobe_shim_step") ? "true" : "false");
  return 0;
}
