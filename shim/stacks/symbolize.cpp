#include "shim/stacks/symbolize.h"

#include <cxxabi.h>
#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <climits>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <optional>

#include "shim/base/libelf_api.h"

namespace msprobe::shim {
namespace {

bool is_regular_file(const std::string &path) {
  struct stat st {};
  return ::stat(path.c_str(), &st) == 0 && S_ISREG(st.st_mode);
}

std::string dirname_of(const std::string &path) {
  const size_t slash = path.rfind('/');
  return slash == std::string::npos ? std::string(".") : path.substr(0, slash);
}

std::string hex(uint64_t v) {
  char buf[32];
  std::snprintf(buf, sizeof(buf), "0x%llx", static_cast<unsigned long long>(v));
  return buf;
}

// Which of two symbols at the same address names it: .symtab before .dynsym (its names are the same or better),
// then global before weak before local binding; the name decides ties so the choice never depends on file order.
struct Candidate {
  ElfSymbolTable::Symbol sym;
  int rank;
};

int binding_rank(unsigned bind) {
  switch (bind) {
    case STB_GLOBAL: return 0;
    case STB_WEAK: return 1;
    default: return 2;
  }
}

}  // namespace

ElfSymbolTable::~ElfSymbolTable() {
  for (const Image &im : images_) ::munmap(im.addr, im.size);
}

namespace {

// The file mapped privately and opened by libelf, or nullptr. Private and writable (copy-on-write, never written
// in practice) because elf_memory() takes a char *; the mapping is clean page cache, so a big library's symbols
// cost address space rather than memory.
Elf *map_elf(const LibElf *E, const std::string &path, void **addr, size_t *size) {
  if (!is_regular_file(path)) return nullptr;
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return nullptr;
  struct stat st {};
  if (::fstat(fd, &st) != 0 || st.st_size <= 0) {
    ::close(fd);
    return nullptr;
  }
  *size = static_cast<size_t>(st.st_size);
  *addr = ::mmap(nullptr, *size, PROT_READ | PROT_WRITE, MAP_PRIVATE, fd, 0);
  ::close(fd);
  if (*addr == MAP_FAILED) return nullptr;
  Elf *elf = E->memory(static_cast<char *>(*addr), *size);
  if (elf == nullptr || E->kind(elf) != ELF_K_ELF) {
    if (elf != nullptr) E->end(elf);
    ::munmap(*addr, *size);
    return nullptr;
  }
  return elf;
}

// The GNU build id of a note section, as hex; empty when it has none.
std::string build_id_in(const LibElf *E, Elf_Scn *scn) {
  std::string id;
  Elf_Data *data = E->getdata(scn, nullptr);
  if (data == nullptr) return id;
  GElf_Nhdr nh;
  size_t off = 0, name_off = 0, desc_off = 0;
  while ((off = E->getnote(data, off, &nh, &name_off, &desc_off)) > 0) {
    if (nh.n_type != NT_GNU_BUILD_ID || nh.n_namesz != 4 ||
        std::memcmp(static_cast<const char *>(data->d_buf) + name_off, "GNU", 4) != 0)
      continue;
    const auto *d = static_cast<const unsigned char *>(data->d_buf) + desc_off;
    id.clear();
    for (size_t k = 0; k < nh.n_descsz; ++k) {
      char b[3];
      std::snprintf(b, sizeof(b), "%02x", d[k]);
      id.append(b);
    }
  }
  return id;
}

// The file name a .gnu_debuglink section holds, or nullopt for any other section.
std::optional<std::string> debuglink_in(const LibElf *E, Elf *elf, size_t shstrndx, Elf_Scn *scn, const GElf_Shdr &sh) {
  const char *sname = E->strptr(elf, shstrndx, sh.sh_name);
  if (sname == nullptr || std::strcmp(sname, ".gnu_debuglink") != 0) return std::nullopt;
  Elf_Data *data = E->getdata(scn, nullptr);
  if (data == nullptr || data->d_size == 0) return std::nullopt;
  return std::string(static_cast<const char *>(data->d_buf),
                     strnlen(static_cast<const char *>(data->d_buf), data->d_size));
}

// The function symbols of a .symtab or .dynsym section. Names point into the mapped image [begin, end); a name
// libelf returns from elsewhere is copied into `copies`.
void collect_functions(const LibElf *E, Elf *elf, Elf_Scn *scn, const GElf_Shdr &sh, const char *image_begin,
                       const char *image_end, std::vector<std::unique_ptr<char[]>> &copies,
                       std::vector<Candidate> &found) {
  Elf_Data *data = E->getdata(scn, nullptr);
  if (data == nullptr || sh.sh_entsize == 0) return;
  const bool symtab = sh.sh_type == SHT_SYMTAB;
  const size_t count = sh.sh_size / sh.sh_entsize;
  for (size_t i = 0; i < count; ++i) {
    GElf_Sym s;
    if (E->getsym(data, static_cast<int>(i), &s) == nullptr) continue;
    const unsigned type = GELF_ST_TYPE(s.st_info);
    if ((type != STT_FUNC && type != STT_GNU_IFUNC) || s.st_shndx == SHN_UNDEF || s.st_value == 0) continue;
    const char *name = E->strptr(elf, sh.sh_link, s.st_name);
    if (name == nullptr || name[0] == '\0') continue;
    if (name < image_begin || name >= image_end) {  // libelf made a copy: keep our own
      const size_t len = std::strlen(name);
      copies.emplace_back(new char[len + 1]);
      std::memcpy(copies.back().get(), name, len + 1);
      name = copies.back().get();
    }
    found.push_back({{s.st_value, s.st_size, name}, (symtab ? 0 : 3) + binding_rank(GELF_ST_BIND(s.st_info))});
  }
}

// `symbols` (sorted by address) with `found` added: what is in already (the main file) wins ties; then the
// candidates' ranks, then the names.
void merge_symbols(std::vector<ElfSymbolTable::Symbol> &symbols, std::vector<Candidate> found) {
  std::vector<Candidate> all;
  all.reserve(symbols.size() + found.size());
  for (const ElfSymbolTable::Symbol &s : symbols) all.push_back({s, -1});
  all.insert(all.end(), found.begin(), found.end());
  std::sort(all.begin(), all.end(), [](const Candidate &a, const Candidate &b) {
    if (a.sym.addr != b.sym.addr) return a.sym.addr < b.sym.addr;
    if (a.rank != b.rank) return a.rank < b.rank;
    return std::strcmp(a.sym.name, b.sym.name) < 0;
  });
  symbols.clear();
  for (const Candidate &c : all)
    if (symbols.empty() || symbols.back().addr != c.sym.addr) symbols.push_back(c.sym);
}

}  // namespace

// Reads the function symbols of one file: -1 when it is not a readable ELF file, 0 when it has no .symtab, 1 when
// it has one. With `symtab_only` (a debug file) .dynsym is skipped: the main file's is already in.
int ElfSymbolTable::add_file(const std::string &path, bool symtab_only, std::string *build_id, std::string *debuglink) {
  const LibElf *E = libelf();
  if (E == nullptr) return -1;
  void *addr = nullptr;
  size_t size = 0;
  Elf *elf = map_elf(E, path, &addr, &size);
  if (elf == nullptr) return -1;
  images_.push_back({addr, size});
  const char *image_begin = static_cast<const char *>(addr);
  size_t shstrndx = 0;
  const bool have_names = E->getshdrstrndx(elf, &shstrndx) == 0;
  std::vector<Candidate> found;
  Elf_Scn *scn = nullptr;
  while ((scn = E->nextscn(elf, scn)) != nullptr) {
    GElf_Shdr sh;
    if (E->getshdr(scn, &sh) == nullptr) continue;
    if (sh.sh_type == SHT_SYMTAB || (sh.sh_type == SHT_DYNSYM && !symtab_only)) {
      collect_functions(E, elf, scn, sh, image_begin, image_begin + size, copies_, found);
    } else if (sh.sh_type == SHT_NOTE && build_id != nullptr) {
      if (std::string id = build_id_in(E, scn); !id.empty()) *build_id = std::move(id);
    } else if (have_names && debuglink != nullptr && sh.sh_type == SHT_PROGBITS) {
      if (auto link = debuglink_in(E, elf, shstrndx, scn, sh)) *debuglink = std::move(*link);
    }
  }
  E->end(elf);
  bool has_symtab = false;
  for (const Candidate &c : found) has_symtab |= c.rank < 3;
  merge_symbols(symbols_, std::move(found));
  return has_symtab ? 1 : 0;
}

std::unique_ptr<ElfSymbolTable> ElfSymbolTable::load(const std::string &path,
                                                     const std::vector<std::string> &debug_dirs) {
  std::unique_ptr<ElfSymbolTable> t(new ElfSymbolTable());
  std::string build_id, debuglink;
  const int main_file = t->add_file(path, false, &build_id, &debuglink);
  t->readable_ = main_file >= 0;
  // A file with a .symtab has every function already; stripped files (distribution libraries) may have a
  // separate debug file.
  if (main_file != 0) return t;
  std::vector<std::string> candidates;
  if (build_id.size() > 2) {
    for (const std::string &d : debug_dirs)
      candidates.push_back(d + "/.build-id/" + build_id.substr(0, 2) + "/" + build_id.substr(2) + ".debug");
  }
  if (!debuglink.empty()) {
    char real[PATH_MAX];
    const std::string dir = dirname_of(::realpath(path.c_str(), real) != nullptr ? std::string(real) : path);
    candidates.push_back(dir + "/.debug/" + debuglink);
    for (const std::string &d : debug_dirs) candidates.push_back(d + dir + "/" + debuglink);
    candidates.push_back(dir + "/" + debuglink);
  }
  for (const std::string &c : candidates) {
    if (c == path || !is_regular_file(c)) continue;
    if (t->add_file(c, true, nullptr, nullptr) == 1) {
      t->debug_file_ = c;
      break;
    }
  }
  return t;
}

const ElfSymbolTable::Symbol *ElfSymbolTable::find(uint64_t vaddr) const {
  auto it =
      std::upper_bound(symbols_.begin(), symbols_.end(), vaddr, [](uint64_t a, const Symbol &s) { return a < s.addr; });
  // The nearest start below may be a size-0 symbol or a short one that ends before vaddr while an enclosing
  // one covers it: look a little further back.
  for (int steps = 0; it != symbols_.begin() && steps < 64; ++steps) {
    --it;
    if (vaddr >= it->addr && vaddr - it->addr < it->size) return &*it;
  }
  return nullptr;
}

std::string demangle(const char *name) {
  if (name == nullptr) return {};
  if (name[0] == '_' && name[1] == 'Z') {
    int status = 0;
    char *d = abi::__cxa_demangle(name, nullptr, nullptr, &status);
    if (d != nullptr) {
      std::string out = status == 0 ? std::string(d) : std::string(name);
      std::free(d);
      return out;
    }
  }
  return name;
}

Symbolizer &Symbolizer::global() {
  static Symbolizer *s = new Symbolizer();
  return *s;
}

Symbolizer::Symbolizer() : debug_dirs_{"/usr/lib/debug"} {}

const ElfSymbolTable *Symbolizer::table(const std::string &path) {
  if (path.find('/') == std::string::npos) return nullptr;  // "linux-vdso.so.1": no file behind it
  auto it = tables_.find(path);
  if (it == tables_.end()) it = tables_.emplace(path, ElfSymbolTable::load(path, debug_dirs_)).first;
  return it->second->readable() ? it->second.get() : nullptr;
}

std::string Symbolizer::describe(uintptr_t addr, const ModuleInfo *module) {
  if (module == nullptr) return hex(addr);
  const uint64_t off = addr - module->base;
  std::string where = module_basename(module->path) + "+" + hex(off);
  std::lock_guard<std::mutex> lock(mu_);
  const ElfSymbolTable *t = table(module->path);
  const ElfSymbolTable::Symbol *s = t ? t->find(off) : nullptr;
  if (s == nullptr) return where;
  auto d = demangled_.find(s->name);
  if (d == demangled_.end()) d = demangled_.emplace(s->name, demangle(s->name)).first;
  return d->second + " (" + where + ")";
}

std::optional<std::string> Symbolizer::function_at(const std::string &path, uint64_t vaddr) {
  std::lock_guard<std::mutex> lock(mu_);
  const ElfSymbolTable *t = table(path);
  const ElfSymbolTable::Symbol *s = t ? t->find(vaddr) : nullptr;
  if (s == nullptr) return std::nullopt;
  return demangle(s->name);
}

void Symbolizer::set_debug_dirs(std::vector<std::string> dirs) {
  std::lock_guard<std::mutex> lock(mu_);
  debug_dirs_ = std::move(dirs);
  demangled_.clear();
  tables_.clear();
}

void Symbolizer::clear() {
  std::lock_guard<std::mutex> lock(mu_);
  demangled_.clear();
  tables_.clear();
}

}  // namespace msprobe::shim
