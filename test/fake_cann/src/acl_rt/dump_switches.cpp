// aclmdlInitDump / aclmdlSetDump / aclmdlFinalizeDump (the ACL runtime's toolchain/dump.cpp: libascendcl.so of
// CANN 8.x, libacl_rt.so of 9.x) and aclInit's dump section, with CANN's ordering rules and codes (cann_dump.md
// §1.3-§1.7; runtime src/acl/aclrt_impl/toolchain/dump.cpp). The dump itself is adump's (ascend_dump/:
// libascend_dump.so of 9.x).
//
// aclInit with a non-empty config file starts the dump server and applies the file's "dump" section as aclmdlSetDump
// would (the same checks: ACL_ERROR_INVALID_DUMP_CONFIG fails aclInit), without the flag of aclmdlInitDump: a later
// aclmdlInitDump succeeds (the server is running already), aclmdlSetDump then replaces the configuration, and
// aclmdlFinalizeDump turns every dump off, aclInit's included, and stops the server. A configuration that enables
// nothing (no "dump", an empty one, nothing selected) leaves the one in force as it is (adump's dump_manager.cpp
// SetDumpConfig returns before touching it): only aclmdlFinalizeDump or aclFinalize turns a dump off.
#include <atomic>
#include <cstdio>
#include <memory>
#include <mutex>
#include <string>

#include "acl/acl_rt.h"
#include "fakecann/dump.h"
#include "fakecann/stream.h"

using namespace fakecann;

namespace {
std::mutex g_mu;
bool g_dump_initialized = false;  // aclmdlInitDump ran (toolchain/dump.cpp aclmdlInitDumpFlag)
// aclInit started the server (AclDump's AdxInitFromAclInit flag). Atomic: aclFinalize reads it without g_mu, which a
// stuck aclmdlFinalizeDump may hold (joining a record thread inside a callback that never returns) when aclInit did
// not start the server.
std::atomic<bool> g_init_server{false};

aclError refuse(aclError code, const char *why) {
  set_error_message(why);
  return code;
}
// Puts `c` in force (nullptr: nothing enabled, the one in force stays). Under g_mu.
void apply(std::shared_ptr<const dump::Config> c) {
  if (c == nullptr) return;
  dump::note_dump_path(c->path + (c->path.empty() || c->path.back() == '/' ? "" : "/") + c->time_dir);
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

}  // extern "C"
