// libFuzzer target: the NameRegex engine behind MSPROBE_LIST / MSPROBE_SCOPE / MSPROBE_STEP_MARKER
// (shim/config/kernel_filter.h), and the collector's naming guarantees (format/naming.h): whatever bytes an op type or
// scope holds, the kernel and file names built from them stay inside the dump directory.
#include <fuzzer/FuzzedDataProvider.h>

#include <cstdint>
#include <cstdlib>
#include <string>

#include "format/naming.h"
#include "shim/config/kernel_filter.h"

namespace {

bool name_part_ok(std::string_view s) {
  if (s.empty() || s.front() == '-') return false;
  for (char c : s)
    if (!((c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '_' || c == '-'))
      return false;
  return true;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  using namespace msprobe;
  FuzzedDataProvider in(data, size);
  const std::string pattern = in.ConsumeRandomLengthString(2048);
  const std::string text = in.ConsumeRandomLengthString(1024);
  const std::string scope = in.ConsumeRemainingBytesAsString();

  std::string error;
  if (auto re = shim::NameRegex::compile(pattern, &error)) {
    (void)re->matches(text);
    (void)re->matches(scope);
  } else if (error.empty()) {
    std::abort();  // a refused pattern must say why
  }
  shim::KernelFilter filter;
  std::string why, note;
  if (filter.add_item(pattern, &why, &note)) (void)filter.matches(text, text + ".x.0");

  const std::string op = format::sanitize_name_part(text, format::kUnknownOpType);
  const std::string name = format::sanitize_name_part(scope, format::kDefaultOpName);
  if (!name_part_ok(op) || !name_part_ok(name)) std::abort();
  const std::string kernel = format::kernel_name(format::kernel_base_name(text, scope), 7);
  const std::string file = format::tensor_file_name(kernel, format::IoKind::Output, 3, "npy");
  if (kernel != op + "." + name + ".7." + std::string(format::kDirection) || format::kernel_stem(kernel) != op + "." + name + ".7" ||
      !format::is_safe_file_name(file))
    std::abort();
  if (!format::is_csv_safe(format::csv_safe_text(text))) std::abort();
  return 0;
}
