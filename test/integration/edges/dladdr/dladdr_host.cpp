// shim_dladdr_host: a MindSpore-shaped program (test_shim_dladdr.py). At start-up its Ascend plugin
// (libascend_path_probe.so) finds the CANN install from the addresses of the CANN functions it is linked against, as
// MindSpore's GetAscendPath does, and refuses to go on unless the path runs through "latest"; then, as MindSpore
// does next, it opens <that install>/lib64/libascendcl.so and looks aclrtMalloc up with dlsym. Then one aclop kernel
// (z = x + y) runs through direct (PLT) calls. Last, it prints where some of the GOT entries of this program, of the
// plugin and of libascendcl point (list_got_slots, shim/base/got_patch.h), as "got: OBJECT NAME KIND -> FILE".
// Exit status: 0 when all is well, 3 when the install check failed (MindSpore throws), 2 on an API error, 1 on a
// wrong result.
//
// `shim_dladdr_host --fork-first` forks before any CANN call: the child (RANK_ID=1) runs the kernel and exits, then the
// parent does; a child forked before the parent's first CANN call captures on its own (docs/lifecycle.md).
#include <dlfcn.h>
#include <stdlib.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdio>
#include <cstring>
#include <string>
#include <vector>

#include "acl/acl.h"
#include "acl/acl_op_compiler.h"
#include "ascend_path_probe.h"
#include "shim/base/got_patch.h"

namespace {

constexpr int64_t kN = 4;

const char *base_name(const char *path) {
  const char *slash = std::strrchr(path, '/');
  return slash ? slash + 1 : path;
}

const char *file_of(const void *address) {
  Dl_info info{};
  if (address == nullptr || dladdr(address, &info) == 0 || info.dli_fname == nullptr) return "?";
  return *info.dli_fname ? base_name(info.dli_fname) : "the program";
}

bool ok(aclError rc, const char *what) {
  if (rc != ACL_SUCCESS) std::fprintf(stderr, "shim_dladdr_host: %s failed with %d\n", what, rc);
  return rc == ACL_SUCCESS;
}

// z = x + y with aclop, every call a direct one. 0, 1 or 2 as the exit status says.
int add_on_the_device() {
  if (!ok(aclInit(nullptr), "aclInit") || !ok(aclrtSetDevice(0), "aclrtSetDevice")) return 2;
  aclrtStream stream = nullptr;
  if (!ok(aclrtCreateStream(&stream), "aclrtCreateStream")) return 2;
  const float x[kN] = {1.0f, 2.0f, 3.0f, 4.0f}, y[kN] = {0.5f, -1.0f, 8.0f, 0.25f};
  float z[kN] = {};
  const size_t bytes = sizeof x;
  void *dx = nullptr, *dy = nullptr, *dz = nullptr;
  bool good = ok(aclrtMalloc(&dx, bytes, ACL_MEM_MALLOC_HUGE_FIRST), "aclrtMalloc") &&
              ok(aclrtMalloc(&dy, bytes, ACL_MEM_MALLOC_HUGE_FIRST), "aclrtMalloc") &&
              ok(aclrtMalloc(&dz, bytes, ACL_MEM_MALLOC_HUGE_FIRST), "aclrtMalloc") &&
              ok(aclrtMemcpy(dx, bytes, x, bytes, ACL_MEMCPY_HOST_TO_DEVICE), "aclrtMemcpy") &&
              ok(aclrtMemcpy(dy, bytes, y, bytes, ACL_MEMCPY_HOST_TO_DEVICE), "aclrtMemcpy");
  if (good) {
    const int64_t dims[1] = {kN};
    aclTensorDesc *in[2] = {aclCreateTensorDesc(ACL_FLOAT, 1, dims, ACL_FORMAT_ND),
                            aclCreateTensorDesc(ACL_FLOAT, 1, dims, ACL_FORMAT_ND)};
    aclTensorDesc *out[1] = {aclCreateTensorDesc(ACL_FLOAT, 1, dims, ACL_FORMAT_ND)};
    aclDataBuffer *in_buf[2] = {aclCreateDataBuffer(dx, bytes), aclCreateDataBuffer(dy, bytes)};
    aclDataBuffer *out_buf[1] = {aclCreateDataBuffer(dz, bytes)};
    aclopAttr *attr = aclopCreateAttr();
    good = ok(aclopCompileAndExecute("Add", 2, in, in_buf, 1, out, out_buf, attr, ACL_ENGINE_SYS, ACL_COMPILE_SYS,
                                     nullptr, stream),
              "aclopCompileAndExecute") &&
           ok(aclrtSynchronizeStream(stream), "aclrtSynchronizeStream") &&
           ok(aclrtMemcpy(z, bytes, dz, bytes, ACL_MEMCPY_DEVICE_TO_HOST), "aclrtMemcpy");
    aclopDestroyAttr(attr);
    for (aclTensorDesc *d : {in[0], in[1], out[0]}) aclDestroyTensorDesc(d);
    for (aclDataBuffer *b : {in_buf[0], in_buf[1], out_buf[0]}) aclDestroyDataBuffer(b);
  }
  for (void *p : {dx, dy, dz})
    if (p != nullptr) ok(aclrtFree(p), "aclrtFree");
  ok(aclrtDestroyStream(stream), "aclrtDestroyStream");
  ok(aclrtResetDevice(0), "aclrtResetDevice");
  ok(aclFinalize(), "aclFinalize");
  if (!good) return 2;
  bool right = true;
  for (int64_t i = 0; i < kN; ++i) right = right && z[i] == x[i] + y[i];
  std::printf("aclop Add: %s\n", right ? "ok" : "wrong result");
  return right ? 0 : 1;
}

// This program's own entries (calls it made above), the plugin's, and libascendcl's call into libruntime (rtMalloc,
// made by aclrtMalloc), for a few CANN names, hooked or not.
void report_got() {
  msprobe::shim::PatchOptions options;
  options.skip_self = false;  // this program links the GOT code itself
  options.wants = [](const char *name) {
    for (const char *n : {"aclrtMalloc", "aclrtFree", "aclopCompileAndExecute", "aclrtMemcpy", "rtMalloc"})
      if (std::strcmp(name, n) == 0) return true;
    return false;
  };
  for (const msprobe::shim::GotSlot &s : msprobe::shim::list_got_slots(options)) {
    const char *object = s.object.empty() ? "program" : base_name(s.object.c_str());
    if (!s.object.empty() && std::strstr(object, "ascend_path_probe") == nullptr &&
        std::strcmp(object, "libascendcl.so") != 0)
      continue;
    std::printf("got: %s %s %s -> %s\n", object, s.symbol.c_str(),
                s.kind == msprobe::shim::GotSlotKind::JumpSlot ? "JUMP_SLOT" : "GLOB_DAT", file_of(s.target));
  }
}

}  // namespace

int main(int argc, char **argv) {
  if (argc == 2 && std::strcmp(argv[1], "--fork-first") == 0) {
    const pid_t pid = fork();
    if (pid == 0) {
      setenv("RANK_ID", "1", 1);
      const int rc = add_on_the_device();
      std::fflush(stdout);
      _exit(rc);
    }
    int status = 0;
    if (pid < 0 || waitpid(pid, &status, 0) != pid || !WIFEXITED(status) || WEXITSTATUS(status) != 0) {
      std::fprintf(stderr, "shim_dladdr_host: the child failed (status %d)\n", status);
      return 2;
    }
    return add_on_the_device();
  }
  char ascend_path[4096] = {};
  if (ascend_path_probe(ascend_path, sizeof ascend_path) != 0) {
    std::fprintf(stderr,
                 "Get ascend path failed, please check whether CANN packages are installed correctly, \n"
                 "and environment variables are set by source ${LOCAL_ASCEND}/ascend-toolkit/set_env.sh.\n");
    return 3;
  }
  std::printf("ascend path: %s\n", ascend_path);
  const std::string acl = std::string(ascend_path) + "/lib64/libascendcl.so";
  void *handle = dlopen(acl.c_str(), RTLD_LAZY);
  if (handle == nullptr) {
    std::fprintf(stderr, "shim_dladdr_host: dlopen %s: %s\n", acl.c_str(), dlerror());
    return 2;
  }
  std::printf("dlsym(aclrtMalloc): %s\n", file_of(dlsym(handle, "aclrtMalloc")));
  const int rc = add_on_the_device();
  report_got();
  return rc;
}
