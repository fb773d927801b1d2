// Finding the real functions behind the names the shim interposes.
//
// The shim exports dlsym, so its own lookups must never go through the PLT: real_dlsym() is libc's
// dlsym, obtained with dlvsym. find_original() locates the definition of a name in the first loaded
// object other than the shim, including libraries opened RTLD_LOCAL (torch_npu and MindSpore open the
// CANN libraries that way), which RTLD_NEXT cannot see.
#pragma once
#include <atomic>

namespace msprobe::shim {

void *real_dlsym(void *handle, const char *name);
void *real_dlopen(const char *file, int mode);
int real_dlclose(void *handle);

// The loaded object (glibc link_map, usable as a dlsym handle) that contains `addr`, or nullptr.
void *object_containing(const void *addr);
// True when `addr` lies inside libmsprobe_shim.so (or the test binary that links the shim core).
bool inside_shim(const void *addr);

// Next definition of `name` after the object `caller_addr` belongs to: dlsym(RTLD_NEXT) semantics on
// behalf of another object (glibc resolves RTLD_NEXT relative to its direct caller, which is the shim).
void *next_definition(const void *caller_addr, const char *name);
// First definition of `name` outside the shim among all loaded objects (global and RTLD_LOCAL).
void *find_original(const char *name);

// A function the shim interposes under its own name: `original` is filled lazily (calls may arrive
// before any constructor ran), or from the handle the host looked the name up in.
struct HookSlot {
  const char *name;
  std::atomic<void *> original{nullptr};
  void *resolve();  // the original, looked up once; nullptr if nothing defines it
};

}  // namespace msprobe::shim
