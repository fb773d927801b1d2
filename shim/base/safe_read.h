// Reading memory that may not be mapped, without faulting: the header-less aclnn path (docs/prototypes.md) probes
// argument slots that may or may not hold pointers. No ACL here.
#pragma once
#include <sys/types.h>

#include <cstdint>

namespace msprobe::shim {

// Reads the 8 bytes at each of two addresses that may not be mapped: false when either cannot be read. `self` is
// getpid(), which the caller looks up once per scan. The host's errno is left as it was.
bool safe_read_pair(pid_t self, const void *a, const void *b, uint64_t *out_a, uint64_t *out_b);

}  // namespace msprobe::shim
