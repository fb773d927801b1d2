#include "shim/aclnn/plt_redirect.h"

#include <dlfcn.h>

#include <algorithm>
#include <climits>
#include <cstdlib>
#include <cstring>
#include <map>
#include <mutex>
#include <new>

#include "shim/aclnn/aclnn_capture.h"
#include "shim/base/got_patch.h"
#include "shim/base/symbols.h"

namespace msprobe::shim {
namespace {

std::string resolved(const std::string &path) {
  char buf[PATH_MAX];
  return realpath(path.c_str(), buf) != nullptr ? std::string(buf) : std::string();
}

std::string_view parent(std::string_view path) {
  size_t slash = path.rfind('/');
  return slash == std::string_view::npos || slash == 0 ? std::string_view() : path.substr(0, slash);
}

// Without the variables: the install the loaded ACL runtime comes from, <root>/lib64/<the library defining aclrtMalloc>
// (CANN 8's libascendcl, 9's libacl_rt), as the loader names it and resolved; a toolkit's lib64 resolves into its
// <arch>-linux/ folder, whose parent (the version, with opp/) is the install. Never a system prefix, which would claim
// the host's own libraries.
std::vector<std::string> loaded_install_roots() {
  Dl_info info;
  void *fn = find_original("aclrtMalloc");
  if (fn == nullptr || dladdr(fn, &info) == 0 || info.dli_fname == nullptr) return {};
  std::vector<std::string> roots;
  for (const std::string &library : {std::string(info.dli_fname), resolved(info.dli_fname)}) {
    const std::string_view lib64 = parent(library);
    if (lib64.size() < 6 || lib64.substr(lib64.size() - 6) != "/lib64") continue;
    std::string_view root = parent(lib64);
    const std::string_view arch = root.substr(root.rfind('/') + 1);
    if (arch.size() > 6 && arch.substr(arch.size() - 6) == "-linux") root = parent(root);
    if (!root.empty() && root != "/usr" && root != "/usr/local" && root != "/opt") roots.emplace_back(root);
  }
  return roots;
}

// The roots and, per object path, whether it is CANN's: skip() runs for every loaded object after every dlopen.
struct CannObjects {
  std::mutex mu;
  std::vector<std::string> roots;
  std::map<std::string, bool> verdicts;

  void use(std::vector<std::string> now) {
    std::lock_guard<std::mutex> lock(mu);
    if (now != roots) verdicts.clear();
    roots = std::move(now);
  }
  bool contains(const char *path) {
    std::lock_guard<std::mutex> lock(mu);
    auto it = verdicts.find(path);
    if (it != verdicts.end()) return it->second;
    const bool cann = path[0] != '\0' && (under_cann_root(path, roots) || under_cann_root(resolved(path), roots));
    verdicts.emplace(path, cann);
    return cann;
  }
};

CannObjects &cann_objects() {
  static CannObjects *objects = new CannObjects;  // immortal: dlopen hooks run during exit
  return *objects;
}

}  // namespace

std::vector<std::string> cann_roots(const std::function<const char *(const char *)> &getenv) {
  std::vector<std::string> roots;
  auto add = [&roots](std::string_view root) {
    while (!root.empty() && root.back() == '/') root.remove_suffix(1);
    if (root.empty()) return;  // also "/": it would claim the host's own objects
    roots.emplace_back(root);
    std::string real = resolved(roots.back());
    if (!real.empty() && real != roots.back()) roots.push_back(std::move(real));
  };
  for (const char *name : {"ASCEND_HOME_PATH", "ASCEND_TOOLKIT_HOME", "ASCEND_OPP_PATH"})
    if (const char *v = getenv(name)) add(v);
  if (const char *v = getenv("ASCEND_CUSTOM_OPP_PATH")) {
    std::string_view list(v);
    for (size_t start = 0; start <= list.size();) {
      size_t end = std::min(list.find(':', start), list.size());
      add(list.substr(start, end - start));
      start = end + 1;
    }
  }
  return roots;
}

bool under_cann_root(std::string_view path, const std::vector<std::string> &roots) {
  for (const std::string &root : roots)
    if (path.size() > root.size() && path.substr(0, root.size()) == root && path[root.size()] == '/') return true;
  return false;
}

void redirect_plt_calls() {
  try {
    std::vector<std::string> roots = cann_roots(&::getenv);
    if (roots.empty()) roots = loaded_install_roots();
    cann_objects().use(std::move(roots));
  } catch (const std::bad_alloc &) {
    return;  // nothing is redirected rather than CANN's own calls
  }
  PatchOptions options;
  // The CANN libraries call each other (and themselves) directly; those calls are the runtime's business, not
  // launches by the host. A path that cannot be judged (no memory) is left alone.
  options.skip = [](const char *path) {
    try {
      return cann_objects().contains(path);
    } catch (const std::bad_alloc &) {
      return true;
    }
  };
  options.wants = [](const char *name) { return std::strncmp(name, "aclnn", 5) == 0; };
  options.resolve = [](const char *name) { return find_original(name); };
  patch_got(
      [](const char *name, void *current) -> void * {
        if (current == nullptr) return nullptr;
        return aclnn_capture().wrap_symbol(name, current);
      },
      options);
}

}  // namespace msprobe::shim
