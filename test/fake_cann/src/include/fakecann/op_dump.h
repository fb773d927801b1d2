// Single-op data dump (dump_op_switch "on") for host-launched kernels: what adump's AdumpDumpTensorV2 and
// AdumpGetDumpSwitch are to nnopbase and the ACL (shared/reference/cann_dump.md §9). Implemented in libascendcl
// (src/ascendcl/op_dump.cpp), where the config of aclmdlSetDump lives; libnnopbase links it, as the real one
// calls into the ACL runtime.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include "acl/acl_base.h"
#include "fakecann/export.h"

namespace fakecann::opdump {

// One tensor as the dump sees it: the device bytes of its (contiguous) data.
struct Tensor {
  aclDataType dtype;
  aclFormat format;
  std::vector<int64_t> shape;
  const void *device;
  uint64_t bytes;
};

// What the config in force asks of a host-launched op; all false without dump_op_switch "on".
struct Switch {
  bool on = false;
  bool inputs = false, outputs = false;  // dump_mode
  bool l2 = false, l0 = false;           // dump_level: op -> the aclnn API (L2), kernel -> its kernels (L0), all
};

// Read once per host op call (nnopbase reads AdumpGetDumpSwitch once per aclnn call).
FAKECANN_API Switch op_switch();

// True while any dump config is in force (data, overflow or exception): nnopbase's executor cache is then off.
FAKECANN_API bool any_dump();

// AdumpDumpTensorV2: one dump file of `inputs` and `outputs` (either may be empty) named
// {op_type}.{op_name}.{task}.{stream}.{us} under {dump_path}/{time}/{device}/, synchronously: under a
// process-wide mutex it serializes the op's mapping info, copies it and the tensor table to two device
// allocations with blocking copies, enqueues the dump kernel on `stream` (it reads the tensors when the stream
// reaches it) and synchronizes the stream. Returns an ACL error code (0 when dump is off).
FAKECANN_API int dump_tensors(const std::string &op_type, const std::string &op_name, uint32_t task_id,
                              const std::vector<Tensor> &inputs, const std::vector<Tensor> &outputs, void *stream);

// A task id for the file names of the kernel about to be launched on this thread: a per-thread count of
// dumped kernels, wrapped at 16 bits as on devices that report 16-bit task ids (the stand-in's runtime has no
// task ids; CANN uses the thread's last task id, §9).
FAKECANN_API uint32_t next_task_id();

}  // namespace fakecann::opdump
