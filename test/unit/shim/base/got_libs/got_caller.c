#include "got_target.h"

int32_t caller_sub(int32_t a, int32_t b) { return got_sub(a, b); }
int32_t caller_add(int32_t a, int32_t b) { return got_add(a, b); }
int caller_read_data(void) { return got_data_object; }
