// The collector's problems on stderr: one line each, a problem that repeats (a full disk fails every later write)
// shown three times and then once more to say the rest are not shown. The counters keep the full count.
#pragma once
#include <string>

namespace msprobe::collector {

void report(const char *what, const std::string &detail);

}  // namespace msprobe::collector
