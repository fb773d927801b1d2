// ACL runtime: allocators registered for streams (runtime src/acl/aclrt_impl/allocator.cpp). A description holds
// an object and four functions; registering copies them (a later change to the description does not reach the
// registration) and remembers the description; registering again replaces, unregistering an unregistered stream
// succeeds. Every refusal is the ACL's (ACL_ERROR_INVALID_PARAM): a null argument, a description without its object,
// alloc, free or get-address function, a stream that has no allocator.
#include "acl/acl_rt_allocator.h"

#include <map>
#include <mutex>

#include "acl/acl.h"
#include "fakecann/stream.h"

using namespace fakecann;

namespace {

struct Desc {
  aclrtAllocator obj = nullptr;
  aclrtAllocatorAllocFunc alloc = nullptr;
  aclrtAllocatorFreeFunc free = nullptr;
  aclrtAllocatorAllocAdviseFunc advise = nullptr;
  aclrtAllocatorGetAddrFromBlockFunc addr = nullptr;
};

struct Registration {
  aclrtAllocatorDesc desc;  // the application's description
  Desc copy;                // its functions when it was registered
};

std::mutex g_mu;
std::map<aclrtStream, Registration> *g_registered = new std::map<aclrtStream, Registration>;

template <typename T>
aclError set_field(aclrtAllocatorDesc desc, T value, T Desc::*field) {
  if (desc == nullptr || value == nullptr) return ACL_ERROR_INVALID_PARAM;
  static_cast<Desc *>(desc)->*field = value;
  return ACL_SUCCESS;
}

}  // namespace

extern "C" {

aclrtAllocatorDesc aclrtAllocatorCreateDesc() { return new Desc; }

aclError aclrtAllocatorDestroyDesc(aclrtAllocatorDesc allocatorDesc) {
  if (allocatorDesc == nullptr) return ACL_ERROR_INVALID_PARAM;
  delete static_cast<Desc *>(allocatorDesc);
  return ACL_SUCCESS;
}

aclError aclrtAllocatorSetObjToDesc(aclrtAllocatorDesc allocatorDesc, aclrtAllocator allocator) {
  return set_field(allocatorDesc, allocator, &Desc::obj);
}

aclError aclrtAllocatorSetAllocFuncToDesc(aclrtAllocatorDesc allocatorDesc, aclrtAllocatorAllocFunc func) {
  return set_field(allocatorDesc, func, &Desc::alloc);
}

aclError aclrtAllocatorSetFreeFuncToDesc(aclrtAllocatorDesc allocatorDesc, aclrtAllocatorFreeFunc func) {
  return set_field(allocatorDesc, func, &Desc::free);
}

aclError aclrtAllocatorSetAllocAdviseFuncToDesc(aclrtAllocatorDesc allocatorDesc, aclrtAllocatorAllocAdviseFunc func) {
  return set_field(allocatorDesc, func, &Desc::advise);
}

aclError aclrtAllocatorSetGetAddrFromBlockFuncToDesc(aclrtAllocatorDesc allocatorDesc,
                                                     aclrtAllocatorGetAddrFromBlockFunc func) {
  return set_field(allocatorDesc, func, &Desc::addr);
}

aclError aclrtAllocatorRegister(aclrtStream stream, aclrtAllocatorDesc allocatorDesc) {
  if (stream == nullptr || allocatorDesc == nullptr) return ACL_ERROR_INVALID_PARAM;
  const Desc &d = *static_cast<Desc *>(allocatorDesc);
  if (d.obj == nullptr || d.alloc == nullptr || d.free == nullptr || d.addr == nullptr) {
    set_error_message("aclrtAllocatorRegister: the description lacks its object, alloc, free or get-address function");
    return ACL_ERROR_INVALID_PARAM;
  }
  std::lock_guard<std::mutex> lk(g_mu);
  (*g_registered)[stream] = Registration{allocatorDesc, d};
  return ACL_SUCCESS;
}

aclError aclrtAllocatorGetByStream(aclrtStream stream, aclrtAllocatorDesc *allocatorDesc, aclrtAllocator *allocator,
                                   aclrtAllocatorAllocFunc *allocFunc, aclrtAllocatorFreeFunc *freeFunc,
                                   aclrtAllocatorAllocAdviseFunc *allocAdviseFunc,
                                   aclrtAllocatorGetAddrFromBlockFunc *getAddrFromBlockFunc) {
  if (allocatorDesc == nullptr || stream == nullptr) return ACL_ERROR_INVALID_PARAM;
  std::lock_guard<std::mutex> lk(g_mu);
  auto it = g_registered->find(stream);
  if (it == g_registered->end()) {
    set_error_message("aclrtAllocatorGetByStream: the stream is not registered with any allocator");
    return ACL_ERROR_INVALID_PARAM;
  }
  const Desc &d = it->second.copy;
  *allocatorDesc = it->second.desc;
  if (allocator != nullptr) *allocator = d.obj;
  if (allocFunc != nullptr) *allocFunc = d.alloc;
  if (freeFunc != nullptr) *freeFunc = d.free;
  if (allocAdviseFunc != nullptr) *allocAdviseFunc = d.advise;
  if (getAddrFromBlockFunc != nullptr) *getAddrFromBlockFunc = d.addr;
  return ACL_SUCCESS;
}

aclError aclrtAllocatorUnregister(aclrtStream stream) {
  if (stream == nullptr) return ACL_ERROR_INVALID_PARAM;
  std::lock_guard<std::mutex> lk(g_mu);
  g_registered->erase(stream);
  return ACL_SUCCESS;
}

}  // extern "C"
