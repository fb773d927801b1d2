// The stand-in's toy model, shared by the tests that run it (test_model_dump.cpp, test/unit/shim/graph/
// test_stand_in.cpp): its spec for tools/fake_atc.py, the writer, every tensor computed on the CPU, and the scratch
// folders and files those tests use.
#pragma once
#include <gtest/gtest.h>
#include <unistd.h>

#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <map>
#include <regex>
#include <string>
#include <vector>

namespace toy_model {

// A new empty folder under the temp directory: {prefix}{pid}_{tag}.
inline std::string scratch_dir(const std::string &prefix, const std::string &tag) {
  std::filesystem::path p = std::filesystem::temp_directory_path() / (prefix + std::to_string(getpid()) + "_" + tag);
  std::filesystem::remove_all(p);
  std::filesystem::create_directories(p);
  return p.string();
}

inline void write_file(const std::string &path, const std::string &text) {
  std::ofstream(path, std::ios::binary) << text;
}

inline std::string read_file(const std::string &path) {
  std::ifstream f(path, std::ios::binary);
  return std::string((std::istreambuf_iterator<char>(f)), std::istreambuf_iterator<char>());
}

// x, y: [rows, 3] inputs; b: [3] weight. add = x + y; mul = add * b; relu; out = gelu(relu).
inline const char *kSpec = R"({"name": "toy",
  "tensors": [{"name": "x", "dtype": "float32", "shape": [ROWS, 3]}, {"name": "y", "dtype": "float32", "shape": [ROWS, 3]},
              {"name": "b", "dtype": "float32", "shape": [3]}, {"name": "t0", "dtype": "float32", "shape": [ROWS, 3]},
              {"name": "t1", "dtype": "float32", "shape": [ROWS, 3]}, {"name": "t2", "dtype": "float32", "shape": [ROWS, 3]},
              {"name": "out", "dtype": "float32", "shape": [ROWS, 3]}],
  "inputs": ["x", "y"], "outputs": ["out"], "weights": {"b": [0.5, -2.0, 3.0]},
  "nodes": [{"type": "Add", "name": "block/add", "inputs": ["x", "y"], "outputs": ["t0"]},
            {"type": "Mul", "name": "block.mul 1", "inputs": ["t0", "b"], "outputs": ["t1"]},
            {"type": "Relu", "name": "relu", "inputs": ["t1"], "outputs": ["t2"]},
            {"type": "Gelu", "name": "gelu", "inputs": ["t2"], "outputs": ["out"]}]})";

// Writes the toy model with `rows` rows through fake_atc.py; returns its path.
inline std::string make_model(const std::string &dir, int rows) {
  std::string spec = std::regex_replace(kSpec, std::regex("ROWS"), std::to_string(rows));
  std::ofstream(dir + "/toy.json", std::ios::binary) << spec;
  const char *src = std::getenv("MSPROBE_SOURCE_DIR");
  std::string cmd = std::string("/usr/bin/python3 ") + (src ? src : ".") + "/test/fake_cann/tools/fake_atc.py " + dir +
                    "/toy.json " + dir + "/toy.om";
  EXPECT_EQ(std::system(cmd.c_str()), 0) << cmd;
  return dir + "/toy.om";
}

// The values each kernel reads and writes, computed here: {x, y, b, t0, t1, t2, out}.
inline std::map<std::string, std::vector<float>> reference(int rows) {
  std::map<std::string, std::vector<float>> v;
  const float b[3] = {0.5f, -2.0f, 3.0f};
  for (int i = 0; i < rows * 3; ++i) {
    float x = 0.25f * (float)(i % 17) - 1.5f, y = 0.125f * (float)(i % 5) - 0.25f;
    float t0 = (float)((double)x + y), t1 = (float)((double)t0 * b[i % 3]), t2 = t1 > 0 ? t1 : 0.0f;
    float out = (float)(0.5 * t2 * (1.0 + std::erf(t2 / std::sqrt(2.0))));
    for (auto [k, val] : {std::pair{"x", x}, {"y", y}, {"t0", t0}, {"t1", t1}, {"t2", t2}, {"out", out}})
      v[k].push_back(val);
  }
  v["b"] = {b[0], b[1], b[2]};
  return v;
}

}  // namespace toy_model
