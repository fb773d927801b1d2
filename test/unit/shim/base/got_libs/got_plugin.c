// Opened with dlopen after the first patch: only its entries are new.
#include "got_target.h"

int32_t plugin_call(int32_t a) { return got_plugin_target(a); }
