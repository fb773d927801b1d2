// A host program that throws and catches C++ exceptions through frames of its own (destructors running during
// unwinding, nested try blocks, rethrow, std::exception_ptr across threads, a throwing constructor, forced stack
// depth). It prints what it caught, so a run with a preloaded library can be compared with a plain run.
//
// When a preloaded library defines msprobe_test_probe(), it is called at the points where a capture shim would
// take a stack: inside catch blocks and inside destructors while an exception is propagating.
#include <cstdio>
#include <exception>
#include <memory>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

extern "C" void msprobe_test_probe(const char *where) __attribute__((weak));

namespace {

void probe(const char *where) {
  if (msprobe_test_probe != nullptr) msprobe_test_probe(where);
}

int g_destroyed = 0;

struct Guard {
  const char *name;
  ~Guard() {
    ++g_destroyed;
    probe(name);  // runs during unwinding
  }
};

struct Custom {
  int code;
  std::string text;
};

__attribute__((noinline)) void thrower(int depth, int kind) {
  Guard g{"thrower"};
  if (depth > 0) {
    thrower(depth - 1, kind);
    return;
  }
  switch (kind) {
    case 0: throw std::runtime_error("runtime");
    case 1: throw Custom{42, "custom"};
    case 2: throw 7;
    default: throw std::out_of_range("range");
  }
}

struct Throws {
  Guard member{"member"};
  explicit Throws(int v) {
    if (v > 0) throw std::invalid_argument("ctor " + std::to_string(v));
  }
};

__attribute__((noinline)) std::string nested() {
  try {
    try {
      thrower(3, 0);
    } catch (const std::runtime_error &e) {
      probe("inner catch");
      throw std::logic_error(std::string("wrapped ") + e.what());
    }
  } catch (const std::logic_error &e) {
    probe("outer catch");
    return e.what();
  }
  return "none";
}

__attribute__((noinline)) std::string rethrown() {
  try {
    try {
      thrower(2, 1);
    } catch (...) {
      probe("rethrow");
      throw;
    }
  } catch (const Custom &c) {
    return c.text + " " + std::to_string(c.code);
  }
  return "none";
}

}  // namespace

int main() {
  std::vector<std::string> lines;
  for (int kind = 0; kind < 4; ++kind) {
    try {
      thrower(20, kind);
    } catch (const std::exception &e) {
      probe("catch std");
      lines.push_back(std::string("std ") + e.what());
    } catch (const Custom &c) {
      lines.push_back("custom " + std::to_string(c.code));
    } catch (int v) {
      lines.push_back("int " + std::to_string(v));
    }
  }
  lines.push_back(nested());
  lines.push_back(rethrown());
  try {
    auto p = std::make_unique<Throws>(3);
  } catch (const std::invalid_argument &e) {
    lines.push_back(e.what());
  }
  std::exception_ptr ep;
  std::thread t([&] {
    try {
      thrower(5, 3);
    } catch (...) {
      probe("thread");
      ep = std::current_exception();
    }
  });
  t.join();
  try {
    std::rethrow_exception(ep);
  } catch (const std::out_of_range &e) {
    lines.push_back(std::string("from thread ") + e.what());
  }
  for (const std::string &l : lines) std::printf("%s\n", l.c_str());
  std::printf("destroyed %d\n", g_destroyed);
  return 0;
}
