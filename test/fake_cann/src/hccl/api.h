// The host side of libhccl's collectives for the files beside hccl.cpp (alltoall.cpp, fused.cpp): the argument checks
// with HCCL's codes, the communicator table and the launch onto the caller's stream. Defined in hccl.cpp.
#pragma once
#include <cstdint>
#include <functional>
#include <memory>
#include <string>

#include "acl/acl_base.h"
#include "comm.h"
#include "hccl/hccl_types.h"

namespace fakecann::hccl {

// Sets aclGetRecentErrMsg's text and returns `r`.
HcclResult api_fail(HcclResult r, const std::string &msg);
// comm and stream not null (HCCL_E_PTR), comm live (HCCL_E_PARA); *out gets it.
HcclResult api_check_call(const char *api, HcclComm comm, aclrtStream stream, std::shared_ptr<Comm> *out);
// A defined type (HCCL_E_PARA) that the stand-in moves (HCCL_E_NOT_SUPPORT).
HcclResult api_check_dtype(const char *api, HcclDataType t);

// A collective whose data movement lives outside collectives.cpp: run(comm) on the stream worker.
struct WorkerTask {
  const char *api = "";
  std::function<void(Comm &)> run;
};
inline void execute(Comm &c, const WorkerTask &t) { t.run(c); }

// Enqueues `task` on the stream as one collective (the communicator lives until it ran; HcclCommDestroy waits).
HcclResult api_enqueue(std::shared_ptr<Comm> c, aclrtStream stream, WorkerTask task);

// The live communicator behind a handle, or nullptr.
std::shared_ptr<Comm> api_find(HcclComm comm);
// The live communicator named `ident` (HcclGetCommName) created on `device`, or nullptr.
std::shared_ptr<Comm> api_find_named(const std::string &ident, int32_t device);

}  // namespace fakecann::hccl
