// Kernel names the framework gives after the launch (shim/capture/scope_names.h), against the CANN stand-in: while
// armed, launches wait on their thread and the thread's next kernel record names them all, in launch order, with
// ordinals per name; each fallback to today's name (another record on a thread that never names its kernels, the bound,
// thread exit, flush); the name filters applied to the names given; another thread's record names nothing here.
#include <gtest/gtest.h>
#include <stdlib.h>

#include <algorithm>
#include <thread>

#include "shim/capture/kernel_launch.h"
#include "shim/capture/scope_names.h"
#include "shim/capture/session.h"
#include "test/unit/shim/capture/capture_test_util.h"

using namespace msprobe::shim;
using namespace capture_test;

namespace {

class ScopeNames : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    aclInit(nullptr);
    scope_names::arm();  // for the whole process: this executable's launches are all named later
  }
  void SetUp() override {
    unsetenv("RANK_ID");
    unsetenv("RANK");
    ASSERT_EQ(aclrtSetDevice(0), ACL_SUCCESS);
    ASSERT_EQ(aclrtCreateStream(&stream_), ACL_SUCCESS);
    x_ = device_floats({1.f, -2.f, 3.f});
  }
  void TearDown() override {
    aclrtFree(x_.data);
    aclrtDestroyStream(stream_);
  }
  // One launch of `op` reading x_, finished as a successful one.
  void launch(Session &s, const char *op) {
    KernelLaunch k(s, op, kEmptyStack, stream_);
    EXPECT_TRUE(k.ticket().name_pending);
    EXPECT_TRUE(k.ticket().name.empty());
    k.input_tensor(x_);
    k.finish(true);
  }
  // The kernel names of step 0, sorted (dump_data's object keeps its keys sorted).
  static std::vector<std::string> names(const fs::path &dir) {
    const nlohmann::json data = dump_data(dir);
    std::vector<std::string> out;
    for (auto it = data.begin(); it != data.end(); ++it) out.push_back(it.key());
    return out;
  }
  aclrtStream stream_ = nullptr;
  TensorMeta x_;
};

TEST_F(ScopeNames, TheNextKernelRecordNamesEveryLaunchSinceThePreviousOne) {
  const fs::path dir = fresh_dir("scope_record");
  {
    Session s(config_of({}, dir));
    launch(s, "Cast");
    launch(s, "Matmul");  // one framework kernel, two CANN launches
    scope_names::kernel_recorded("Default/net/fc1-Dense/MatMul-op0");
    launch(s, "Matmul");
    // Another thread's record names nothing here.
    std::thread([] { scope_names::kernel_recorded("Default/elsewhere/Add-op0"); }).join();
    scope_names::kernel_recorded("Default/net/fc1-Dense/MatMul-op0");  // the same kernel again: ordinal 1
    s.shutdown();
  }
  EXPECT_EQ(names(dir), (std::vector<std::string>{"Cast.Default_net_fc1-Dense_MatMul-op0.0.forward",
                                                  "Matmul.Default_net_fc1-Dense_MatMul-op0.0.forward",
                                                  "Matmul.Default_net_fc1-Dense_MatMul-op0.1.forward"}));
  fs::remove_all(dir);
}

TEST_F(ScopeNames, FallbacksGiveTodaysNames) {
  const fs::path dir = fresh_dir("scope_fallback");
  {
    Session s(config_of({}, dir));
    s.set_before_flush([] { scope_names::resolve_all(); });
    // A thread that never had a kernel record: another record of the framework names its launches as today.
    std::thread([&] {
      aclrtSetDevice(0);
      launch(s, "Relu");
      scope_names::other_record();
    }).join();
    // A thread that had one waits for its kernels' records through other records...
    scope_names::kernel_recorded("Default/first-op0");
    launch(s, "Add");
    scope_names::other_record();
    // ... until a flush (or exit) names what still waits.
    s.flush();
    // A thread that exits names what it left.
    std::thread([&] {
      aclrtSetDevice(0);
      launch(s, "Neg");
    }).join();
    s.shutdown();
  }
  EXPECT_EQ(names(dir), (std::vector<std::string>{"Add.Default.0.forward", "Neg.Default.0.forward",
                                                  "Relu.Default.0.forward"}));
  fs::remove_all(dir);
}

TEST_F(ScopeNames, MoreThanTheBoundWaitingAreNamedAsToday) {
  const fs::path dir = fresh_dir("scope_bound");
  {
    Session s(config_of({{"MSPROBE_TASK", "structure"}}, dir));
    for (size_t i = 0; i <= scope_names::kMaxPending; ++i) launch(s, "Mul");
    scope_names::kernel_recorded("Default/late-op0");  // nothing left to name
    s.shutdown();
  }
  const std::vector<std::string> n = names(dir);
  ASSERT_EQ(n.size(), scope_names::kMaxPending + 1);
  for (size_t i = 0; i <= scope_names::kMaxPending; ++i)
    EXPECT_NE(std::find(n.begin(), n.end(), "Mul.Default." + std::to_string(i) + ".forward"), n.end()) << i;
  fs::remove_all(dir);
}

TEST_F(ScopeNames, NameFiltersApplyToTheNamesGiven) {
  const fs::path dir = fresh_dir("scope_filter");
  {
    Session s(config_of({{"MSPROBE_LIST", "name-regex(.*_fc2_.*)"}}, dir));
    launch(s, "Matmul");
    scope_names::kernel_recorded("Default/fc1/MatMul-op0");
    launch(s, "Matmul");
    scope_names::kernel_recorded("Default/fc2/MatMul-op0");
    launch(s, "Matmul");
    scope_names::kernel_recorded("Default/fc1/MatMul-op0");
    s.shutdown();
  }
  // The unselected ones were copied (their names came later) and let go; every launch still took its ordinal.
  EXPECT_EQ(names(dir), (std::vector<std::string>{"Matmul.Default_fc2_MatMul-op0.0.forward"}));
  fs::remove_all(dir);
}

}  // namespace
