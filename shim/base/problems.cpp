#include "shim/base/problems.h"

#include <atomic>
#include <cstddef>

#include "shim/base/log.h"

namespace msprobe::shim {
namespace {

struct Kind {
  const char *counted;  // "kernels not recorded": the exit line's words for the count
  const char *what;     // the first report: what happened ...
  const char *cost;     // ... and what it costs the dump
};

// One row per Problem, in its order.
constexpr Kind kKinds[] = {
    {"kernels not recorded", "a kernel could not be recorded",
     "the host's call went through, and the kernel is missing from the dump"},
    {"stacks not taken", "a kernel's call stack could not be taken",
     "the kernel is named Default and has no stack in stack.json"},
    {"launches not tracked", "an aclnn launch could not be tracked", "it went through uncaptured"},
    {"phase-1 calls not kept", "an aclnn phase 1 could not be kept", "its kernel is captured without arguments"},
    {"aclnn calls without readable arguments",
     "no CANN header declares an aclnn op and its arguments could not be found without one",
     "its kernels are counted and named, not written (set ASCEND_HOME_PATH to the CANN install: docs/prototypes.md)"},
    {"descriptors not kept",
     "a descriptor (tensor, list, allocation, attribute or kernel binary) could not be recorded",
     "kernels that use it are described less fully"},
    {"communicators not kept", "an HCCL communicator or call could not be recorded", "its kernels have no \"comm\""},
    {"model or graph events not followed", "a model load, execution or ACL graph capture could not be followed",
     "its kernels may be missing or described less fully"},
    {"framework records not read", "a MindSpore profiler record could not be read",
     "the kernels it names keep their Python-scope names"},
};
static_assert(std::size(kKinds) == (size_t)Problem::Count_, "one row per Problem");

constinit std::atomic<uint64_t> g_counts[(size_t)Problem::Count_] = {};

}  // namespace

void report_problem(Problem kind, const char *detail) noexcept {
  const size_t k = (size_t)kind;
  if (k >= std::size(kKinds)) return;
  if (g_counts[k].fetch_add(1, std::memory_order_relaxed) == 0)
    log_warn("%s (%s); %s (further ones are counted at exit)", kKinds[k].what, detail ? detail : "?", kKinds[k].cost);
}

uint64_t problem_count(Problem kind) noexcept {
  const size_t k = (size_t)kind;
  return k < std::size(kKinds) ? g_counts[k].load(std::memory_order_relaxed) : 0;
}

std::string problem_summary() {
  std::string out;
  for (size_t k = 0; k < std::size(kKinds); ++k) {
    const uint64_t n = g_counts[k].load(std::memory_order_relaxed);
    if (n == 0) continue;
    if (!out.empty()) out += ", ";
    out += std::to_string(n) + " " + kKinds[k].counted;
  }
  return out;
}

}  // namespace msprobe::shim
