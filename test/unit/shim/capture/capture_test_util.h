// Helpers shared by the capture-core tests that run against the CANN stand-in: a fresh dump directory, a Config
// loaded from MSPROBE_* variables given in code, float tensors on the stand-in's device, dump.json read back.
#pragma once
#include <gtest/gtest.h>
#include <unistd.h>

#include <cmath>
#include <filesystem>
#include <fstream>
#include <map>
#include <nlohmann/json.hpp>
#include <sstream>
#include <string>
#include <vector>

#include "acl/acl.h"
#include "shim/config/config.h"
#include "shim/device/handles.h"

namespace capture_test {

namespace fs = std::filesystem;
using Vars = std::map<std::string, std::string>;

inline fs::path fresh_dir(const std::string &name) {
  fs::path d = fs::temp_directory_path() / ("msprobe_capture_" + name + "_" + std::to_string(::getpid()));
  fs::remove_all(d);
  return d;
}

// A Config as the composition root would load it from these variables alone, dumping into `dir`.
inline msprobe::shim::Config config_of(Vars vars, const fs::path &dir) {
  vars.emplace("MSPROBE_DUMP_PATH", dir.string());
  vars.emplace("MSPROBE_STACK", "off");
  msprobe::shim::ConfigLoad l = msprobe::shim::load_config([&](const char *name) -> const char * {
    const auto it = vars.find(name);
    return it == vars.end() ? nullptr : it->second.c_str();
  });
  EXPECT_TRUE(l.errors.empty()) << ::testing::PrintToString(l.errors);
  return l.config;
}

// A contiguous float32 tensor of `values` on the stand-in's device.
inline msprobe::shim::TensorMeta device_floats(const std::vector<float> &values) {
  msprobe::shim::TensorMeta m;
  m.dtype = ACL_FLOAT;
  m.format = ACL_FORMAT_ND;
  m.ndim = m.storage_ndim = 1;
  m.shape[0] = m.storage[0] = (int64_t)values.size();
  m.strides[0] = 1;
  const size_t bytes = values.size() * sizeof(float);
  EXPECT_EQ(aclrtMalloc(&m.data, bytes, ACL_MEM_MALLOC_HUGE_FIRST), ACL_SUCCESS);
  EXPECT_EQ(aclrtMemcpy(m.data, bytes, values.data(), bytes, ACL_MEMCPY_HOST_TO_DEVICE), ACL_SUCCESS);
  return m;
}

struct Stats {
  double max, min, mean, norm;
};

inline Stats stats_of(const std::vector<float> &v) {
  Stats s{-INFINITY, INFINITY, 0, 0};
  for (float x : v) {
    s.max = std::max(s.max, (double)x);
    s.min = std::min(s.min, (double)x);
    s.mean += x;
    s.norm += (double)x * x;
  }
  s.mean /= (double)v.size();
  s.norm = std::sqrt(s.norm);
  return s;
}

// A dump.json tensor entry has the statistics of `v` (Max/Min exact, Mean/Norm to float precision).
inline void expect_stats(const nlohmann::json &t, const std::vector<float> &v, const std::string &what) {
  const Stats s = stats_of(v);
  ASSERT_TRUE(t.is_object()) << what << ": " << t.dump();
  EXPECT_EQ(t["shape"], nlohmann::json::array({(int64_t)v.size()})) << what;
  EXPECT_EQ(t["Max"].get<double>(), s.max) << what;
  EXPECT_EQ(t["Min"].get<double>(), s.min) << what;
  EXPECT_NEAR(t["Mean"].get<double>(), s.mean, 1e-5 * (1 + std::fabs(s.mean))) << what;
  EXPECT_NEAR(t["Norm"].get<double>(), s.norm, 1e-5 * (1 + s.norm)) << what;
}

inline nlohmann::json read_json(const fs::path &p) {
  std::ifstream f(p);
  std::stringstream ss;
  ss << f.rdbuf();
  return nlohmann::json::parse(ss.str());
}

// The "data" object of step `step`'s dump.json (rank folder "rank": no rank variable in the tests).
inline nlohmann::json dump_data(const fs::path &dir, int step = 0) {
  const fs::path p = dir / ("step" + std::to_string(step)) / "rank" / "dump.json";
  EXPECT_TRUE(fs::exists(p)) << p;
  if (!fs::exists(p)) return nlohmann::json::object();
  return read_json(p)["data"];
}

}  // namespace capture_test
