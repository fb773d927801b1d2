// The stand-in's model file, in place of the proprietary .om: "FAKEOM01" followed by a JSON graph of
// libascendcl's op types (op_registry.h) with tensor bindings, written by tools/fake_atc.py. Layout and
// fields: test/fake_cann/README.md. Parsing checks the whole graph up front (node order, bindings, every
// node by its op's rules), as GE does when it loads a model.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include "acl/acl_base.h"
#include "fakecann/op_registry.h"

namespace fakecann::model {

enum class Role { Input, Output, Weight, Internal };

struct Tensor {
  std::string name;
  aclDataType dtype = ACL_FLOAT;
  aclFormat format = ACL_FORMAT_ND;
  std::vector<int64_t> shape;
  uint64_t bytes = 0;
  Role role = Role::Internal;
  size_t io_index = 0;          // position among the model's inputs or outputs
  std::vector<uint8_t> weight;  // Role::Weight: the bytes loaded to device memory
};

struct Node {
  std::string type, name;
  std::vector<size_t> inputs, outputs;  // indices into Definition::tensors
  aclop::Attrs attrs;
  aclop::KernelFn kernel = nullptr;
};

struct Definition {
  std::string name;  // the graph's own name (an ATC model's "name")
  std::vector<Tensor> tensors;
  std::vector<size_t> inputs, outputs;
  std::vector<Node> nodes;  // in execution order
};

inline constexpr char kMagic[] = "FAKEOM01";

// Parses and checks a model image. Returns ACL_SUCCESS, or ACL_ERROR_PARSE_MODEL with *why set.
aclError parse(const void *data, size_t size, Definition *out, std::string *why);
// Reads a model file: ACL_ERROR_READ_MODEL_FAILURE when it cannot be read, else as parse().
aclError parse_file(const char *path, Definition *out, std::string *why);

}  // namespace fakecann::model
