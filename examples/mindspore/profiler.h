// MindSpore's runtime profiler, as libmindspore_profiler.so exports it in 2.5-2.7 (mindspore/ccsrc/debug/profiler/
// profiler.h of r2.7.rc1; include/common/profiler.h in 2.5): the classes, enums and macros the KBK runtime uses, with
// ProfilerData's members exactly as there (profiler.h:452-470), since a tool that reads the records reads that layout.
// Built, as MindSpore is, with _GLIBCXX_USE_CXX11_ABI=0 (8-byte copy-on-write std::string).
#pragma once
#include <sys/syscall.h>
#include <unistd.h>

#include <cstdint>
#include <list>
#include <map>
#include <memory>
#include <mutex>
#include <string>

#define PROFILER_EXPORT __attribute__((visibility("default")))

namespace mindspore {
namespace runtime {

enum class ProfilerStage {
  kDefault,
  kPython,
  kCapture,
  kRunGraph,
  kRunGrad,
  kRunOp,
  kAsnumpy,
  kCompileGradGraph,
  kWaitPipeline,
  kSyncStream
};
enum class ProfilerModule { kDefault, kGraphExecutorPy, kRuntime, kPynative, kKernel, kPython, kCapture, kOther };
// The first events, in MindSpore's order (the rest are not used here).
enum class ProfilerEvent {
  kDefault,
  kKernelInfer,
  kKernelResize,
  kKernelInferAndResize,
  kKernelLaunch,
  kKernelLaunckCallback,
  kKernelUpdate,
  kKernelPrepareData,
  kGraphLaunch,
  kInputProcess,
  kOutputProcess,
  kWaitTaskFinish,
  kPreLaunch,
  kPostLaunch,
  kSendOutput,
  kMemoryAlloc,
  kMemoryFree,
  kCopyData,
  kStreamSync,
  kProcessMultiStream,
  kWaitKernelsInferFinish,
  kWaitKernelsResizeFinish,
  kWaitKernelsLaunchFinish,
  kKernelInferInner,
  kKernelInferDataSync,
  kKernelResizeInner,
  kKernelLaunchInner,
};

struct ProfilerData {
  ProfilerData(ProfilerModule module, ProfilerEvent event, const std::string &op_full_name, const std::string &op_name,
               bool is_inner_event, uint64_t start_time, uint64_t end_time, uint64_t flow_id = UINT64_MAX,
               std::string py_stack = "")
      : is_stage_(false),
        stage_(ProfilerStage::kDefault),
        module_(module),
        event_(event),
        op_full_name_(op_full_name),
        op_name_(op_name),
        is_inner_event_(is_inner_event),
        start_time_(start_time),
        end_time_(end_time),
        dur_time_(end_time - start_time),
        tid_(static_cast<uint64_t>(syscall(SYS_gettid))),
        pid_(getpid()),
        flow_id_(flow_id),
        py_stack_(std::move(py_stack)) {}

  bool is_graph_data_{false};
  bool is_stage_{false};
  ProfilerStage stage_{ProfilerStage::kDefault};
  ProfilerModule module_{ProfilerModule::kDefault};
  ProfilerEvent event_{ProfilerEvent::kDefault};
  std::string module_graph_{};
  std::string event_graph_{};
  std::string op_full_name_{};
  std::string op_name_{};
  bool is_inner_event_{false};
  uint64_t start_time_{0L};
  uint64_t end_time_{0L};
  uint64_t dur_time_{0L};
  int8_t level_{-1};
  std::map<std::string, std::string> custom_info_{};
  uint64_t tid_{};
  int32_t pid_{0};
  uint64_t flow_id_{UINT64_MAX};
  std::string py_stack_{};
};
using ProfilerDataPtr = std::shared_ptr<ProfilerData>;

class PROFILER_EXPORT ProfilerAnalyzer {
 public:
  static ProfilerAnalyzer &GetInstance() noexcept;
  // Increase step at the step begin (the first call reads MS_ENABLE_RUNTIME_PROFILER).
  void StartStep();
  // Keeps the step's records for Clear().
  void EndStep();
  // Writes RuntimeProfilerJson<ts>.json (a Chrome trace) when steps were kept.
  void Clear() noexcept;
  bool profiler_enable() const;
  void RecordData(const ProfilerDataPtr &data) noexcept;
  uint64_t GetTimeStamp() const noexcept;
  // For example: ScopeName(XX/XX/ReLU-op1) --> BriefName(ReLU)
  std::string GetBriefName(const std::string &scope_name) const;

 private:
  ProfilerAnalyzer() = default;
  ~ProfilerAnalyzer() { Clear(); }
  void Initialize();

  size_t step_{0};
  std::list<ProfilerDataPtr> data_;
  std::list<std::pair<size_t, std::list<ProfilerDataPtr>>> data_line_;
  std::mutex data_mutex_;
  std::string json_file_name_;
  bool profiler_enable_{false};
  bool init_{false};
};

}  // namespace runtime
}  // namespace mindspore

#define PROFILER_START(start_time)                                                     \
  do {                                                                                 \
    if (mindspore::runtime::ProfilerAnalyzer::GetInstance().profiler_enable()) {       \
      start_time = mindspore::runtime::ProfilerAnalyzer::GetInstance().GetTimeStamp(); \
    }                                                                                  \
  } while (0)

#define PROFILER_END(start_time, module, event, op_name, is_inner_event)                                         \
  do {                                                                                                           \
    if (mindspore::runtime::ProfilerAnalyzer::GetInstance().profiler_enable()) {                                 \
      auto end_time = mindspore::runtime::ProfilerAnalyzer::GetInstance().GetTimeStamp();                        \
      auto brief_name = mindspore::runtime::ProfilerAnalyzer::GetInstance().GetBriefName(op_name);               \
      mindspore::runtime::ProfilerAnalyzer::GetInstance().RecordData(                                            \
          std::make_shared<mindspore::runtime::ProfilerData>(module, event, op_name, brief_name, is_inner_event, \
                                                             start_time, end_time));                             \
    }                                                                                                            \
  } while (0)
