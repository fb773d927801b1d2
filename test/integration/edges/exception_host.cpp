// A host program that throws and catches C++ exceptions through its own frames, before and after an aclnn
// launch, and prints a transcript of what it caught. Run with and without libmsprobe_shim.so preloaded, the
// transcript and exit status must be the same: the shim must not interpose the C++ exception ABI
// (_Unwind_*, __cxa_*, the personality routine) or break unwinding in any other way (spec §3).
#include <cstdio>
#include <exception>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

#include "acl/acl.h"
#include "aclnn/acl_meta.h"
#include "aclnnop/aclnn_mul.h"

#define NOINLINE __attribute__((noinline))

namespace {

int g_live = 0;  // RAII objects alive: unwinding must run every destructor
struct Guard {
  Guard() { ++g_live; }
  ~Guard() { --g_live; }
  Guard(const Guard &) = delete;
  Guard &operator=(const Guard &) = delete;
};

struct HostError : std::runtime_error {
  int depth;
  HostError(const std::string &what, int d) : std::runtime_error(what), depth(d) {}
};
struct DerivedError : HostError {
  using HostError::HostError;
};

NOINLINE int recurse_and_throw(int depth, int limit) {
  Guard g;
  if (depth == limit) throw DerivedError("thrown at depth " + std::to_string(depth), depth);
  return recurse_and_throw(depth + 1, limit) + 1;  // not a tail call: every frame stays
}

NOINLINE void rethrow_through(int limit) {
  Guard g;
  try {
    recurse_and_throw(0, limit);
  } catch (HostError &e) {
    e.depth += 1000;
    throw;  // the same object, modified
  }
}

NOINLINE void nested(int limit) {
  try {
    rethrow_through(limit);
  } catch (...) {
    std::throw_with_nested(std::logic_error("outer"));
  }
}

std::vector<std::string> g_lines;
void say(const std::string &s) { g_lines.push_back(s); }

NOINLINE void round_of_exceptions(const char *tag) {
  for (int limit : {0, 5, 40}) {
    try {
      rethrow_through(limit);
      say("no exception");
    } catch (const DerivedError &e) {
      say(std::string(tag) + " caught DerivedError depth=" + std::to_string(e.depth) + " what=" + e.what() +
          " live=" + std::to_string(g_live));
    }
  }
  try {
    nested(3);
  } catch (const std::logic_error &outer) {
    try {
      std::rethrow_if_nested(outer);
    } catch (const HostError &inner) {
      say(std::string(tag) + " nested " + outer.what() + " / " + inner.what());
    }
  }
  std::exception_ptr from_thread;
  std::thread t([&] {
    try {
      recurse_and_throw(0, 7);
    } catch (...) {
      from_thread = std::current_exception();
    }
  });
  t.join();
  try {
    std::rethrow_exception(from_thread);
  } catch (const HostError &e) {
    say(std::string(tag) + " from thread depth=" + std::to_string(e.depth));
  }
  try {
    std::vector<int> v(3);
    (void)v.at(10);  // thrown inside libstdc++, caught here
  } catch (const std::out_of_range &) {
    say(std::string(tag) + " out_of_range");
  }
}

bool ok(int rc, const char *what) {
  if (rc != 0) std::fprintf(stderr, "exception_host: %s failed with %d\n", what, rc);
  return rc == 0;
}

// One aclnnMul, so that the shim is really at work (initialized, capturing) between the rounds.
NOINLINE bool launch_mul(aclrtStream stream) {
  constexpr int64_t n = 4;
  const int64_t dims[1] = {n}, strides[1] = {1};
  float hx[n] = {1, 2, 3, 4}, hz[n] = {};
  void *x = nullptr, *z = nullptr;
  if (!ok(aclrtMalloc(&x, sizeof hx, ACL_MEM_MALLOC_HUGE_FIRST), "aclrtMalloc") ||
      !ok(aclrtMalloc(&z, sizeof hz, ACL_MEM_MALLOC_HUGE_FIRST), "aclrtMalloc"))
    return false;
  bool good = ok(aclrtMemcpy(x, sizeof hx, hx, sizeof hx, ACL_MEMCPY_HOST_TO_DEVICE), "aclrtMemcpy");
  aclTensor *tx = aclCreateTensor(dims, 1, ACL_FLOAT, strides, 0, ACL_FORMAT_ND, dims, 1, x);
  aclTensor *tz = aclCreateTensor(dims, 1, ACL_FLOAT, strides, 0, ACL_FORMAT_ND, dims, 1, z);
  uint64_t ws = 0;
  aclOpExecutor *ex = nullptr;
  good = good && ok(aclnnMulGetWorkspaceSize(tx, tx, tz, &ws, &ex), "aclnnMulGetWorkspaceSize") && ws == 0 &&
         ok(aclnnMul(nullptr, 0, ex, stream), "aclnnMul") && ok(aclrtSynchronizeStream(stream), "sync") &&
         ok(aclrtMemcpy(hz, sizeof hz, z, sizeof hz, ACL_MEMCPY_DEVICE_TO_HOST), "aclrtMemcpy");
  aclDestroyTensor(tx);
  aclDestroyTensor(tz);
  aclrtFree(x);
  aclrtFree(z);
  for (int64_t i = 0; good && i < n; ++i) good = hz[i] == hx[i] * hx[i];
  say(std::string("mul ") + (good ? "ok" : "MISMATCH"));
  return good;
}

}  // namespace

int main() {
  round_of_exceptions("before");
  if (!ok(aclInit(nullptr), "aclInit") || !ok(aclrtSetDevice(0), "aclrtSetDevice")) return 2;
  aclrtStream stream = nullptr;
  if (!ok(aclrtCreateStream(&stream), "aclrtCreateStream")) return 2;
  bool good = launch_mul(stream);
  round_of_exceptions("during");
  good = launch_mul(stream) && good;
  ok(aclrtDestroyStream(stream), "aclrtDestroyStream");
  ok(aclrtResetDevice(0), "aclrtResetDevice");
  ok(aclFinalize(), "aclFinalize");
  round_of_exceptions("after");
  for (const std::string &l : g_lines) std::printf("%s\n", l.c_str());
  std::printf("live=%d\n", g_live);
  return good && g_live == 0 ? 0 : 1;
}
