// libascendcl.so: aclmdlInitDump / aclmdlSetDump / aclmdlFinalizeDump (the ACL runtime's toolchain/dump.cpp) and
// acldumpRegCallback / acldumpUnregCallback (adump), with CANN's ordering rules and codes (cann_dump.md §1.3-§1.7).
#include "acl/acl_dump.h"

#include <cstdio>
#include <mutex>

#include "acl/acl_rt.h"
#include "dump.h"
#include "fakecann/stream.h"

using namespace fakecann;

namespace {
std::mutex g_mu;
bool g_dump_initialized = false;

aclError refuse(aclError code, const char *why) {
  set_error_message(why);
  return code;
}
}  // namespace

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
  dump::set_active_config(std::move(c));  // last call wins
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

}  // extern "C"
