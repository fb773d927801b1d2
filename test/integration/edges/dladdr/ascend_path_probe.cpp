#include "ascend_path_probe.h"

#include <dlfcn.h>

#include <cstdio>
#include <cstring>
#include <set>
#include <string>
#include <vector>

#include "hooked_names.h"

namespace {

// GetAscendPath (symbol_utils.cc): the path up to "latest", plus "latest/"; empty when there is no "latest".
std::string ascend_path_of(const std::string &file) {
  const std::string latest = "latest";
  const size_t pos = file.rfind(latest);
  return pos == std::string::npos ? std::string() : file.substr(0, pos) + latest + "/";
}

// The shim's own list, when it is loaded.
int compare_with_the_shims_list(const std::vector<HookedFunction> &functions) {
  using ListFn = const char *(*)(unsigned);
  auto list = reinterpret_cast<ListFn>(dlsym(RTLD_DEFAULT, "msprobe_shim_hooked_function"));
  if (list == nullptr) return 0;
  std::set<std::string> shims, ours;
  for (unsigned i = 0; const char *name = list(i); ++i) shims.insert(name);
  for (const HookedFunction &f : functions) ours.insert(f.name);
  int failures = 0;
  for (const std::string &n : shims) {
    if (ours.count(n) != 0) continue;
    std::fprintf(stderr, "ascend_path_probe: the shim hooks %s, which is not listed here\n", n.c_str());
    ++failures;
  }
  for (const std::string &n : ours) {
    if (shims.count(n) != 0) continue;
    std::fprintf(stderr, "ascend_path_probe: %s is listed here but not hooked by the shim\n", n.c_str());
    ++failures;
  }
  std::printf("the shim hooks %zu CANN functions, the same as this library lists\n", shims.size());
  return failures;
}

}  // namespace

int ascend_path_probe(char *ascend_path, size_t size) {
  const std::vector<HookedFunction> functions = hooked_functions();
  int failures = 0;
  std::string first;
  for (const HookedFunction &f : functions) {
    Dl_info info{};
    if (dladdr(f.address, &info) == 0 || info.dli_fname == nullptr) {
      std::fprintf(stderr, "ascend_path_probe: dladdr(&%s) failed\n", f.name);
      ++failures;
      continue;
    }
    const std::string file = info.dli_fname;
    std::printf("dladdr(&%s): %s\n", f.name, file.c_str());
    const std::string path = ascend_path_of(file);
    const std::string lib64 = path + "lib64/";
    if (path.empty()) {
      std::fprintf(stderr, "ascend_path_probe: %s: Get ascend path failed (no \"latest\" in %s)\n", f.name, file.c_str());
      ++failures;
    } else if (file.compare(0, lib64.size(), lib64) != 0 || file.find('/', lib64.size()) != std::string::npos ||
               file.find("msprobe") != std::string::npos) {
      std::fprintf(stderr, "ascend_path_probe: %s lives in %s, not in a CANN library under %s\n", f.name, file.c_str(),
                   lib64.c_str());
      ++failures;
    }
    if (first.empty()) {
      first = path;
    } else if (path != first) {
      std::fprintf(stderr, "ascend_path_probe: %s is in %s, another install than %s\n", f.name, file.c_str(), first.c_str());
      ++failures;
    }
  }
  std::snprintf(ascend_path, size, "%s", first.c_str());
  return failures + compare_with_the_shims_list(functions);
}
