// aclInit / aclFinalize and aclInit's dump section, against CANN's runtime (src/acl/aclrt_impl/acl.cpp,
// acl_rt_impl_base.cpp, common/json_parser.cpp, toolchain/dump.cpp; adump's dump_manager.cpp). The process state these
// set is global, so the tests run in their order here: the refusals first (none sets the "first config"), then every
// successful aclInit with the same config, then one with another.
#include <gtest/gtest.h>
#include <unistd.h>

#include <cstring>
#include <filesystem>
#include <fstream>
#include <mutex>
#include <regex>
#include <string>
#include <vector>

#include "acl/acl.h"
#include "acl/acl_dump.h"
#include "aclnnop/aclnn_add.h"

namespace fs = std::filesystem;

namespace {

const fs::path g_dir = fs::temp_directory_path() / ("fake_cann_acl_init_" + std::to_string(getpid()));

std::string write(const std::string &name, const std::string &text) {
  fs::create_directories(g_dir);
  std::ofstream(g_dir / name) << text;
  return (g_dir / name).string();
}

// The one config every successful aclInit of this process gets: the data dump of every aclnn kernel, to `dump_a`.
std::string init_config() {
  fs::create_directories(g_dir / "dump_a");
  return write("acl.json", R"({"dump": {"dump_path": ")" + (g_dir / "dump_a").string() +
                               R"(", "dump_list": [], "dump_op_switch": "on"}})");
}

// Dump files under `root` (recursively).
std::vector<std::string> files_under(const fs::path &root) {
  std::vector<std::string> out;
  if (!fs::exists(root)) return out;
  for (const auto &e : fs::recursive_directory_iterator(root))
    if (e.is_regular_file()) out.push_back(e.path().string());
  return out;
}

// One aclnnAdd of two 4-element tensors on device 0.
void run_add() {
  ASSERT_EQ(aclrtSetDevice(0), ACL_SUCCESS);
  std::vector<float> host = {1, 2, 3, 4};
  void *x = nullptr, *o = nullptr;
  ASSERT_EQ(aclrtMalloc(&x, 16, ACL_MEM_MALLOC_HUGE_FIRST), ACL_SUCCESS);
  ASSERT_EQ(aclrtMalloc(&o, 16, ACL_MEM_MALLOC_HUGE_FIRST), ACL_SUCCESS);
  ASSERT_EQ(aclrtMemcpy(x, 16, host.data(), 16, ACL_MEMCPY_HOST_TO_DEVICE), ACL_SUCCESS);
  int64_t shape[1] = {4};
  aclTensor *tx = aclCreateTensor(shape, 1, ACL_FLOAT, nullptr, 0, ACL_FORMAT_ND, shape, 1, x);
  aclTensor *to = aclCreateTensor(shape, 1, ACL_FLOAT, nullptr, 0, ACL_FORMAT_ND, shape, 1, o);
  float one = 1.0f;
  aclScalar *alpha = aclCreateScalar(&one, ACL_FLOAT);
  uint64_t ws = 0;
  aclOpExecutor *ex = nullptr;
  ASSERT_EQ(aclnnAddGetWorkspaceSize(tx, tx, alpha, to, &ws, &ex), 0);
  ASSERT_EQ(aclnnAdd(nullptr, ws, ex, nullptr), 0);
  ASSERT_EQ(aclrtSynchronizeStream(nullptr), ACL_SUCCESS);
  aclDestroyTensor(tx);
  aclDestroyTensor(to);
  aclDestroyScalar(alpha);
  aclrtFree(x);
  aclrtFree(o);
}

// acl.cpp aclFinalizeImpl: only a finalize after a successful one is refused (ACL_ERROR_REPEAT_FINALIZE, 100037);
// one before any aclInit has nothing to do and succeeds.
TEST(AclInit, FinalizeTwiceIsRepeatFinalize) {
  EXPECT_EQ(aclFinalize(), ACL_SUCCESS);
  EXPECT_EQ(aclFinalize(), ACL_ERROR_REPEAT_FINALIZE);
  EXPECT_EQ(ACL_ERROR_REPEAT_FINALIZE, 100037);
  uint64_t ref = 99;
  EXPECT_EQ(aclFinalizeReference(&ref), ACL_ERROR_REPEAT_FINALIZE);
  EXPECT_EQ(ref, 0u);
}

// acl_rt_impl_base.cpp GetStrFromConfigPath: a file that is not there is ACL_ERROR_INVALID_FILE (100003);
// json_parser.cpp: not a regular file 100003, not JSON or nested deeper than 10 ACL_ERROR_PARSE_FILE (100006);
// toolchain/dump.cpp HandleDumpCommand: a "dump" section adump refuses is ACL_ERROR_INVALID_DUMP_CONFIG (100009).
// A failed aclInit initializes nothing.
TEST(AclInit, ConfigFileErrors) {
  EXPECT_EQ(aclInit((g_dir / "no_such.json").c_str()), ACL_ERROR_INVALID_FILE);
  EXPECT_EQ(ACL_ERROR_INVALID_FILE, 100003);
  fs::create_directories(g_dir / "a_dir");
  EXPECT_EQ(aclInit((g_dir / "a_dir").c_str()), ACL_ERROR_INVALID_FILE);
  EXPECT_EQ(aclInit(write("bad.json", "{\"dump\": ").c_str()), ACL_ERROR_PARSE_FILE);
  EXPECT_EQ(aclInit(write("deep.json", std::string(11, '[') + std::string(11, ']')).c_str()), ACL_ERROR_PARSE_FILE);
  EXPECT_EQ(aclInit(write("mode.json", R"({"dump": {"dump_path": ")" + g_dir.string() +
                                           R"(", "dump_op_switch": "on", "dump_mode": "sideways"}})")
                        .c_str()),
            ACL_ERROR_INVALID_DUMP_CONFIG);
  EXPECT_EQ(aclmdlInitDump(), ACL_ERROR_UNINITIALIZE);  // none of them initialized
  EXPECT_EQ(aclFinalize(), ACL_ERROR_REPEAT_FINALIZE);
}

// acl.cpp aclInitImpl / aclFinalizeReferenceImpl: a second aclInit adds a reference and answers
// ACL_ERROR_REPEAT_INITIALIZE; aclFinalizeReference drops one, the last finalizes; aclFinalize finalizes whatever the
// count.
TEST(AclInit, ReferencesCountAndFinalizeReferenceDropsThem) {
  const std::string cfg = init_config();
  ASSERT_EQ(aclInit(cfg.c_str()), ACL_SUCCESS);
  EXPECT_EQ(aclInit(cfg.c_str()), ACL_ERROR_REPEAT_INITIALIZE);
  EXPECT_EQ(aclInit(cfg.c_str()), ACL_ERROR_REPEAT_INITIALIZE);
  uint64_t ref = 0;
  ASSERT_EQ(aclFinalizeReference(&ref), ACL_SUCCESS);
  EXPECT_EQ(ref, 2u);
  ASSERT_EQ(aclFinalizeReference(&ref), ACL_SUCCESS);
  EXPECT_EQ(ref, 1u);
  EXPECT_EQ(aclmdlInitDump(), ACL_SUCCESS);  // still initialized
  EXPECT_EQ(aclmdlFinalizeDump(), ACL_SUCCESS);
  ASSERT_EQ(aclFinalizeReference(&ref), ACL_SUCCESS);
  EXPECT_EQ(ref, 0u);
  EXPECT_EQ(aclmdlInitDump(), ACL_ERROR_UNINITIALIZE);
  EXPECT_EQ(aclFinalizeReference(&ref), ACL_ERROR_REPEAT_FINALIZE);
  ASSERT_EQ(aclInit(cfg.c_str()), ACL_SUCCESS);
  EXPECT_EQ(aclInit(cfg.c_str()), ACL_ERROR_REPEAT_INITIALIZE);
  ASSERT_EQ(aclFinalize(), ACL_SUCCESS);
  EXPECT_EQ(aclFinalize(), ACL_ERROR_REPEAT_FINALIZE);
  fs::remove_all(g_dir / "dump_a");
}

// toolchain/dump.cpp: aclInit's "dump" section turns the data dump on without aclmdlInitDump's flag: aclmdlSetDump is
// still refused before aclmdlInitDump (ACL_ERROR_DUMP_NOT_RUN), aclmdlInitDump succeeds, aclmdlSetDump replaces the
// configuration, one that enables nothing leaves it (adump dump_manager.cpp SetDumpConfig), aclmdlFinalizeDump turns
// every dump off, aclInit's included. adump_api_platform.cpp acldumpGetPath: "{dump_path}/{time}" of the config.
TEST(AclInit, DumpSectionTurnsTheDataDumpOn) {
  const std::string cfg = init_config();
  ASSERT_EQ(aclInit(cfg.c_str()), ACL_SUCCESS);
  const char *path = acldumpGetPath(DATA_DUMP);
  ASSERT_NE(path, nullptr);
  EXPECT_TRUE(std::regex_match(path, std::regex(std::regex_replace((g_dir / "dump_a").string(),
                                                                   std::regex(R"([.^$|()\[\]{}*+?\\])"), R"(\$&)") +
                                                "/[0-9]{14}")))
      << path;
  EXPECT_EQ(acldumpGetPath(AIC_ERR_BRIEF_DUMP), nullptr);
  run_add();
  EXPECT_EQ(aclmdlSetDump(cfg.c_str()), ACL_ERROR_DUMP_NOT_RUN);
  ASSERT_EQ(aclmdlInitDump(), ACL_SUCCESS);
  fs::create_directories(g_dir / "dump_b");
  const std::string to_b = write("to_b.json", R"({"dump": {"dump_path": ")" + (g_dir / "dump_b").string() +
                                                  R"(", "dump_list": [], "dump_op_switch": "on"}})");
  ASSERT_EQ(aclmdlSetDump(to_b.c_str()), ACL_SUCCESS);
  run_add();
  ASSERT_EQ(aclmdlSetDump(write("nothing.json", R"({"other": 1})").c_str()), ACL_SUCCESS);
  run_add();  // still to dump_b
  ASSERT_EQ(aclmdlFinalizeDump(), ACL_SUCCESS);
  run_add();  // no dump at all
  ASSERT_EQ(aclFinalize(), ACL_SUCCESS);
  // dump_level all, dump_mode output: one output file of the API (L2) and one of its kernel (L0) per aclnnAdd.
  auto a = files_under(g_dir / "dump_a"), b = files_under(g_dir / "dump_b");
  EXPECT_EQ(a.size(), 2u);
  EXPECT_EQ(b.size(), 4u);
  for (const std::string &f : a) EXPECT_NE(fs::path(f).filename().string().find("aclnnAdd_"), std::string::npos) << f;
  fs::remove_all(g_dir / "dump_a");
  fs::remove_all(g_dir / "dump_b");
}

std::mutex g_mu;
std::vector<std::string> g_chunk_files;
int g_bad_lengths = 0;

int32_t on_chunk(const acldumpChunk *c, int32_t len) {
  std::lock_guard<std::mutex> lk(g_mu);
  if ((size_t)len != sizeof(acldumpChunk) + c->bufLen || c->offset != -1 || c->flag != 0) ++g_bad_lengths;
  if (c->isLastChunk) g_chunk_files.push_back(c->fileName);
  return 0;
}

// adump's record server delivers the chunks of aclInit's dump to a callback registered with acldumpRegCallback (as
// those of aclmdlSetDump's): len = sizeof(acldumpChunk) + bufLen, offset -1, flag 0; nothing reaches the disk.
TEST(AclInit, DumpSectionChunksReachTheCallback) {
  const std::string cfg = init_config();
  ASSERT_EQ(aclInit(cfg.c_str()), ACL_SUCCESS);
  ASSERT_EQ(acldumpRegCallback(on_chunk, 0), ACL_SUCCESS);
  run_add();
  ASSERT_EQ(aclFinalize(), ACL_SUCCESS);  // stops the server aclInit started: every chunk delivered
  acldumpUnregCallback();
  std::lock_guard<std::mutex> lk(g_mu);
  EXPECT_EQ(g_bad_lengths, 0);
  ASSERT_EQ(g_chunk_files.size(), 2u);
  const std::string dir = acldumpGetPath(DATA_DUMP);
  for (const std::string &f : g_chunk_files) EXPECT_EQ(f.rfind(dir + "/0/aclnnAdd_", 0), 0u) << f;
  EXPECT_TRUE(files_under(g_dir / "dump_a").empty());
  fs::remove_all(g_dir / "dump_a");
}

// acl.cpp aclInitImpl: once an aclInit succeeded, one with another config's content is ACL_ERROR_INVALID_PARAM.
TEST(AclInit, LaterConfigMustMatchTheFirst) {
  EXPECT_EQ(aclInit(write("other.json", R"({"err_msg_mode": "1"})").c_str()), ACL_ERROR_INVALID_PARAM);
  EXPECT_EQ(aclInit(nullptr), ACL_ERROR_INVALID_PARAM);  // an empty config differs too
  ASSERT_EQ(aclInit(init_config().c_str()), ACL_SUCCESS);
  EXPECT_EQ(aclFinalize(), ACL_SUCCESS);
  fs::remove_all(g_dir);
}

}  // namespace
