// libFuzzer target: the shim's configuration (shim/config/config.h). The input picks which MSPROBE_* variables are set
// and to what, and optionally the bytes of the config.json that MSPROBE_CONFIG names (a memfd, so no file is
// written). load_config must never throw, crash or loop, and must say why whenever it disables capture.
#include <fuzzer/FuzzedDataProvider.h>
#include <sys/mman.h>
#include <unistd.h>

#include <cstdint>
#include <cstdlib>
#include <map>
#include <string>

#include "shim/config/config.h"

namespace {

constexpr const char *kVariables[] = {
    "MSPROBE_DUMP_PATH", "MSPROBE_TASK",      "MSPROBE_STEP",          "MSPROBE_RANK",        "MSPROBE_LIST",
    "MSPROBE_SCOPE",     "MSPROBE_DATA_MODE", "MSPROBE_SUMMARY_MODE",  "MSPROBE_FILE_FORMAT", "MSPROBE_STACK",
    "MSPROBE_COMPRESS",  "MSPROBE_BUFFER_MB", "MSPROBE_OVERFLOW_NUMS", "MSPROBE_STEP_MARKER", "MSPROBE_LOG_LEVEL",
    "MSPROBE_ENABLE",    "MSPROBE_PRECISION",
};

// One memfd reused by every run: /proc/self/fd/N is a regular file, as a real config.json is.
int config_fd() {
  static const int fd = memfd_create("fuzz_config_json", MFD_CLOEXEC);
  return fd;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  using namespace msprobe::shim;
  FuzzedDataProvider in(data, size);
  std::map<std::string, std::string> env;
  const bool with_file = in.ConsumeBool();
  for (const char *name : kVariables) {
    if (in.ConsumeBool()) {
      std::string v = in.ConsumeRandomLengthString(512);
      // An environment value cannot hold a NUL byte: getenv would stop there.
      v = v.substr(0, v.find('\0'));
      env[name] = std::move(v);
    }
  }
  std::string file_path;
  if (with_file && config_fd() >= 0) {
    const std::string text = in.ConsumeRemainingBytesAsString();
    if (ftruncate(config_fd(), 0) != 0 || pwrite(config_fd(), text.data(), text.size(), 0) < 0) return 0;
    file_path = "/proc/self/fd/" + std::to_string(config_fd());
    env["MSPROBE_CONFIG"] = file_path;
  }
  const ConfigLoad load = load_config([&](const char *name) -> const char * {
    auto it = env.find(name);
    return it == env.end() ? nullptr : it->second.c_str();
  });
  if (!load.errors.empty() && load.config.enabled) std::abort();  // an error must disable capture
  for (const std::string &line : load.errors)
    if (line.empty() || line.find('\n') != std::string::npos) std::abort();  // one line each
  if (load.config.enabled) {
    (void)describe(load.config);
    // The filters the capture path runs on every launch, on a few names.
    for (const char *kernel : {"MatMul.Default.0", "ApplyAdamW.module_Net_forward.3", "", "..", "a/b.c.7"}) {
      std::string_view k(kernel);
      std::string_view type = k.substr(0, k.find('.'));
      (void)load.config.list.matches(type, k);
      if (load.config.scope) {
        (void)load.config.scope->first.matches(type, k);
        (void)load.config.scope->second.matches(type, k);
      }
      (void)load.config.step_marker.matches(type);
    }
  }
  return 0;
}
