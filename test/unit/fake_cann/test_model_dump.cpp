// The model API and the data dump of the stand-in: a 4-kernel model (Add, Mul with a weight, Relu, Gelu) written by
// tools/fake_atc.py, executed with aclmdlExecute[Async] against a CPU computation written here; with dump on, the
// chunks (or files) are reassembled and decoded with an own protobuf reader: header length, DumpData fields, and the
// tensor bytes, which must be exactly each kernel's inputs and outputs. Also the config validation codes.
#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <map>
#include <mutex>
#include <regex>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "acl/acl.h"
#include "acl/acl_dump.h"
#include "test/unit/fake_cann/proto_fields.h"
#include "test/unit/fake_cann/toy_model.h"

namespace fs = std::filesystem;

using namespace fakecann_test;

namespace {

const bool g_acl = aclInit(nullptr) == ACL_SUCCESS;

std::string tmpdir(const std::string &tag) { return toy_model::scratch_dir("fake_cann_mdl_", tag); }
using toy_model::read_file;
using toy_model::write_file;

using toy_model::make_model;
using toy_model::reference;

struct Device {
  Device() { EXPECT_EQ(aclrtSetDevice(0), ACL_SUCCESS); }
};

// Device buffers for the toy model's inputs (filled) and output, and the datasets over them.
struct Io {
  int rows;
  size_t bytes;
  void *x = nullptr, *y = nullptr, *out = nullptr;
  aclDataBuffer *bx, *by, *bout;
  aclmdlDataset *in = aclmdlCreateDataset(), *outs = aclmdlCreateDataset();
  explicit Io(int r) : rows(r), bytes((size_t)r * 3 * 4) {
    auto ref = reference(rows);
    EXPECT_EQ(aclrtMalloc(&x, bytes, ACL_MEM_MALLOC_HUGE_FIRST), ACL_SUCCESS);
    EXPECT_EQ(aclrtMalloc(&y, bytes, ACL_MEM_MALLOC_HUGE_FIRST), ACL_SUCCESS);
    EXPECT_EQ(aclrtMalloc(&out, bytes, ACL_MEM_MALLOC_HUGE_FIRST), ACL_SUCCESS);
    EXPECT_EQ(aclrtMemcpy(x, bytes, ref["x"].data(), bytes, ACL_MEMCPY_HOST_TO_DEVICE), ACL_SUCCESS);
    EXPECT_EQ(aclrtMemcpy(y, bytes, ref["y"].data(), bytes, ACL_MEMCPY_HOST_TO_DEVICE), ACL_SUCCESS);
    bx = aclCreateDataBuffer(x, bytes), by = aclCreateDataBuffer(y, bytes), bout = aclCreateDataBuffer(out, bytes);
    aclmdlAddDatasetBuffer(in, bx), aclmdlAddDatasetBuffer(in, by), aclmdlAddDatasetBuffer(outs, bout);
  }
  ~Io() {
    aclmdlDestroyDataset(in), aclmdlDestroyDataset(outs);
    aclDestroyDataBuffer(bx), aclDestroyDataBuffer(by), aclDestroyDataBuffer(bout);
    aclrtFree(x), aclrtFree(y), aclrtFree(out);
  }
  std::vector<float> output() const {
    std::vector<float> v((size_t)rows * 3);
    EXPECT_EQ(aclrtMemcpy(v.data(), bytes, out, bytes, ACL_MEMCPY_DEVICE_TO_HOST), ACL_SUCCESS);
    return v;
  }
};

// ---- chunk collection through the callback ----

struct Collected {
  std::mutex mu;
  std::map<std::string, std::string> files;  // complete files
  std::map<std::string, std::string> open;
  std::vector<uint32_t> buf_lens;
  std::vector<uint32_t> last_flags;
  std::set<std::thread::id> threads;
  int bad_headers = 0;
  std::atomic<int> delay_ms{0};
};
Collected *g_collected = nullptr;

int32_t on_chunk(const acldumpChunk *c, int32_t len) {
  if (int d = g_collected->delay_ms.load()) std::this_thread::sleep_for(std::chrono::milliseconds(d));
  std::lock_guard<std::mutex> lk(g_collected->mu);
  Collected &k = *g_collected;
  k.threads.insert(std::this_thread::get_id());
  if ((size_t)len != sizeof(acldumpChunk) + c->bufLen || c->offset != -1 || c->flag != 0) ++k.bad_headers;
  k.buf_lens.push_back(c->bufLen);
  k.last_flags.push_back(c->isLastChunk);
  const char *payload = reinterpret_cast<const char *>(c) + 4116;
  k.open[c->fileName].append(payload, c->bufLen);
  if (c->isLastChunk) {
    k.files[c->fileName] = k.open[c->fileName];
    k.open.erase(c->fileName);
  }
  return 0;
}

std::string config(const std::string &dir, const std::string &body) {
  std::string path = dir + "/dump.json";
  write_file(path, body);
  return path;
}

// Runs the toy model `runs` times with dump on, delivering to the callback; returns the files.
std::map<std::string, std::string> dump_runs(const std::string &dir, const std::string &cfg_body, int rows, int runs,
                                             Collected &k) {
  g_collected = &k;
  EXPECT_EQ(acldumpRegCallback(on_chunk, 0), ACL_SUCCESS);
  EXPECT_EQ(aclmdlInitDump(), ACL_SUCCESS);
  EXPECT_EQ(aclmdlSetDump(config(dir, cfg_body).c_str()), ACL_SUCCESS);
  uint32_t id = 0;
  EXPECT_EQ(aclmdlLoadFromFile(make_model(dir, rows).c_str(), &id), ACL_SUCCESS);
  Io io(rows);
  for (int r = 0; r < runs; ++r) EXPECT_EQ(aclmdlExecute(id, io.in, io.outs), ACL_SUCCESS);
  EXPECT_EQ(aclmdlFinalizeDump(), ACL_SUCCESS);
  acldumpUnregCallback();
  EXPECT_EQ(aclmdlUnload(id), ACL_SUCCESS);
  std::lock_guard<std::mutex> lk(k.mu);
  return k.files;
}

}  // namespace

namespace {

struct Expect {
  const char *type, *name, *file_name;
  std::vector<const char *> in, out;
};
const std::vector<Expect> kKernels = {{"Add", "block/add", "block_add", {"x", "y"}, {"t0"}},
                                      {"Mul", "block.mul 1", "block_mul_1", {"t0", "b"}, {"t1"}},
                                      {"Relu", "relu", "relu", {"t1"}, {"t2"}},
                                      {"Gelu", "gelu", "gelu", {"t2"}, {"out"}}};

// Checks one dump file of the toy model against the kernel it belongs to (found by its file name).
void check_file(const std::string &path, const std::string &content, int rows, bool inputs, bool outputs) {
  std::smatch m;
  std::string base = path.substr(path.rfind('/') + 1);
  ASSERT_TRUE(std::regex_match(base, m, std::regex(R"((\w+)\.([A-Za-z0-9_-]+)\.(\d+)\.(\d+)\.(\d{16}))"))) << base;
  auto it = std::find_if(kKernels.begin(), kKernels.end(), [&](const Expect &e) { return m[1] == e.type; });
  ASSERT_NE(it, kKernels.end()) << base;
  EXPECT_EQ(m[2].str(), it->file_name);
  EXPECT_EQ(std::stoul(m[3].str()), (unsigned long)(it - kKernels.begin()));  // task id: the kernel's place
  ASSERT_GE(content.size(), 8u);
  uint64_t h;
  std::memcpy(&h, content.data(), 8);
  ASSERT_LE(8 + h, content.size());
  Fields f = decode(content.substr(8, h));
  EXPECT_EQ(f.all(1), std::vector<std::string>{"2.0"});
  EXPECT_GT(f.varint(2), 1600000000000000u);  // µs since the epoch
  EXPECT_EQ(f.all(6), std::vector<std::string>{it->name});
  auto ref = reference(rows);
  std::string data;
  auto check_tensors = [&](uint32_t field, const std::vector<const char *> &names, bool wanted, bool output) {
    std::vector<std::string> msgs = f.all(field);
    ASSERT_EQ(msgs.size(), wanted ? names.size() : 0u) << base;
    for (size_t i = 0; i < msgs.size(); ++i) {
      Fields t = decode(msgs[i]);
      std::vector<uint64_t> want =
          std::string(names[i]) == "b" ? std::vector<uint64_t>{3} : std::vector<uint64_t>{(uint64_t)rows, 3};
      EXPECT_EQ(t.varint(1), 1u) << "DT_FLOAT is 1 in the dump proto";
      EXPECT_EQ(t.varint(2), 2u) << "FORMAT_ND";
      EXPECT_EQ(dims(t.all(3).at(0)), want);
      EXPECT_EQ(t.varint(output ? 6 : 5), want.size() == 1 ? 12u : (uint64_t)rows * 12) << "size";
      EXPECT_EQ(dims(t.all(output ? 7 : 6).at(0)), want) << "original_shape";
      EXPECT_NE(t.varint(output ? 9 : 8), 0u) << "device address";
    }
  };
  check_tensors(4, it->in, inputs, false);
  check_tensors(3, it->out, outputs, true);
  if (inputs)
    for (const char *n : it->in) data += bytes_of(ref[n]);
  if (outputs)
    for (const char *n : it->out) data += bytes_of(ref[n]);
  EXPECT_EQ(content.substr(8 + h), data) << base << ": tensor bytes differ from the kernel's";
}

uint32_t load_toy(const std::string &dir, int rows) {
  uint32_t id = 0;
  EXPECT_EQ(aclmdlLoadFromFile(make_model(dir, rows).c_str(), &id), ACL_SUCCESS);
  return id;
}

}  // namespace

TEST(Model, DescAndExecuteMatchCpu) {
  ASSERT_TRUE(g_acl);
  Device d;
  std::string dir = tmpdir("exec");
  uint32_t id = load_toy(dir, 4);
  aclmdlDesc *desc = aclmdlCreateDesc();
  ASSERT_EQ(aclmdlGetDesc(desc, id), ACL_SUCCESS);
  EXPECT_EQ(aclmdlGetNumInputs(desc), 2u);
  EXPECT_EQ(aclmdlGetNumOutputs(desc), 1u);
  EXPECT_EQ(aclmdlGetInputSizeByIndex(desc, 1), 48u);
  EXPECT_EQ(aclmdlGetOutputSizeByIndex(desc, 0), 48u);
  EXPECT_STREQ(aclmdlGetInputNameByIndex(desc, 1), "y");
  EXPECT_EQ(aclmdlGetOutputDataType(desc, 0), ACL_FLOAT);
  EXPECT_EQ(aclmdlGetInputFormat(desc, 0), ACL_FORMAT_ND);
  aclmdlIODims dims;
  ASSERT_EQ(aclmdlGetOutputDims(desc, 0, &dims), ACL_SUCCESS);
  EXPECT_STREQ(dims.name, "out");
  EXPECT_EQ(dims.dimCount, 2u);
  EXPECT_EQ(dims.dims[0], 4);
  EXPECT_EQ(dims.dims[1], 3);
  EXPECT_EQ(aclmdlDestroyDesc(desc), ACL_SUCCESS);
  Io io(4);
  ASSERT_EQ(aclmdlExecute(id, io.in, io.outs), ACL_SUCCESS);  // synchronous: the output is ready
  EXPECT_EQ(io.output(), reference(4)["out"]);
  EXPECT_EQ(aclmdlUnload(id), ACL_SUCCESS);
  EXPECT_EQ(aclmdlUnload(id), ACL_ERROR_INVALID_MODEL_ID);
}

TEST(Model, LoadFromMemAndExecuteAsync) {
  ASSERT_TRUE(g_acl);
  Device d;
  std::string dir = tmpdir("mem");
  std::string image = read_file(make_model(dir, 8));
  uint32_t id = 0;
  ASSERT_EQ(aclmdlLoadFromMem(image.data(), image.size(), &id), ACL_SUCCESS);
  aclrtStream s;
  ASSERT_EQ(aclrtCreateStream(&s), ACL_SUCCESS);
  Io io(8);
  ASSERT_EQ(aclmdlExecuteAsync(id, io.in, io.outs, s), ACL_SUCCESS);
  ASSERT_EQ(aclrtSynchronizeStream(s), ACL_SUCCESS);
  EXPECT_EQ(io.output(), reference(8)["out"]);
  EXPECT_EQ(aclrtDestroyStream(s), ACL_SUCCESS);
  EXPECT_EQ(aclmdlUnload(id), ACL_SUCCESS);
}

TEST(Model, Errors) {
  ASSERT_TRUE(g_acl);
  Device d;
  std::string dir = tmpdir("err");
  uint32_t id = 0;
  EXPECT_EQ(aclmdlLoadFromFile((dir + "/missing.om").c_str(), &id), ACL_ERROR_READ_MODEL_FAILURE);
  write_file(dir + "/bad.om", "{\"name\": \"x\"}");
  EXPECT_EQ(aclmdlLoadFromFile((dir + "/bad.om").c_str(), &id), ACL_ERROR_PARSE_MODEL);
  write_file(dir + "/bad2.om", "FAKEOM01{\"name\":\"m\",\"tensors\":[],\"inputs\":[],\"outputs\":[],\"nodes\":[]}");
  EXPECT_EQ(aclmdlLoadFromFile((dir + "/bad2.om").c_str(), &id), ACL_ERROR_PARSE_MODEL);
  id = load_toy(dir, 2);
  Io io(2);
  EXPECT_EQ(aclmdlExecute(id + 100, io.in, io.outs), ACL_ERROR_INVALID_MODEL_ID);
  EXPECT_EQ(aclmdlExecute(id, io.outs, io.outs), ACL_ERROR_MODEL_INPUT_NOT_MATCH);  // 1 buffer for 2 inputs
  // A host buffer is not device memory.
  std::vector<float> host(6);
  aclDataBuffer *hb = aclCreateDataBuffer(host.data(), 24);
  aclmdlDataset *hs = aclmdlCreateDataset();
  aclmdlAddDatasetBuffer(hs, hb);
  EXPECT_EQ(aclmdlExecute(id, io.in, hs), ACL_ERROR_MODEL_OUTPUT_NOT_MATCH);
  aclmdlDestroyDataset(hs);
  aclDestroyDataBuffer(hb);
  EXPECT_EQ(aclmdlUnload(id), ACL_SUCCESS);
}

TEST(ModelDump, CallbackChunksReassembleIntoDumpFiles) {
  ASSERT_TRUE(g_acl);
  Device d;
  std::string dir = tmpdir("cb");
  Collected k;
  auto files = dump_runs(
      dir, R"({"dump": {"dump_path": ")" + dir + R"(", "dump_mode": "all", "dump_list": [{"model_name": "toy"}]}})", 64,
      1, k);
  ASSERT_EQ(files.size(), 4u);
  EXPECT_TRUE(k.open.empty());
  EXPECT_EQ(k.bad_headers, 0) << "len = 4120 + bufLen, offset -1, flag 0";
  ASSERT_EQ(k.threads.size(), 1u) << "one delivery thread";
  EXPECT_NE(*k.threads.begin(), std::this_thread::get_id());
  for (const auto &[path, content] : files) {
    EXPECT_TRUE(std::regex_match(path, std::regex(dir + R"(/\d{14}/0/toy/\d+/0/[^/]+)"))) << path;
    check_file(path, content, 64, true, true);
  }
  // Chunks: full payloads except each file's last one.
  const char *env = std::getenv("FAKE_CANN_DUMP_CHUNK_BYTES");
  const uint32_t limit = env ? (uint32_t)std::atoi(env) : 128u << 20;
  size_t split = 0;
  for (size_t i = 0; i < k.buf_lens.size(); ++i) {
    EXPECT_LE(k.buf_lens[i], limit);
    if (!k.last_flags[i]) {
      EXPECT_EQ(k.buf_lens[i], limit);
      ++split;
    }
  }
  if (env) {
    EXPECT_GT(split, 4u * 10) << "a 768-byte tensor is split across chunks";
  } else {
    EXPECT_EQ(k.buf_lens.size(), 4u);
  }
}

TEST(ModelDump, FinalizeReturnsAfterTheLastChunk) {
  ASSERT_TRUE(g_acl);
  Device d;
  std::string dir = tmpdir("fin");
  Collected k;
  k.delay_ms = 30;  // a slow consumer: the queue is still full when FinalizeDump is called
  auto files = dump_runs(dir, R"({"dump": {"dump_path": ")" + dir + R"(", "dump_list": [{}]}})", 2, 2, k);
  EXPECT_EQ(files.size(), 8u) << "4 kernels x 2 runs, all delivered before aclmdlFinalizeDump returned";
  EXPECT_TRUE(k.open.empty());
  for (const auto &[path, content] : files) check_file(path, content, 2, false, true);  // dump_mode output
}

TEST(ModelDump, ListAndStepFilters) {
  ASSERT_TRUE(g_acl);
  Device d;
  std::string dir = tmpdir("filter");
  {
    Collected k;
    auto f =
        dump_runs(dir,
                  R"({"dump": {"dump_path": ")" + dir +
                      R"(", "dump_mode": "input", "dump_list": [{"model_name": "toy", "layer": ["block.mul 1"]}]}})",
                  2, 1, k);
    ASSERT_EQ(f.size(), 1u);
    EXPECT_NE(f.begin()->first.find("/Mul.block_mul_1."), std::string::npos);
    check_file(f.begin()->first, f.begin()->second, 2, true, false);
  }
  {
    Collected k;
    auto f =
        dump_runs(dir, R"({"dump": {"dump_path": ")" + dir + R"(", "dump_list": [{"model_name": "other"}]}})", 2, 1, k);
    EXPECT_EQ(f.size(), 0u);
  }
  {
    Collected k;
    auto f = dump_runs(dir, R"({"dump": {"dump_path": ")" + dir + R"(", "dump_list": [], "dump_op_switch": "on",
                                "dump_step": "1|3-4"}})",
                       2, 5, k);
    std::set<std::string> steps;
    for (const auto &[path, content] : f) {
      std::string parent = fs::path(path).parent_path().filename().string();
      steps.insert(parent);
    }
    EXPECT_EQ(f.size(), 12u);
    EXPECT_EQ(steps, (std::set<std::string>{"1", "3", "4"}));
  }
}

TEST(ModelDump, StatsModeDeliversCsv) {
  ASSERT_TRUE(g_acl);
  Device d;
  std::string dir = tmpdir("stats");
  Collected k;
  auto f = dump_runs(dir,
                     R"({"dump": {"dump_path": ")" + dir +
                         R"(", "dump_mode": "all", "dump_data": "stats", "dump_list": [{"layer": ["relu"]}]}})",
                     2, 1, k);
  ASSERT_EQ(f.size(), 1u);
  EXPECT_EQ(f.begin()->first.substr(f.begin()->first.size() - 4), ".csv");
  std::string csv = f.begin()->second;
  ASSERT_FALSE(csv.empty());
  EXPECT_EQ(csv.back(), '\0') << "CSV through the callback ends with its NUL";
  auto ref = reference(2);
  auto mx = [](const std::vector<float> &v) { return *std::max_element(v.begin(), v.end()); };
  auto mn = [](const std::vector<float> &v) { return *std::min_element(v.begin(), v.end()); };
  auto avg = [](const std::vector<float> &v) {
    double s = 0;
    for (float x : v) s += x;
    return (float)(s / (double)v.size());
  };
  char row[2][256];
  const std::vector<float> *t[2] = {&ref["t1"], &ref["t2"]};
  for (int i = 0; i < 2; ++i)
    std::snprintf(row[i], sizeof row[i], "%s,0,24,DT_FLOAT,ND,2x3,%.9g,%.9g,%.9g,6,0,0,0\n", i ? "Output" : "Input",
                  mx(*t[i]), mn(*t[i]), avg(*t[i]));
  EXPECT_EQ(csv, std::string("Input/Output,Index,Data Size,Data Type,Format,Shape,Max Value,Min Value,Avg Value,Count,"
                             "Nan Count,Negative Inf Count,Positive Inf Count\n") +
                     row[0] + row[1] + std::string(1, '\0'));
}

TEST(ModelDump, WithoutCallbackFilesGoToDumpPath) {
  ASSERT_TRUE(g_acl);
  Device d;
  std::string dir = tmpdir("disk");
  ASSERT_EQ(aclmdlInitDump(), ACL_SUCCESS);
  ASSERT_EQ(aclmdlSetDump(config(dir, R"({"dump": {"dump_path": ")" + dir +
                                          R"(", "dump_mode": "all", "dump_list": [{"model_name": "toy"}]}})")
                              .c_str()),
            ACL_SUCCESS);
  uint32_t id = load_toy(dir, 64);
  {
    Io io(64);
    ASSERT_EQ(aclmdlExecute(id, io.in, io.outs), ACL_SUCCESS);
  }
  ASSERT_EQ(aclmdlFinalizeDump(), ACL_SUCCESS);
  EXPECT_EQ(aclmdlUnload(id), ACL_SUCCESS);
  int n = 0;
  for (const auto &e : fs::recursive_directory_iterator(dir)) {
    if (!e.is_regular_file() || e.path().parent_path().string() == dir) continue;
    ++n;
    std::string rel = fs::relative(e.path(), dir).string();
    EXPECT_TRUE(std::regex_match(rel, std::regex(R"(\d{14}/0/toy/\d+/0/\w+\.[A-Za-z0-9_-]+\.\d+\.\d+\.\d{16})")))
        << rel;
    check_file(e.path().string(), read_file(e.path().string()), 64, true, true);
  }
  EXPECT_EQ(n, 4);
}

TEST(DumpConfig, ValidationErrors) {
  ASSERT_TRUE(g_acl);
  std::string dir = tmpdir("cfg");
  ASSERT_EQ(aclmdlInitDump(), ACL_SUCCESS);
  auto set = [&](const std::string &body) { return aclmdlSetDump(config(dir, body).c_str()); };
  const std::string p = "\"dump_path\": \"" + dir + "\"";
  EXPECT_EQ(aclmdlSetDump(nullptr), ACL_ERROR_INVALID_PARAM);
  EXPECT_EQ(aclmdlSetDump((dir + "/none.json").c_str()), ACL_ERROR_INVALID_FILE);
  EXPECT_EQ(set(""), ACL_SUCCESS) << "an empty file configures nothing";
  EXPECT_EQ(set("{}"), ACL_SUCCESS);
  EXPECT_EQ(set(R"({"dump": {}})"), ACL_SUCCESS);
  EXPECT_EQ(set("{\"dump\": {" + p + "}}"), ACL_SUCCESS) << "nothing enabled";
  EXPECT_EQ(set(R"({"dump": {"dump_list": [}})"), ACL_ERROR_PARSE_FILE);
  EXPECT_EQ(set("{\"a\":" + std::string(11, '[') + std::string(11, ']') + "}"), ACL_ERROR_PARSE_FILE);
  const std::vector<std::string> invalid = {
      R"({"dump": "on"})",
      "{\"dump\": {" + p + ", \"dump_list\": [{}], \"dump_mode\": \"both\"}}",
      "{\"dump\": {" + p + ", \"dump_list\": [{}], \"dump_mode\": 1}}",
      "{\"dump\": {" + p + ", \"dump_list\": {}}}",
      R"({"dump": {"dump_list": [{}]}})",
      R"({"dump": {"dump_path": "/no/such/dir", "dump_list": [{}]}})",
      "{\"dump\": {" + p + ", \"dump_list\": [{}], \"dump_data\": \"raw\"}}",
      "{\"dump\": {" + p + ", \"dump_list\": [{}], \"dump_stats\": [\"Max\"]}}",
      "{\"dump\": {" + p + ", \"dump_list\": [{}], \"dump_data\": \"stats\", \"dump_stats\": []}}",
      "{\"dump\": {" + p + ", \"dump_list\": [{}], \"dump_data\": \"stats\", \"dump_stats\": [\"Median\"]}}",
      "{\"dump\": {" + p + ", \"dump_list\": [{}], \"dump_step\": \"3-1\"}}",
      "{\"dump\": {" + p + ", \"dump_list\": [{}], \"dump_step\": \"1|a\"}}",
      "{\"dump\": {" + p + ", \"dump_list\": [{\"model_name\": \"\"}]}}",
      "{\"dump\": {" + p + ", \"dump_list\": [{\"layer\": []}]}}",
      "{\"dump\": {" + p + ", \"dump_list\": [], \"dump_op_switch\": \"on\", \"dump_debug\": \"on\"}}",
      "{\"dump\": {" + p + ", \"dump_list\": [], \"dump_op_switch\": \"yes\"}}",
  };
  for (const std::string &body : invalid) EXPECT_EQ(set(body), ACL_ERROR_INVALID_DUMP_CONFIG) << body;
  EXPECT_EQ(set("{\"dump\": {" + p + ", \"dump_list\": [{\"layer\": []}], \"dump_op_switch\": \"on\"}}"), ACL_SUCCESS);
  EXPECT_EQ(aclmdlFinalizeDump(), ACL_SUCCESS);
}

TEST(DumpConfig, CallOrderAndCallbackCodes) {
  ASSERT_TRUE(g_acl);
  EXPECT_EQ(aclmdlSetDump("x"), ACL_ERROR_DUMP_NOT_RUN);
  EXPECT_EQ(aclmdlFinalizeDump(), ACL_ERROR_DUMP_NOT_RUN);
  ASSERT_EQ(aclmdlInitDump(), ACL_SUCCESS);
  EXPECT_EQ(aclmdlInitDump(), ACL_ERROR_REPEAT_INITIALIZE);
  EXPECT_EQ(aclmdlFinalizeDump(), ACL_SUCCESS);
  EXPECT_EQ(acldumpRegCallback(nullptr, 0), ACL_ERROR_FAILURE);
  EXPECT_EQ(acldumpRegCallback(on_chunk, 1), ACL_ERROR_FAILURE);
  ASSERT_EQ(aclFinalize(), ACL_SUCCESS);  // before aclInit (again)
  EXPECT_EQ(aclmdlInitDump(), ACL_ERROR_UNINITIALIZE);
  EXPECT_EQ(aclmdlSetDump("x"), ACL_ERROR_UNINITIALIZE);
  EXPECT_EQ(aclmdlFinalizeDump(), ACL_ERROR_UNINITIALIZE);
  ASSERT_EQ(aclInit(nullptr), ACL_SUCCESS);
}
