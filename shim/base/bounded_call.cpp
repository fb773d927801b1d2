#include "shim/base/bounded_call.h"

#include <signal.h>

#include <condition_variable>
#include <memory>
#include <mutex>
#include <system_error>
#include <thread>

namespace msprobe::shim {
namespace {

// Shared by the caller and the helper: whoever leaves last frees it.
struct Done {
  std::mutex mu;
  std::condition_variable cv;
  bool done = false;
};

}  // namespace

bool call_with_deadline(std::function<void()> fn, std::chrono::milliseconds timeout) {
  auto state = std::make_shared<Done>();
  sigset_t all, old;
  sigfillset(&all);
  pthread_sigmask(SIG_SETMASK, &all, &old);  // the helper must never take the host's signals
  std::thread helper;
  try {
    helper = std::thread([fn, state] {
      fn();
      std::lock_guard<std::mutex> lk(state->mu);
      state->done = true;
      state->cv.notify_all();
    });
  } catch (const std::system_error &) {
    pthread_sigmask(SIG_SETMASK, &old, nullptr);
    fn();
    return true;
  }
  pthread_sigmask(SIG_SETMASK, &old, nullptr);
  std::unique_lock<std::mutex> lk(state->mu);
  const bool done = state->cv.wait_for(lk, timeout, [&] { return state->done; });
  lk.unlock();
  if (done)
    helper.join();
  else
    helper.detach();
  return done;
}

}  // namespace msprobe::shim
