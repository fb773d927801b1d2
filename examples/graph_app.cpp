// graph_app: .om-style inference through the ACL model API, as a plain C++ program linked directly against
// the CANN libraries: load a model (default: graph_mlp.om, built from examples/graph_mlp.json by fake_atc.py),
// read its desc, allocate device buffers, execute it over a few inputs and check each output against a CPU
// computation of the same MLP, y = relu(x @ w1 + b1) @ w2 + b2.
//
//   graph_app [--mem] [--async] [--runs N] [MODEL]
//     --mem    aclmdlLoadFromMem (the file read by the program) instead of aclmdlLoadFromFile
//     --async  aclmdlExecuteAsync on an own stream + aclrtSynchronizeStream instead of aclmdlExecute
//     --own-dump DIR  the program turns CANN's data dump on itself (aclmdlInitDump/SetDump, files under DIR) and
//                     prints how many files it got
//     --own-callback  the program registers its own acldumpRegCallback and prints how many files' chunks it got
//     --stuck-callback  a test seam: the program's own dump callback never returns (it is registered as with
//                       --own-callback; without a dump in force it is never called)
//
// One line per execution; exit status 0 when every output matches, 1 on a mismatch, 2 on an API or usage error.
#include <algorithm>
#include <atomic>
#include <chrono>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <string>
#include <thread>
#include <vector>

#include "acl/acl.h"
#include "acl/acl_dump.h"

#ifndef GRAPH_APP_DEFAULT_MODEL
#define GRAPH_APP_DEFAULT_MODEL "graph_mlp.om"
#endif

namespace {

// The model's sizes and weights: the formulas of graph_mlp.json's "doc".
constexpr int kB = 4, kD = 8, kH = 16, kO = 4;

float w1(int i, int j) { return (float)((i * 7 + j * 3) % 11 - 5) / 8.0f; }
float b1(int j) { return (float)((j * 5) % 7 - 3) / 4.0f; }
float w2(int i, int j) { return (float)((i * 3 + j * 5) % 9 - 4) / 8.0f; }
float b2(int j) { return (float)(j % 3 - 1) / 2.0f; }

// Input of execution `run`: multiples of 1/4 in [-2, 2].
std::vector<float> input(int run) {
  std::vector<float> x(kB * kD);
  for (int r = 0; r < kB; ++r)
    for (int c = 0; c < kD; ++c) x[r * kD + c] = (float)((run * 13 + r * 5 + c * 3) % 17 - 8) / 4.0f;
  return x;
}

// The CPU reference, accumulating in double and rounding once per kernel, as the device does.
std::vector<float> reference(const std::vector<float> &x) {
  std::vector<float> a(kB * kH), y(kB * kO);
  for (int r = 0; r < kB; ++r)
    for (int j = 0; j < kH; ++j) {
      double acc = 0;
      for (int p = 0; p < kD; ++p) acc += (double)x[r * kD + p] * w1(p, j);
      float h = (float)((double)(float)acc + b1(j));
      a[r * kH + j] = h > 0 ? h : 0.0f;
    }
  for (int r = 0; r < kB; ++r)
    for (int j = 0; j < kO; ++j) {
      double acc = 0;
      for (int p = 0; p < kH; ++p) acc += (double)a[r * kH + p] * w2(p, j);
      y[r * kO + j] = (float)((double)(float)acc + b2(j));
    }
  return y;
}

struct Options {
  bool from_mem = false, async = false;
  int runs = 3;
  std::string model = GRAPH_APP_DEFAULT_MODEL;
  std::string own_dump;       // --own-dump DIR: the program runs CANN's data dump itself, files under DIR
  bool own_callback = false;  // --own-callback: the program registers its own dump callback and counts the files
  bool stuck_callback = false;  // --stuck-callback: its callback never returns
};

bool ok(aclError rc, const char *what) {
  if (rc == ACL_SUCCESS) return true;
  const char *msg = aclGetRecentErrMsg();
  std::fprintf(stderr, "graph_app: %s failed with %d%s%s\n", what, rc, msg && *msg ? ": " : "", msg ? msg : "");
  return false;
}

bool parse(int argc, char **argv, Options &o) {
  for (int i = 1; i < argc; ++i) {
    std::string a = argv[i];
    if (a == "--mem") {
      o.from_mem = true;
    } else if (a == "--async") {
      o.async = true;
    } else if (a == "--own-callback") {
      o.own_callback = true;
    } else if (a == "--stuck-callback") {
      o.own_callback = o.stuck_callback = true;
    } else if (a == "--own-dump" && i + 1 < argc) {
      o.own_dump = argv[++i];
    } else if (a == "--runs" && i + 1 < argc) {
      o.runs = std::atoi(argv[++i]);
      if (o.runs < 1) return false;
    } else if (!a.empty() && a[0] != '-') {
      o.model = a;
    } else {
      return false;
    }
  }
  return true;
}

bool load(const Options &o, uint32_t *id) {
  if (!o.from_mem) return ok(aclmdlLoadFromFile(o.model.c_str(), id), "aclmdlLoadFromFile");
  std::ifstream f(o.model, std::ios::binary);
  std::vector<char> bytes((std::istreambuf_iterator<char>(f)), std::istreambuf_iterator<char>());
  if (!f || bytes.empty()) {
    std::fprintf(stderr, "graph_app: cannot read %s\n", o.model.c_str());
    return false;
  }
  // The runtime copies what it keeps: the bytes may go after the call.
  return ok(aclmdlLoadFromMem(bytes.data(), bytes.size(), id), "aclmdlLoadFromMem");
}

// Device buffers for a model's inputs and outputs (sizes from its desc) and the datasets over them.
struct Io {
  std::vector<void *> in_ptrs, out_ptrs;
  std::vector<size_t> in_sizes, out_sizes;
  aclmdlDataset *in = aclmdlCreateDataset(), *out = aclmdlCreateDataset();

  bool add(aclmdlDataset *set, size_t bytes, std::vector<void *> &ptrs, std::vector<size_t> &sizes) {
    void *p = nullptr;
    if (!ok(aclrtMalloc(&p, bytes, ACL_MEM_MALLOC_HUGE_FIRST), "aclrtMalloc")) return false;
    ptrs.push_back(p);
    sizes.push_back(bytes);
    return ok(aclmdlAddDatasetBuffer(set, aclCreateDataBuffer(p, bytes)), "aclmdlAddDatasetBuffer");
  }
  bool create(aclmdlDesc *desc) {
    for (size_t i = 0; i < aclmdlGetNumInputs(desc); ++i)
      if (!add(in, aclmdlGetInputSizeByIndex(desc, i), in_ptrs, in_sizes)) return false;
    for (size_t i = 0; i < aclmdlGetNumOutputs(desc); ++i)
      if (!add(out, aclmdlGetOutputSizeByIndex(desc, i), out_ptrs, out_sizes)) return false;
    return true;
  }
  ~Io() {
    for (aclmdlDataset *set : {in, out}) {
      for (size_t i = 0; i < aclmdlGetDatasetNumBuffers(set); ++i) aclDestroyDataBuffer(aclmdlGetDatasetBuffer(set, i));
      aclmdlDestroyDataset(set);
    }
    for (void *p : in_ptrs) aclrtFree(p);
    for (void *p : out_ptrs) aclrtFree(p);
  }
};

// The model must be the MLP this program knows: one [4, 8] fp32 input, one [4, 4] fp32 output.
bool check_desc(aclmdlDesc *desc) {
  aclmdlIODims in{}, out{};
  bool good = aclmdlGetNumInputs(desc) == 1 && aclmdlGetNumOutputs(desc) == 1 &&
              ok(aclmdlGetInputDims(desc, 0, &in), "aclmdlGetInputDims") &&
              ok(aclmdlGetOutputDims(desc, 0, &out), "aclmdlGetOutputDims") && in.dimCount == 2 &&
              in.dims[0] == kB && in.dims[1] == kD && out.dimCount == 2 && out.dims[0] == kB && out.dims[1] == kO &&
              aclmdlGetInputDataType(desc, 0) == ACL_FLOAT && aclmdlGetOutputDataType(desc, 0) == ACL_FLOAT;
  if (!good) std::fprintf(stderr, "graph_app: the model is not the [%d, %d] -> [%d, %d] fp32 MLP\n", kB, kD, kB, kO);
  return good;
}

// Executes once; returns 0 (match), 1 (mismatch) or 2 (API error).
int execute_once(const Options &o, uint32_t id, Io &io, aclrtStream stream, int run) {
  std::vector<float> x = input(run), want = reference(x), got(want.size(), NAN);
  if (!ok(aclrtMemcpy(io.in_ptrs[0], io.in_sizes[0], x.data(), x.size() * 4, ACL_MEMCPY_HOST_TO_DEVICE), "H2D"))
    return 2;
  if (o.async) {
    if (!ok(aclmdlExecuteAsync(id, io.in, io.out, stream), "aclmdlExecuteAsync")) return 2;
    if (!ok(aclrtSynchronizeStream(stream), "aclrtSynchronizeStream")) return 2;
  } else if (!ok(aclmdlExecute(id, io.in, io.out), "aclmdlExecute")) {
    return 2;
  }
  if (!ok(aclrtMemcpy(got.data(), got.size() * 4, io.out_ptrs[0], io.out_sizes[0], ACL_MEMCPY_DEVICE_TO_HOST), "D2H"))
    return 2;
  double worst = 0;
  bool same = true;
  for (size_t i = 0; i < want.size(); ++i) {
    double err = std::fabs((double)got[i] - want[i]);
    worst = std::fmax(worst, std::isnan(err) ? INFINITY : err);
    same &= err <= 1e-6 * (1.0 + std::fabs(want[i]));
  }
  std::printf("run %d %s max_abs_err %g y[0] %g\n", run, same ? "ok" : "MISMATCH", worst, got[0]);
  return same ? 0 : 1;
}

int run_model(const Options &o, uint32_t id) {
  aclmdlDesc *desc = aclmdlCreateDesc();
  aclrtStream stream = nullptr;
  int status = 2;
  if (ok(aclmdlGetDesc(desc, id), "aclmdlGetDesc") && check_desc(desc) &&
      (!o.async || ok(aclrtCreateStream(&stream), "aclrtCreateStream"))) {
    Io io;
    if (io.create(desc)) {
      status = 0;
      for (int r = 0; r < o.runs && status != 2; ++r) status = std::max(status, execute_once(o, id, io, stream, r));
    }
  }
  if (stream) ok(aclrtDestroyStream(stream), "aclrtDestroyStream");
  aclmdlDestroyDesc(desc);
  return status;
}

// --own-dump: CANN's data dump as a program turns it on for itself (files written by CANN under `dir`).
bool start_own_dump(const std::string &dir) {
  const std::string config = dir + "/own_dump.json";
  std::ofstream(config) << "{\"dump\": {\"dump_path\": \"" << dir << "\", \"dump_list\": [{}], \"dump_mode\": \"all\"}}\n";
  return ok(aclmdlInitDump(), "aclmdlInitDump") && ok(aclmdlSetDump(config.c_str()), "aclmdlSetDump");
}

// --own-callback: the files' chunks as a program's own callback sees them (CANN calls it on one thread).
std::atomic<int> g_chunks{0}, g_files{0};
int32_t count_chunk(const acldumpChunk *chunk, int32_t len) {
  if (chunk == nullptr || len != (int32_t)(sizeof(acldumpChunk) + chunk->bufLen)) return 1;
  ++g_chunks;
  if (chunk->isLastChunk) ++g_files;
  return 0;
}

// --stuck-callback: the first chunk it is given, it keeps.
int32_t stuck_chunk(const acldumpChunk *, int32_t) {
  for (;;) std::this_thread::sleep_for(std::chrono::hours(1));
}

int count_files(const std::string &dir) {
  int n = 0;
  std::error_code ec;
  for (auto it = std::filesystem::recursive_directory_iterator(dir, ec); !ec && it != decltype(it)(); it.increment(ec))
    if (it->is_regular_file() && it->path().filename() != "own_dump.json") ++n;
  return n;
}

}  // namespace

int main(int argc, char **argv) {
  Options o;
  if (!parse(argc, argv, o)) {
    std::fprintf(stderr,
                 "usage: graph_app [--mem] [--async] [--runs N] [--own-dump DIR] [--own-callback] [--stuck-callback] "
                 "[MODEL]\n");
    return 2;
  }
  if (!ok(aclInit(nullptr), "aclInit") || !ok(aclrtSetDevice(0), "aclrtSetDevice")) return 2;
  if (!o.own_dump.empty() && !start_own_dump(o.own_dump)) return 2;
  if (o.own_callback && !ok(acldumpRegCallback(o.stuck_callback ? stuck_chunk : count_chunk, 0), "acldumpRegCallback"))
    return 2;
  uint32_t id = 0;
  int status = 2;
  if (load(o, &id)) {
    status = run_model(o, id);
    if (!ok(aclmdlUnload(id), "aclmdlUnload")) status = 2;
  }
  if (!o.own_dump.empty() && !ok(aclmdlFinalizeDump(), "aclmdlFinalizeDump")) status = 2;
  if (!o.own_dump.empty()) std::printf("graph_app: own dump: %d files\n", count_files(o.own_dump));
  ok(aclrtResetDevice(0), "aclrtResetDevice");
  if (o.own_callback) {
    acldumpUnregCallback();
    std::printf("graph_app: own callback: %d files in %d chunks\n", g_files.load(), g_chunks.load());
  }
  ok(aclFinalize(), "aclFinalize");
  std::printf("graph_app: %s\n", status == 0 ? "all outputs match" : status == 1 ? "MISMATCH" : "API error");
  return status;
}
