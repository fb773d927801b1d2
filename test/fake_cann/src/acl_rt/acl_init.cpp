// ACL runtime: aclInit / aclFinalize / aclFinalizeReference, as CANN's runtime does them
// (src/acl/aclrt_impl/acl.cpp, common/json_parser.cpp); what describes the install (versions, SoC, CANN attributes)
// is acl_sys.cpp's. Here:
// - aclInit counts references: a second call adds one and answers ACL_ERROR_REPEAT_INITIALIZE; the config file must be
//   a readable regular file (else ACL_ERROR_INVALID_FILE), of valid JSON nested at most 10 deep (else
//   ACL_ERROR_PARSE_FILE); an empty path or an empty file configures nothing. Once an aclInit succeeded, a later one
//   must be given the same content (the first one's hash): another is ACL_ERROR_INVALID_PARAM.
// - aclFinalize finalizes whatever the count; a second aclFinalize is ACL_ERROR_REPEAT_FINALIZE (a first one without
//   aclInit succeeds: nothing to finalize). aclFinalizeReference drops one reference and finalizes with the last.
#include <sys/stat.h>

#include <cstdio>
#include <cstring>
#include <fstream>
#include <iterator>
#include <mutex>
#include <nlohmann/json.hpp>
#include <string>

#include "acl/acl.h"
#include "fakecann/dump.h"
#include "fakecann/stream.h"

using namespace fakecann;

namespace {

std::recursive_mutex g_mu;
uint64_t g_ref_count = 0;  // aclInit references (acl.cpp aclInitRefCount)
bool g_finalized = false;  // the last finalize succeeded (acl.cpp aclFinalizeFlag)
bool g_had_init = false;   // an aclInit succeeded: g_first_content is its config (acl.cpp aclInitJsonHash)
std::string g_first_content;

aclError refuse(aclError code, const std::string &why) {
  set_error_message(why);
  std::fprintf(stderr, "[fake_cann] %s\n", why.c_str());
  return code;
}

// json_parser.cpp GetMaxNestedLayers: counts every '{' and '[' of the file, strings included.
bool nested_too_deep(const std::string &text) {
  int objects = 0, arrays = 0, max_objects = 0, max_arrays = 0;
  for (char c : text) {
    if (c == '\0') break;
    objects += c == '{' ? 1 : (c == '}' && objects > 0 ? -1 : 0);
    arrays += c == '[' ? 1 : (c == ']' && arrays > 0 ? -1 : 0);
    max_objects = std::max(max_objects, objects);
    max_arrays = std::max(max_arrays, arrays);
  }
  return max_objects > 10 || max_arrays > 10;
}

// aclInit's read of the config (acl_rt_impl_base.cpp GetStrFromConfigPath); *text gets the file (empty: nothing).
aclError read_config(const char *path, std::string *text) {
  text->clear();
  if (path == nullptr || path[0] == '\0') return ACL_SUCCESS;
  struct stat st;
  if (stat(path, &st) != 0) return refuse(ACL_ERROR_INVALID_FILE, std::string("aclInit: no config file ") + path);
  if (!S_ISREG(st.st_mode))
    return refuse(ACL_ERROR_INVALID_FILE, std::string("aclInit: config ") + path + " is not a regular file");
  std::ifstream f(path, std::ios::binary);
  if (!f) return refuse(ACL_ERROR_INVALID_FILE, std::string("aclInit: cannot read config file ") + path);
  text->assign(std::istreambuf_iterator<char>(f), std::istreambuf_iterator<char>());
  return ACL_SUCCESS;
}

// The error-message handling's parse of a non-empty config (acl.cpp HandleErrorManagerConfig, json_parser.cpp).
aclError check_json(const char *path, const std::string &text) {
  if (text.empty()) return ACL_SUCCESS;
  if (nested_too_deep(text))
    return refuse(ACL_ERROR_PARSE_FILE, std::string("aclInit: config ") + path + " nests deeper than 10");
  if (nlohmann::json::parse(text, nullptr, false).is_discarded())
    return refuse(ACL_ERROR_PARSE_FILE, std::string("aclInit: config ") + path + " is not valid JSON");
  return ACL_SUCCESS;
}

void finalize_locked() {
  dump::release_init_dump();
  synchronize_all_streams();
  g_finalized = true;
  g_ref_count = 0;
}

}  // namespace

namespace fakecann::dump {
bool acl_initialized() {
  std::lock_guard<std::recursive_mutex> lk(g_mu);
  return g_ref_count > 0;
}
}  // namespace fakecann::dump

extern "C" {

aclError aclInit(const char *configPath) {
  std::lock_guard<std::recursive_mutex> lk(g_mu);
  if (g_ref_count > 0) {
    ++g_ref_count;
    return ACL_ERROR_REPEAT_INITIALIZE;
  }
  std::string text;
  if (aclError e = read_config(configPath, &text)) return e;
  if (g_had_init && text != g_first_content)
    return refuse(ACL_ERROR_INVALID_PARAM, "aclInit: the config differs from the first aclInit's");
  if (aclError e = check_json(configPath, text)) return e;
  if (!text.empty())
    if (aclError e = dump::apply_init_dump(configPath)) return e;
  g_finalized = false;
  g_ref_count = 1;
  if (!g_had_init) g_first_content = text;
  g_had_init = true;
  return ACL_SUCCESS;
}

aclError aclFinalize(void) {
  std::lock_guard<std::recursive_mutex> lk(g_mu);
  if (g_finalized) return refuse(ACL_ERROR_REPEAT_FINALIZE, "aclFinalize: finalized already");
  finalize_locked();
  return ACL_SUCCESS;
}

aclError aclFinalizeReference(uint64_t *refCount) {
  std::lock_guard<std::recursive_mutex> lk(g_mu);
  if (g_ref_count > 1) {
    --g_ref_count;
    if (refCount != nullptr) *refCount = g_ref_count;
    return ACL_SUCCESS;
  }
  if (g_ref_count < 1) {
    if (refCount != nullptr) *refCount = 0;
    return refuse(ACL_ERROR_REPEAT_FINALIZE, "aclFinalizeReference: not initialized, or finalized already");
  }
  finalize_locked();
  if (refCount != nullptr) *refCount = 0;
  return ACL_SUCCESS;
}

const char *aclGetRecentErrMsg(void) { return error_message(); }

}  // extern "C"
