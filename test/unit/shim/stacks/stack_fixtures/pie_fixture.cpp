// A position-independent executable, built with -g, whose captured stack must name a `static` function, a
// non-exported (hidden, only in .symtab) function and a C++ method: `stack_fixture_pie` prints
//     ID <stack id>            (twice from the same call site: the same id)
//     FRAME <frame>            one per native frame, innermost first
//     EXPORTED <0|1>           whether the hidden function is visible to dlsym (it must not be)
#include <dlfcn.h>

#include <cstdio>

#include "shim/stacks/stacks.h"

using msprobe::shim::StackId;
using msprobe::shim::StackMode;
using msprobe::shim::StackTable;

namespace msprobe_fixture {
struct Widget {
  __attribute__((noinline)) StackId method(int depth);
};
}  // namespace msprobe_fixture

volatile int g_sink;        // written after each call, so that no call is a tail call
volatile int g_rounds = 2;  // a loop the compiler cannot unroll into two call sites

extern "C" __attribute__((visibility("hidden"), noinline)) StackId fixture_hidden_level(int x);

static __attribute__((noinline)) StackId fixture_static_leaf(int x) {
  const StackId id = StackTable::global().capture();
  g_sink = x;
  return id;
}

extern "C" StackId fixture_hidden_level(int x) {
  const StackId id = fixture_static_leaf(x + 1);
  g_sink = x;
  return id;
}

StackId msprobe_fixture::Widget::method(int depth) {
  const StackId id = fixture_hidden_level(depth);
  g_sink = depth;
  return id;
}

int main() {
  StackId ids[2] = {};
  for (int i = 0; i < g_rounds; ++i) ids[i] = msprobe_fixture::Widget().method(2);  // one call site, twice
  std::printf("ID %u\nID %u\n", ids[0], ids[1]);
  for (const std::string &f : StackTable::global().frames(ids[0], StackMode::Native))
    std::printf("FRAME %s\n", f.c_str());
  std::printf("EXPORTED %d\n", dlsym(RTLD_DEFAULT, "fixture_hidden_level") != nullptr ? 1 : 0);
  return 0;
}
