// Reading a captured tensor's staged bytes: its logical view as contiguous bytes, and the NaN/Inf in a kernel's
// outputs (the check of overflow_check and of the flight task).
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include "record/kernel_record.h"

namespace msprobe::collector {

// The logical view of a tensor as contiguous bytes: a pointer into the block when the view is already contiguous,
// else a gathered copy in `scratch`. nullptr when the view does not fit in its block. `bytes` gets the view's size.
// Sub-byte elements (FP4, FP6) stay packed, the view's first element at bit 0.
const unsigned char *materialize(const record::TensorCapture &t, std::vector<unsigned char> &scratch, uint64_t *bytes);

// The NaN/Inf in a kernel's outputs ("output.0: 3 NaN, 1 +Inf, 0 -Inf; output.2: ..."), empty when there is none.
// Statistics computed elsewhere (the device's) are used when present, else the bytes.
std::string nonfinite_outputs(const record::KernelCapture &k, format::StatPrecision precision);

}  // namespace msprobe::collector
