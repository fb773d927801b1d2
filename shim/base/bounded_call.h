// A call into code the shim does not control (the runtime, and through it the host) that the shim must not wait for
// without a bound: it runs on a helper thread (all signals blocked) and the caller waits at most `timeout`. When the
// call has not returned by then, the caller goes on and the helper is left to finish on its own; nothing it touches
// may be owned by the caller's stack.
#pragma once
#include <chrono>
#include <functional>

namespace msprobe::shim {

// True when fn() returned within `timeout`. When no helper thread can be made, fn() runs on the caller (as it would
// without the bound) and the result is true.
bool call_with_deadline(std::function<void()> fn, std::chrono::milliseconds timeout);

}  // namespace msprobe::shim
