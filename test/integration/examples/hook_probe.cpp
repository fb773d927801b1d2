// libhook_probe.so: a test-only MindSpore hook tool (shared/reference/cann_dump.md §5) that appends one line per
// call to $HOOK_PROBE_LOG, for the tests of examples/graph_runtime/ms_hook_runner.cpp:
//   begin device=<id> step=<n> keys=<k,...> kbyk=<0|1> kernels=<name>|<name>|...
//   end keys=<k,...>
// MS_DbgOnStepEnd takes the map by reference, as msprobe's tool does, while the runner passes it by value
// through MindSpore's pointer type: call-compatible under the Itanium C++ ABI (§5.2), which this exercises.
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <map>
#include <string>
#include <vector>

namespace {

std::string keys(const std::map<uint32_t, void *> &exts) {
  std::string s;
  for (const auto &[k, v] : exts) s += (s.empty() ? "" : ",") + std::to_string(k);
  return s;
}

void append(const std::string &line) {
  const char *path = std::getenv("HOOK_PROBE_LOG");
  if (path == nullptr) return;
  if (FILE *f = std::fopen(path, "a")) {
    std::fprintf(f, "%s\n", line.c_str());
    std::fclose(f);
  }
}

}  // namespace

extern "C" __attribute__((visibility("default"))) void MS_DbgOnStepBegin(uint32_t device, int32_t step,
                                                                         std::map<uint32_t, void *> exts) {
  std::string line = "begin device=" + std::to_string(device) + " step=" + std::to_string(step) + " keys=" + keys(exts);
  if (auto it = exts.find(1); it != exts.end() && it->second) line += std::string(" kbyk=") + (*(bool *)it->second ? "1" : "0");
  if (auto it = exts.find(0); it != exts.end() && it->second) {
    line += " kernels=";
    const auto &names = *static_cast<const std::vector<std::string> *>(it->second);
    for (size_t i = 0; i < names.size(); ++i) line += (i ? "|" : "") + names[i];
  }
  append(line);
}

// libhook_probe_no_end.so: built without it, a tool the runner must refuse (both symbols are required).
#ifndef HOOK_PROBE_WITHOUT_END
extern "C" __attribute__((visibility("default"))) void MS_DbgOnStepEnd(std::map<uint32_t, void *> &exts) {
  append("end keys=" + keys(exts));
}
#endif
