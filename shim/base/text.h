// ASCII text helpers for the shim's parsers: the settings and config.json (shim/config/), kernel filters
// (shim/config/kernel_filter.cpp) and the aclnn prototypes read from CANN's headers (shim/aclnn/prototypes.cpp).
// ASCII on purpose: std::isspace and std::tolower follow the host's locale (in a Turkish locale 'I' does not lower
// to 'i'), and the shim runs inside someone else's process.
#pragma once
#include <cstddef>
#include <string_view>

namespace msprobe::shim {

// ' ', \t, \n, \r, \f, \v: what std::isspace means in the C locale.
constexpr bool is_space(char c) { return c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\f' || c == '\v'; }

// `s` without the white space around it.
constexpr std::string_view trim(std::string_view s) {
  while (!s.empty() && is_space(s.front())) s.remove_prefix(1);
  while (!s.empty() && is_space(s.back())) s.remove_suffix(1);
  return s;
}

constexpr char ascii_lower(char c) { return c >= 'A' && c <= 'Z' ? static_cast<char>(c + 32) : c; }

// Equal but for the case of ASCII letters.
constexpr bool iequals(std::string_view a, std::string_view b) {
  if (a.size() != b.size()) return false;
  for (size_t i = 0; i < a.size(); ++i) {
    if (ascii_lower(a[i]) != ascii_lower(b[i])) return false;
  }
  return true;
}

}  // namespace msprobe::shim
