// How the stand-in's op libraries launch their kernels: through libruntime's exported API, as real CANN's do.
//
// libnnopbase (aclnn phase 2) and libascendcl (aclop) each register the op device binary
// $ASCEND_HOME_PATH/opp/kernel/fake_op_kernels.o once with rtRegisterAllKernel, then launch every op with
// rtKernelLaunchWithHandleV2 (tiling key 1, kernel fake_op_task_1, impl=op_task). These are ordinary calls into
// libruntime through the PLT, so a tool preloaded into the process sees them, as it would on a real NPU.
//
// The args blob follows the TBE convention: the device addresses of the op's tensors (inputs, then outputs,
// then the workspace if any; 0 for an absent optional tensor), then the tiling slot (hasTiling), then the
// tiling data, an OpTaskTiling. A real kernel computes from those; the CPU stand-in's computation is the closure
// the op library built on the host (it holds the views, strides and attributes), named by the tiling data. The
// runtime owns the task once the launch returns RT_ERROR_NONE and deletes it after running it on the stream
// worker; on any error the launch never happened and the caller still owns it.
#pragma once
#include <dlfcn.h>

#include <cstdint>
#include <cstring>
#include <fstream>
#include <functional>
#include <iterator>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "acl/acl_base.h"
#include "runtime/kernel.h"

namespace fakecann {

struct OpTask {
  std::function<void()> run;
};

constexpr uint64_t kOpTaskMagic = 0x314b534154504f46ULL;  // "FOPTASK1"
constexpr uint64_t kOpTaskTilingKey = 1;                  // fake_op_task_1

struct OpTaskTiling {
  uint64_t magic = kOpTaskMagic;
  uint64_t task = 0;       // OpTask*
  uint64_t addresses = 0;  // how many address slots precede the tiling slot
};

// Inline and hidden: every op library gets its own copy, with its own registration (as each real op package
// registers its own kernels).
namespace op_task_detail {

// <dir of this library>/../opp/kernel/fake_op_kernels.o: the install layout, as real op libraries find their
// kernels beside lib64.
inline std::string binary_path() {
  static const char anchor = 0;
  Dl_info info;
  if (dladdr(&anchor, &info) == 0 || info.dli_fname == nullptr) return {};
  std::string lib(info.dli_fname);
  size_t slash = lib.rfind('/');
  std::string dir = slash == std::string::npos ? std::string(".") : lib.substr(0, slash);
  return dir + "/../opp/kernel/fake_op_kernels.o";
}

struct Registration {
  void *handle = nullptr;
  int error = ACL_ERROR_RT_PARAM_INVALID;
};

inline const Registration &registration() {
  static const Registration r = [] {
    Registration out;
    std::ifstream f(binary_path(), std::ios::binary);
    std::vector<char> bytes((std::istreambuf_iterator<char>(f)), std::istreambuf_iterator<char>());
    rtDevBinary_t bin{RT_DEV_BINARY_MAGIC_ELF, 0, bytes.data(), bytes.size()};
    // The runtime keeps what it needs: the bytes may go.
    out.error = rtRegisterAllKernel(&bin, &out.handle);
    return out;
  }();
  return r;
}

}  // namespace op_task_detail

// Launches `run` as the kernel of an op whose tensors are at `addresses`. Returns an RT error code; on success
// the runtime owns the task.
inline int launch_op_task(void *stream, const std::vector<uint64_t> &addresses, std::function<void()> run) {
  const op_task_detail::Registration &reg = op_task_detail::registration();
  if (reg.error != RT_ERROR_NONE) return reg.error;
  auto task = std::make_unique<OpTask>(OpTask{std::move(run)});
  const size_t n = addresses.size();
  OpTaskTiling tiling;
  tiling.task = reinterpret_cast<uint64_t>(task.get());
  tiling.addresses = n;
  std::vector<uint64_t> blob(n + 1 + sizeof(OpTaskTiling) / 8);
  if (n > 0) std::memcpy(blob.data(), addresses.data(), n * 8);
  std::memcpy(blob.data() + n + 1, &tiling, sizeof tiling);  // slot n is patched by the runtime
  rtArgsEx_t args{};
  args.args = blob.data();
  args.argsSize = (uint32_t)(blob.size() * 8);
  args.hasTiling = 1;
  args.tilingAddrOffset = (uint32_t)(n * 8);
  args.tilingDataOffset = (uint32_t)((n + 1) * 8);
  int rc = rtKernelLaunchWithHandleV2(reg.handle, kOpTaskTilingKey, 1, &args, nullptr, stream, nullptr);
  if (rc == RT_ERROR_NONE) (void)task.release();
  return rc;
}

}  // namespace fakecann
