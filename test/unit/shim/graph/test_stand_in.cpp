// shim/graph on the CANN stand-in's real model dumps: a 4-kernel model (Add, Mul with a weight, Relu, Gelu) written
// by tools/fake_atc.py and executed with dump on and a callback registered (as test/unit/fake_cann/
// test_model_dump.cpp does); every chunk goes through ChunkAssembler, every file through decode_dump_file, and the
// tensors must be each kernel's real inputs and outputs, computed here on the CPU. Stats mode: the CSV's values
// must equal the statistics computed here. ctest runs it twice: 128 MiB chunks, and 100-byte chunks
// (FAKE_CANN_DUMP_CHUNK_BYTES), which split every file inside its header and inside its tensors.
// With SHIM_GRAPH_SAVE_DIR set, every completed file is also written there (how the seeds of
// test/fuzz/corpus/fuzz_graph_dump were made).
#include <gtest/gtest.h>
#include <unistd.h>

#include <algorithm>
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
#include <vector>

#include "acl/acl.h"
#include "acl/acl_dump.h"
#include "shim/graph/chunk_assembler.h"
#include "shim/graph/dump_file.h"
#include "shim/graph/stats_csv.h"
#include "test/unit/fake_cann/toy_model.h"

namespace fs = std::filesystem;
using namespace msprobe::shim::graph;
using msprobe::format::DType;

namespace {

const bool g_acl = aclInit(nullptr) == ACL_SUCCESS;

std::string tmpdir(const std::string &tag) { return toy_model::scratch_dir("shim_graph_", tag); }
using toy_model::write_file;

using toy_model::make_model;
using toy_model::reference;

// What the callback hands over: chunks into the assembler, completed files kept.
struct Sink {
  std::mutex mu;
  ChunkAssembler assembler;
  std::vector<AssembledFile> files;
  std::vector<std::string> errors;
  size_t chunks = 0;
};
Sink *g_sink = nullptr;

int32_t on_chunk(const acldumpChunk *c, int32_t len) {
  std::lock_guard<std::mutex> lk(g_sink->mu);
  ++g_sink->chunks;
  ChunkResult r = g_sink->assembler.feed(c, len);
  if (!r.error.empty()) g_sink->errors.push_back(r.error);
  if (!r.file) return 0;
  if (const char *save = std::getenv("SHIM_GRAPH_SAVE_DIR")) {
    std::ofstream(std::string(save) + "/" + std::string(base_name(r.file->name)), std::ios::binary)
        .write((const char *)r.file->bytes.data(), (std::streamsize)r.file->bytes.size());
  }
  g_sink->files.push_back(std::move(*r.file));
  return 0;
}

// Loads the toy model, runs it once with the dump config `body` and the callback on, returns when all was delivered.
void dump_run(const std::string &dir, const std::string &body, int rows, Sink &sink) {
  g_sink = &sink;
  ASSERT_EQ(aclrtSetDevice(0), ACL_SUCCESS);
  ASSERT_EQ(acldumpRegCallback(on_chunk, 0), ACL_SUCCESS);
  ASSERT_EQ(aclmdlInitDump(), ACL_SUCCESS);
  write_file(dir + "/dump.json", body);
  ASSERT_EQ(aclmdlSetDump((dir + "/dump.json").c_str()), ACL_SUCCESS);
  uint32_t id = 0;
  ASSERT_EQ(aclmdlLoadFromFile(make_model(dir, rows).c_str(), &id), ACL_SUCCESS);
  auto ref = reference(rows);
  const size_t bytes = (size_t)rows * 12;
  void *dev[3] = {};
  aclmdlDataset *in = aclmdlCreateDataset(), *out = aclmdlCreateDataset();
  for (int i = 0; i < 3; ++i) {
    ASSERT_EQ(aclrtMalloc(&dev[i], bytes, ACL_MEM_MALLOC_HUGE_FIRST), ACL_SUCCESS);
    if (i < 2) aclrtMemcpy(dev[i], bytes, ref[i ? "y" : "x"].data(), bytes, ACL_MEMCPY_HOST_TO_DEVICE);
    aclmdlAddDatasetBuffer(i < 2 ? in : out, aclCreateDataBuffer(dev[i], bytes));
  }
  EXPECT_EQ(aclmdlExecute(id, in, out), ACL_SUCCESS);
  EXPECT_EQ(aclmdlFinalizeDump(), ACL_SUCCESS);  // returns after the last chunk was delivered
  acldumpUnregCallback();
  EXPECT_EQ(aclmdlUnload(id), ACL_SUCCESS);
  for (aclmdlDataset *d : {in, out}) {
    for (size_t i = 0; i < aclmdlGetDatasetNumBuffers(d); ++i) aclDestroyDataBuffer(aclmdlGetDatasetBuffer(d, i));
    aclmdlDestroyDataset(d);
  }
  for (void *p : dev) aclrtFree(p);
}

struct Kernel {
  const char *type, *name, *file_name;
  std::vector<const char *> in, out;
};
const std::vector<Kernel> kKernels = {{"Add", "block/add", "block_add", {"x", "y"}, {"t0"}},
                                      {"Mul", "block.mul 1", "block_mul_1", {"t0", "b"}, {"t1"}},
                                      {"Relu", "relu", "relu", {"t1"}, {"t2"}},
                                      {"Gelu", "gelu", "gelu", {"t2"}, {"out"}}};

std::vector<float> as_floats(std::span<const unsigned char> b) {
  std::vector<float> v(b.size() / 4);
  std::memcpy(v.data(), b.data(), v.size() * 4);
  return v;
}

void check_tensors(const std::vector<DumpTensor> &got, const std::vector<const char *> &names, int rows,
                   const std::string &file) {
  auto ref = reference(rows);
  ASSERT_EQ(got.size(), names.size()) << file;
  for (size_t i = 0; i < got.size(); ++i) {
    const DumpTensor &t = got[i];
    const bool weight = std::string(names[i]) == "b";
    EXPECT_EQ(t.dtype, DType::F32) << file;
    EXPECT_EQ(t.dtype_name, "DT_FLOAT");
    EXPECT_EQ(t.format_name, "ND");
    const std::vector<int64_t> want = weight ? std::vector<int64_t>{3} : std::vector<int64_t>{rows, 3};
    EXPECT_EQ(t.shape, want) << file;
    EXPECT_EQ(t.device_shape, t.shape);
    EXPECT_TRUE(t.decodable) << t.note;
    EXPECT_EQ(as_floats(t.bytes), ref[names[i]]) << file << " " << names[i] << ": bytes differ from the CPU's";
  }
}

}  // namespace

TEST(GraphStandIn, TensorDumpDecodesToTheKernelsTensors) {
  ASSERT_TRUE(g_acl);
  const std::string dir = tmpdir("tensor");
  const int rows = 64;
  Sink sink;
  dump_run(dir,
           R"({"dump": {"dump_path": ")" + dir + R"(", "dump_mode": "all", "dump_list": [{"model_name": "toy"}]}})",
           rows, sink);
  EXPECT_TRUE(sink.errors.empty()) << sink.errors.front();
  EXPECT_TRUE(sink.assembler.pending().empty());
  ASSERT_EQ(sink.files.size(), 4u);
  const char *limit = std::getenv("FAKE_CANN_DUMP_CHUNK_BYTES");
  const bool small_chunks = limit && std::atoi(limit) > 0 && std::atoi(limit) <= 100;
  if (small_chunks) {
    EXPECT_GT(sink.chunks, 4u * 10) << "files split into many chunks";
  }
  std::set<std::string> seen;
  int split_in_header = 0;  // files whose first 100-byte chunk ends inside the header (Add's, Mul's)
  for (AssembledFile &file : sink.files) {
    std::string error;
    const std::string name = file.name;
    auto f = decode_dump_file(name, std::make_shared<const std::vector<unsigned char>>(std::move(file.bytes)), &error);
    ASSERT_TRUE(f) << error;
    auto k = std::find_if(kKernels.begin(), kKernels.end(), [&](const Kernel &e) { return f->name.op_type == e.type; });
    ASSERT_NE(k, kKernels.end()) << name;
    seen.insert(k->type);
    EXPECT_EQ(f->name.op_name, k->file_name);
    EXPECT_EQ(f->op_name, k->name);
    EXPECT_EQ(f->name.task_id, (uint32_t)(k - kKernels.begin()));
    EXPECT_EQ(f->version, "2.0");
    EXPECT_EQ(f->place.model_name, "toy");
    EXPECT_EQ(f->place.dump_number, 0u) << "the model's first execution";
    EXPECT_EQ(f->place.device_id, 0u);
    EXPECT_EQ(f->trailing_bytes, 0u);
    split_in_header += f->header_length + 8 > 100;
    check_tensors(f->inputs, k->in, rows, name);
    check_tensors(f->outputs, k->out, rows, name);
  }
  EXPECT_EQ(seen.size(), 4u);
  EXPECT_EQ(split_in_header, 2);
}

namespace {

struct Expected {
  float max, min, avg, l2;
};
Expected stats_of(const std::vector<float> &v) {
  double sum = 0, sq = 0;
  for (float x : v) sum += x, sq += (double)x * x;
  return {*std::max_element(v.begin(), v.end()), *std::min_element(v.begin(), v.end()), (float)(sum / (double)v.size()),
          (float)std::sqrt(sq)};
}

// Runs the toy model in stats mode for the kernel `layer`; returns its decoded CSV.
std::optional<StatsFile> stats_run(const std::string &tag, const std::string &extra, const char *layer) {
  const std::string dir = tmpdir(tag);
  Sink sink;
  dump_run(dir,
           R"({"dump": {"dump_path": ")" + dir + R"(", "dump_mode": "all", "dump_data": "stats", )" + extra +
               R"("dump_list": [{"layer": [")" + layer + R"("]}]}})",
           4, sink);
  EXPECT_TRUE(sink.errors.empty());
  EXPECT_EQ(sink.files.size(), 1u);
  if (sink.files.size() != 1) return std::nullopt;
  const AssembledFile &f = sink.files[0];
  std::string error;
  StatsAssembler stats;
  auto csv = stats.feed(f.name, std::string_view((const char *)f.bytes.data(), f.bytes.size()), &error);
  EXPECT_TRUE(csv) << error;
  return csv;
}

}  // namespace

TEST(GraphStandIn, StatsCsvEqualsCpuStatistics) {
  ASSERT_TRUE(g_acl);
  auto csv = stats_run("stats", "", "relu");
  ASSERT_TRUE(csv);
  EXPECT_EQ(csv->name.op_type, "Relu");
  EXPECT_EQ(csv->place.model_name, "toy");
  ASSERT_EQ(csv->rows.size(), 2u);
  auto ref = reference(4);
  const char *names[] = {"t1", "t2"};
  for (int i = 0; i < 2; ++i) {
    const StatsRow &r = csv->rows[i];
    const Expected e = stats_of(ref[names[i]]);
    EXPECT_EQ(r.io, i ? msprobe::format::IoKind::Output : msprobe::format::IoKind::Input);
    EXPECT_EQ(r.dtype, DType::F32);
    EXPECT_EQ(r.shape, (std::vector<int64_t>{4, 3}));
    EXPECT_EQ(r.data_size, 48u);
    EXPECT_EQ(r.count, 12u);
    EXPECT_EQ((float)*r.max, e.max);
    EXPECT_EQ((float)*r.min, e.min);
    EXPECT_EQ((float)*r.avg, e.avg);
    EXPECT_EQ(r.nan, 0);
    EXPECT_EQ(r.neg_inf, 0);
    EXPECT_EQ(r.pos_inf, 0);
    EXPECT_FALSE(r.l2norm);
  }
}

TEST(GraphStandIn, StatsCsvSelectedColumnsWithL2norm) {
  ASSERT_TRUE(g_acl);
  auto csv = stats_run("l2", R"("dump_stats": ["Max", "Min", "L2norm"], )", "gelu");
  ASSERT_TRUE(csv);
  EXPECT_EQ(csv->columns.back(), "l2norm");
  ASSERT_EQ(csv->rows.size(), 2u);
  auto ref = reference(4);
  const Expected e = stats_of(ref["out"]);
  const StatsRow &r = csv->rows[1];
  EXPECT_EQ((float)*r.max, e.max);
  EXPECT_EQ((float)*r.min, e.min);
  EXPECT_EQ((float)*r.l2norm, e.l2);
  EXPECT_FALSE(r.avg);
  EXPECT_FALSE(r.nan);
}
