// The host side of the collectives for the files beside hccl.cpp (alltoall.cpp, fused.cpp): the argument checks with
// HCCL's codes and the launch onto the caller's stream, defined in hccl.cpp; the communicator table and the error
// path, defined in communicators.cpp (libhcomm.so of CANN 9.x, hence exported: FAKECANN_API).
#pragma once
#include <cstdint>
#include <functional>
#include <memory>
#include <string>

#include "acl/acl_base.h"
#include "comm.h"
#include "fakecann/export.h"
#include "hccl/hccl_types.h"

namespace fakecann::hccl {

// Sets aclGetRecentErrMsg's text and returns `r`.
FAKECANN_API HcclResult api_fail(HcclResult r, const std::string &msg);
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
FAKECANN_API std::shared_ptr<Comm> api_find(HcclComm comm);
// The live communicator named `ident` (HcclGetCommName) created on `device`, or nullptr.
FAKECANN_API std::shared_ptr<Comm> api_find_named(const std::string &ident, int32_t device);

}  // namespace fakecann::hccl
