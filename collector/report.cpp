#include "collector/report.h"

#include <cstdio>
#include <map>
#include <mutex>

namespace msprobe::collector {

void report(const char *what, const std::string &detail) {
  static std::mutex mu;
  static auto *seen = new std::map<std::string, int>;  // never destroyed: reports may come from exit handlers
  int n;
  {
    std::lock_guard<std::mutex> lk(mu);
    n = ++(*seen)[what];
  }
  if (n <= 3)
    std::fprintf(stderr, "msprobe-shim: %s: %s\n", what, detail.c_str());
  else if (n == 4)
    std::fprintf(stderr, "msprobe-shim: %s: further occurrences are not shown\n", what);
}

}  // namespace msprobe::collector
