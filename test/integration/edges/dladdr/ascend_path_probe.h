// libascend_path_probe.so: how MindSpore's Ascend plugin (libmindspore_ascend.so, linked against libascendcl) finds
// its CANN install at start-up (GetAscendPath, reference/mindspore_runtime.md §1.1).
#pragma once
#include <cstddef>

extern "C" {

// MindSpore's check, for every CANN function the shim hooks instead of aclrtMalloc alone: dladdr on the address this
// library was linked to must name a file whose path contains "latest", in that install's lib64/ (a CANN library,
// never the shim). Prints one line per function, "dladdr(&NAME): FILE", on stdout. When the shim is loaded, also
// checks that its list of hooked CANN functions (msprobe_shim_hooked_function) is the one this library was built
// with. Writes the install path MindSpore derives (".../latest/") into `ascend_path`; returns the number of failures,
// each described on stderr.
__attribute__((visibility("default"))) int ascend_path_probe(char *ascend_path, size_t size);

}
