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

// The loaded object (glibc link_map) that contains `addr`, or nullptr. Not a dlsym handle for an object loaded at
// start-up that nobody opened yet (its search list is empty until then): use lookup_in_object_of for that.
void *object_containing(const void *addr);
// dlsym(handle of the object containing `addr`, name): `name` in that object or its dependencies, or nullptr.
void *lookup_in_object_of(const void *addr, const char *name);
// True when `addr` lies inside libmsprobe_shim.so (or the test binary that links the shim core).
bool inside_shim(const void *addr);
// True when `addr` lies in an object the loader placed before the shim in its chain of objects (the main program,
// libraries preloaded ahead of the shim): a definition there would win a symbol lookup over one of the shim's.
bool loaded_before_shim(const void *addr);

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
  // The original, looked up once; nullptr if nothing defines it. Inline: every hook and runtime call asks.
  void *resolve() {
    void *p = original.load(std::memory_order_acquire);
    return p ? p : resolve_first();
  }

 private:
  void *resolve_first();
};

}  // namespace msprobe::shim
