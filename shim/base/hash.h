// The shim's one non-cryptographic hash: 64-bit FNV-1a (keys of tables, names derived from bytes every rank sees the
// same). Not for anything an adversary chooses.
#pragma once
#include <cstddef>
#include <cstdint>

namespace msprobe::shim {

inline constexpr uint64_t kFnv1aOffset = 1469598103934665603ull;
inline constexpr uint64_t kFnv1aPrime = 1099511628211ull;

// Folds one byte into `h`.
constexpr uint64_t fnv1a_step(uint64_t h, unsigned char byte) { return (h ^ byte) * kFnv1aPrime; }

inline uint64_t fnv1a64(const void *data, size_t n, uint64_t h = kFnv1aOffset) {
  const auto *p = static_cast<const unsigned char *>(data);
  for (size_t i = 0; i < n; ++i) h = fnv1a_step(h, p[i]);
  return h;
}

}  // namespace msprobe::shim
