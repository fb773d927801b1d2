// Kernel and file names (spec §5): `{OpType}.{OpName}.{n}.forward`, `{kernel}.{input|output}.{slot}.{npy|bin}`, the
// long-name rule with mapping.csv, and the text rules that keep msprobe's CSV export from refusing a dump.
//
// Guarantees:
// - A sanitized name part holds only [A-Za-z0-9_-], is never empty and never starts with '-' (a leading '-' is
//   REPLACED by '_'; '+', '=', '%', '@' cannot survive sanitization anyway). So kernel and file names never start
//   with one of msprobe's forbidden characters, never contain '/', and are never "." or "..": nothing they name can
//   escape the dump directory.
// - Names are deterministic: the same launches in the same order give the same names in every run (msprobe's
//   compare matches by exact name).
#pragma once
#include <cstdint>
#include <functional>
#include <map>
#include <optional>
#include <random>
#include <string>
#include <string_view>
#include <unordered_map>

#include "format/format.h"

namespace msprobe::format {

// Every byte outside [A-Za-z0-9_-] (so '/', '\', '.', space, ';', any UTF-8 or binary byte) becomes '_'; a leading
// '-' becomes '_'; an empty input gives `fallback` (which must itself be sanitized).
std::string sanitize_name_part(std::string_view raw, std::string_view fallback);

inline constexpr std::string_view kDefaultOpName = "Default";  // spec: OpName when there is no Python scope
inline constexpr std::string_view kUnknownOpType = "Unknown";

// "{OpType}.{OpName}", both sanitized (empty OpName -> "Default", empty OpType -> "Unknown").
std::string kernel_base_name(std::string_view op_type, std::string_view op_name);

// The direction token every kernel name ends with. msprobe's compare (since 2026) and its trend tool drop, without a
// word, every entry whose last or second-to-last '.'-token is not forward, backward or parameters_grad; a kernel
// execution is a forward call, as msprobe's own device-level writer names its ops (msprobe_compare_facts.md §9).
inline constexpr std::string_view kDirection = "forward";
// "{base}.{ordinal}.forward".
std::string kernel_name(std::string_view base, uint64_t ordinal);
// The reverse, for readers: the OpType of a kernel name, the part before the first '.' (a sanitized OpType has none).
constexpr std::string_view op_type_of(std::string_view kernel_name) {
  return kernel_name.substr(0, kernel_name.find('.'));
}
// A kernel name without its direction token: "Add.Default.0" for "Add.Default.0.forward" and for the
// "Add.Default.0" that dumps written before the token existed hold. Readers pair kernels of old and new dumps by it.
constexpr std::string_view kernel_stem(std::string_view kernel_name) {
  const size_t dot = kernel_name.rfind('.');
  if (dot != std::string_view::npos && kernel_name.substr(dot + 1) == kDirection) return kernel_name.substr(0, dot);
  return kernel_name;
}
// "{OpType}.{OpName}" of a kernel name of either form ("" when it has no ordinal).
constexpr std::string_view kernel_base_of(std::string_view kernel_name) {
  const std::string_view stem = kernel_stem(kernel_name);
  const size_t dot = stem.rfind('.');
  return dot == std::string_view::npos ? std::string_view() : stem.substr(0, dot);
}

// The n of `{OpType}.{OpName}.{n}.forward`: how many kernels with the same base name came before in this step and rank.
// Not thread-safe: call it in launch order from one thread (or under the caller's lock).
class KernelOrdinals {
 public:
  uint64_t next(uint64_t step, std::optional<uint32_t> rank, std::string_view base);
  // Frees the counters of steps < `step` (a finished step never gets new kernels).
  void drop_steps_before(uint64_t step);
  // The counters of kernels without a rank become `rank`'s (a process's rank adopted after it began: names go on).
  void adopt_rank(uint32_t rank);
  void clear() { counters_.clear(); }

 private:
  struct Hash {
    using is_transparent = void;
    size_t operator()(std::string_view s) const { return std::hash<std::string_view>{}(s); }
  };
  using Counters = std::unordered_map<std::string, uint64_t, Hash, std::equal_to<>>;
  std::map<std::pair<uint64_t, int64_t>, Counters> counters_;  // (step, rank or -1) -> base -> next ordinal
};

// "{kernel}.{input|output}.{slot}.{suffix}".
std::string tensor_file_name(std::string_view kernel, IoKind io, uint32_t slot, std::string_view suffix);
// "npy" for npy mode, but "bin" for Raw tensors (npy cannot hold them) and in bin mode.
std::string_view tensor_file_suffix(FileFormat format, DType dtype);

// A plain file name that stays inside its directory: not empty, not "." or "..", no '/' and no NUL.
bool is_safe_file_name(std::string_view name);

// ---- Free text (stack frames, string argument values) -------------------------------------------------------
// msprobe's compare refuses a string that starts with + - = % @ (or the full-width ＋ － ＝ ％ ＠), or contains ';'
// followed by one. csv_safe_text puts a space in front of such a start and after such a ';' (the fix Huawei's own
// CSV sanitizers apply); any other text is returned unchanged.
bool is_csv_safe(std::string_view text);
std::string csv_safe_text(std::string_view text);

// ---- Long names (> kMaxBasename) ------------------------------------------------------------------------------
// 32 random digits + "." + the text after the last '.' of `basename` (no suffix if it has no '.', or if the suffix
// is not a short [A-Za-z0-9_-] word).
std::string long_name_replacement(std::string_view basename, std::mt19937_64 &rng);

}  // namespace msprobe::format
