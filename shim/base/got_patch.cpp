#include "shim/base/got_patch.h"

#include <elf.h>
#include <link.h>
#include <sys/auxv.h>
#include <sys/mman.h>
#include <unistd.h>

#include <algorithm>
#include <cstddef>
#include <cstring>
#include <map>
#include <mutex>
#include <set>
#include <tuple>
#include <unordered_map>

#include "shim/base/log.h"

namespace msprobe::shim {
namespace {

#if defined(__x86_64__)
constexpr uint32_t kJumpSlot = R_X86_64_JUMP_SLOT;
constexpr uint32_t kGlobDat = R_X86_64_GLOB_DAT;
#elif defined(__aarch64__)
constexpr uint32_t kJumpSlot = R_AARCH64_JUMP_SLOT;
constexpr uint32_t kGlobDat = R_AARCH64_GLOB_DAT;
#else
#error "msprobe-shim patches GOTs on x86-64 and aarch64 only"
#endif

// Which loaded object: the same base, program headers and name. A library unloaded and another loaded at
// the same address would have to match all three (and then its GOT is checked value by value anyway).
struct ObjectId {
  uintptr_t base = 0;
  const void *phdr = nullptr;
  std::string name;
  auto key() const { return std::tie(base, phdr, name); }
  bool operator<(const ObjectId &o) const { return key() < o.key(); }
  bool operator==(const ObjectId &o) const { return key() == o.key(); }
};

ObjectId id_of(const dl_phdr_info *info) {
  return ObjectId{info->dlpi_addr, info->dlpi_phdr, info->dlpi_name ? info->dlpi_name : ""};
}

bool has_subs(size_t size) { return size >= offsetof(dl_phdr_info, dlpi_subs) + sizeof(dl_phdr_info::dlpi_subs); }

bool contains(const dl_phdr_info *info, uintptr_t addr) {
  if (addr == 0) return false;
  for (int i = 0; i < info->dlpi_phnum; ++i) {
    const ElfW(Phdr) &ph = info->dlpi_phdr[i];
    if (ph.p_type != PT_LOAD) continue;
    const uintptr_t lo = info->dlpi_addr + ph.p_vaddr;
    if (addr >= lo && addr < lo + ph.p_memsz) return true;
  }
  return false;
}

bool is_loader_or_vdso(const dl_phdr_info *info) {
  const char *name = info->dlpi_name ? info->dlpi_name : "";
  const char *base = std::strrchr(name, '/');
  base = base ? base + 1 : name;
  if (std::strncmp(base, "ld-linux", 8) == 0 || std::strncmp(base, "ld.so", 5) == 0 ||
      std::strncmp(base, "linux-vdso", 10) == 0 || std::strncmp(base, "linux-gate", 10) == 0)
    return true;
  return contains(info, getauxval(AT_SYSINFO_EHDR)) || contains(info, getauxval(AT_BASE));
}

// ---- Phase A: which objects exist (no caller code runs under the loader's lock) ----

struct ObjectEntry {
  ObjectId id;
  bool builtin_skip = false;  // ld.so, the vDSO, the shim
};

struct ListCtx {
  uintptr_t self = 0;
  std::vector<ObjectEntry> objects;
  unsigned long long subs = 0;
};

int list_objects_cb(dl_phdr_info *info, size_t size, void *data) {
  auto *ctx = static_cast<ListCtx *>(data);
  if (has_subs(size)) ctx->subs = info->dlpi_subs;
  ObjectEntry e{id_of(info)};
  e.builtin_skip = is_loader_or_vdso(info) || contains(info, ctx->self);
  ctx->objects.push_back(std::move(e));
  return 0;
}

// ---- Phase B: the function GOT entries of selected objects ----

struct Candidate {
  uintptr_t slot;
  uintptr_t value;  // what the entry held when scanned
  uint32_t name;    // offset into ScannedObject::names
  GotSlotKind kind;
  bool relro;
  bool bound;
  bool writable;  // its segment is writable outside RELRO (always, for real GOTs)
};

struct ScannedObject {
  ObjectId id;
  std::string names;  // NUL-separated copies: the object may be unloaded before the callbacks run
  std::vector<Candidate> slots;
};

struct DynamicTables {
  const ElfW(Sym) *symtab = nullptr;
  const char *strtab = nullptr;
  size_t strsz = 0;
  const ElfW(Rela) *jmprel = nullptr;
  size_t pltrelsz = 0;
  ElfW(Sxword) pltrel = DT_RELA;
  const ElfW(Rela) *rela = nullptr;
  size_t relasz = 0;
  size_t relaent = sizeof(ElfW(Rela));
};

// glibc relocates the d_ptr entries of the dynamic section in place at load time (except for the vDSO and
// on a few architectures); other loaders leave them relative. Offsets are far below any load base.
uintptr_t dyn_address(uintptr_t value, uintptr_t base) { return value < base ? value + base : value; }

bool read_dynamic(const dl_phdr_info *info, DynamicTables &t) {
  const ElfW(Dyn) *dyn = nullptr;
  for (int i = 0; i < info->dlpi_phnum; ++i)
    if (info->dlpi_phdr[i].p_type == PT_DYNAMIC)
      dyn = reinterpret_cast<const ElfW(Dyn) *>(info->dlpi_addr + info->dlpi_phdr[i].p_vaddr);
  if (!dyn) return false;
  const uintptr_t base = info->dlpi_addr;
  for (; dyn->d_tag != DT_NULL; ++dyn) {
    switch (dyn->d_tag) {
      case DT_SYMTAB: t.symtab = reinterpret_cast<const ElfW(Sym) *>(dyn_address(dyn->d_un.d_ptr, base)); break;
      case DT_STRTAB: t.strtab = reinterpret_cast<const char *>(dyn_address(dyn->d_un.d_ptr, base)); break;
      case DT_STRSZ: t.strsz = dyn->d_un.d_val; break;
      case DT_JMPREL: t.jmprel = reinterpret_cast<const ElfW(Rela) *>(dyn_address(dyn->d_un.d_ptr, base)); break;
      case DT_PLTRELSZ: t.pltrelsz = dyn->d_un.d_val; break;
      case DT_PLTREL: t.pltrel = static_cast<ElfW(Sxword)>(dyn->d_un.d_val); break;
      case DT_RELA: t.rela = reinterpret_cast<const ElfW(Rela) *>(dyn_address(dyn->d_un.d_ptr, base)); break;
      case DT_RELASZ: t.relasz = dyn->d_un.d_val; break;
      case DT_RELAENT: t.relaent = dyn->d_un.d_val; break;
      default: break;
    }
  }
  return t.symtab && t.strtab && t.relaent == sizeof(ElfW(Rela));
}

// The range glibc's _dl_protect_relro made read-only: PT_GNU_RELRO with both ends rounded down to pages.
void relro_range(const dl_phdr_info *info, uintptr_t &lo, uintptr_t &hi) {
  lo = hi = 0;
  const uintptr_t page = static_cast<uintptr_t>(sysconf(_SC_PAGESIZE));
  for (int i = 0; i < info->dlpi_phnum; ++i) {
    const ElfW(Phdr) &ph = info->dlpi_phdr[i];
    if (ph.p_type != PT_GNU_RELRO) continue;
    lo = (info->dlpi_addr + ph.p_vaddr) & ~(page - 1);
    hi = (info->dlpi_addr + ph.p_vaddr + ph.p_memsz) & ~(page - 1);
  }
}

bool segment_writable(const dl_phdr_info *info, uintptr_t addr) {
  for (int i = 0; i < info->dlpi_phnum; ++i) {
    const ElfW(Phdr) &ph = info->dlpi_phdr[i];
    const uintptr_t lo = info->dlpi_addr + ph.p_vaddr;
    if (ph.p_type == PT_LOAD && addr >= lo && addr < lo + ph.p_memsz) return (ph.p_flags & PF_W) != 0;
  }
  return false;
}

void scan_object(const dl_phdr_info *info, ScannedObject &out) {
  DynamicTables t;
  if (!read_dynamic(info, t)) return;
  uintptr_t relro_lo, relro_hi;
  relro_range(info, relro_lo, relro_hi);
  const uintptr_t base = info->dlpi_addr;
  std::unordered_map<uint32_t, uint32_t> name_offsets;

  auto walk = [&](const ElfW(Rela) * begin, const ElfW(Rela) * end) {
    for (const ElfW(Rela) *rel = begin; rel < end; ++rel) {
      const ElfW(Rela) &r = *rel;
      const auto type = static_cast<uint32_t>(ELF64_R_TYPE(r.r_info));
      if (type != kJumpSlot && type != kGlobDat) continue;
      const auto sym_index = static_cast<uint32_t>(ELF64_R_SYM(r.r_info));
      if (sym_index == 0) continue;
      const ElfW(Sym) &sym = t.symtab[sym_index];
      const int sym_type = ELF64_ST_TYPE(sym.st_info);
      // Only code: GLOB_DAT also binds data and TLS symbols, whose entries must never change.
      if (sym_type != STT_FUNC && sym_type != STT_GNU_IFUNC && sym_type != STT_NOTYPE) continue;
      if (t.strsz && sym.st_name >= t.strsz) continue;
      const uintptr_t slot = base + r.r_offset;

      Candidate c{};
      c.slot = slot;
      c.value = __atomic_load_n(reinterpret_cast<uintptr_t *>(slot), __ATOMIC_ACQUIRE);
      c.kind = type == kJumpSlot ? GotSlotKind::JumpSlot : GotSlotKind::GlobDat;
      c.relro = slot >= relro_lo && slot < relro_hi;
      c.writable = segment_writable(info, slot);
      // A lazy entry points into its own object (the PLT) until first called. The symbol's own definition
      // in this object is a bound target, not a stub.
      const bool defined_here = sym.st_shndx != SHN_UNDEF && sym.st_value != 0;
      const bool own_definition = defined_here && c.value == base + sym.st_value;
      c.bound = c.kind == GotSlotKind::GlobDat || !contains(info, c.value) || own_definition;
      auto [it, fresh] = name_offsets.emplace(sym.st_name, static_cast<uint32_t>(out.names.size()));
      if (fresh) out.names.append(t.strtab + sym.st_name).push_back('\0');
      c.name = it->second;
      out.slots.push_back(c);
    }
  };
  // Some linkers make DT_RELA cover DT_JMPREL as well: walk the union of the two ranges once.
  const ElfW(Rela) *rela_end = t.rela ? t.rela + t.relasz / sizeof(ElfW(Rela)) : nullptr;
  const ElfW(Rela) *jmp = t.pltrel == DT_RELA ? t.jmprel : nullptr;
  const ElfW(Rela) *jmp_end = jmp ? jmp + t.pltrelsz / sizeof(ElfW(Rela)) : nullptr;
  walk(t.rela, rela_end);
  if (jmp && t.rela && jmp < rela_end && jmp_end > t.rela) {
    walk(jmp, std::min(jmp_end, t.rela));
    walk(std::max(jmp, rela_end), jmp_end);
  } else {
    walk(jmp, jmp_end);
  }
}

struct ScanCtx {
  const std::map<ObjectId, size_t> *wanted;  // object -> index into `out`
  std::vector<ScannedObject> *out;
};

int scan_cb(dl_phdr_info *info, size_t, void *data) {
  auto *ctx = static_cast<ScanCtx *>(data);
  auto it = ctx->wanted->find(id_of(info));
  if (it != ctx->wanted->end()) scan_object(info, (*ctx->out)[it->second]);
  return 0;
}

// ---- Phase D: writing ----

struct Write {
  Candidate c;
  uintptr_t replacement;
  const char *symbol;
};

struct WriteCtx {
  const std::map<ObjectId, std::vector<Write> *> *writes;
  std::vector<std::pair<const ObjectId *, Write>> done;
  std::set<ObjectId> incomplete;  // an entry changed under us: look at the object again next time
};

bool write_entry(const dl_phdr_info *info, const Write &w, uintptr_t page_size) {
  auto *slot = reinterpret_cast<uintptr_t *>(w.c.slot);
  const bool unprotect = w.c.relro || !w.c.writable;
  void *page = reinterpret_cast<void *>(w.c.slot & ~(page_size - 1));
  if (unprotect && mprotect(page, page_size, PROT_READ | PROT_WRITE) != 0) {
    log_warn("cannot make the GOT entry of %s in %s writable", w.symbol,
             *info->dlpi_name ? info->dlpi_name : "the main program");
    return false;
  }
  // Release: whatever the caller built before returning the replacement (a Forwarder, its closure) is
  // visible to a thread that then jumps through the entry.
  uintptr_t expected = w.c.value;
  bool ok = __atomic_compare_exchange_n(slot, &expected, w.replacement, false, __ATOMIC_RELEASE, __ATOMIC_ACQUIRE);
  // A lazy entry the loader bound in the meantime now holds the real target, which is what the replacement
  // was computed for.
  if (!ok && !w.c.bound && expected != w.replacement && !contains(info, expected))
    ok = __atomic_compare_exchange_n(slot, &expected, w.replacement, false, __ATOMIC_RELEASE, __ATOMIC_ACQUIRE);
  if (unprotect) {
    // RELRO pages go back to read-only, as the loader left them; other GOT pages are writable anyway.
    const int prot = w.c.relro ? PROT_READ : PROT_READ | PROT_WRITE;
    if (mprotect(page, page_size, prot) != 0) log_warn("cannot restore the protection of a GOT page");
  }
  return ok;
}

int write_cb(dl_phdr_info *info, size_t, void *data) {
  auto *ctx = static_cast<WriteCtx *>(data);
  auto it = ctx->writes->find(id_of(info));
  if (it == ctx->writes->end()) return 0;
  const uintptr_t page_size = static_cast<uintptr_t>(sysconf(_SC_PAGESIZE));
  for (const Write &w : *it->second) {
    if (write_entry(info, w, page_size))
      ctx->done.emplace_back(&it->first, w);
    else
      ctx->incomplete.insert(it->first);
  }
  return 0;
}

uintptr_t default_self() { return reinterpret_cast<uintptr_t>(&list_got_slots); }

// One lock for every patcher in the process, not one per GotPatcher: two patchers writing entries on the same
// RELRO page concurrently could otherwise make it read-only under each other's write.
std::mutex &patch_mutex() {
  static std::mutex m;
  return m;
}

// Phase A plus the skips: the objects to look at. The skip predicate is caller code, so it runs here, with
// no lock held, not inside the loader's iteration.
std::vector<ObjectId> candidate_objects(const PatchOptions &options, unsigned long long &subs) {
  ListCtx list;
  if (options.skip_self)
    list.self = options.self_address ? reinterpret_cast<uintptr_t>(options.self_address) : default_self();
  dl_iterate_phdr(&list_objects_cb, &list);
  subs = list.subs;
  std::vector<ObjectId> out;
  for (ObjectEntry &e : list.objects) {
    if (e.builtin_skip) continue;
    if (options.skip && options.skip(e.id.name.c_str())) continue;
    out.push_back(std::move(e.id));
  }
  return out;
}

// Phase B: the entries of those objects that are still loaded.
std::vector<ScannedObject> scan_objects(std::vector<ObjectId> ids) {
  std::vector<ScannedObject> out;
  std::map<ObjectId, size_t> wanted;
  for (ObjectId &id : ids) {
    wanted.emplace(id, out.size());
    out.push_back(ScannedObject{std::move(id), {}, {}});
  }
  if (!wanted.empty()) {
    ScanCtx ctx{&wanted, &out};
    dl_iterate_phdr(&scan_cb, &ctx);
  }
  return out;
}

}  // namespace

// ---- GotPatcher ----

struct GotPatcher::State {                           // guarded by patch_mutex()
  std::set<ObjectId> visited;                        // objects fully handled
  std::unordered_map<uintptr_t, uintptr_t> written;  // entry -> value we wrote
  unsigned long long subs = 0;                       // loader's unload count when `visited` was last valid
};

GotPatcher::GotPatcher() : state_(new State) {}
GotPatcher::~GotPatcher() { delete state_; }

namespace {

GotSlot slot_of(const ObjectId &object, const char *symbol, const Candidate &c) {
  GotSlot s;
  s.object = object.name;
  s.symbol = symbol;
  s.slot = reinterpret_cast<void **>(c.slot);
  s.target = reinterpret_cast<void *>(c.value);
  s.kind = c.kind;
  s.relro = c.relro;
  s.bound = c.bound;
  return s;
}

// What the callbacks want written into the scanned slots (phase C of patch(), no lock held). A callback that throws
// or hands back what it was given leaves its slot alone.
std::map<ObjectId, std::vector<Write>> plan_writes(const std::vector<ScannedObject> &objects,
                                                   const ReplacementFor &replacement_for, const PatchOptions &options) {
  std::map<ObjectId, std::vector<Write>> writes;
  for (const ScannedObject &o : objects) {
    auto &list = writes[o.id];
    for (const Candidate &c : o.slots) {
      if (c.kind == GotSlotKind::GlobDat && c.value == 0) continue;  // weak undefined: keep it absent
      const char *name = o.names.c_str() + c.name;
      try {
        if (options.wants && !options.wants(name)) continue;
        if (options.observe) options.observe(slot_of(o.id, name, c));
      } catch (...) {
        continue;
      }
      if (options.jump_slots_only && c.kind != GotSlotKind::JumpSlot) continue;
      void *current = reinterpret_cast<void *>(c.value);
      if (!c.bound) {
        current = nullptr;
        if (options.resolve) {
          try {
            current = options.resolve(name);
          } catch (...) {
            current = nullptr;
          }
        }
      }
      void *replacement = nullptr;
      try {
        replacement = replacement_for(name, current);
      } catch (...) {
        replacement = nullptr;
      }
      // Handing back what it was given means "leave it": for a lazy entry that is the resolved target,
      // which must not be written either (binding is the loader's business).
      if (!replacement || replacement == current || reinterpret_cast<uintptr_t>(replacement) == c.value) continue;
      list.push_back(Write{c, reinterpret_cast<uintptr_t>(replacement), name});
    }
  }
  return writes;
}

}  // namespace

int GotPatcher::patch(const ReplacementFor &replacement_for, const PatchOptions &options) noexcept {
  try {
    State &st = *state_;
    // Phase A without our lock; phase B under it (our mutex, then the loader's: the only order used).
    unsigned long long subs = 0;
    std::vector<ObjectId> ids = candidate_objects(options, subs);
    std::vector<ScannedObject> objects;
    {
      std::lock_guard<std::mutex> lock(patch_mutex());
      if (subs != st.subs) {  // something was unloaded: an address may now hold a different object
        st.visited.clear();
        st.subs = subs;
      }
      if (!options.rescan) std::erase_if(ids, [&](const ObjectId &id) { return st.visited.count(id) != 0; });
      objects = scan_objects(std::move(ids));
      // Entries that still hold what this patcher wrote are done.
      for (ScannedObject &o : objects)
        std::erase_if(o.slots, [&](const Candidate &c) {
          auto it = st.written.find(c.slot);
          return it != st.written.end() && it->second == c.value;
        });
    }

    // Phase C: the callbacks, with no lock held.
    std::map<ObjectId, std::vector<Write>> writes = plan_writes(objects, replacement_for, options);

    // Phase D: write, into objects that are still the ones scanned.
    std::lock_guard<std::mutex> lock(patch_mutex());
    std::map<ObjectId, std::vector<Write> *> pending;
    for (auto &[id, list] : writes)
      if (!list.empty()) pending.emplace(id, &list);
    WriteCtx ctx{&pending, {}, {}};
    if (!pending.empty()) dl_iterate_phdr(&write_cb, &ctx);
    for (const auto &[id, w] : ctx.done) {
      st.written[w.c.slot] = w.replacement;
      if (options.patched) options.patched->push_back(slot_of(*id, w.symbol, w.c));
    }
    for (const ScannedObject &o : objects)
      if (!ctx.incomplete.count(o.id)) st.visited.insert(o.id);
    return static_cast<int>(ctx.done.size());
  } catch (...) {
    log_warn("GOT patching failed (out of memory?); calls through the PLT are not all captured");
    return 0;
  }
}

int patch_got(const ReplacementFor &replacement_for, const PatchOptions &options) noexcept {
  static GotPatcher *patcher = new (std::nothrow) GotPatcher;  // immortal: dlopen hooks run during exit
  return patcher ? patcher->patch(replacement_for, options) : 0;
}

std::vector<GotSlot> list_got_slots(const PatchOptions &options) noexcept {
  std::vector<GotSlot> out;
  try {
    unsigned long long subs = 0;
    for (const ScannedObject &o : scan_objects(candidate_objects(options, subs)))
      for (const Candidate &c : o.slots) {
        const char *name = o.names.c_str() + c.name;
        if (!options.wants || options.wants(name)) out.push_back(slot_of(o.id, name, c));
      }
  } catch (...) {
    out.clear();
  }
  return out;
}

}  // namespace msprobe::shim
