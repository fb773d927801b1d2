// Functions of libgot_target.so, the library whose callers' GOT entries test_got_patch.cpp redirects.
#pragma once
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

int32_t got_add(int32_t a, int32_t b);
int32_t got_mul(int32_t a, int32_t b);  // the test program takes its address (GLOB_DAT)
int32_t got_sub(int32_t a, int32_t b);  // also called by libgot_caller.so (skip list)
int32_t got_plugin_target(int32_t a);   // also called by libgot_plugin.so (dlopened later)
int32_t got_concurrent(int32_t a);
int32_t got_declined(int32_t a);
// Mixed integer / floating-point parameters, one integer on the stack on x86-64.
double got_scale(double x, float f, int8_t c, int64_t n, int32_t a, int32_t b, int32_t d, int32_t e, int8_t s);
// Never called before the test patches them: their entries are still lazy in a -z lazy program.
int64_t got_lazy_probe(int64_t a, double x, int8_t c);
int64_t got_lazy_unresolved(int64_t a);
int64_t got_lazy_untouched(int64_t a);
extern int got_data_object;  // a data symbol: its GOT entry must never be offered

// libgot_caller.so: calls into libgot_target.so through its own PLT/GOT.
int32_t caller_sub(int32_t a, int32_t b);
int32_t caller_add(int32_t a, int32_t b);
int caller_read_data(void);

#ifdef __cplusplus
}
#endif
