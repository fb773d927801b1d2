// Raw kernel path of libruntime: the device binary is a real ELF (read here with libelf), registered
// with rtDevBinaryRegister/rtRegisterAllKernel and launched with rtKernelLaunch, rtKernelLaunchWithFlag(V2)
// and rtKernelLaunchWithHandle(V2); results are checked against plain loops written here.
#include <fcntl.h>
#include <gelf.h>
#include <gtest/gtest.h>
#include <libelf.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <iterator>
#include <random>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "../time_scale.h"
#include "acl/acl_base.h"
#include "rt_buffers.h"
#include "runtime/rt.h"

#ifndef ACL_ERROR_RT_CONTEXT_NULL
#define ACL_ERROR_RT_CONTEXT_NULL 107002
#endif

namespace {

// Before any stream task runs (the *_async ctests): a slower machine gets a longer task delay, so that the scaled
// "did not wait" bound of AsyncResultsAreValidOnlyAfterSynchronize stays under it.
[[maybe_unused]] const bool g_delay_scaled = msprobe::test::scale_fake_cann_task_delay();

std::string kernel_path() {
  const char *home = std::getenv("ASCEND_HOME_PATH");
  return std::string(home ? home : ".") + "/opp/kernel/fake_kernels.o";
}

std::vector<char> read_file(const std::string &path) {
  std::ifstream f(path, std::ios::binary);
  return std::vector<char>(std::istreambuf_iterator<char>(f), std::istreambuf_iterator<char>());
}

// Packs the TBE-style args blob: 64-bit device addresses, then scalars.
struct Args {
  std::vector<char> bytes;
  Args &ptr(const void *p) { return u64(reinterpret_cast<uint64_t>(p)); }
  Args &u64(uint64_t v) { return raw(&v, 8); }
  Args &f32(float v) { return raw(&v, 4); }
  Args &raw(const void *p, size_t n) {
    bytes.insert(bytes.end(), static_cast<const char *>(p), static_cast<const char *>(p) + n);
    return *this;
  }
  uint32_t size() const { return (uint32_t)bytes.size(); }
};

rtArgsEx_t args_ex(Args &a) {
  rtArgsEx_t info{};
  info.args = a.bytes.data();
  info.argsSize = a.size();
  return info;
}

// IEEE half decode, written independently of the stand-in's conversions.
float half_bits_to_float(uint16_t h) {
  int e = (h >> 10) & 0x1f, m = h & 0x3ff;
  float mag = e == 0 ? std::ldexp((float)m, -24) : std::ldexp(1.0f + m / 1024.0f, e - 15);
  return (h & 0x8000) ? -mag : mag;
}
// Encode of values exactly representable as normal halves (checked by decoding).
uint16_t float_to_half_bits(float f) {
  uint16_t sign = f < 0 ? 0x8000 : 0;
  float a = std::fabs(f);
  if (a == 0.0f) return sign;
  int e;
  float frac = std::frexp(a, &e);  // a = frac * 2^e, frac in [0.5, 1)
  uint16_t bits = (uint16_t)(sign | ((e - 1 + 15) << 10) | (uint16_t)std::lround((frac * 2 - 1) * 1024));
  EXPECT_EQ(half_bits_to_float(bits), f) << "test value not representable in fp16";
  return bits;
}

class RtKernels : public ::testing::Test, protected RtBuffers {
 protected:
  static void SetUpTestSuite() { ASSERT_EQ(rtSetDevice(0), RT_ERROR_NONE); }
  void SetUp() override {
    ASSERT_EQ(rtSetDevice(0), RT_ERROR_NONE);
    ASSERT_EQ(rtStreamCreate(&stream_, 0), RT_ERROR_NONE);
    image_ = read_file(kernel_path());
    ASSERT_FALSE(image_.empty()) << "missing " << kernel_path();
  }
  void TearDown() override {
    free_all();
    rtStreamDestroy(stream_);
  }

  rtDevBinary_t binary(uint32_t magic = RT_DEV_BINARY_MAGIC_ELF) {
    return rtDevBinary_t{magic, 0, image_.data(), image_.size()};
  }
  static std::vector<float> random_floats(size_t n, unsigned seed) {
    std::mt19937 rng(seed);
    std::uniform_real_distribution<float> dist(-4.0f, 4.0f);
    std::vector<float> v(n);
    for (float &x : v) x = dist(rng);
    return v;
  }

  rtStream_t stream_ = nullptr;
  std::vector<char> image_;
};

// ---- the binary format ----

TEST_F(RtKernels, KernelBinaryIsAnElfWhoseSymbolTableNamesTheKernels) {
  ASSERT_NE(elf_version(EV_CURRENT), EV_NONE);
  int fd = open(kernel_path().c_str(), O_RDONLY);
  ASSERT_GE(fd, 0);
  Elf *elf = elf_begin(fd, ELF_C_READ, nullptr);
  ASSERT_NE(elf, nullptr);
  EXPECT_EQ(elf_kind(elf), ELF_K_ELF);
  size_t shstrndx = 0;
  ASSERT_EQ(elf_getshdrstrndx(elf, &shstrndx), 0);
  size_t kernel_section = 0;
  std::set<std::string> kernels;
  std::string add_descriptor;
  Elf_Scn *symtab = nullptr;
  GElf_Shdr symtab_hdr{};
  for (Elf_Scn *scn = elf_nextscn(elf, nullptr); scn; scn = elf_nextscn(elf, scn)) {
    GElf_Shdr sh;
    ASSERT_NE(gelf_getshdr(scn, &sh), nullptr);
    if (std::strcmp(elf_strptr(elf, shstrndx, sh.sh_name), ".fake_kernel") == 0) kernel_section = elf_ndxscn(scn);
    if (sh.sh_type == SHT_SYMTAB) {
      symtab = scn;
      symtab_hdr = sh;
    }
  }
  ASSERT_NE(kernel_section, 0u);
  ASSERT_NE(symtab, nullptr);
  Elf_Data *syms = elf_getdata(symtab, nullptr);
  Elf_Data *kdata = elf_getdata(elf_getscn(elf, kernel_section), nullptr);
  for (size_t i = 0; i < symtab_hdr.sh_size / symtab_hdr.sh_entsize; ++i) {
    GElf_Sym sym;
    ASSERT_NE(gelf_getsym(syms, (int)i, &sym), nullptr);
    if (sym.st_shndx != kernel_section || GELF_ST_TYPE(sym.st_info) != STT_OBJECT) continue;
    std::string name = elf_strptr(elf, symtab_hdr.sh_link, sym.st_name);
    kernels.insert(name);
    if (name == "fake_vector_add") add_descriptor = static_cast<const char *>(kdata->d_buf) + sym.st_value;
  }
  elf_end(elf);
  close(fd);
  std::set<std::string> expected = {"fake_vector_add",    "fake_vector_add_fp16", "fake_scale",
                                    "fake_relu",          "fake_elementwise_1",   "fake_elementwise_2",
                                    "fake_elementwise_3", "fake_elementwise_4"};
  EXPECT_EQ(kernels, expected);
  EXPECT_NE(add_descriptor.find("impl=vector_add"), std::string::npos) << add_descriptor;
}

TEST_F(RtKernels, RegistrationRefusesBadBinaries) {
  void *h = nullptr;
  rtDevBinary_t bin = binary(RT_DEV_BINARY_MAGIC_PLAIN);  // right bytes, non-ELF magic
  EXPECT_EQ(rtDevBinaryRegister(&bin, &h), ACL_ERROR_RT_PARAM_INVALID);
  std::vector<char> garbage(4096);
  std::mt19937 rng(7);
  for (char &c : garbage) c = (char)rng();
  bin = rtDevBinary_t{RT_DEV_BINARY_MAGIC_ELF, 0, garbage.data(), garbage.size()};
  EXPECT_EQ(rtDevBinaryRegister(&bin, &h), ACL_ERROR_RT_PARAM_INVALID);
  EXPECT_EQ(rtRegisterAllKernel(&bin, &h), ACL_ERROR_RT_PARAM_INVALID);
  // A truncated ELF: the header survives, the sections do not.
  bin = rtDevBinary_t{RT_DEV_BINARY_MAGIC_ELF, 0, image_.data(), 64};
  EXPECT_EQ(rtDevBinaryRegister(&bin, &h), ACL_ERROR_RT_PARAM_INVALID);
  // A real ELF without kernels (this test executable).
  std::vector<char> self = read_file("/proc/self/exe");
  bin = rtDevBinary_t{RT_DEV_BINARY_MAGIC_ELF, 0, self.data(), self.size()};
  EXPECT_EQ(rtDevBinaryRegister(&bin, &h), ACL_ERROR_RT_PARAM_INVALID);
  bin = rtDevBinary_t{RT_DEV_BINARY_MAGIC_ELF, 0, nullptr, 100};
  EXPECT_EQ(rtDevBinaryRegister(&bin, &h), ACL_ERROR_RT_PARAM_INVALID);
  EXPECT_EQ(rtDevBinaryRegister(nullptr, &h), ACL_ERROR_RT_PARAM_INVALID);
  bin = binary();
  EXPECT_EQ(rtDevBinaryRegister(&bin, nullptr), ACL_ERROR_RT_PARAM_INVALID);
  EXPECT_EQ(rtDevBinaryUnRegister(&bin), ACL_ERROR_RT_PARAM_INVALID);  // not a handle
}

// Corrupted and truncated images are refused or, where the damage misses everything the runtime
// reads, accepted: never a crash.
TEST_F(RtKernels, CorruptedBinariesNeverCrash) {
  std::mt19937 rng(11);
  int accepted = 0;
  for (int iter = 0; iter < 300; ++iter) {
    std::vector<char> bad = image_;
    if (iter % 3 == 0) {
      bad.resize(std::uniform_int_distribution<size_t>(4, image_.size() - 1)(rng));
    } else {
      for (int k = 0; k < 8; ++k) bad[std::uniform_int_distribution<size_t>(4, bad.size() - 1)(rng)] = (char)rng();
    }
    rtDevBinary_t bin{RT_DEV_BINARY_MAGIC_ELF, 0, bad.data(), bad.size()};
    void *h = nullptr;
    rtError_t rc = (iter & 1) ? rtRegisterAllKernel(&bin, &h) : rtDevBinaryRegister(&bin, &h);
    ASSERT_TRUE(rc == RT_ERROR_NONE || rc == ACL_ERROR_RT_PARAM_INVALID) << rc;
    if (rc == RT_ERROR_NONE) {
      ++accepted;
      EXPECT_EQ(rtDevBinaryUnRegister(h), RT_ERROR_NONE);
    }
  }
  EXPECT_LT(accepted, 300);
}

TEST_F(RtKernels, FunctionRegisterChecksHandleAndSymbol) {
  rtDevBinary_t bin = binary();
  void *h = nullptr;
  ASSERT_EQ(rtDevBinaryRegister(&bin, &h), RT_ERROR_NONE);
  static const char stub = 0, stub2 = 0;
  EXPECT_EQ(rtFunctionRegister(h, &stub, "x", "no_such_kernel", FUNC_MODE_NORMAL), ACL_ERROR_RT_PARAM_INVALID);
  EXPECT_EQ(rtFunctionRegister(&bin, &stub, "x", "fake_relu", FUNC_MODE_NORMAL), ACL_ERROR_RT_PARAM_INVALID);
  EXPECT_EQ(rtFunctionRegister(h, nullptr, "x", "fake_relu", FUNC_MODE_NORMAL), ACL_ERROR_RT_PARAM_INVALID);
  EXPECT_EQ(rtFunctionRegister(h, &stub, "fake_relu", "fake_relu", FUNC_MODE_NORMAL), RT_ERROR_NONE);
  EXPECT_EQ(rtFunctionRegister(h, &stub, "fake_relu", "fake_relu", FUNC_MODE_NORMAL), RT_ERROR_NONE);  // same again
  EXPECT_EQ(rtFunctionRegister(h, &stub, "fake_scale", "fake_scale", FUNC_MODE_NORMAL), ACL_ERROR_RT_PARAM_INVALID);
  EXPECT_EQ(rtFunctionRegister(h, &stub2, "fake_scale", "fake_scale", FUNC_MODE_NORMAL), RT_ERROR_NONE);
  // Unregistering the binary forgets its stubs.
  ASSERT_EQ(rtDevBinaryUnRegister(h), RT_ERROR_NONE);
  EXPECT_EQ(rtDevBinaryUnRegister(h), ACL_ERROR_RT_PARAM_INVALID);
  Args a;
  a.ptr(nullptr).ptr(nullptr).u64(0);
  EXPECT_EQ(rtKernelLaunch(&stub, 1, a.bytes.data(), a.size(), nullptr, stream_), ACL_ERROR_RT_PARAM_INVALID);
}

// ---- launches vs reference ----

TEST_F(RtKernels, KernelLaunchVectorAddCopiesArgsAtLaunch) {
  rtDevBinary_t bin = binary();
  void *h = nullptr;
  ASSERT_EQ(rtDevBinaryRegister(&bin, &h), RT_ERROR_NONE);
  // The image may be freed after registration: the runtime keeps what it needs.
  image_.assign(image_.size(), 0);
  static const char stub = 0;
  ASSERT_EQ(rtFunctionRegister(h, &stub, "fake_vector_add", "fake_vector_add", FUNC_MODE_NORMAL), RT_ERROR_NONE);
  const size_t n = 1000;
  auto x = random_floats(n, 1), y = random_floats(n, 2);
  void *dx = upload(x), *dy = upload(y), *dz = alloc(n * 4);
  Args a;
  a.ptr(dx).ptr(dy).ptr(dz).u64(n);
  ASSERT_EQ(rtKernelLaunch(&stub, 8, a.bytes.data(), a.size(), nullptr, stream_), RT_ERROR_NONE);
  std::fill(a.bytes.begin(), a.bytes.end(), (char)0xff);  // the host reuses its args buffer at once
  ASSERT_EQ(rtStreamSynchronize(stream_), RT_ERROR_NONE);
  auto z = download<float>(dz, n);
  for (size_t i = 0; i < n; ++i) ASSERT_EQ(z[i], x[i] + y[i]) << i;
  EXPECT_EQ(rtDevBinaryUnRegister(h), RT_ERROR_NONE);
}

TEST_F(RtKernels, KernelLaunchWithFlagScaleAndRelu) {
  rtDevBinary_t bin = binary(RT_DEV_BINARY_MAGIC_ELF_AIVEC);
  void *h = nullptr;
  ASSERT_EQ(rtDevBinaryRegister(&bin, &h), RT_ERROR_NONE);
  static const char scale_stub = 0, relu_stub = 0;
  ASSERT_EQ(rtFunctionRegister(h, &scale_stub, "scale", "fake_scale", FUNC_MODE_NORMAL), RT_ERROR_NONE);
  ASSERT_EQ(rtFunctionRegister(h, &relu_stub, "relu", "fake_relu", FUNC_MODE_NORMAL), RT_ERROR_NONE);
  const size_t n = 333;
  auto x = random_floats(n, 3);
  void *dx = upload(x), *dy = alloc(n * 4), *dr = alloc(n * 4);
  Args sa;
  sa.ptr(dx).ptr(dy).u64(n).f32(-2.5f);
  rtArgsEx_t si = args_ex(sa);
  ASSERT_EQ(rtKernelLaunchWithFlag(&scale_stub, 4, &si, nullptr, stream_, RT_KERNEL_DEFAULT), RT_ERROR_NONE);
  Args ra;
  ra.ptr(dy).ptr(dr).u64(n);  // relu of the scaled values: stream order makes y ready
  rtArgsEx_t ri = args_ex(ra);
  rtTaskCfgInfo_t cfg{};
  ASSERT_EQ(rtKernelLaunchWithFlagV2(&relu_stub, 4, &ri, nullptr, stream_, RT_KERNEL_DUMPFLAG, &cfg), RT_ERROR_NONE);
  ASSERT_EQ(rtStreamSynchronize(stream_), RT_ERROR_NONE);
  auto y = download<float>(dy, n), r = download<float>(dr, n);
  for (size_t i = 0; i < n; ++i) {
    float want = x[i] * -2.5f;
    ASSERT_FLOAT_EQ(y[i], want) << i;
    ASSERT_EQ(r[i], want > 0 ? want : 0.0f) << i;
  }
  rtDevBinaryUnRegister(h);
}

TEST_F(RtKernels, KernelLaunchWithHandlePicksKernelByTilingKey) {
  rtDevBinary_t bin = binary();
  void *h = nullptr;
  ASSERT_EQ(rtRegisterAllKernel(&bin, &h), RT_ERROR_NONE);
  const size_t n = 257;
  auto x = random_floats(n, 4), y = random_floats(n, 5);
  void *dx = upload(x), *dy = upload(y), *d1 = alloc(n * 4), *d2 = alloc(n * 4), *d3 = alloc(n * 4);
  Args a1, a2, a3;
  a1.ptr(dx).ptr(dy).ptr(d1).u64(n);
  a2.ptr(dx).ptr(d2).u64(n).f32(0.5f);
  a3.ptr(dx).ptr(d3).u64(n);
  rtArgsEx_t i1 = args_ex(a1), i2 = args_ex(a2), i3 = args_ex(a3);
  ASSERT_EQ(rtKernelLaunchWithHandle(h, 1, 2, &i1, nullptr, stream_, "add"), RT_ERROR_NONE);
  ASSERT_EQ(rtKernelLaunchWithHandleV2(h, 2, 2, &i2, nullptr, stream_, nullptr), RT_ERROR_NONE);
  rtTaskCfgInfo_t cfg{};
  ASSERT_EQ(rtKernelLaunchWithHandleV2(h, 3, 2, &i3, nullptr, stream_, &cfg), RT_ERROR_NONE);
  ASSERT_EQ(rtStreamSynchronize(stream_), RT_ERROR_NONE);
  auto r1 = download<float>(d1, n), r2 = download<float>(d2, n), r3 = download<float>(d3, n);
  for (size_t i = 0; i < n; ++i) {
    ASSERT_EQ(r1[i], x[i] + y[i]);
    ASSERT_EQ(r2[i], x[i] * 0.5f);
    ASSERT_EQ(r3[i], std::max(x[i], 0.0f));
  }
  // Tiling key 4: the fp16 vector add.
  std::vector<float> hx = {1.5f, -2.0f, 1024.0f, 0.25f}, hy = {0.5f, 3.0f, 1.0f, -0.125f};
  std::vector<uint16_t> bx, by;
  for (size_t i = 0; i < hx.size(); ++i) {
    bx.push_back(float_to_half_bits(hx[i]));
    by.push_back(float_to_half_bits(hy[i]));
  }
  void *hdx = upload(bx), *hdy = upload(by), *hdz = alloc(8);
  Args a4;
  a4.ptr(hdx).ptr(hdy).ptr(hdz).u64(4);
  rtArgsEx_t i4 = args_ex(a4);
  ASSERT_EQ(rtKernelLaunchWithHandle(h, 4, 1, &i4, nullptr, stream_, nullptr), RT_ERROR_NONE);
  ASSERT_EQ(rtStreamSynchronize(stream_), RT_ERROR_NONE);
  auto hz = download<uint16_t>(hdz, 4);
  for (size_t i = 0; i < 4; ++i) EXPECT_EQ(half_bits_to_float(hz[i]), hx[i] + hy[i]) << i;  // exact in fp16
  // Unknown tiling key, handle of a binary not registered with rtRegisterAllKernel, unknown handle.
  EXPECT_EQ(rtKernelLaunchWithHandle(h, 99, 1, &i1, nullptr, stream_, nullptr), ACL_ERROR_RT_PARAM_INVALID);
  void *plain = nullptr;
  ASSERT_EQ(rtDevBinaryRegister(&bin, &plain), RT_ERROR_NONE);
  EXPECT_EQ(rtKernelLaunchWithHandle(plain, 1, 1, &i1, nullptr, stream_, nullptr), ACL_ERROR_RT_PARAM_INVALID);
  EXPECT_EQ(rtKernelLaunchWithHandleV2(&bin, 1, 1, &i1, nullptr, stream_, nullptr), ACL_ERROR_RT_PARAM_INVALID);
  EXPECT_EQ(rtKernelLaunchWithHandle(h, 1, 1, nullptr, nullptr, stream_, nullptr), ACL_ERROR_RT_PARAM_INVALID);
  rtDevBinaryUnRegister(plain);
  rtDevBinaryUnRegister(h);
}

// rtArgsEx_t extras: the runtime places host inputs and tiling data that travel inside the blob in
// device memory and patches their device addresses into the given slots.
TEST_F(RtKernels, HostInputsAndTilingInsideTheArgsArePatchedToDeviceAddresses) {
  rtDevBinary_t bin = binary();
  void *h = nullptr;
  ASSERT_EQ(rtDevBinaryRegister(&bin, &h), RT_ERROR_NONE);
  static const char stub = 0;
  ASSERT_EQ(rtFunctionRegister(h, &stub, "add", "fake_vector_add", FUNC_MODE_NORMAL), RT_ERROR_NONE);
  std::vector<float> x = {1, 2, 3, 4}, y = {10, 20, 30, 40};
  void *dz = alloc(16);
  Args a;
  a.u64(0).u64(0).ptr(dz).u64(4).raw(x.data(), 16).raw(y.data(), 16);  // x at 32, y at 48
  rtHostInputInfo_t host_input{0, 32};
  rtArgsEx_t info = args_ex(a);
  info.hostInputInfoPtr = &host_input;
  info.hostInputInfoNum = 1;
  info.hasTiling = 1;
  info.tilingAddrOffset = 8;
  info.tilingDataOffset = 48;
  ASSERT_EQ(rtKernelLaunchWithFlag(&stub, 1, &info, nullptr, stream_, 0), RT_ERROR_NONE);
  ASSERT_EQ(rtStreamSynchronize(stream_), RT_ERROR_NONE);
  EXPECT_EQ(download<float>(dz, 4), (std::vector<float>{11, 22, 33, 44}));
  // Offsets outside the blob are refused at launch.
  info.tilingAddrOffset = a.size();
  EXPECT_EQ(rtKernelLaunchWithFlag(&stub, 1, &info, nullptr, stream_, 0), ACL_ERROR_RT_PARAM_INVALID);
  // isNoNeedH2DCopy: the args already live in device memory.
  Args d;
  void *dx = upload(x), *dy = upload(y);
  d.ptr(dx).ptr(dy).ptr(dz).u64(4);
  void *dargs = upload(d.bytes);
  rtArgsEx_t dev_info{};
  dev_info.args = dargs;
  dev_info.argsSize = d.size();
  dev_info.isNoNeedH2DCopy = 1;
  ASSERT_EQ(rtMemset(dz, 16, 0, 16), RT_ERROR_NONE);
  ASSERT_EQ(rtKernelLaunchWithFlagV2(&stub, 1, &dev_info, nullptr, stream_, 0, nullptr), RT_ERROR_NONE);
  ASSERT_EQ(rtStreamSynchronize(stream_), RT_ERROR_NONE);
  EXPECT_EQ(download<float>(dz, 4), (std::vector<float>{11, 22, 33, 44}));
  dev_info.args = d.bytes.data();  // a host pointer claimed to be device memory
  EXPECT_EQ(rtKernelLaunchWithFlag(&stub, 1, &dev_info, nullptr, stream_, 0), ACL_ERROR_RT_PARAM_INVALID);
  // Device-resident args without the flag: the runtime would have to read device memory from the host.
  EXPECT_EQ(rtKernelLaunch(&stub, 1, dargs, d.size(), nullptr, stream_), ACL_ERROR_RT_PARAM_INVALID);
  rtDevBinaryUnRegister(h);
}

// ---- misuse ----

TEST_F(RtKernels, LaunchArgumentErrors) {
  rtDevBinary_t bin = binary();
  void *h = nullptr;
  ASSERT_EQ(rtDevBinaryRegister(&bin, &h), RT_ERROR_NONE);
  static const char stub = 0, unknown = 0;
  ASSERT_EQ(rtFunctionRegister(h, &stub, "relu", "fake_relu", FUNC_MODE_NORMAL), RT_ERROR_NONE);
  void *dx = alloc(16);
  Args a;
  a.ptr(dx).ptr(dx).u64(4);
  EXPECT_EQ(rtKernelLaunch(&unknown, 1, a.bytes.data(), a.size(), nullptr, stream_), ACL_ERROR_RT_PARAM_INVALID);
  EXPECT_EQ(rtKernelLaunch(nullptr, 1, a.bytes.data(), a.size(), nullptr, stream_), ACL_ERROR_RT_PARAM_INVALID);
  EXPECT_EQ(rtKernelLaunch(&stub, 0, a.bytes.data(), a.size(), nullptr, stream_), ACL_ERROR_RT_PARAM_INVALID);
  EXPECT_EQ(rtKernelLaunch(&stub, 1, nullptr, 24, nullptr, stream_), ACL_ERROR_RT_PARAM_INVALID);
  EXPECT_EQ(rtKernelLaunchWithFlag(&stub, 1, nullptr, nullptr, stream_, 0), ACL_ERROR_RT_PARAM_INVALID);
  int not_a_stream = 0;
  EXPECT_EQ(rtKernelLaunch(&stub, 1, a.bytes.data(), a.size(), nullptr, &not_a_stream), ACL_ERROR_RT_PARAM_INVALID);
  // Without a current device on the launching thread.
  int rc = -1;
  std::thread([&] { rc = rtKernelLaunch(&stub, 1, a.bytes.data(), a.size(), nullptr, stream_); }).join();
  EXPECT_EQ(rc, ACL_ERROR_RT_CONTEXT_NULL);
  EXPECT_EQ(rtStreamSynchronize(stream_), RT_ERROR_NONE);
  rtDevBinaryUnRegister(h);
}

TEST_F(RtKernels, BadDevicePointerInArgsIsAnAicoreExceptionOnSync) {
  rtDevBinary_t bin = binary();
  void *h = nullptr;
  ASSERT_EQ(rtDevBinaryRegister(&bin, &h), RT_ERROR_NONE);
  static const char stub = 0;
  ASSERT_EQ(rtFunctionRegister(h, &stub, "add", "fake_vector_add", FUNC_MODE_NORMAL), RT_ERROR_NONE);
  std::vector<float> host(64, 1.0f);
  void *dx = upload(host), *dz = alloc(256);
  // A host address where a device address belongs: the launch is accepted, the kernel faults.
  Args a;
  a.ptr(dx).ptr(host.data()).ptr(dz).u64(64);
  ASSERT_EQ(rtKernelLaunch(&stub, 1, a.bytes.data(), a.size(), nullptr, stream_), RT_ERROR_NONE);
  EXPECT_EQ(rtStreamSynchronize(stream_), ACL_ERROR_RT_AICORE_EXCEPTION);
  // Reading past the end of a device allocation.
  Args b;
  b.ptr(dx).ptr(dx).ptr(dz).u64(65);
  ASSERT_EQ(rtKernelLaunch(&stub, 1, b.bytes.data(), b.size(), nullptr, stream_), RT_ERROR_NONE);
  EXPECT_EQ(rtStreamSynchronize(stream_), ACL_ERROR_RT_AICORE_EXCEPTION);
  // An args blob shorter than the kernel's layout.
  ASSERT_EQ(rtKernelLaunch(&stub, 1, a.bytes.data(), 16, nullptr, stream_), RT_ERROR_NONE);
  EXPECT_EQ(rtStreamSynchronize(stream_), ACL_ERROR_RT_AICORE_EXCEPTION);
  // A freed buffer.
  void *gone = nullptr;
  ASSERT_EQ(rtMalloc(&gone, 256, RT_MEMORY_HBM, 0), RT_ERROR_NONE);
  ASSERT_EQ(rtFree(gone), RT_ERROR_NONE);
  Args c;
  c.ptr(dx).ptr(gone).ptr(dz).u64(64);
  ASSERT_EQ(rtKernelLaunch(&stub, 1, c.bytes.data(), c.size(), nullptr, stream_), RT_ERROR_NONE);
  EXPECT_EQ(rtStreamSynchronize(stream_), ACL_ERROR_RT_AICORE_EXCEPTION);
  // The error is reported once; the stream keeps working.
  Args ok;
  ok.ptr(dx).ptr(dx).ptr(dz).u64(64);
  ASSERT_EQ(rtKernelLaunch(&stub, 1, ok.bytes.data(), ok.size(), nullptr, stream_), RT_ERROR_NONE);
  ASSERT_EQ(rtStreamSynchronize(stream_), RT_ERROR_NONE);
  EXPECT_EQ(download<float>(dz, 64), std::vector<float>(64, 2.0f));
  rtDevBinaryUnRegister(h);
}

// Registered by aclop_rt.cmake as a second ctest with FAKE_CANN_TASK_DELAY_US set: every stream task
// then starts late, so a read before synchronization observably sees the old data.
TEST_F(RtKernels, AsyncResultsAreValidOnlyAfterSynchronize) {
  if (std::getenv("FAKE_CANN_TASK_DELAY_US") == nullptr) GTEST_SKIP() << "runs as fake_cann_rt_kernels_async";
  rtDevBinary_t bin = binary();
  void *h = nullptr;
  ASSERT_EQ(rtRegisterAllKernel(&bin, &h), RT_ERROR_NONE);
  std::vector<float> x(128, 3.0f), y(128, 4.0f);
  void *dx = upload(x), *dy = upload(y), *dz = alloc(512);
  Args a;
  a.ptr(dx).ptr(dy).ptr(dz).u64(128);
  rtArgsEx_t info = args_ex(a);
  auto t0 = std::chrono::steady_clock::now();
  ASSERT_EQ(rtKernelLaunchWithHandle(h, 1, 1, &info, nullptr, stream_, nullptr), RT_ERROR_NONE);
  // Did not wait (the task starts FAKE_CANN_TASK_DELAY_US = 20 ms, scaled, later).
  EXPECT_LT(std::chrono::steady_clock::now() - t0, msprobe::test::scaled(std::chrono::milliseconds(15)));
  EXPECT_EQ(download<float>(dz, 128), std::vector<float>(128, 0.0f));  // stale: the kernel has not run
  ASSERT_EQ(rtStreamSynchronize(stream_), RT_ERROR_NONE);
  EXPECT_EQ(download<float>(dz, 128), std::vector<float>(128, 7.0f));
  rtDevBinaryUnRegister(h);
}

}  // namespace
