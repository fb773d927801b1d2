// libFuzzer target: the aclnn header prototype parser (shim/aclnn/prototypes.h), which reads whatever headers a CANN
// install or a custom op vendor ships. An input whose first line is a bare name (no blank, no '/', '#' or '*')
// gives the op name to look up, the rest the header text; any other input is all header text, so that the test
// fixtures' headers (test/unit/shim/aclnn/fixtures/aclnnop and cann_shapes, scripts/fuzz.sh passes them as seeds) are
// inputs as they are.
#include <cstdint>
#include <cstdlib>
#include <string_view>

#include "shim/aclnn/prototypes.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  using namespace msprobe::shim;
  const std::string_view input(reinterpret_cast<const char *>(data), size);
  const size_t nl = input.find('\n');
  const std::string_view first = nl == std::string_view::npos ? std::string_view{} : input.substr(0, nl);
  const bool named = !first.empty() && first.find_first_of(" \t/#*") == std::string_view::npos;
  const std::string_view op = named ? first : std::string_view{};
  const std::string_view text = named ? input.substr(nl + 1) : input;

  if (auto p = parse_prototype(text, op)) {
    // The trailing pair the parser promises (docs/prototypes.md).
    if (p->params.size() < 2 || p->params[p->params.size() - 2].kind != ParamKind::WorkspaceSizeOut ||
        p->params.back().kind != ParamKind::ExecutorOut)
      std::abort();
    // Directions: every tensor has the rule that decided it, and an op with a tensor writes one.
    bool tensors = false, writes = false;
    for (const Param &q : p->params) {
      const bool tensor = q.kind == ParamKind::Tensor || q.kind == ParamKind::TensorList;
      if (tensor != (q.dir_rule != DirectionRule::None)) std::abort();
      tensors = tensors || tensor;
      writes = writes || (tensor && (q.dir == Direction::Output || q.dir == Direction::InOut));
    }
    if (tensors != writes) std::abort();
  }
  size_t tried = 0;
  for (const std::string &declared : declared_ops(text)) {
    if (declared.empty()) std::abort();
    if (++tried > 8) break;  // bounded work per input
    (void)parse_prototype(text, declared);
  }
  return 0;
}
