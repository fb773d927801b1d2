// Raw runtime kernels (shim/device/kernel_binaries.h): kernel symbols of registered device binaries (the stand-in's
// real fake_kernels.o, and ELF images written here byte by byte with <elf.h>), stub and tiling-key names,
// and the classification of an argument blob's slots against the allocation table.
#include "shim/device/kernel_binaries.h"

#include <elf.h>
#include <gtest/gtest.h>

#include <cstdlib>
#include <cstring>
#include <fstream>
#include <iterator>
#include <set>
#include <string>
#include <vector>

using namespace msprobe::shim;

namespace {

std::vector<char> read_file(const std::string &path) {
  std::ifstream f(path, std::ios::binary);
  return std::vector<char>(std::istreambuf_iterator<char>(f), {});
}

std::vector<char> stand_in_kernels() {
  const char *home = std::getenv("ASCEND_HOME_PATH");
  return home ? read_file(std::string(home) + "/opp/kernel/fake_kernels.o") : std::vector<char>{};
}

struct SymSpec {
  std::string name;
  unsigned char type = STT_OBJECT;
  unsigned char bind = STB_GLOBAL;
  bool defined = true;
};

// A minimal ELF64 relocatable object: .data holding 8 bytes per defined symbol, .symtab, .strtab, .shstrtab.
std::vector<char> make_elf(const std::vector<SymSpec> &syms) {
  auto append = [](std::vector<char> &v, const void *p, size_t n) {
    v.insert(v.end(), static_cast<const char *>(p), static_cast<const char *>(p) + n);
  };
  auto align8 = [](std::vector<char> &v) { v.resize((v.size() + 7) & ~size_t(7), 0); };
  std::string strtab(1, '\0'), shstrtab(1, '\0');
  auto add_str = [](std::string &tab, const std::string &s) {
    size_t off = tab.size();
    tab += s;
    tab += '\0';
    return (uint32_t)off;
  };
  const uint32_t n_data = add_str(shstrtab, ".data"), n_symtab = add_str(shstrtab, ".symtab"),
                 n_strtab = add_str(shstrtab, ".strtab"), n_shstrtab = add_str(shstrtab, ".shstrtab");
  // Locals first, as ELF requires; sh_info = index of the first non-local.
  std::vector<Elf64_Sym> table(1);  // symbol 0 is null
  uint64_t data_size = 0;
  for (int pass = 0; pass < 2; ++pass)
    for (const SymSpec &s : syms) {
      if ((s.bind == STB_LOCAL) != (pass == 0)) continue;
      Elf64_Sym e{};
      e.st_name = add_str(strtab, s.name);
      e.st_info = (unsigned char)ELF64_ST_INFO(s.bind, s.type);
      e.st_shndx = s.defined ? 1 : SHN_UNDEF;
      if (s.defined) {
        e.st_value = data_size;
        e.st_size = 8;
        data_size += 8;
      }
      table.push_back(e);
    }
  uint32_t first_global = 1;
  for (const SymSpec &s : syms) first_global += s.bind == STB_LOCAL;

  std::vector<char> out(sizeof(Elf64_Ehdr), 0);
  const uint64_t data_off = out.size();
  out.resize(out.size() + data_size, 'k');
  const uint64_t strtab_off = out.size();
  append(out, strtab.data(), strtab.size());
  const uint64_t shstrtab_off = out.size();
  append(out, shstrtab.data(), shstrtab.size());
  align8(out);
  const uint64_t symtab_off = out.size();
  append(out, table.data(), table.size() * sizeof(Elf64_Sym));
  align8(out);
  const uint64_t sh_off = out.size();
  Elf64_Shdr sh[5]{};
  sh[1] = Elf64_Shdr{n_data, SHT_PROGBITS, SHF_ALLOC | SHF_WRITE, 0, data_off, data_size, 0, 0, 8, 0};
  sh[2] = Elf64_Shdr{n_symtab, SHT_SYMTAB, 0, 0, symtab_off, table.size() * sizeof(Elf64_Sym), 3, first_global, 8,
                     sizeof(Elf64_Sym)};
  sh[3] = Elf64_Shdr{n_strtab, SHT_STRTAB, 0, 0, strtab_off, strtab.size(), 0, 0, 1, 0};
  sh[4] = Elf64_Shdr{n_shstrtab, SHT_STRTAB, 0, 0, shstrtab_off, shstrtab.size(), 0, 0, 1, 0};
  append(out, sh, sizeof sh);

  Elf64_Ehdr eh{};
  std::memcpy(eh.e_ident, ELFMAG, SELFMAG);
  eh.e_ident[EI_CLASS] = ELFCLASS64;
  eh.e_ident[EI_DATA] = ELFDATA2LSB;
  eh.e_ident[EI_VERSION] = EV_CURRENT;
  eh.e_type = ET_REL;
  eh.e_machine = EM_X86_64;
  eh.e_version = EV_CURRENT;
  eh.e_shoff = sh_off;
  eh.e_ehsize = sizeof(Elf64_Ehdr);
  eh.e_shentsize = sizeof(Elf64_Shdr);
  eh.e_shnum = 5;
  eh.e_shstrndx = 4;
  std::memcpy(out.data(), &eh, sizeof eh);
  return out;
}

const void *h(uint64_t v) { return reinterpret_cast<const void *>(v); }

}  // namespace

TEST(ElfKernelSymbols, StandInBinaryListsItsEightKernels) {
  std::vector<char> image = stand_in_kernels();
  ASSERT_FALSE(image.empty()) << "fake_kernels.o not found under ASCEND_HOME_PATH";
  auto syms = elf_kernel_symbols(image.data(), image.size());
  // device_kernels/README.md's table.
  const std::set<std::string> want{"fake_vector_add",    "fake_vector_add_fp16", "fake_scale",         "fake_relu",
                                   "fake_elementwise_1", "fake_elementwise_2",   "fake_elementwise_3", "fake_elementwise_4"};
  EXPECT_EQ(std::set<std::string>(syms.begin(), syms.end()), want);
  EXPECT_EQ(syms.size(), want.size());
}

TEST(ElfKernelSymbols, GlobalDefinedFunctionsAndObjectsOnly) {
  auto image = make_elf({{"kernel_a", STT_OBJECT},
                         {"kernel_b", STT_FUNC},
                         {"weak_kernel", STT_FUNC, STB_WEAK},
                         {"local_helper", STT_OBJECT, STB_LOCAL},
                         {"imported", STT_FUNC, STB_GLOBAL, false},
                         {"a_section_like", STT_SECTION}});
  auto syms = elf_kernel_symbols(image.data(), image.size());
  EXPECT_EQ(syms, (std::vector<std::string>{"kernel_a", "kernel_b", "weak_kernel"}));
}

TEST(ElfKernelSymbols, NonElfAndDamagedImagesGiveNothing) {
  const char text[] = "this is not an ELF image at all, only some bytes";
  EXPECT_TRUE(elf_kernel_symbols(text, sizeof text).empty());
  EXPECT_TRUE(elf_kernel_symbols(nullptr, 100).empty());
  auto image = make_elf({{"kernel_a"}});
  EXPECT_TRUE(elf_kernel_symbols(image.data(), 10).empty());
  // Section headers cut off: libelf refuses, the caller gets no symbols and no crash.
  EXPECT_TRUE(elf_kernel_symbols(image.data(), image.size() - 100).empty());
  // The caller's bytes are not touched.
  auto copy = image;
  (void)elf_kernel_symbols(image.data(), image.size());
  EXPECT_EQ(copy, image);
}

TEST(KernelBinaries, StubNamesPreferTheBinarysSymbol) {
  KernelBinaries r;
  std::vector<char> image = stand_in_kernels();
  ASSERT_FALSE(image.empty());
  r.register_binary(h(0x100), image.data(), image.size());
  static const char stub_a = 0, stub_b = 0, stub_c = 0, stub_d = 0;
  r.register_function(h(0x100), &stub_a, "fake_vector_add", "fake_vector_add");
  r.register_function(h(0x100), &stub_b, "my_relu_stub", "fake_relu");     // kernelInfoExt is the symbol
  r.register_function(h(0x100), &stub_c, "fake_scale", "not a symbol");    // only stubName is
  r.register_function(h(0x100), &stub_d, "host_name", nullptr);            // neither: the string given
  EXPECT_EQ(r.stub_kernel(&stub_a), "fake_vector_add");
  EXPECT_EQ(r.stub_kernel(&stub_b), "fake_relu");
  EXPECT_EQ(r.stub_kernel(&stub_c), "fake_scale");
  EXPECT_EQ(r.stub_kernel(&stub_d), "host_name");
  static const char never = 0;
  EXPECT_FALSE(r.stub_kernel(&never));
}

TEST(KernelBinaries, HandleLaunchesNameTheKernelOfTheirTilingKey) {
  KernelBinaries r;
  std::vector<char> image = stand_in_kernels();
  ASSERT_FALSE(image.empty());
  r.register_binary(h(0x200), image.data(), image.size());
  EXPECT_EQ(r.handle_kernel(h(0x200), 1), "fake_elementwise_1");
  EXPECT_EQ(r.handle_kernel(h(0x200), 4), "fake_elementwise_4");
  EXPECT_FALSE(r.handle_kernel(h(0x200), 5));
  EXPECT_FALSE(r.handle_kernel(h(0x300), 1));  // unknown handle
}

TEST(KernelBinaries, AmbiguousOrMalformedTilingKeysNameNothing) {
  KernelBinaries r;
  auto image = make_elf({{"add_7"}, {"mul_7"}, {"sub_8"}, {"div_"}, {"abs_x9"}, {"big_99999999999999999999999"}});
  r.register_binary(h(0x10), image.data(), image.size());
  EXPECT_FALSE(r.handle_kernel(h(0x10), 7));
  EXPECT_EQ(r.handle_kernel(h(0x10), 8), "sub_8");
  EXPECT_FALSE(r.handle_kernel(h(0x10), 9));
  EXPECT_EQ(r.symbols(h(0x10)).size(), 6u);
}

TEST(KernelBinaries, UnregisterForgetsTheBinaryAndItsStubs) {
  KernelBinaries r;
  auto image = make_elf({{"k_1"}, {"k_2"}});
  static const char s1 = 0, s2 = 0;
  r.register_binary(h(0x40), image.data(), image.size());
  r.register_binary(h(0x50), image.data(), image.size());
  r.register_function(h(0x40), &s1, "k_1", "k_1");
  r.register_function(h(0x50), &s2, "k_2", "k_2");
  r.unregister_binary(h(0x40));
  EXPECT_FALSE(r.stub_kernel(&s1));
  EXPECT_FALSE(r.handle_kernel(h(0x40), 1));
  EXPECT_EQ(r.stub_kernel(&s2), "k_2");
  // The runtime hands the same handle value to a new binary: nothing of the old one survives.
  auto other = make_elf({{"z_1"}});
  r.register_function(h(0x50), &s1, "k_1", "k_1");
  r.register_binary(h(0x50), other.data(), other.size());
  EXPECT_FALSE(r.stub_kernel(&s1));
  EXPECT_FALSE(r.stub_kernel(&s2));
  EXPECT_EQ(r.handle_kernel(h(0x50), 1), "z_1");
}

TEST(ScanArgsBlob, DevicePointersIncludingInteriorOnesAndRawValues) {
  DeviceAllocations a;
  a.insert(h(0x10000), 32);  // x
  a.insert(h(0x20000), 64);  // y (the blob points 16 bytes in)
  a.insert(h(0x30000), 32);  // z
  const uint64_t blob[5] = {0x10000, 0x20010, 0x30000, 8, 0x30020 /* one past z */};
  auto s = scan_args_blob(blob, sizeof blob, a);
  ASSERT_EQ(s.size(), 5u);
  EXPECT_EQ(s[0].device_extent, 32u);
  EXPECT_EQ(s[1].device_extent, 48u);
  EXPECT_EQ(s[2].device_extent, 32u);
  EXPECT_FALSE(s[3].device_extent);
  EXPECT_EQ(s[3].value, 8u);
  EXPECT_FALSE(s[4].device_extent);
  for (size_t i = 0; i < s.size(); ++i) {
    EXPECT_EQ(s[i].offset, 8 * i);
    EXPECT_EQ(s[i].bytes, 8u);
    EXPECT_EQ(s[i].value, blob[i]);
  }
}

TEST(ScanArgsBlob, ATrailingPartialSlotIsAValueOfItsOwnWidth) {
  DeviceAllocations a;
  a.insert(h(0x10000), 16);
  unsigned char blob[28];
  const uint64_t x = 0x10000, n = 4;
  const float scale = 2.5f;
  std::memcpy(blob, &x, 8);
  std::memcpy(blob + 8, &x, 8);
  std::memcpy(blob + 16, &n, 8);
  std::memcpy(blob + 24, &scale, 4);
  auto s = scan_args_blob(blob, sizeof blob, a);
  ASSERT_EQ(s.size(), 4u);
  EXPECT_EQ(s[3].offset, 24u);
  EXPECT_EQ(s[3].bytes, 4u);
  uint32_t bits;
  std::memcpy(&bits, &scale, 4);
  EXPECT_EQ(s[3].value, bits);
  EXPECT_FALSE(s[3].device_extent);
  EXPECT_EQ(s[1].device_extent, 16u);
  EXPECT_TRUE(scan_args_blob(nullptr, 16, a).empty());
  EXPECT_TRUE(scan_args_blob(blob, 0, a).empty());
}
