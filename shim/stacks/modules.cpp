#include "shim/stacks/modules.h"

#include <link.h>
#include <unistd.h>

#include <climits>
#include <cstddef>

namespace msprobe::shim {
namespace {

struct Seen {
  std::string path;
  uintptr_t base = 0;
  std::vector<std::pair<uintptr_t, uintptr_t>> loads;
  bool main_program = false;
};

struct Collect {
  std::vector<Seen> seen;
  unsigned long long adds = 0, subs = 0;
  int index = 0;
};

bool has_counters(size_t size) {
  return size >= offsetof(struct dl_phdr_info, dlpi_subs) + sizeof(((struct dl_phdr_info *)nullptr)->dlpi_subs);
}

// Runs under the loader's lock: copy only, never call back into the shim.
int collect_one(struct dl_phdr_info *info, size_t size, void *data) {
  auto *c = static_cast<Collect *>(data);
  if (c->index == 0 && has_counters(size)) {
    c->adds = info->dlpi_adds;
    c->subs = info->dlpi_subs;
  }
  Seen s;
  s.main_program = c->index == 0 && (info->dlpi_name == nullptr || info->dlpi_name[0] == '\0');
  ++c->index;
  if (info->dlpi_name != nullptr) s.path = info->dlpi_name;
  s.base = info->dlpi_addr;
  for (int i = 0; i < info->dlpi_phnum; ++i) {
    const ElfW(Phdr) &ph = info->dlpi_phdr[i];
    if (ph.p_type != PT_LOAD || ph.p_memsz == 0) continue;
    const uintptr_t begin = info->dlpi_addr + ph.p_vaddr;
    s.loads.emplace_back(begin, begin + ph.p_memsz);
  }
  if (!s.loads.empty() && (s.main_program || !s.path.empty())) c->seen.push_back(std::move(s));
  return 0;
}

int read_counters(struct dl_phdr_info *info, size_t size, void *data) {
  auto *c = static_cast<Collect *>(data);
  if (has_counters(size)) {
    c->adds = info->dlpi_adds;
    c->subs = info->dlpi_subs;
  }
  return 1;  // the counters are global: the first object is enough
}

std::string self_exe() {
  char buf[PATH_MAX];
  const ssize_t n = ::readlink("/proc/self/exe", buf, sizeof(buf) - 1);
  return n > 0 ? std::string(buf, static_cast<size_t>(n)) : std::string("[main program]");
}

bool same_module(const ModuleInfo &m, const Seen &s) {
  return m.base == s.base && m.loads == s.loads && (m.main_program ? s.main_program : m.path == s.path);
}

}  // namespace

bool ModuleInfo::contains(uintptr_t addr) const {
  for (const auto &[b, e] : loads)
    if (addr >= b && addr < e) return true;
  return false;
}

std::string module_basename(const std::string &path) {
  const size_t slash = path.rfind('/');
  return slash == std::string::npos ? path : path.substr(slash + 1);
}

ModuleMap &ModuleMap::global() {
  static ModuleMap *m = new ModuleMap();  // leaked: stacks may be rendered from exit handlers
  return *m;
}

ModuleMap::Changes ModuleMap::refresh() {
  // One refresh at a time, so that an older snapshot is never merged after a newer one. The loader's lock is
  // taken inside this one, never the other way round (dl_iterate_phdr callbacks never call back into us).
  std::lock_guard<std::mutex> serial(refresh_mu_);
  Collect c;
  dl_iterate_phdr(&collect_one, &c);  // outside mu_: never hold our lock while waiting for the loader's
  std::string exe;
  for (const Seen &s : c.seen)
    if (s.main_program) exe = self_exe();

  std::lock_guard<std::mutex> lock(mu_);
  const uint32_t next = loaded_ ? gen_ + 1 : 0;
  bool changed = !loaded_;
  Changes ch;
  std::vector<bool> still(modules_.size(), false);
  for (Seen &s : c.seen) {
    bool known = false;
    for (size_t i = 0; i < modules_.size(); ++i) {
      if (modules_[i].end_gen == UINT32_MAX && same_module(modules_[i], s)) {
        still[i] = known = true;
        break;
      }
    }
    if (known) continue;
    ModuleInfo m;
    m.path = s.main_program ? exe : std::move(s.path);
    m.base = s.base;
    m.loads = std::move(s.loads);
    m.first_gen = next;
    m.main_program = s.main_program;
    modules_.push_back(std::move(m));
    changed = true;
    ++ch.added;
  }
  for (size_t i = 0; i < still.size(); ++i) {
    if (!still[i] && modules_[i].end_gen == UINT32_MAX) {
      modules_[i].end_gen = next;
      changed = true;
      ++ch.removed;
    }
  }
  if (changed) gen_ = next;
  adds_ = c.adds;
  subs_ = c.subs;
  loaded_ = true;
  return ch;
}

ModuleMap::Changes ModuleMap::refresh_if_changed() {
  Collect c;
  dl_iterate_phdr(&read_counters, &c);
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (loaded_ && c.adds == adds_ && c.subs == subs_) return {};
  }
  return refresh();
}

uint32_t ModuleMap::generation() const {
  std::lock_guard<std::mutex> lock(mu_);
  return gen_;
}

std::optional<ModuleInfo> ModuleMap::find(uintptr_t addr, uint32_t gen) const {
  std::lock_guard<std::mutex> lock(mu_);
  for (const ModuleInfo &m : modules_)
    if (m.alive_at(gen) && m.contains(addr)) return m;
  return std::nullopt;
}

bool ModuleMap::appeared_in(uint32_t gen, const std::string &needle) const {
  std::lock_guard<std::mutex> lock(mu_);
  for (const ModuleInfo &m : modules_)
    if (m.first_gen == gen && module_basename(m.path).find(needle) != std::string::npos) return true;
  return false;
}

std::vector<ModuleInfo> ModuleMap::all() const {
  std::lock_guard<std::mutex> lock(mu_);
  return modules_;
}

}  // namespace msprobe::shim
