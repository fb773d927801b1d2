// MindSpore's runtime profiler as the source of kernel names (shim/hooks/mindspore.cpp): what the composition root and
// the dlopen hook call.
#pragma once

namespace msprobe::shim {

// At start-up, before MindSpore reads it: MS_ENABLE_RUNTIME_PROFILER=1 unless the user set the variable.
void offer_mindspore_profiler();
// After objects were loaded: once libmindspore_profiler.so is among them, its profiler is started (StartStep, once)
// and, when it is on, kernels are named from its records (scope_names::arm).
void mindspore_libraries_loaded();

}  // namespace msprobe::shim
