#include "format/naming.h"

#include <algorithm>
#include <cerrno>
#include <limits>
#include <stdexcept>

namespace msprobe::format {
namespace {

bool is_name_char(unsigned char c) {
  return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_' || c == '-';
}

bool is_forbidden_ascii(unsigned char c) {
  return kForbiddenLeading.find(static_cast<char>(c)) != std::string_view::npos;
}

// Length of a forbidden character at text[i]: 1 for + - = % @, 3 for their full-width UTF-8 forms, else 0.
[[gnu::always_inline]] inline size_t forbidden_at(std::string_view text, size_t i) {
  if (i >= text.size()) return 0;
  if (is_forbidden_ascii(static_cast<unsigned char>(text[i]))) return 1;
  // U+FF0B ＋, U+FF0D －, U+FF1D ＝, U+FF05 ％, U+FF20 ＠ are EF BC 8B / 8D / 9D / 85 and EF BC A0.
  if (i + 2 < text.size() && static_cast<unsigned char>(text[i]) == 0xef &&
      static_cast<unsigned char>(text[i + 1]) == 0xbc) {
    const unsigned char c = static_cast<unsigned char>(text[i + 2]);
    if (c == 0x8b || c == 0x8d || c == 0x9d || c == 0x85 || c == 0xa0) return 3;
  }
  return 0;
}

}  // namespace

std::string sanitize_name_part(std::string_view raw, std::string_view fallback) {
  if (raw.empty()) return std::string(fallback);
  std::string out(raw);
  for (char &c : out)
    if (!is_name_char(static_cast<unsigned char>(c))) c = '_';
  if (out[0] == '-') out[0] = '_';
  return out;
}

std::string kernel_base_name(std::string_view op_type, std::string_view op_name) {
  return sanitize_name_part(op_type, kUnknownOpType) + '.' + sanitize_name_part(op_name, kDefaultOpName);
}

std::string kernel_name(std::string_view base, uint64_t ordinal) {
  std::string s(base);
  s += '.';
  s += std::to_string(ordinal);
  s += '.';
  s += kDirection;
  return s;
}

uint64_t KernelOrdinals::next(uint64_t step, std::optional<uint32_t> rank, std::string_view base) {
  Counters &c = counters_[{step, rank ? static_cast<int64_t>(*rank) : -1}];
  auto it = c.find(base);
  if (it == c.end()) it = c.emplace(std::string(base), 0).first;
  return it->second++;
}

void KernelOrdinals::drop_steps_before(uint64_t step) {
  counters_.erase(counters_.begin(), counters_.lower_bound({step, std::numeric_limits<int64_t>::min()}));
}

void KernelOrdinals::adopt_rank(uint32_t rank) {
  for (auto it = counters_.begin(); it != counters_.end();) {
    if (it->first.second != -1) {
      ++it;
      continue;
    }
    Counters &to = counters_[{it->first.first, static_cast<int64_t>(rank)}];
    for (auto &[base, next] : it->second) to[base] = std::max(to[base], next);
    it = counters_.erase(it);
  }
}

std::string tensor_file_name(std::string_view kernel, IoKind io, uint32_t slot, std::string_view suffix) {
  std::string s(kernel);
  s += '.';
  s += io_name(io);
  s += '.';
  s += std::to_string(slot);
  s += '.';
  s += suffix;
  return s;
}

std::string_view tensor_file_suffix(FileFormat format, DType dtype) {
  return format == FileFormat::Npy && npy_can_store(dtype) ? file_suffix(FileFormat::Npy)
                                                           : file_suffix(FileFormat::Bin);
}

bool is_safe_file_name(std::string_view name) {
  return !name.empty() && name != "." && name != ".." && name.find('/') == std::string_view::npos &&
         name.find('\0') == std::string_view::npos;
}

bool is_csv_safe(std::string_view text) {
  if (forbidden_at(text, 0)) return false;
  for (size_t i = text.find(';'); i != std::string_view::npos; i = text.find(';', i + 1))
    if (forbidden_at(text, i + 1)) return false;
  return true;
}

std::string csv_safe_text(std::string_view text) {
  if (is_csv_safe(text)) return std::string(text);
  std::string out;
  out.reserve(text.size() + 4);
  if (forbidden_at(text, 0)) out += ' ';
  for (size_t i = 0; i < text.size(); ++i) {
    out += text[i];
    if (text[i] == ';' && forbidden_at(text, i + 1)) out += ' ';
  }
  return out;
}

std::string long_name_replacement(std::string_view basename, std::mt19937_64 &rng) {
  std::string name(kLongNameDigits, '0');
  std::uniform_int_distribution<int> digit(0, 9);
  for (char &c : name) c = static_cast<char>('0' + digit(rng));
  const size_t dot = basename.rfind('.');
  if (dot != std::string_view::npos) {
    const std::string_view suffix = basename.substr(dot + 1);
    bool word = !suffix.empty() && suffix.size() <= 32;
    for (char c : suffix) word = word && is_name_char(static_cast<unsigned char>(c));
    if (word) {
      name += '.';
      name += suffix;
    }
  }
  return name;
}

}  // namespace msprobe::format
