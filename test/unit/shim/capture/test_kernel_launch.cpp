// One kernel launch captured end to end (shim/capture/kernel_launch.h) against the CANN stand-in: a Session dumping
// into a temporary directory, real device tensors, a "kernel" that writes its output on the stream, and dump.json
// read back: the kernel's name, its input and output statistics equal to those computed here, inputs as they were
// before the kernel overwrote them. A failed launch submits nothing.
#include <gtest/gtest.h>
#include <stdlib.h>

#include <cstdio>
#include <list>

#include "races/clocks.h"
#include "shim/capture/kernel_launch.h"
#include "shim/capture/session.h"
#include "test/unit/shim/capture/capture_test_util.h"

using namespace msprobe::shim;
using namespace capture_test;

namespace {

class KernelLaunchTest : public ::testing::TestWithParam<const char *> {
 protected:
  static void SetUpTestSuite() { aclInit(nullptr); }
  void SetUp() override {
    unsetenv("RANK_ID");
    unsetenv("RANK");
    ASSERT_EQ(aclrtSetDevice(0), ACL_SUCCESS);
    ASSERT_EQ(aclrtCreateStream(&stream_), ACL_SUCCESS);
  }
  void TearDown() override {
    for (const TensorMeta &t : tensors_) aclrtFree(t.data);
    aclrtDestroyStream(stream_);
  }
  TensorMeta tensor(const std::vector<float> &v) {
    tensors_.push_back(device_floats(v));
    return tensors_.back();
  }
  // What a kernel does to its output: writes `v` there, in stream order, after whatever was enqueued before.
  void kernel_writes(const TensorMeta &out, const std::vector<float> &v) {
    written_.push_back(v);  // the source must outlive the asynchronous copy
    const size_t bytes = v.size() * sizeof(float);
    ASSERT_EQ(aclrtMemcpyAsync(out.data, bytes, written_.back().data(), bytes, ACL_MEMCPY_HOST_TO_DEVICE, stream_),
              ACL_SUCCESS);
  }
  // MSPROBE_DEVICE_STATS from the test parameter: statistics computed by reductions on the device, or on the host.
  Config config(const fs::path &dir, Vars vars = {}) {
    vars.emplace("MSPROBE_DEVICE_STATS", GetParam());
    return config_of(vars, dir);
  }

  aclrtStream stream_ = nullptr;
  std::vector<TensorMeta> tensors_;
  std::list<std::vector<float>> written_;
};

TEST_P(KernelLaunchTest, AFinishedLaunchIsInDumpJsonWithItsStatistics) {
  const fs::path dir = fresh_dir(std::string("stats_") + GetParam());
  const std::vector<float> x = {1.5f, -2.f, 3.25f, 0.f, 4.f, -1.f}, y0(6, 0.f), y = {2.f, 4.f, -8.f, 0.5f, 1.f, 3.f};
  {
    Session session(config(dir));
    const TensorMeta tx = tensor(x), ty = tensor(y0);
    KernelLaunch k(session, "Mul", kEmptyStack, stream_);
    ASSERT_TRUE(k.capturing());
    EXPECT_EQ(k.ticket().name, "Mul.Default.0.forward");
    k.input_tensor(tx);
    k.input_value(msprobe::format::ValueArg{"float", 2.0});
    kernel_writes(ty, y);
    k.output_tensor(ty);
    k.finish(true);
    session.flush();
    // On disk once flushed (dump.json becomes a whole JSON document when the session closes).
    std::ifstream flushed(dir / "step0" / "rank" / "dump.json");
    const std::string text((std::istreambuf_iterator<char>(flushed)), std::istreambuf_iterator<char>());
    EXPECT_NE(text.find("\"Mul.Default.0.forward\""), std::string::npos) << text;
    session.shutdown();
  }
  const nlohmann::json data = dump_data(dir);
  ASSERT_TRUE(data.contains("Mul.Default.0.forward")) << data.dump();
  EXPECT_EQ(data.size(), 1u);
  const nlohmann::json &e = data["Mul.Default.0.forward"];
  ASSERT_EQ(e["input_args"].size(), 2u) << e.dump();
  expect_stats(e["input_args"][0], x, "input x");
  EXPECT_EQ(e["input_args"][1]["type"], "float");
  EXPECT_EQ(e["input_args"][1]["value"].get<double>(), 2.0);
  ASSERT_EQ(e["output"].size(), 1u) << e.dump();
  expect_stats(e["output"][0], y, "output y");
  EXPECT_EQ(e["launch"]["index"].get<int>(), 0);
  fs::remove_all(dir);
}

// MSPROBE_RACECHECK=1: each tensor argument is an access of the bytes its view spans (shape, strides and offset, times
// the element size), stamped on its stream; two launches on two streams with nothing between them race over the bytes
// both views touch, and an event recorded after the first and waited for before the second orders them.
TEST_P(KernelLaunchTest, UnderTheRaceCheckArgumentsAreAccessesOfTheirViews) {
  const fs::path dir = fresh_dir(std::string("races_") + GetParam());
  aclrtStream other = nullptr;
  ASSERT_EQ(aclrtCreateStream(&other), ACL_SUCCESS);
  int event_handle = 0;  // the clocks know events by address only
  uint64_t base = 0;
  {
    Session session(config(dir, {{"MSPROBE_RACECHECK", "1"}}));
    ASSERT_NE(session.stream_clocks(), nullptr);
    const TensorMeta x = tensor(std::vector<float>(8, 1.f)), a = tensor(std::vector<float>(4, 0.f)),
                     b = tensor(std::vector<float>(4, 0.f)), c = tensor(std::vector<float>(4, 0.f));
    base = reinterpret_cast<uint64_t>(x.data);
    TensorMeta odd = x;  // elements 1, 3, 5: bytes [4, 24)
    odd.shape[0] = 3;
    odd.strides[0] = 2;
    odd.offset = 1;
    TensorMeta tail = x;  // elements 4..7: bytes [16, 32)
    tail.shape[0] = 4;
    tail.offset = 4;
    const auto launch = [&](const char *op, aclrtStream s, const TensorMeta &in, const TensorMeta &o) {
      KernelLaunch k(session, op, kEmptyStack, s);
      k.input_tensor(in);
      k.inputs_done();
      k.output_tensor(o);
      k.finish(true);
    };
    launch("Muls", stream_, a, odd);  // writes x's odd elements on stream_
    launch("Relu", other, tail, b);   // reads x's tail on `other`: races
    session.stream_clocks()->record(&event_handle, other);
    session.stream_clocks()->wait(stream_, &event_handle);
    launch("Adds", stream_, c, tail);  // writes the tail after the read: ordered
    session.shutdown();
  }
  ASSERT_EQ(aclrtSynchronizeStream(other), ACL_SUCCESS);
  aclrtDestroyStream(other);
  const nlohmann::json races = read_json(dir / "step0" / "rank" / "races.json")["races"];
  ASSERT_EQ(races.size(), 1u) << races.dump();
  const nlohmann::json &r = races["race.0"];
  EXPECT_EQ(r["kind"], "read-write");
  const auto hex = [](uint64_t v) {
    char b[24];
    std::snprintf(b, sizeof b, "0x%llx", static_cast<unsigned long long>(v));
    return std::string(b);
  };
  EXPECT_EQ(r["bytes"], nlohmann::json::array({hex(base + 16), hex(base + 24)}));
  EXPECT_EQ(r["first"]["kernel"], "Muls.Default.0.forward");
  EXPECT_EQ(r["first"]["access"], "write");
  EXPECT_EQ(r["first"]["tensors"], nlohmann::json::array({"output.0"}));
  EXPECT_EQ(r["first"]["range"], nlohmann::json::array({hex(base + 4), hex(base + 24)}));
  EXPECT_EQ(r["second"]["kernel"], "Relu.Default.0.forward");
  EXPECT_EQ(r["second"]["access"], "read");
  EXPECT_EQ(r["second"]["range"], nlohmann::json::array({hex(base + 16), hex(base + 32)}));
  EXPECT_NE(r["first"]["stream_id"], r["second"]["stream_id"]);
  EXPECT_EQ(r["count"], 1);
  fs::remove_all(dir);
}

// A family that cannot tell reads from writes (a raw kernel's argument blob) says so: its buffers are accesses of
// unknown kind, which race with a read on another stream and are reported as "unknown", never guessed.
TEST_P(KernelLaunchTest, UnderTheRaceCheckAnUndescribedKernelsAccessesAreUnknown) {
  const fs::path dir = fresh_dir(std::string("races_unknown_") + GetParam());
  aclrtStream other = nullptr;
  ASSERT_EQ(aclrtCreateStream(&other), ACL_SUCCESS);
  {
    Session session(config(dir, {{"MSPROBE_RACECHECK", "1"}}));
    const TensorMeta x = tensor(std::vector<float>(4, 1.f)), y = tensor(std::vector<float>(4, 0.f));
    {
      KernelLaunch k(session, "raw_kernel", kEmptyStack, stream_);
      k.accesses_unknown();
      k.input_tensor(x);  // as a raw kernel's slot: an input before the launch, an output after it
      k.inputs_done();
      k.output_tensor(x);
      k.finish(true);
    }
    {
      KernelLaunch k(session, "Relu", kEmptyStack, other);
      k.input_tensor(x);
      k.inputs_done();
      k.output_tensor(y);
      k.finish(true);
    }
    session.shutdown();
  }
  ASSERT_EQ(aclrtSynchronizeStream(other), ACL_SUCCESS);
  aclrtDestroyStream(other);
  const nlohmann::json races = read_json(dir / "step0" / "rank" / "races.json")["races"];
  ASSERT_EQ(races.size(), 1u) << races.dump();
  const nlohmann::json &r = races["race.0"];
  EXPECT_EQ(r["kind"], "unknown");
  EXPECT_EQ(r["first"]["access"], "unknown");
  EXPECT_EQ(r["first"]["tensors"], nlohmann::json::array({"input.0", "output.0"}));
  EXPECT_EQ(r["second"]["access"], "read");
  fs::remove_all(dir);
}

TEST_P(KernelLaunchTest, InputsAreCopiedBeforeAnInPlaceKernelOverwritesThem) {
  const fs::path dir = fresh_dir(std::string("inplace_") + GetParam());
  const std::vector<float> before = {1.f, 2.f, 3.f, 4.f}, after = {-10.f, 20.f, -30.f, 40.f};
  {
    Session session(config(dir));
    const TensorMeta t = tensor(before);
    KernelLaunch k(session, "InplaceMul", kEmptyStack, stream_);
    k.input_tensor(t);
    kernel_writes(t, after);
    k.output_tensor(t);
    k.finish(true);
    session.shutdown();
  }
  const nlohmann::json data = dump_data(dir);
  ASSERT_TRUE(data.contains("InplaceMul.Default.0.forward")) << data.dump();
  expect_stats(data["InplaceMul.Default.0.forward"]["input_args"][0], before, "input before the kernel");
  expect_stats(data["InplaceMul.Default.0.forward"]["output"][0], after, "output after it");
  fs::remove_all(dir);
}

TEST_P(KernelLaunchTest, AFailedLaunchSubmitsNothingButKeepsItsName) {
  const fs::path dir = fresh_dir(std::string("failed_") + GetParam());
  const std::vector<float> x = {5.f, 6.f, 7.f};
  {
    Session session(config(dir));
    const TensorMeta tx = tensor(x);
    {
      KernelLaunch k(session, "Add", kEmptyStack, stream_);
      ASSERT_TRUE(k.capturing());
      k.input_tensor(tx);
      k.finish(false);  // the real launch failed: the kernel never ran
    }
    session.flush();
    EXPECT_FALSE(fs::exists(dir)) << "nothing is created until a kernel is submitted";
    {
      KernelLaunch k(session, "Add", kEmptyStack, stream_);
      EXPECT_EQ(k.ticket().name, "Add.Default.1.forward");
      k.input_tensor(tx);
      k.output_tensor(tx);
      k.finish(true);
    }
    session.shutdown();
  }
  const nlohmann::json data = dump_data(dir);
  EXPECT_EQ(data.size(), 1u) << data.dump();
  EXPECT_FALSE(data.contains("Add.Default.0.forward"));
  ASSERT_TRUE(data.contains("Add.Default.1.forward"));
  expect_stats(data["Add.Default.1.forward"]["input_args"][0], x, "input");
  fs::remove_all(dir);
}

TEST_P(KernelLaunchTest, DataModeAndListDecideWhatIsTaken) {
  const fs::path dir = fresh_dir(std::string("mode_") + GetParam());
  const std::vector<float> x = {1.f, -1.f}, y = {3.f, 9.f};
  {
    Session session(config(dir, {{"MSPROBE_DATA_MODE", "output"}, {"MSPROBE_LIST", "Relu"}}));
    const TensorMeta tx = tensor(x), ty = tensor(y);
    {
      KernelLaunch skipped(session, "Add", kEmptyStack, stream_);
      EXPECT_FALSE(skipped.capturing());
      skipped.input_tensor(tx);
      skipped.output_tensor(ty);
      skipped.finish(true);
    }
    KernelLaunch k(session, "Relu", kEmptyStack, stream_);
    ASSERT_TRUE(k.capturing());
    k.input_tensor(tx);  // ignored: outputs only
    k.output_tensor(ty);
    k.finish(true);
    session.shutdown();
  }
  const nlohmann::json data = dump_data(dir);
  EXPECT_EQ(data.size(), 1u) << data.dump();
  ASSERT_TRUE(data.contains("Relu.Default.0.forward"));
  EXPECT_FALSE(data["Relu.Default.0.forward"].contains("input_args"));
  expect_stats(data["Relu.Default.0.forward"]["output"][0], y, "output");
  EXPECT_EQ(data["Relu.Default.0.forward"]["launch"]["index"].get<int>(), 1);
  fs::remove_all(dir);
}

INSTANTIATE_TEST_SUITE_P(DeviceStats, KernelLaunchTest, ::testing::Values("on", "off"));

}  // namespace
