// libascendcl.so: aclmdlInitDump / aclmdlSetDump / aclmdlFinalizeDump (the ACL runtime's toolchain/dump.cpp),
// aclInit's dump section, and acldumpRegCallback / acldumpUnregCallback / acldumpGetPath / aclopStartDumpArgs /
// aclopStopDumpArgs (adump), with CANN's ordering rules and codes (cann_dump.md §1.3-§1.7; runtime
// src/acl/aclrt_impl/toolchain/dump.cpp, src/dfx/adump/).
//
// aclInit with a non-empty config file starts the dump server and applies the file's "dump" section as aclmdlSetDump
// would (the same checks: ACL_ERROR_INVALID_DUMP_CONFIG fails aclInit), without the flag of aclmdlInitDump: a later
// aclmdlInitDump succeeds (the server is running already), aclmdlSetDump then replaces the configuration, and
// aclmdlFinalizeDump turns every dump off, aclInit's included, and stops the server. A configuration that enables
// nothing (no "dump", an empty one, nothing selected) leaves the one in force as it is (adump's dump_manager.cpp
// SetDumpConfig returns before touching it): only aclmdlFinalizeDump or aclFinalize turns a dump off.
#include "acl/acl_dump.h"

#include <unistd.h>

#include <atomic>
#include <cstdio>
#include <filesystem>
#include <mutex>
#include <system_error>

#include "acl/acl_rt.h"
#include "dump.h"
#include "fakecann/stream.h"

using namespace fakecann;

namespace {
std::mutex g_mu;
bool g_dump_initialized = false;  // aclmdlInitDump ran (toolchain/dump.cpp aclmdlInitDumpFlag)
// aclInit started the server (AclDump's AdxInitFromAclInit flag). Atomic: aclFinalize reads it without g_mu, which a
// stuck aclmdlFinalizeDump may hold (joining a record thread inside a callback that never returns) when aclInit did
// not start the server.
std::atomic<bool> g_init_server{false};
std::string g_dump_path;          // acldumpGetPath(DATA_DUMP): "{dump_path}/{time}" of the last enabling config
std::string g_args_path;          // aclopStartDumpArgs's directory while it is on

aclError refuse(aclError code, const char *why) {
  set_error_message(why);
  return code;
}
// Puts `c` in force (nullptr: nothing enabled, the one in force stays). Under g_mu.
void apply(std::shared_ptr<const dump::Config> c) {
  if (c == nullptr) return;
  g_dump_path = c->path + (c->path.empty() || c->path.back() == '/' ? "" : "/") + c->time_dir;
  dump::set_active_config(std::move(c));
}

}  // namespace

namespace fakecann::dump {

aclError apply_init_dump(const char *configPath) {
  std::lock_guard<std::mutex> lk(g_mu);
  server_start();
  g_init_server = true;
  std::shared_ptr<const Config> c;
  std::string why;
  if (aclError e = load_config(configPath, &c, &why)) {
    std::fprintf(stderr, "[fake_cann] aclInit: %s\n", why.c_str());
    return refuse(e, why.c_str());
  }
  apply(std::move(c));
  return ACL_SUCCESS;
}

void release_init_dump() {
  if (!g_init_server) return;
  std::lock_guard<std::mutex> lk(g_mu);
  if (!g_init_server) return;
  g_init_server = false;
  server_stop();
}

}  // namespace fakecann::dump

extern "C" {

aclError aclmdlInitDump(void) {
  std::lock_guard<std::mutex> lk(g_mu);
  if (!dump::acl_initialized()) return refuse(ACL_ERROR_UNINITIALIZE, "aclmdlInitDump before aclInit");
  if (g_dump_initialized) return refuse(ACL_ERROR_REPEAT_INITIALIZE, "aclmdlInitDump called twice");
  dump::server_start();
  g_dump_initialized = true;
  return ACL_SUCCESS;
}

aclError aclmdlSetDump(const char *dumpCfgPath) {
  std::lock_guard<std::mutex> lk(g_mu);
  if (!dump::acl_initialized()) return refuse(ACL_ERROR_UNINITIALIZE, "aclmdlSetDump before aclInit");
  if (!g_dump_initialized) return refuse(ACL_ERROR_DUMP_NOT_RUN, "aclmdlSetDump before aclmdlInitDump");
  if (dumpCfgPath == nullptr) return refuse(ACL_ERROR_INVALID_PARAM, "aclmdlSetDump: dumpCfgPath is NULL");
  std::shared_ptr<const dump::Config> c;
  std::string why;
  if (aclError e = dump::load_config(dumpCfgPath, &c, &why)) {
    std::fprintf(stderr, "[fake_cann] aclmdlSetDump: %s\n", why.c_str());
    return refuse(e, why.c_str());
  }
  apply(std::move(c));  // last call wins
  return ACL_SUCCESS;
}

// Returns once every queued chunk was delivered; work still running on a stream is not waited for.
aclError aclmdlFinalizeDump(void) {
  std::lock_guard<std::mutex> lk(g_mu);
  if (!dump::acl_initialized()) return refuse(ACL_ERROR_UNINITIALIZE, "aclmdlFinalizeDump before aclInit");
  if (!g_dump_initialized) return refuse(ACL_ERROR_DUMP_NOT_RUN, "aclmdlFinalizeDump before aclmdlInitDump");
  dump::set_active_config(nullptr);
  dump::server_stop();
  g_dump_initialized = false;
  return ACL_SUCCESS;
}

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
