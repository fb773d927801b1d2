// acldumpRegCallback / acldumpUnregCallback / acldumpGetPath / aclopStartDumpArgs / aclopStopDumpArgs (adump:
// libascendcl.so of CANN 8.x, libascend_dump.so of 9.x), with CANN's ordering rules and codes (cann_dump.md §1.3-§1.7;
// runtime src/dfx/adump/). The switches that turn the dump on are acl_rt/dump_switches.cpp's.
#include "acl/acl_dump.h"

#include <unistd.h>

#include <cstdio>
#include <filesystem>
#include <mutex>
#include <string>
#include <system_error>

#include "fakecann/dump.h"
#include "fakecann/stream.h"

using namespace fakecann;

namespace {
std::mutex g_mu;
std::string g_dump_path;  // acldumpGetPath(DATA_DUMP): "{dump_path}/{time}" of the last enabling config
std::string g_args_path;  // aclopStartDumpArgs's directory while it is on

aclError refuse(aclError code, const char *why) {
  set_error_message(why);
  return code;
}

}  // namespace

namespace fakecann::dump {

void note_dump_path(const std::string &path) {
  std::lock_guard<std::mutex> lk(g_mu);
  g_dump_path = path;
}

}  // namespace fakecann::dump

extern "C" {

aclError acldumpRegCallback(int32_t (*const messageCallback)(const acldumpChunk *, int32_t), int32_t flag) {
  if (messageCallback == nullptr || flag != 0) return ACL_ERROR_FAILURE;
  // A second callback is ignored (adump logs an error) and the call still succeeds.
  if (!dump::register_callback(messageCallback))
    std::fprintf(stderr, "[fake_cann] acldumpRegCallback: a callback is already registered; ignored\n");
  return ACL_SUCCESS;
}

void acldumpUnregCallback(void) {
  if (!dump::unregister_callback()) std::fprintf(stderr, "[fake_cann] acldumpUnregCallback: none registered\n");
}

// adump_api_platform.cpp: the data dump's "{dump_path}/{YYYYMMDDhhmmss}" (what adump's DumpSetting keeps from the last
// configuration that enabled a dump, also after it was turned off), NULL before any; exception dumps have their own.
const char *acldumpGetPath(acldumpType dumpType) {
  std::lock_guard<std::mutex> lk(g_mu);
  if (dumpType != DATA_DUMP && dumpType != OVERFLOW_DUMP) return nullptr;
  return g_dump_path.empty() ? nullptr : g_dump_path.c_str();
}

// adump_api_platform.cpp and dump_manager.cpp StartDumpArgs / StopDumpArgs: the operators' argument records
// (ACL_OP_DUMP_OP_AICORE_ARGS) go to a directory, made when missing; a null or empty path, a path that is no readable
// and writable directory, a dump type without that bit or a second start are ACL_ERROR_FAILURE. Stopping what is not
// started succeeds. The records are opbase's serialization of each kernel's tiling (nnopbase op_info_record): the
// stand-in's operators have no tiling and write none, so the directory stays as it was.
aclError aclopStartDumpArgs(uint32_t dumpType, const char *path) {
  if (path == nullptr || (dumpType & ACL_OP_DUMP_OP_AICORE_ARGS) == 0)
    return refuse(ACL_ERROR_FAILURE, "aclopStartDumpArgs: NULL path or a dump type without ACL_OP_DUMP_OP_AICORE_ARGS");
  std::lock_guard<std::mutex> lk(g_mu);
  if (!g_args_path.empty()) return refuse(ACL_ERROR_FAILURE, "aclopStartDumpArgs: called repeatedly");
  std::error_code ec;
  if (path[0] == '\0') return refuse(ACL_ERROR_FAILURE, "aclopStartDumpArgs: the path is empty");
  if (!std::filesystem::exists(path, ec) && !std::filesystem::create_directories(path, ec))
    return refuse(ACL_ERROR_FAILURE, "aclopStartDumpArgs: cannot create the directory");
  if (!std::filesystem::is_directory(path, ec) || access(path, R_OK | W_OK) != 0)
    return refuse(ACL_ERROR_FAILURE, "aclopStartDumpArgs: the path is not a readable, writable directory");
  g_args_path = std::filesystem::absolute(path, ec).string();
  return ACL_SUCCESS;
}

aclError aclopStopDumpArgs(uint32_t dumpType) {
  std::lock_guard<std::mutex> lk(g_mu);
  if ((dumpType & ACL_OP_DUMP_OP_AICORE_ARGS) != 0) g_args_path.clear();
  return ACL_SUCCESS;
}

}  // extern "C"
