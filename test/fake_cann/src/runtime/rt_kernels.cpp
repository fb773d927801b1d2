// libruntime.so: device binaries and raw kernel launches (runtime/kernel.h).
//
// A device binary of the stand-in is a real ELF object (device_kernels/README.md): every data symbol
// in section .fake_kernel is a kernel whose bytes name a built-in CPU implementation
// ("fake-kernel v1 impl=vector_add dtype=float32"). Launch arguments follow the TBE convention: a
// packed blob of 64-bit device addresses (inputs, then outputs) followed by scalars. As on the device,
// the runtime copies the blob into device memory at launch (the host may reuse its buffer at once) and
// the kernel reads it, and every tensor, through device_bytes(): a bad address is a KernelError, which
// the next synchronization reports as ACL_ERROR_RT_AICORE_EXCEPTION.
//
// impl=op_task is the kernel the op libraries (aclnn phase 2, aclop) launch through this same public API
// (fakecann/op_task.h): its tiling data names the computation the op library prepared on the host.
#include <gelf.h>
#include <libelf.h>

#include <cstring>
#include <map>
#include <memory>
#include <mutex>
#include <sstream>
#include <string>
#include <vector>

#include "acl/acl_base.h"
#include "fakecann/call_counters.h"
#include "fakecann/device.h"
#include "fakecann/dtype.h"
#include "fakecann/op_task.h"
#include "fakecann/rt_internal.h"
#include "fakecann/stream.h"
#include "fakecann/tensor_io.h"
#include "runtime/rt.h"

namespace fakecann {

namespace {

enum class Impl { VectorAdd, Scale, Relu, OpTask };

struct KernelDef {
  std::string symbol;
  Impl impl = Impl::VectorAdd;
  aclDataType dtype = ACL_FLOAT;
};

struct Binary {
  bool all_kernel = false;  // registered by rtRegisterAllKernel: launchable by tiling key
  std::map<std::string, KernelDef> kernels;
};

struct Stub {
  Binary *binary;
  KernelDef kernel;
};

std::mutex g_mu;
// Handles are Binary*; leaked on purpose so late launches from static destructors never see freed maps.
std::map<void *, std::unique_ptr<Binary>> *g_binaries = new std::map<void *, std::unique_ptr<Binary>>;
std::map<const void *, Stub> *g_stubs = new std::map<const void *, Stub>;
// aclrtFuncHandle values: kernels of binaries loaded by aclrtBinaryLoad*, each the address of its KernelDef in the
// binary (live until the binary is unloaded).
std::map<const void *, void *> *g_functions = new std::map<const void *, void *>;  // function -> its binary

int invalid(const std::string &why) {
  set_error_message(why);
  return rt_error(ACL_ERROR_RT_PARAM_INVALID);
}

// "fake-kernel v1 impl=vector_add dtype=float32" -> KernelDef; false when not a descriptor we know.
bool parse_descriptor(const std::string &text, KernelDef *k) {
  std::istringstream is(text);
  std::string magic, version, field;
  if (!(is >> magic >> version) || magic != "fake-kernel" || version != "v1") return false;
  bool have_impl = false;
  while (is >> field) {
    auto eq = field.find('=');
    if (eq == std::string::npos) return false;
    std::string key = field.substr(0, eq), value = field.substr(eq + 1);
    if (key == "impl") {
      if (value == "vector_add")
        k->impl = Impl::VectorAdd;
      else if (value == "scale")
        k->impl = Impl::Scale;
      else if (value == "relu")
        k->impl = Impl::Relu;
      else if (value == "op_task")
        k->impl = Impl::OpTask;
      else
        return false;
      have_impl = true;
    } else if (key == "dtype") {
      if (value == "float32")
        k->dtype = ACL_FLOAT;
      else if (value == "float16")
        k->dtype = ACL_FLOAT16;
      else if (value == "bfloat16")
        k->dtype = ACL_BF16;
      else
        return false;
    }  // other keys are for future kernels: ignored
  }
  return have_impl;
}

bool is_elf_magic(uint32_t magic) {
  return magic == RT_DEV_BINARY_MAGIC_ELF || magic == RT_DEV_BINARY_MAGIC_ELF_AIVEC ||
         magic == RT_DEV_BINARY_MAGIC_ELF_AICUBE;
}

// Reads the kernel table of an ELF image with libelf. Returns an RT error code.
int parse_binary(const rtDevBinary_t *bin, Binary *out) {
  if (bin == nullptr || bin->data == nullptr || bin->length < SELFMAG) return invalid("device binary is NULL or empty");
  if (!is_elf_magic(bin->magic)) return invalid("device binary magic is not an AI Core ELF magic");
  static std::once_flag once;
  std::call_once(once, [] { elf_version(EV_CURRENT); });
  // libelf may touch the image it reads; work on a private copy (the caller may also free its buffer
  // right after registration).
  std::vector<char> image(static_cast<const char *>(bin->data), static_cast<const char *>(bin->data) + bin->length);
  if (std::memcmp(image.data(), ELFMAG, SELFMAG) != 0) return invalid("device binary is not an ELF image");
  Elf *elf = elf_memory(image.data(), image.size());
  if (elf == nullptr) return invalid(std::string("libelf cannot read the device binary: ") + elf_errmsg(-1));
  std::unique_ptr<Elf, int (*)(Elf *)> guard(elf, elf_end);
  size_t shstrndx;
  if (elf_kind(elf) != ELF_K_ELF || elf_getshdrstrndx(elf, &shstrndx) != 0)
    return invalid("device binary has no section name table");
  Elf_Scn *kernels = nullptr, *symtab = nullptr;
  size_t kernels_index = 0;
  GElf_Shdr symtab_hdr{};
  for (Elf_Scn *scn = elf_nextscn(elf, nullptr); scn != nullptr; scn = elf_nextscn(elf, scn)) {
    GElf_Shdr sh;
    if (gelf_getshdr(scn, &sh) == nullptr) return invalid("device binary has a corrupt section header");
    const char *name = elf_strptr(elf, shstrndx, sh.sh_name);
    if (name != nullptr && std::strcmp(name, ".fake_kernel") == 0) {
      kernels = scn;
      kernels_index = elf_ndxscn(scn);
    } else if (sh.sh_type == SHT_SYMTAB) {
      symtab = scn;
      symtab_hdr = sh;
    }
  }
  if (kernels == nullptr || symtab == nullptr) return invalid("device binary has no .fake_kernel section or symtab");
  Elf_Data *kdata = elf_getdata(kernels, nullptr);
  Elf_Data *sdata = elf_getdata(symtab, nullptr);
  if (kdata == nullptr || kdata->d_buf == nullptr || sdata == nullptr)
    return invalid("device binary sections are empty");
  size_t nsyms = symtab_hdr.sh_entsize ? symtab_hdr.sh_size / symtab_hdr.sh_entsize : 0;
  for (size_t i = 0; i < nsyms; ++i) {
    GElf_Sym sym;
    if (gelf_getsym(sdata, (int)i, &sym) == nullptr) return invalid("device binary has a corrupt symbol table");
    if (GELF_ST_TYPE(sym.st_info) != STT_OBJECT || sym.st_shndx != kernels_index) continue;
    const char *name = elf_strptr(elf, symtab_hdr.sh_link, sym.st_name);
    if (name == nullptr || sym.st_value > kdata->d_size || sym.st_size > kdata->d_size - sym.st_value)
      return invalid("device binary has a corrupt kernel symbol");
    const char *bytes = static_cast<const char *>(kdata->d_buf) + sym.st_value;
    KernelDef k;
    k.symbol = name;
    if (!parse_descriptor(std::string(bytes, strnlen(bytes, sym.st_size)), &k))
      return invalid(std::string("device binary kernel ") + name + " has an unknown descriptor");
    out->kernels[k.symbol] = k;
  }
  if (out->kernels.empty()) return invalid("device binary defines no kernels");
  return RT_ERROR_NONE;
}

int register_binary(const rtDevBinary_t *bin, void **hdl, bool all_kernel) {
  if (hdl == nullptr) return invalid("NULL handle output");
  auto b = std::make_unique<Binary>();
  b->all_kernel = all_kernel;
  if (int e = parse_binary(bin, b.get())) return e;
  std::lock_guard<std::mutex> lk(g_mu);
  *hdl = b.get();
  (*g_binaries)[b.get()] = std::move(b);
  return RT_ERROR_NONE;
}

// ---- kernels (run on the stream worker) ----

struct ArgReader {
  const char *blob;
  uint32_t size;
  uint64_t u64(uint32_t off) const {
    if ((uint64_t)off + 8 > size) throw KernelError("kernel reads past its " + std::to_string(size) + "-byte args");
    uint64_t v;
    std::memcpy(&v, blob + off, 8);
    return v;
  }
  float f32(uint32_t off) const {
    if ((uint64_t)off + 4 > size) throw KernelError("kernel reads past its " + std::to_string(size) + "-byte args");
    float v;
    std::memcpy(&v, blob + off, 4);
    return v;
  }
};

// Host alias of n elements of `dtype` at device address `addr` (throws KernelError when out of bounds).
void *tensor_bytes(uint64_t addr, uint64_t n, aclDataType dtype) {
  uint64_t es = dtype_size(dtype);
  if (n > UINT64_MAX / es) throw KernelError("element count overflows the address space");
  return device_bytes(reinterpret_cast<const void *>(addr), n * es);
}

// op_task: address slots, the tiling slot, then the fixed-size tiling data (fakecann/op_task.h). The kernel
// reads its tiling through the address the runtime patched into the slot, and runs the task it names (as often as the
// launch runs: a launch captured into a model runs at every replay).
void run_op_task(const ArgReader &a) {
  constexpr uint32_t kTiling = sizeof(OpTaskTiling);
  if (a.size < 8 + kTiling) throw KernelError("op_task kernel: args hold no tiling slot and tiling data");
  const uint64_t tiling_addr = a.u64(a.size - kTiling - 8);
  OpTaskTiling t;
  std::memcpy(&t, device_bytes(reinterpret_cast<const void *>(tiling_addr), kTiling), kTiling);
  if (t.magic != kOpTaskMagic || t.task == 0 || t.addresses > (a.size - kTiling - 8) / 8 ||
      t.addresses * 8 + 8 + kTiling != a.size)
    throw KernelError("op_task kernel: tiling data does not name a task");
  reinterpret_cast<OpTask *>(t.task)->run();
}

// The task an op_task launch's args name, for its release (the runtime owns it from the launch on); null when the args
// name none (a bad launch, which ran as a kernel error).
OpTask *op_task_of(const KernelDef &k, const void *dev_args, uint32_t size) {
  constexpr uint32_t kTiling = sizeof(OpTaskTiling);
  if (k.impl != Impl::OpTask || size < 8 + kTiling) return nullptr;
  const char *blob = static_cast<const char *>(device_host_alias(dev_args, size));
  if (blob == nullptr) return nullptr;
  uint64_t tiling_addr;
  std::memcpy(&tiling_addr, blob + size - kTiling - 8, 8);
  const void *tiling = device_host_alias(reinterpret_cast<const void *>(tiling_addr), kTiling);
  if (tiling == nullptr) return nullptr;
  OpTaskTiling t;
  std::memcpy(&t, tiling, kTiling);
  return t.magic == kOpTaskMagic ? reinterpret_cast<OpTask *>(t.task) : nullptr;
}

void run_kernel(const KernelDef &k, const void *dev_args, uint32_t args_size) {
  ArgReader a{args_size ? static_cast<const char *>(device_bytes(dev_args, args_size)) : nullptr, args_size};
  const aclDataType t = k.dtype;
  switch (k.impl) {
    case Impl::VectorAdd: {  // x, y, z, n: z = x + y
      uint64_t n = a.u64(24);
      if (n == 0) return;
      void *x = tensor_bytes(a.u64(0), n, t), *y = tensor_bytes(a.u64(8), n, t), *z = tensor_bytes(a.u64(16), n, t);
      for (uint64_t i = 0; i < n; ++i) store_element(z, t, i, load_element(x, t, i) + load_element(y, t, i));
      break;
    }
    case Impl::Scale: {  // x, y, n, scale: y = x * scale
      uint64_t n = a.u64(16);
      float s = a.f32(24);
      if (n == 0) return;
      void *x = tensor_bytes(a.u64(0), n, t), *y = tensor_bytes(a.u64(8), n, t);
      for (uint64_t i = 0; i < n; ++i) store_element(y, t, i, load_element(x, t, i) * (double)s);
      break;
    }
    case Impl::Relu: {  // x, y, n: y = max(x, 0)
      uint64_t n = a.u64(16);
      if (n == 0) return;
      void *x = tensor_bytes(a.u64(0), n, t), *y = tensor_bytes(a.u64(8), n, t);
      for (uint64_t i = 0; i < n; ++i) {
        double v = load_element(x, t, i);
        store_element(y, t, i, v > 0.0 ? v : 0.0);
      }
      break;
    }
    case Impl::OpTask: run_op_task(a); break;
  }
}

// Places the args where the kernel reads them and enqueues it. `info` carries the rtArgsEx_t extras:
// host inputs and tiling data inside the blob, whose device addresses the runtime patches in.
int launch(const KernelDef &k, uint32_t blockDim, const rtArgsEx_t &info, rtStream_t stm, const char *what) {
  if (blockDim == 0) return invalid("blockDim must be at least 1");
  if (info.args == nullptr && info.argsSize != 0) return invalid("NULL args with a nonzero argsSize");
  if (info.hostInputInfoNum != 0 && info.hostInputInfoPtr == nullptr) return invalid("NULL hostInputInfoPtr");
  if (int e = require_context()) return e;
  Stream *s;
  if (int e = resolve_stream(stm, &s)) return e;
  const uint32_t size = info.argsSize;
  if (info.isNoNeedH2DCopy) {
    // The caller already placed the args in device memory; the kernel reads them there, when it runs.
    if (size != 0 && device_host_alias(info.args, size) == nullptr)
      return invalid("isNoNeedH2DCopy args are not inside a device allocation");
    const void *dev_args = info.args;
    return stream_enqueue_kernel(
        s, [k, dev_args, size] { run_kernel(k, dev_args, size); }, what);
  }
  // Patch a slot of the blob with the device address of data that lives inside the blob.
  std::vector<std::pair<uint32_t, uint32_t>> patches;  // (address slot offset, data offset)
  if (info.hasTiling) patches.emplace_back(info.tilingAddrOffset, info.tilingDataOffset);
  for (uint16_t i = 0; i < info.hostInputInfoNum; ++i)
    patches.emplace_back(info.hostInputInfoPtr[i].addrOffset, info.hostInputInfoPtr[i].dataOffset);
  for (auto [slot, data] : patches)
    if ((uint64_t)slot + 8 > size || data > size) return invalid("tiling/host input offsets exceed argsSize");
  // The blob is copied from host memory; the host cannot read a device address.
  if (size != 0 && in_device_range(info.args)) return invalid("args point to device memory without isNoNeedH2DCopy");
  void *dev_args = nullptr;
  if (size != 0) {
    dev_args = device_alloc_high(size);  // the runtime's args pool, apart from the host's buffers
    if (dev_args == nullptr) return rt_error(ACL_ERROR_RT_MEMORY_ALLOCATION);
    char *host = static_cast<char *>(device_bytes(dev_args, size));
    std::memcpy(host, info.args, size);
    for (auto [slot, data] : patches) {
      uint64_t addr = reinterpret_cast<uint64_t>(dev_args) + data;
      std::memcpy(host + slot, &addr, 8);
    }
  }
  auto release = [k, dev_args, size] {
    delete op_task_of(k, dev_args, size);
    if (dev_args) device_free(dev_args);
  };
  // A kernel task: what a task group holds and a task update replaces.
  const int rc = stream_enqueue_kernel(
      s, [k, dev_args, size] { run_kernel(k, dev_args, size); }, what, release);
  if (rc != 0 && dev_args) device_free(dev_args);  // refused: the op task stays the launcher's (op_task.h)
  return rc;
}

int launch_stub(const void *stubFunc, uint32_t blockDim, const rtArgsEx_t &info, rtStream_t stm) {
  KernelDef k;
  {
    std::lock_guard<std::mutex> lk(g_mu);
    auto it = g_stubs->find(stubFunc);
    if (stubFunc == nullptr || it == g_stubs->end()) return invalid("kernel stub is not registered");
    k = it->second.kernel;
  }
  return launch(k, blockDim, info, stm, "rtKernelLaunch");
}

int launch_handle(void *hdl, uint64_t tilingKey, uint32_t blockDim, const rtArgsEx_t *argsInfo, rtStream_t stm) {
  if (argsInfo == nullptr) return invalid("NULL argsInfo");
  KernelDef k;
  {
    std::lock_guard<std::mutex> lk(g_mu);
    auto it = g_binaries->find(hdl);
    if (hdl == nullptr || it == g_binaries->end()) return invalid("binary handle is not registered");
    if (!it->second->all_kernel) return invalid("handle launch needs a binary registered by rtRegisterAllKernel");
    // Ascend C names the kernel of tiling key K `{kernel}_{K}`.
    const std::string suffix = "_" + std::to_string(tilingKey);
    int found = 0;
    for (const auto &[name, def] : it->second->kernels)
      if (name.size() > suffix.size() && name.compare(name.size() - suffix.size(), suffix.size(), suffix) == 0) {
        k = def;
        ++found;
      }
    if (found != 1)
      return invalid("tiling key " + std::to_string(tilingKey) + (found ? " is ambiguous" : " has no kernel"));
  }
  return launch(k, blockDim, *argsInfo, stm, "rtKernelLaunchWithHandle");
}

}  // namespace

int binary_load(const void *data, uint64_t length, uint32_t magic, void **handle) {
  rtDevBinary_t bin{magic, 0, data, length};
  return register_binary(&bin, handle, true);
}

int binary_unload(void *handle) {
  std::lock_guard<std::mutex> lk(g_mu);
  auto it = g_binaries->find(handle);
  if (handle == nullptr || it == g_binaries->end()) return rt_error(ACL_ERROR_RT_INVALID_HANDLE);
  for (auto f = g_functions->begin(); f != g_functions->end();)
    f = f->second == handle ? g_functions->erase(f) : std::next(f);
  for (auto st = g_stubs->begin(); st != g_stubs->end();)
    st = (st->second.binary == it->second.get()) ? g_stubs->erase(st) : std::next(st);
  g_binaries->erase(it);  // kernels already enqueued hold copies of their KernelDef
  return RT_ERROR_NONE;
}

int binary_function(void *handle, const char *name, void **func) {
  std::lock_guard<std::mutex> lk(g_mu);
  auto it = g_binaries->find(handle);
  if (handle == nullptr || it == g_binaries->end()) return rt_error(ACL_ERROR_RT_INVALID_HANDLE);
  auto k = it->second->kernels.find(name);
  if (k == it->second->kernels.end()) {
    set_error_message(std::string("no kernel ") + name + " in the binary");
    return rt_error(ACL_ERROR_RT_SYMBOL_NOT_FOUND);
  }
  *func = &k->second;
  (*g_functions)[&k->second] = handle;
  return RT_ERROR_NONE;
}

int launch_function(void *func, uint32_t blockDim, const rtArgsEx_t &args, void *stream, const char *what) {
  KernelDef k;
  {
    std::lock_guard<std::mutex> lk(g_mu);
    if (func == nullptr || g_functions->count(func) == 0) {
      set_error_message("not a function of a loaded binary");
      return rt_error(ACL_ERROR_RT_INVALID_HANDLE);
    }
    k = *static_cast<const KernelDef *>(func);
  }
  return launch(k, blockDim, args, stream, what);
}

}  // namespace fakecann

using namespace fakecann;

extern "C" {

rtError_t rtDevBinaryRegister(const rtDevBinary_t *bin, void **hdl) { return register_binary(bin, hdl, false); }

rtError_t rtRegisterAllKernel(const rtDevBinary_t *bin, void **hdl) { return register_binary(bin, hdl, true); }

rtError_t rtDevBinaryUnRegister(void *hdl) {
  std::lock_guard<std::mutex> lk(g_mu);
  auto it = g_binaries->find(hdl);
  if (hdl == nullptr || it == g_binaries->end()) return invalid("binary handle is not registered");
  // Kernels already enqueued hold copies of their KernelDef, so they still run.
  for (auto s = g_stubs->begin(); s != g_stubs->end();)
    s = (s->second.binary == it->second.get()) ? g_stubs->erase(s) : std::next(s);
  g_binaries->erase(it);
  return RT_ERROR_NONE;
}

rtError_t rtFunctionRegister(void *binHandle, const void *stubFunc, const char_t *stubName, const void *kernelInfoExt,
                             uint32_t /*funcMode*/) {
  if (stubFunc == nullptr) return invalid("NULL stubFunc");
  const char *symbol = kernelInfoExt ? static_cast<const char *>(kernelInfoExt) : stubName;
  if (symbol == nullptr) return invalid("no kernel name given");
  std::lock_guard<std::mutex> lk(g_mu);
  auto it = g_binaries->find(binHandle);
  if (binHandle == nullptr || it == g_binaries->end()) return invalid("binary handle is not registered");
  auto k = it->second->kernels.find(symbol);
  if (k == it->second->kernels.end()) return invalid(std::string("kernel not in the binary: ") + symbol);
  auto [pos, inserted] = g_stubs->emplace(stubFunc, Stub{it->second.get(), k->second});
  if (!inserted && (pos->second.binary != it->second.get() || pos->second.kernel.symbol != symbol))
    return invalid("stubFunc is already registered for another kernel");
  return RT_ERROR_NONE;
}

rtError_t rtKernelLaunch(const void *stubFunc, uint32_t blockDim, void *args, uint32_t argsSize,
                         rtSmDesc_t * /*smDesc*/, rtStream_t stm) {
  count_call(CallKind::KernelLaunch);
  rtArgsEx_t info{};
  info.args = args;
  info.argsSize = argsSize;
  return launch_stub(stubFunc, blockDim, info, stm);
}

rtError_t rtKernelLaunchWithFlag(const void *stubFunc, uint32_t blockDim, rtArgsEx_t *argsInfo, rtSmDesc_t * /*smDesc*/,
                                 rtStream_t stm, uint32_t /*flags*/) {
  count_call(CallKind::KernelLaunch);
  if (argsInfo == nullptr) return invalid("NULL argsInfo");
  return launch_stub(stubFunc, blockDim, *argsInfo, stm);
}

rtError_t rtKernelLaunchWithFlagV2(const void *stubFunc, uint32_t blockDim, rtArgsEx_t *argsInfo,
                                   rtSmDesc_t * /*smDesc*/, rtStream_t stm, uint32_t /*flags*/,
                                   const rtTaskCfgInfo_t * /*cfgInfo*/) {
  count_call(CallKind::KernelLaunch);
  if (argsInfo == nullptr) return invalid("NULL argsInfo");
  return launch_stub(stubFunc, blockDim, *argsInfo, stm);
}

rtError_t rtKernelLaunchWithHandle(void *hdl, const uint64_t tilingKey, uint32_t blockDim, rtArgsEx_t *argsInfo,
                                   rtSmDesc_t * /*smDesc*/, rtStream_t stm, const void * /*kernelInfo*/) {
  count_call(CallKind::KernelLaunch);
  return launch_handle(hdl, tilingKey, blockDim, argsInfo, stm);
}

rtError_t rtKernelLaunchWithHandleV2(void *hdl, const uint64_t tilingKey, uint32_t blockDim, rtArgsEx_t *argsInfo,
                                     rtSmDesc_t * /*smDesc*/, rtStream_t stm, const rtTaskCfgInfo_t * /*cfgInfo*/) {
  count_call(CallKind::KernelLaunch);
  return launch_handle(hdl, tilingKey, blockDim, argsInfo, stm);
}

}  // extern "C"
