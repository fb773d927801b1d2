// prototype_census: runs the shim's aclnn prototype reader (shim/aclnn/prototypes.h) over an include tree, the way
// the shim would read it, and prints one JSON object per op: its header and every parameter with the kind, the
// direction and the rule that decided it. A developer's tool, outside CI: scripts/prototype_census.py drives it
// (extracts CANN's headers, compares with CANN's docs, sums up); see docs/prototypes.md, "Census".
//
// Usage: prototype_census DIR...   (each DIR an aclnnop folder: its *.h and those one level below, as the shim reads)
#include <dirent.h>
#include <sys/stat.h>

#include <algorithm>
#include <cstdio>
#include <fstream>
#include <nlohmann/json.hpp>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include "shim/aclnn/prototypes.h"

namespace {

using msprobe::shim::OpPrototype;
using msprobe::shim::Param;
using msprobe::shim::PrototypeIndex;

bool is_dir(const std::string &path) {
  struct stat st {};
  return ::stat(path.c_str(), &st) == 0 && S_ISDIR(st.st_mode);
}

std::vector<std::string> entries(const std::string &dir) {
  std::vector<std::string> names;
  if (DIR *d = ::opendir(dir.c_str())) {
    while (const dirent *e = ::readdir(d))
      if (e->d_name[0] != '.') names.emplace_back(e->d_name);
    ::closedir(d);
  }
  std::sort(names.begin(), names.end());
  return names;
}

bool is_header(const std::string &name) { return name.size() > 2 && name.compare(name.size() - 2, 2, ".h") == 0; }

// The headers the index considers under a root: *.h in it and one level below.
std::vector<std::string> headers_under(const std::string &root) {
  std::vector<std::string> found;
  for (const auto &name : entries(root)) {
    const std::string path = root + "/" + name;
    if (is_dir(path)) {
      for (const auto &sub : entries(path))
        if (is_header(sub)) found.push_back(path + "/" + sub);
    } else if (is_header(name)) {
      found.push_back(path);
    }
  }
  return found;
}

std::string read_text(const std::string &path) {
  std::ifstream f(path, std::ios::binary);
  std::stringstream s;
  s << f.rdbuf();
  return s.str();
}

nlohmann::json describe(const Param &p) {
  return {{"name", p.name},          {"type", p.type_text},           {"kind", to_string(p.kind)},
          {"dir", to_string(p.dir)}, {"rule", to_string(p.dir_rule)}, {"optional", p.optional}};
}

}  // namespace

int main(int argc, char **argv) {
  if (argc < 2) {
    std::fprintf(stderr, "usage: %s ACLNNOP_DIR...\n", argv[0]);
    return 2;
  }
  std::vector<std::string> roots(argv + 1, argv + argc);
  for (const auto &r : roots)
    if (!is_dir(r)) {
      std::fprintf(stderr, "prototype_census: %s is not a directory\n", r.c_str());
      return 2;
    }
  // Every op any header mentions, then the answer the shim's index gives for it.
  std::vector<std::pair<std::string, std::string>> mentions;  // op, first header mentioning it
  std::set<std::string> seen;
  for (const auto &r : roots)
    for (const auto &h : headers_under(r))
      for (const auto &op : msprobe::shim::declared_ops(read_text(h)))
        if (seen.insert(op).second) mentions.emplace_back(op, h);

  PrototypeIndex index(roots);
  for (const auto &[op, header] : mentions) {
    nlohmann::json line = {{"op", op}};
    if (const OpPrototype *p = index.find(op)) {
      line["header"] = p->header_path;
      line["params"] = nlohmann::json::array();
      for (const auto &q : p->params) line["params"].push_back(describe(q));
    } else {
      line["header"] = header;
      line["error"] = "not understood";
    }
    std::printf("%s\n", line.dump().c_str());
  }
  return 0;
}
