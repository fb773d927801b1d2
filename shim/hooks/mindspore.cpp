// MindSpore's runtime profiler as the source of kernel names (reference/mindspore_runtime.md §3(e1); docs/capture.md,
// "MindSpore"). With MS_ENABLE_RUNTIME_PROFILER=1 MindSpore's KBK runtime wraps every kernel launch in
// PROFILER_START/END (GeKernelExecutor::LaunchKernel, ge_kernel_executor.cc:1349-1396 in 2.7): after KernelMod::Launch
// returned, on the thread that made the CANN calls, it hands ProfilerAnalyzer::RecordData a ProfilerData whose
// op_full_name_ is the kernel's fullname_with_scope
// (`Default/network-WithLossCell/_backbone-MLP/fc1-Dense/MatMul-op0`).
//
// The shim (1) sets MS_ENABLE_RUNTIME_PROFILER=1 at start-up when the user has not set it, (2) calls the exported
// ProfilerAnalyzer::GetInstance().StartStep() once the library exporting it is loaded (libmindspore_profiler.so from
// 2.6, libmindspore_common.so in 2.5; the profiler reads the variable only then, and MindSpore calls StartStep itself
// only from Model.train's callback and PyNative's Sync), (3) takes every RecordData call, redirected in the callers'
// GOT like a linked CANN function (HookReach::Framework), reads the record and names the kernels of that thread
// (shim/capture/scope_names.h). The records are passed on to MindSpore only when the user turned the profiler on: when
// the shim did, nothing piles up in it (its data grows until EndStep, which custom loops never call) and it writes no
// RuntimeProfiler files.
//
// The names and layouts read here are those of MindSpore 2.5.0, 2.6.0 and 2.7 (r2.7.rc1) source, all alike
// (debug/profiler/profiler.h; include/common/profiler.h in 2.5): the ProfilerData members
//   bool is_graph_data_; bool is_stage_; ProfilerStage stage_; ProfilerModule module_; ProfilerEvent event_;
//   std::string module_graph_, event_graph_, op_full_name_, op_name_; bool is_inner_event_; ...
// with ProfilerModule::kKernel = 4 and ProfilerEvent::kKernelLaunch = 4. MindSpore builds with
// _GLIBCXX_USE_CXX11_ABI=0 (8-byte copy-on-write strings); the library's own GetBriefName symbol says which ABI it
// was built with, and a library with neither layout is left alone. 2.8 and later are not verified.
#include <link.h>
#include <unistd.h>

#include <atomic>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <string_view>

#include "shim/base/log.h"
#include "shim/base/safe_read.h"
#include "shim/capture/capture_call.h"
#include "shim/capture/scope_names.h"
#include "shim/hooks/hook.h"
#include "shim/hooks/mindspore_profiler.h"

using namespace msprobe::shim;

namespace {

constexpr const char kRecordData[] =
    "_ZN9mindspore7runtime16ProfilerAnalyzer10RecordDataERKSt10shared_ptrINS0_12ProfilerDataEE";
constexpr const char kGetInstance[] = "_ZN9mindspore7runtime16ProfilerAnalyzer11GetInstanceEv";
constexpr const char kStartStep[] = "_ZN9mindspore7runtime16ProfilerAnalyzer9StartStepEv";
constexpr const char kProfilerEnable[] = "_ZNK9mindspore7runtime16ProfilerAnalyzer15profiler_enableEv";
constexpr const char kBriefNameOldAbi[] = "_ZNK9mindspore7runtime16ProfilerAnalyzer12GetBriefNameERKSs";
constexpr const char kBriefNameNewAbi[] =
    "_ZNK9mindspore7runtime16ProfilerAnalyzer12GetBriefNameB5cxx11ERKNSt7__cxx1112basic_stringIcSt11char_"
    "traitsIcESaIcEEE";
constexpr const char kEnvVar[] = "MS_ENABLE_RUNTIME_PROFILER";

constexpr int32_t kModuleKernel = 4, kEventKernelLaunch = 4;
constexpr uint64_t kMaxNameBytes = 4096;

enum class Layout : int { Unknown, OldAbi, NewAbi };

constinit std::atomic<bool> g_user_enabled{false};  // the user set the variable to 1: records go on to MindSpore
constinit std::atomic<bool> g_user_disabled{false};
constinit std::atomic<bool> g_started{false};  // StartStep called (or given up)
constinit std::atomic<int> g_layout{(int)Layout::Unknown};

// ProfilerData's members up to is_inner_event_, for each std::string ABI (LP64).
struct Offsets {
  size_t module, event, is_stage, full_name, is_inner;
};
constexpr Offsets kOldAbi{8, 12, 1, 32, 48};   // four 8-byte strings from 16
constexpr Offsets kNewAbi{8, 12, 1, 80, 144};  // four 32-byte strings from 16

// What a record is. The name of a kernel launch's is read in place (valid while the hook runs: the caller holds the
// record). The first kChecked names are read through safe reads (a library of another layout would fault otherwise);
// once they all made sense the layout is trusted and names are read directly.
enum class Record { KernelLaunch, Inner, Other, Unreadable };
constexpr int kChecked = 16;
constinit std::atomic<int> g_checked{0};

Record read_record(const void *data_ptr, std::string_view *full_name) {
  const Layout layout = (Layout)g_layout.load(std::memory_order_relaxed);
  if (data_ptr == nullptr || layout == Layout::Unknown) return Record::Unreadable;
  const auto *data = *static_cast<const unsigned char *const *>(data_ptr);  // shared_ptr<ProfilerData>: {T*, ctrl*}
  if (data == nullptr) return Record::Unreadable;
  const Offsets &o = layout == Layout::OldAbi ? kOldAbi : kNewAbi;
  int32_t module, event;
  std::memcpy(&module, data + o.module, 4);
  std::memcpy(&event, data + o.event, 4);
  if (data[o.is_stage] != 0 || data[o.is_inner] == 1) return Record::Inner;
  if (module != kModuleKernel || event != kEventKernelLaunch) return Record::Other;
  const char *chars = nullptr;
  uint64_t len = 0;
  std::memcpy(&chars, data + o.full_name, 8);
  if (chars == nullptr) return Record::Unreadable;
  const bool check = g_checked.load(std::memory_order_relaxed) < kChecked;
  const pid_t self = check ? getpid() : 0;
  if (layout == Layout::OldAbi) {  // _M_p; the length sits in the _Rep header 24 bytes before the characters
    uint64_t first = 0;
    if (check && !safe_read_pair(self, chars - 24, chars, &len, &first)) return Record::Unreadable;
    if (!check) std::memcpy(&len, chars - 24, 8);
  } else {  // {_M_p, _M_string_length, ...}
    std::memcpy(&len, data + o.full_name + 8, 8);
  }
  if (len == 0 || len > kMaxNameBytes) return Record::Unreadable;
  uint64_t a = 0, b = 0;
  if (check) {
    if (!safe_read_pair(self, chars, chars + (len >= 8 ? len - 8 : 0), &a, &b)) return Record::Unreadable;
    g_checked.fetch_add(1, std::memory_order_relaxed);
  }
  *full_name = std::string_view(chars, len);
  return Record::KernelLaunch;
}

void observe(const void *data_ptr) {
  std::string_view name;
  switch (read_record(data_ptr, &name)) {
    case Record::KernelLaunch: scope_names::kernel_recorded(name); break;
    case Record::Other: scope_names::other_record(); break;
    default: break;
  }
}

}  // namespace

namespace {

constinit HookSlot slot_record_data{kRecordData};

// ProfilerAnalyzer::RecordData(const ProfilerDataPtr &) noexcept: `this`, then the shared_ptr's address.
void record_data(void *self, const void *data) noexcept {
  using Real = void (*)(void *, const void *);
  auto real = original_of<Real>(slot_record_data);
  if (!ReentryGuard::active() && scope_names::armed() && capture_enabled())
    guarded(Problem::FrameworkRecordNotRead, [&] {
      ReentryGuard guard;
      observe(data);
    });
  if (real != nullptr && (g_user_enabled.load(std::memory_order_relaxed) || !scope_names::armed())) real(self, data);
}

// A family of one, written out: its name is a C++ one, which the X-macro of hook.h cannot spell.
constinit const HookEntry msprobe_family_entries[] = {
    HookEntry{kRecordData, &address_of<&record_data>, &slot_record_data}};
constinit const HookFamily msprobe_family{msprobe_family_entries, std::size(msprobe_family_entries),
                                          HookReach::Framework};
[[gnu::used, gnu::section("msprobe_hooks")]] constinit const HookFamily *const msprobe_family_ref = &msprobe_family;
}  // namespace

namespace msprobe::shim {

void offer_mindspore_profiler() {
  const char *v = std::getenv(kEnvVar);
  if (v != nullptr && *v != '\0') {
    if (std::strcmp(v, "1") == 0)
      g_user_enabled.store(true);
    else
      g_user_disabled.store(true);
    return;
  }
  ::setenv(kEnvVar, "1", 1);
}

void mindspore_libraries_loaded() {
  if (g_started.load(std::memory_order_acquire) || g_user_disabled.load(std::memory_order_relaxed)) return;
  // Cheap for every other dlopen (Python imports make many): the symbols are looked for only when a library named
  // after MindSpore came (libmindspore_profiler.so from 2.6, libmindspore_common.so in 2.5).
  static std::atomic<int> seen{-1};
  int mindspore_objects = 0;
  dl_iterate_phdr(
      [](dl_phdr_info *info, size_t, void *count) {
        const char *n = info->dlpi_name != nullptr ? info->dlpi_name : "";
        if (const char *slash = std::strrchr(n, '/')) n = slash + 1;  // the file's name, not its directory's
        if (std::strstr(n, "mindspore") != nullptr) ++*static_cast<int *>(count);
        return 0;
      },
      &mindspore_objects);
  if (mindspore_objects == 0 || seen.exchange(mindspore_objects) == mindspore_objects) return;
  using GetInstance = void *(*)();
  using Method = void (*)(void *);
  using Enabled = bool (*)(const void *);
  void *get = find_original(kGetInstance);
  if (get == nullptr) return;  // not (yet) loaded
  if (g_started.exchange(true)) return;
  void *start = find_original(kStartStep), *enabled = find_original(kProfilerEnable);
  Layout layout = find_original(kBriefNameOldAbi)   ? Layout::OldAbi
                  : find_original(kBriefNameNewAbi) ? Layout::NewAbi
                                                    : Layout::Unknown;
  if (start == nullptr || enabled == nullptr || layout == Layout::Unknown || find_original(kRecordData) == nullptr) {
    log_info("MindSpore's runtime profiler lacks the symbols of 2.5-2.7: kernels keep their Python scope names");
    return;
  }
  g_layout.store((int)layout);
  void *instance = reinterpret_cast<GetInstance>(get)();
  reinterpret_cast<Method>(start)(instance);  // Initialize(): reads MS_ENABLE_RUNTIME_PROFILER
  if (!reinterpret_cast<Enabled>(enabled)(instance)) {
    log_info("MindSpore's runtime profiler is off: kernels keep their Python scope names");
    return;
  }
  scope_names::arm();
  log_info("kernel names from MindSpore's runtime profiler (%s std::string ABI)",
           layout == Layout::OldAbi ? "pre-C++11" : "C++11");
}

}  // namespace msprobe::shim
