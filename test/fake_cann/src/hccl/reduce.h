// Element types of HCCL and the reductions of AllReduce / ReduceScatter.
#pragma once
#include <cstdint>

#include "hccl/hccl_types.h"

namespace fakecann::hccl {

// True for the values HcclDataType defines (RESERVED and anything else is a parameter error).
bool dtype_defined(HcclDataType t);
// Whether the stand-in reduces the type (sums ...): not the 8-bit floating types (HIF8, FP8 E4M3/E5M2/E8M0), which
// the collectives only move.
bool dtype_reducible(HcclDataType t);
// Bytes per element; 0 for a defined type the stand-in does not move (INT128).
uint64_t dtype_bytes(HcclDataType t);
const char *dtype_name(HcclDataType t);
bool op_defined(HcclReduceOp op);
const char *op_name(HcclReduceOp op);

// dst[i] = srcs[0][i] op srcs[1][i] op ... (ranks in order, so every rank computes the same bits).
// Floating types are combined in double and rounded once to the type; integers use exact integer
// arithmetic that wraps at the type's width, as the device's integer units do.
void reduce(HcclDataType t, HcclReduceOp op, const char *const *srcs, uint32_t nsrc, char *dst, uint64_t count);

}  // namespace fakecann::hccl
