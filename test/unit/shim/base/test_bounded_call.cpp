// call_with_deadline (shim/base/bounded_call.h): a call that returns in time is waited for and joined; one that does
// not is left behind after the bound, and the caller goes on.
#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <thread>

#include "shim/base/bounded_call.h"

using msprobe::shim::call_with_deadline;
using namespace std::chrono_literals;

namespace {

TEST(BoundedCall, AQuickCallIsWaitedFor) {
  int ran = 0;
  EXPECT_TRUE(call_with_deadline([&] { ++ran; }, 5s));
  EXPECT_EQ(ran, 1);  // joined: its effects are visible to the caller
}

TEST(BoundedCall, ACallThatDoesNotReturnIsLeftBehind) {
  static std::atomic<bool> release{false}, finished{false};  // outlive the test: the helper is still running
  const auto started = std::chrono::steady_clock::now();
  EXPECT_FALSE(call_with_deadline(
      [] {
        while (!release.load()) std::this_thread::sleep_for(1ms);
        finished = true;
      },
      200ms));
  const auto waited = std::chrono::steady_clock::now() - started;
  EXPECT_GE(waited, 200ms);
  EXPECT_LT(waited, 10s);
  EXPECT_FALSE(finished.load());
  release = true;  // the helper ends on its own
  for (int i = 0; i < 5000 && !finished.load(); ++i) std::this_thread::sleep_for(1ms);
  EXPECT_TRUE(finished.load());
}

}  // namespace
