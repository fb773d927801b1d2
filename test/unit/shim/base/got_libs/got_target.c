#include "got_target.h"

int got_data_object = 5;

int32_t got_add(int32_t a, int32_t b) { return a + b; }
int32_t got_mul(int32_t a, int32_t b) { return a * b; }
int32_t got_sub(int32_t a, int32_t b) { return a - b; }
int32_t got_plugin_target(int32_t a) { return 3 * a + 1; }
int32_t got_concurrent(int32_t a) { return a ^ 0x5a5a; }
int32_t got_declined(int32_t a) { return -a; }
double got_scale(double x, float f, int8_t c, int64_t n, int32_t a, int32_t b, int32_t d, int32_t e, int8_t s) {
  return x * (double)f + (double)c + (double)n + (double)a + (double)b + (double)d + (double)e + (double)s;
}
int64_t got_lazy_probe(int64_t a, double x, int8_t c) { return a * 10 + (int64_t)x + c; }
int64_t got_lazy_unresolved(int64_t a) { return a + 1000; }
int64_t got_lazy_untouched(int64_t a) { return a - 1000; }
