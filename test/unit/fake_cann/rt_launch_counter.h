/* What rt_launch_counter.c (an LD_PRELOADed interposer of libruntime's kernel API) records, shared with the test
 * that reads it back through rtCounterSnapshot(), so that the two can never disagree on the layout. */
#ifndef MSPROBE_TEST_RT_LAUNCH_COUNTER_H
#define MSPROBE_TEST_RT_LAUNCH_COUNTER_H
#include <stdint.h>

#define RT_COUNTER_MAX_WORDS 64

struct RtCounter {
  uint64_t register_all_kernel;
  uint64_t launch_with_handle_v2;
  uint64_t launch_other; /* rtKernelLaunch, WithFlag(V2), WithHandle */
  uint64_t tiling_key;
  void *handle;
  uint32_t args_size;
  uint32_t tiling_addr_offset;
  uint32_t tiling_data_offset;
  uint8_t has_tiling;
  uint64_t words[RT_COUNTER_MAX_WORDS]; /* the first args_size bytes of the last blob, as 64-bit words */
};

#endif
