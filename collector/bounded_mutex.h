#pragma once
// A mutex whose lock can give up after a while (TimedLockable), built on std::mutex and a condition variable.
// std::timed_mutex would do, but libstdc++ implements it with pthread_mutex_clocklock, which ThreadSanitizer does not
// intercept: the sanitizer then sees unlocks of a mutex never locked, and the tsan stage cannot check the collector.

#include <chrono>
#include <condition_variable>
#include <mutex>

namespace msprobe::collector {

class BoundedMutex {
 public:
  void lock() {
    std::unique_lock<std::mutex> lk(mu_);
    freed_.wait(lk, [this] { return !held_; });
    held_ = true;
  }
  bool try_lock() {
    std::lock_guard<std::mutex> lk(mu_);
    if (held_) return false;
    held_ = true;
    return true;
  }
  template <class Rep, class Period>
  bool try_lock_for(std::chrono::duration<Rep, Period> wait) {
    std::unique_lock<std::mutex> lk(mu_);
    if (!freed_.wait_for(lk, wait, [this] { return !held_; })) return false;
    held_ = true;
    return true;
  }
  void unlock() {
    {
      std::lock_guard<std::mutex> lk(mu_);
      held_ = false;
    }
    freed_.notify_one();
  }

 private:
  std::mutex mu_;
  std::condition_variable freed_;
  bool held_ = false;
};

}  // namespace msprobe::collector
