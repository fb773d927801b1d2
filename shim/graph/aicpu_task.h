// The argument block of an AI CPU kernel launch (rtCpuKernelLaunchWithFlag), as bytes: what MindSpore's
// AicpuOpKernelMod::CreateCpuKernelInfo and GE's AI CPU tasks put there (reference/mindspore_runtime.md §1.1):
//
//   AicpuParamHead {u32 length; u32 ioAddrNum; u32 extInfoLength; u64 extInfoAddr}   packed, 20 bytes
//   u64 ioAddrs[ioAddrNum]                                                             inputs, then outputs
//   u32 nodeDefLen; u8 nodeDef[nodeDefLen]                                             aicpuops.NodeDef (protobuf)
//
// NodeDef (MindSpore cpu_proto/proto/cpu_node_def.proto, the same in 2.5-2.7): op = 2 (the op type, "GatherV2"),
// attrs = 3, inputs = 4, outputs = 5; Tensor: tensor_shape = 1 {dim = 2 {size = 1}}, tensor_type = 2 (CANN's DataType,
// numbered as aclDataType for every common type). Everything is read from the host's copy of the blob, before the
// launch: the ext info (exact shapes of a dynamic-shape kernel) lives in device memory and is not read.
#pragma once
#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <vector>

namespace msprobe::shim::graph {

struct AicpuTensor {
  int32_t dtype = -1;          // CANN DataType = aclDataType number
  std::vector<int64_t> shape;  // as the NodeDef gives it (a -1 dim: dynamic, see the ext info)
  uint64_t addr = 0;           // its io address
};

struct AicpuTask {
  std::vector<uint64_t> io_addrs;
  std::string op;  // the NodeDef's op; empty without a readable NodeDef
  // Set when the NodeDef describes every io address (inputs + outputs == ioAddrNum): the tensors, addresses filled in.
  bool described = false;
  std::vector<AicpuTensor> inputs, outputs;
  std::string why_undescribed;  // when not described
};

// nullopt when the blob holds no parameter head and io addresses (then nothing of it is an AI CPU task's).
std::optional<AicpuTask> parse_aicpu_args(std::span<const unsigned char> blob);

}  // namespace msprobe::shim::graph
