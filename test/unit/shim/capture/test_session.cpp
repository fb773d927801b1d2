// The capture session's decisions (shim/capture/session.h), without a device: step markers and explicit steps,
// ranks from the environment and from HCCL, captures_ahead(), kernel names and their ordinals per step and rank,
// the list and scope filters, data_mode and the structure task, and names from many threads at once.
// No kernel is submitted here, so nothing is written to disk.
#include <gtest/gtest.h>
#include <stdlib.h>

#include <map>
#include <mutex>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "format/naming.h"
#include "shim/capture/session.h"
#include "shim/config/config.h"

using namespace msprobe::shim;

namespace {

using Vars = std::map<std::string, std::string>;

// A Config as the composition root would load it from these MSPROBE_* variables (and nothing else).
Config config_of(const Vars &vars) {
  ConfigLoad l = load_config([&](const char *name) -> const char * {
    const auto it = vars.find(name);
    return it == vars.end() ? nullptr : it->second.c_str();
  });
  EXPECT_TRUE(l.errors.empty()) << ::testing::PrintToString(l.errors);
  EXPECT_TRUE(l.config.enabled);
  l.config.dump_path = ::testing::TempDir() + "/session_never_written";
  return l.config;
}

const void *const kStream = reinterpret_cast<const void *>(0x1000);
const void *const kStream2 = reinterpret_cast<const void *>(0x2000);

// The rank variables are read at a session's first launch: every test starts without them.
class SessionTest : public ::testing::Test {
 protected:
  void SetUp() override {
    unsetenv("RANK_ID");
    unsetenv("RANK");
  }
  void TearDown() override { SetUp(); }
};

LaunchTicket launch(Session &s, const char *op_type, const void *stream = kStream) {
  return s.begin_launch(op_type, "Default", stream);
}

TEST_F(SessionTest, NamesCountPerBaseNameAndIndicesCountEveryLaunch) {
  Session s(config_of({}));
  const LaunchTicket a0 = launch(s, "Add"), m0 = launch(s, "Mul"), a1 = launch(s, "Add");
  const LaunchTicket f0 = s.begin_launch("Add", "Module.fc1.forward", kStream2);
  EXPECT_EQ(a0.name, "Add.Default.0.forward");
  EXPECT_EQ(m0.name, "Mul.Default.0.forward");
  EXPECT_EQ(a1.name, "Add.Default.1.forward");
  EXPECT_EQ(f0.name, "Add.Module_fc1_forward.0.forward") << "another OpName is another base name";
  EXPECT_EQ(a0.launch_index, 0u);
  EXPECT_EQ(m0.launch_index, 1u);
  EXPECT_EQ(a1.launch_index, 2u);
  EXPECT_EQ(f0.launch_index, 3u);
  // Streams are numbered in order of first use; task ids count per stream.
  EXPECT_EQ(a0.stream_id, 0u);
  EXPECT_EQ(a1.task_id, 2u);
  EXPECT_EQ(f0.stream_id, 1u);
  EXPECT_EQ(f0.task_id, 0u);
  for (const LaunchTicket &t : {a0, m0, a1, f0}) {
    EXPECT_TRUE(t.capture) << t.name;
    EXPECT_TRUE(t.with_inputs && t.with_outputs && t.with_data) << t.name;
    EXPECT_EQ(t.step, 0u);
    EXPECT_FALSE(t.rank.has_value());
  }
}

TEST_F(SessionTest, ARunOfOptimizerKernelsEndsAStepCastAndInplaceCopyInsideIt) {
  Session s(config_of({}));
  EXPECT_TRUE(s.is_step_marker("ApplyAdamW"));
  EXPECT_FALSE(s.is_step_marker("Cast"));
  EXPECT_EQ(launch(s, "Add").step, 0u);
  EXPECT_EQ(launch(s, "ApplyAdamW").step, 0u);
  EXPECT_EQ(launch(s, "Cast").step, 0u) << "mixed precision: a cast inside the optimizer run";
  EXPECT_EQ(launch(s, "ApplyAdamW").step, 0u);
  EXPECT_EQ(launch(s, "InplaceCopy").step, 0u);
  const LaunchTicket next = launch(s, "Add");
  EXPECT_EQ(next.step, 1u) << "the first kernel after the run starts step 1";
  EXPECT_EQ(next.name, "Add.Default.0.forward") << "ordinals start over in each step";
  // A Cast outside a run is an ordinary kernel.
  EXPECT_EQ(launch(s, "Cast").step, 1u);
  EXPECT_EQ(launch(s, "Add").step, 1u);
  // skip_launch counts markers too.
  s.skip_launch("ApplyAdamW", kStream, true);
  EXPECT_EQ(launch(s, "Add").step, 2u);
}

TEST_F(SessionTest, EndStepAndHostMarkedStepsReplaceTheMarkers) {
  Session s(config_of({}));
  EXPECT_EQ(launch(s, "Add").step, 0u);
  s.end_step();
  EXPECT_EQ(launch(s, "Add").name, "Add.Default.0.forward");
  EXPECT_EQ(launch(s, "ApplyAdamW").step, 1u);
  EXPECT_EQ(launch(s, "Add").step, 1u) << "once the host marks steps, optimizer kernels no longer do";

  Session h(config_of({}));
  h.host_marks_steps();
  EXPECT_EQ(launch(h, "ApplyAdamW").step, 0u);
  EXPECT_EQ(launch(h, "Add").step, 0u);
  h.end_step();
  EXPECT_EQ(launch(h, "Add").step, 1u);
}

TEST_F(SessionTest, StepRangesSelectKernelsAndCapturesAheadEndsAfterTheLast) {
  Session s(config_of({{"MSPROBE_STEP", "1,3"}}));
  EXPECT_TRUE(s.captures_ahead());
  std::vector<bool> captured;
  for (int step = 0; step < 5; ++step) {
    captured.push_back(launch(s, "Add").capture);
    EXPECT_EQ(s.captures_ahead(), step <= 3) << "step " << step << ": selected steps ahead, this one included";
    s.end_step();
  }
  EXPECT_FALSE(s.captures_ahead()) << "step 5: past the last selected step";
  EXPECT_EQ(captured, (std::vector<bool>{false, true, false, true, false}));
  EXPECT_FALSE(s.captures_ahead()) << "steps only grow: false stays false";
}

TEST_F(SessionTest, RankFromTheEnvironmentWinsOverTheHcclHint) {
  {
    setenv("RANK", "7", 1);
    setenv("RANK_ID", "3", 1);  // RANK_ID first
    Session s(config_of({}));
    s.set_rank_hint(5);
    EXPECT_EQ(launch(s, "Add").rank, std::optional<uint32_t>(3));
  }
  {
    unsetenv("RANK_ID");  // RANK=7 remains
    Session s(config_of({}));
    EXPECT_EQ(launch(s, "Add").rank, std::optional<uint32_t>(7));
  }
  {
    setenv("RANK", "seven", 1);  // not a number: ignored, the hint decides
    Session s(config_of({}));
    s.set_rank_hint(5);
    EXPECT_EQ(launch(s, "Add").rank, std::optional<uint32_t>(5));
  }
  {
    unsetenv("RANK");
    Session s(config_of({}));
    const LaunchTicket before = launch(s, "Add");
    EXPECT_FALSE(before.rank.has_value());
    s.set_rank_hint(2);  // the communicator is made after some kernels ran
    const LaunchTicket after = launch(s, "Add");
    EXPECT_EQ(after.rank, std::optional<uint32_t>(2));
    // One process on one device, one rank folder (issue 39): the kernels before the communicator are rank 2's too, so
    // the names go on counting where they left off.
    EXPECT_EQ(after.name, "Add.Default.1.forward");
  }
}

TEST_F(SessionTest, AnUnselectedRankCapturesNothingAhead) {
  setenv("RANK_ID", "1", 1);
  Session s(config_of({{"MSPROBE_RANK", "0,2"}}));
  EXPECT_TRUE(s.captures_ahead()) << "the rank is read at the first launch";
  const LaunchTicket t = launch(s, "Add");
  EXPECT_EQ(t.rank, std::optional<uint32_t>(1));
  EXPECT_FALSE(t.capture);
  EXPECT_EQ(t.name, "Add.Default.0.forward") << "named all the same";
  EXPECT_FALSE(s.captures_ahead());

  setenv("RANK_ID", "2", 1);
  Session selected(config_of({{"MSPROBE_RANK", "0,2"}}));
  EXPECT_TRUE(launch(selected, "Add").capture);
  EXPECT_TRUE(selected.captures_ahead());

  // A rank list with no rank known yet: nothing is captured until the rank is known (it may not be selected).
  unsetenv("RANK_ID");
  Session unknown(config_of({{"MSPROBE_RANK", "0"}}));
  EXPECT_FALSE(launch(unknown, "Add").capture);
  unknown.set_rank_hint(0);
  EXPECT_TRUE(launch(unknown, "Add").capture);
}

TEST_F(SessionTest, ListFilterSelectsButEveryKernelIsNamed) {
  Session s(config_of({{"MSPROBE_LIST", "Add,Mul.Default.1"}}));
  EXPECT_TRUE(s.may_capture("Add"));
  EXPECT_TRUE(s.may_capture("Mul"));
  EXPECT_FALSE(s.may_capture("Sub"));
  const LaunchTicket a = launch(s, "Add"), m0 = launch(s, "Mul"), sub = launch(s, "Sub"), m1 = launch(s, "Mul");
  EXPECT_TRUE(a.capture);
  EXPECT_FALSE(m0.capture);
  EXPECT_FALSE(sub.capture);
  EXPECT_EQ(sub.name, "Sub.Default.0.forward");
  EXPECT_TRUE(m1.capture);
  EXPECT_EQ(m1.name, "Mul.Default.1.forward");
}

TEST_F(SessionTest, ScopeOpensAtFirstClosesAfterLastInEachStep) {
  Session s(config_of({{"MSPROBE_SCOPE", "Mul,Relu"}}));
  EXPECT_TRUE(s.may_capture("Sub")) << "any op type can be inside a scope";
  std::vector<std::pair<std::string, bool>> got;
  for (int step = 0; step < 2; ++step) {
    for (const char *op : {"Add", "Mul", "Sub", "Relu", "Add", "Mul"}) {
      const LaunchTicket t = launch(s, op);
      got.emplace_back(t.name, t.capture);
    }
    s.end_step();
  }
  const std::vector<std::pair<std::string, bool>> one_step = {{"Add.Default.0.forward", false}, {"Mul.Default.0.forward", true},
                                                              {"Sub.Default.0.forward", true},  {"Relu.Default.0.forward", true},
                                                              {"Add.Default.1.forward", false}, {"Mul.Default.1.forward", false}};
  std::vector<std::pair<std::string, bool>> want = one_step;
  want.insert(want.end(), one_step.begin(), one_step.end());
  EXPECT_EQ(got, want);
}

TEST_F(SessionTest, DataModeAndStructureTaskShapeTheTicket) {
  Session in(config_of({{"MSPROBE_DATA_MODE", "input"}}));
  const LaunchTicket i = launch(in, "Add");
  EXPECT_TRUE(i.capture && i.with_inputs && i.with_data);
  EXPECT_FALSE(i.with_outputs);

  Session out(config_of({{"MSPROBE_DATA_MODE", "output"}}));
  const LaunchTicket o = launch(out, "Add");
  EXPECT_TRUE(o.capture && o.with_outputs);
  EXPECT_FALSE(o.with_inputs);

  Session structure(config_of({{"MSPROBE_TASK", "structure"}}));
  const LaunchTicket t = launch(structure, "Add");
  EXPECT_TRUE(t.capture && t.with_inputs && t.with_outputs);
  EXPECT_FALSE(t.with_data) << "structure: metadata only";
}

TEST_F(SessionTest, AShutDownSessionCapturesNothing) {
  Session s(config_of({}));
  EXPECT_TRUE(launch(s, "Add").capture);
  s.shutdown();
  const LaunchTicket t = launch(s, "Add");
  EXPECT_FALSE(t.capture);
  EXPECT_EQ(t.name, "Add.Default.1.forward");
}

// 8 threads launch 200 kernels each, of 4 op types: every name is unique and each op type's ordinals are exactly
// 0..N-1, launch indices exactly 0..1599 (the KernelNamer's old guarantee, now the session's).
TEST_F(SessionTest, ConcurrentLaunchesGetUniqueDenseNames) {
  constexpr int kThreads = 8, kPerThread = 200, kTypes = 4;
  Session s(config_of({{"MSPROBE_STEP_MARKER", "off"}}));
  std::mutex mu;
  std::vector<LaunchTicket> all;
  std::vector<std::thread> threads;
  for (int i = 0; i < kThreads; ++i)
    threads.emplace_back([&, i] {
      std::vector<LaunchTicket> mine;
      const std::string type = "Op" + std::to_string(i % kTypes);
      const void *stream = reinterpret_cast<const void *>(uintptr_t(0x100 * (i + 1)));
      for (int k = 0; k < kPerThread; ++k) mine.push_back(s.begin_launch(type, "Default", stream));
      std::lock_guard<std::mutex> lk(mu);
      all.insert(all.end(), mine.begin(), mine.end());
    });
  for (std::thread &t : threads) t.join();
  ASSERT_EQ(all.size(), size_t(kThreads * kPerThread));
  std::set<std::string> names;
  std::set<uint64_t> indices;
  std::map<std::string, std::set<uint64_t>> ordinals;
  for (const LaunchTicket &t : all) {
    EXPECT_TRUE(names.insert(t.name).second) << "duplicate " << t.name;
    indices.insert(t.launch_index);
    const std::string stem(msprobe::format::kernel_stem(t.name));
    ASSERT_EQ(stem + ".forward", t.name);
    const size_t dot = stem.rfind('.');
    ordinals[stem.substr(0, dot)].insert(std::stoull(stem.substr(dot + 1)));
    EXPECT_EQ(t.step, 0u);
  }
  EXPECT_EQ(indices.size(), all.size());
  EXPECT_EQ(*indices.rbegin(), all.size() - 1);
  ASSERT_EQ(ordinals.size(), size_t(kTypes));
  const size_t per_type = size_t(kThreads / kTypes * kPerThread);
  for (const auto &[base, ns] : ordinals) {
    EXPECT_EQ(ns.size(), per_type) << base;
    EXPECT_EQ(*ns.begin(), 0u) << base;
    EXPECT_EQ(*ns.rbegin(), per_type - 1) << base;
  }
}

}  // namespace
