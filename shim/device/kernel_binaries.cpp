#include "shim/device/kernel_binaries.h"

#include <algorithm>
#include <cstring>
#include <memory>
#include <mutex>
#include <unordered_set>

#include "shim/base/libelf_api.h"

namespace msprobe::shim {

namespace {

bool is_kernel_symbol(const GElf_Sym &s) {
  const int type = GELF_ST_TYPE(s.st_info), bind = GELF_ST_BIND(s.st_info);
  return (type == STT_FUNC || type == STT_OBJECT) && (bind == STB_GLOBAL || bind == STB_WEAK) &&
         s.st_shndx != SHN_UNDEF && s.st_shndx < SHN_LORESERVE && s.st_name != 0;
}

// The C string at `p` if it looks like a symbol name (printable, no spaces, bounded); empty otherwise.
std::string symbol_like(const void *p) {
  if (p == nullptr) return {};
  const char *s = static_cast<const char *>(p);
  constexpr size_t kMax = 4096;
  size_t n = strnlen(s, kMax);
  if (n == 0 || n == kMax) return {};
  for (size_t i = 0; i < n; ++i)
    if (s[i] <= ' ' || s[i] > '~') return {};
  return std::string(s, n);
}

// "{kernel}_{K}" -> K; nullopt when the name does not end in "_" and decimal digits.
std::optional<uint64_t> tiling_key_of(const std::string &name) {
  size_t us = name.rfind('_');
  if (us == std::string::npos || us == 0 || us + 1 == name.size()) return std::nullopt;
  uint64_t k = 0;
  for (size_t i = us + 1; i < name.size(); ++i) {
    char c = name[i];
    if (c < '0' || c > '9') return std::nullopt;
    uint64_t d = (uint64_t)(c - '0');
    if (k > (UINT64_MAX - d) / 10) return std::nullopt;
    k = k * 10 + d;
  }
  return k;
}

}  // namespace

std::vector<std::string> elf_kernel_symbols(const void *image, uint64_t length) {
  std::vector<std::string> out;
  if (image == nullptr || length < EI_NIDENT || std::memcmp(image, ELFMAG, SELFMAG) != 0) return out;
  const LibElf *E = libelf();
  if (E == nullptr) return out;  // no libelf.so.1: the kernels keep no names (the shim said so once)
  // libelf may convert the image in place; the caller's bytes are the host's.
  std::vector<char> copy(static_cast<const char *>(image), static_cast<const char *>(image) + length);
  Elf *elf = E->memory(copy.data(), copy.size());
  if (elf == nullptr) return out;
  std::unique_ptr<Elf, int (*)(Elf *)> guard(elf, E->end);
  if (E->kind(elf) != ELF_K_ELF) return out;
  // The full symbol table when there is one (relocatable objects, unstripped images), else the dynamic one.
  Elf_Scn *table = nullptr;
  GElf_Shdr table_hdr{};
  for (Elf_Scn *scn = E->nextscn(elf, nullptr); scn != nullptr; scn = E->nextscn(elf, scn)) {
    GElf_Shdr sh;
    if (E->getshdr(scn, &sh) == nullptr) continue;
    if (sh.sh_type == SHT_SYMTAB || (sh.sh_type == SHT_DYNSYM && table == nullptr)) {
      table = scn;
      table_hdr = sh;
    }
  }
  if (table == nullptr || table_hdr.sh_entsize == 0) return out;
  Elf_Data *data = E->getdata(table, nullptr);
  if (data == nullptr) return out;
  const size_t count = table_hdr.sh_size / table_hdr.sh_entsize;
  std::unordered_set<std::string> seen;
  for (size_t i = 0; i < count && i <= (size_t)INT32_MAX; ++i) {
    GElf_Sym sym;
    if (E->getsym(data, (int)i, &sym) == nullptr) break;
    if (!is_kernel_symbol(sym)) continue;
    const char *name = E->strptr(elf, table_hdr.sh_link, sym.st_name);
    if (name == nullptr || *name == '\0') continue;
    if (seen.insert(name).second) out.emplace_back(name);
  }
  return out;
}

void KernelBinaries::register_binary(const void *handle, const void *image, uint64_t length) {
  if (handle == nullptr) return;
  Binary b;
  b.symbols = elf_kernel_symbols(image, length);  // outside the lock: libelf work
  std::unordered_set<uint64_t> ambiguous;
  for (const std::string &s : b.symbols)
    if (auto k = tiling_key_of(s)) {
      if (ambiguous.count(*k)) continue;
      if (!b.by_tiling_key.emplace(*k, s).second) {
        b.by_tiling_key.erase(*k);
        ambiguous.insert(*k);
      }
    }
  std::unique_lock lk(mu_);
  // A handle value seen again belongs to a new binary: stubs of the old one are gone with it.
  std::erase_if(stubs_, [&](const auto &kv) { return kv.second.handle == handle; });
  binaries_[handle] = std::move(b);
}

void KernelBinaries::unregister_binary(const void *handle) {
  std::unique_lock lk(mu_);
  binaries_.erase(handle);
  std::erase_if(stubs_, [&](const auto &kv) { return kv.second.handle == handle; });
}

void KernelBinaries::register_function(const void *handle, const void *stub, const char *stub_name,
                                       const void *kernel_info_ext) {
  if (stub == nullptr) return;
  const std::string candidates[2] = {symbol_like(kernel_info_ext), symbol_like(stub_name)};
  std::unique_lock lk(mu_);
  std::string name;
  // The name the binary really has wins; otherwise the first usable string the host gave.
  if (auto it = binaries_.find(handle); it != binaries_.end())
    for (const std::string &c : candidates)
      if (!c.empty() &&
          std::find(it->second.symbols.begin(), it->second.symbols.end(), c) != it->second.symbols.end()) {
        name = c;
        break;
      }
  if (name.empty()) name = !candidates[0].empty() ? candidates[0] : candidates[1];
  if (name.empty()) name = kUnknownRtKernel;
  stubs_[stub] = Stub{handle, std::move(name)};
}

std::optional<std::string> KernelBinaries::stub_kernel(const void *stub) const {
  std::shared_lock lk(mu_);
  auto it = stubs_.find(stub);
  if (it == stubs_.end()) return std::nullopt;
  return it->second.kernel;
}

std::optional<std::string> KernelBinaries::handle_kernel(const void *handle, uint64_t tiling_key) const {
  std::shared_lock lk(mu_);
  auto it = binaries_.find(handle);
  if (it == binaries_.end()) return std::nullopt;
  auto k = it->second.by_tiling_key.find(tiling_key);
  if (k == it->second.by_tiling_key.end()) return std::nullopt;
  return k->second;
}

std::vector<std::string> KernelBinaries::symbols(const void *handle) const {
  std::shared_lock lk(mu_);
  auto it = binaries_.find(handle);
  return it == binaries_.end() ? std::vector<std::string>{} : it->second.symbols;
}

KernelBinaries &kernel_binaries() {
  static auto *registry = new KernelBinaries;  // immortal: launches may come from exit handlers
  return *registry;
}

std::vector<RtArgSlot> scan_args_blob(const void *blob, uint32_t bytes, const DeviceAllocations &allocations) {
  std::vector<RtArgSlot> slots;
  if (blob == nullptr || bytes == 0) return slots;
  const auto *p = static_cast<const unsigned char *>(blob);
  const uint32_t n = (uint32_t)(((uint64_t)bytes + 7) / 8);
  slots.resize(n);
  std::vector<uint64_t> candidates(n, 0);
  for (uint32_t i = 0; i < n; ++i) {
    RtArgSlot &s = slots[i];
    s.offset = i * 8;
    s.bytes = std::min<uint32_t>(8, bytes - s.offset);
    std::memcpy(&s.value, p + s.offset, s.bytes);
    if (s.bytes == 8) candidates[i] = s.value;  // a partial slot cannot hold an address; 0 is never inside one
  }
  std::vector<std::optional<DeviceRange>> found(n);
  allocations.find_all(candidates, found);
  for (uint32_t i = 0; i < n; ++i)
    if (candidates[i] != 0 && found[i]) slots[i].device_extent = found[i]->end() - slots[i].value;
  return slots;
}

}  // namespace msprobe::shim
