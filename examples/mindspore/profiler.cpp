// libmindspore_profiler.so of the MindSpore-shaped examples: ProfilerAnalyzer as MindSpore 2.7's
// debug/profiler/profiler.cc behaves (profiler.cc:138-162, 192-200, 242-255, 278-345): off until the first StartStep()
// reads MS_ENABLE_RUNTIME_PROFILER ("1": on); RecordData keeps a record only while on; EndStep moves the step's records
// aside; Clear (also at exit) writes them as RuntimeProfilerJson<ts>.json in the working directory, one Chrome-trace
// event per record named "<Module>::<Event>::<op_name>" (the brief name, as MindSpore's SaveJsonData writes it).
#include "profiler.h"

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <string>

namespace mindspore {
namespace runtime {
namespace {

const char *module_name(ProfilerModule m) {
  static const char *names[] = {"Default", "GraphExecutorPy", "RuntimeFramework", "PynativeFramework",
                                "Kernel",  "Python",          "Capture",          "Other"};
  return names[static_cast<int>(m)];
}

const char *event_name(ProfilerEvent e) {
  switch (e) {
    case ProfilerEvent::kKernelResize: return "KernelResize";
    case ProfilerEvent::kKernelLaunch: return "KernelLaunch";
    case ProfilerEvent::kKernelLaunchInner: return "KernelLaunchInner";
    case ProfilerEvent::kPreLaunch: return "PreLaunch";
    case ProfilerEvent::kPostLaunch: return "PostLaunch";
    case ProfilerEvent::kGraphLaunch: return "GraphLaunch";
    case ProfilerEvent::kMemoryAlloc: return "MemoryAlloc";
    default: return "Default";
  }
}

}  // namespace

ProfilerAnalyzer &ProfilerAnalyzer::GetInstance() noexcept {
  static ProfilerAnalyzer instance{};
  return instance;
}

void ProfilerAnalyzer::Initialize() {
  if (init_) return;
  std::lock_guard<std::mutex> lock(data_mutex_);
  init_ = true;
  const char *env = std::getenv("MS_ENABLE_RUNTIME_PROFILER");
  if (env == nullptr || std::string(env) != "1") return;
  profiler_enable_ = true;
  json_file_name_ = "RuntimeProfilerJson" + std::to_string(GetTimeStamp()) + ".json";
}

bool ProfilerAnalyzer::profiler_enable() const { return profiler_enable_; }

uint64_t ProfilerAnalyzer::GetTimeStamp() const noexcept {
  if (!profiler_enable_) return 0;
  return static_cast<uint64_t>(
      std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::system_clock::now().time_since_epoch())
          .count());
}

std::string ProfilerAnalyzer::GetBriefName(const std::string &scope_name) const {
  auto first_index = scope_name.rfind('/');
  auto second_index = scope_name.rfind("-op");
  if (first_index != std::string::npos && second_index != std::string::npos && first_index + 1 < scope_name.size() &&
      first_index + 1 < second_index)
    return scope_name.substr(first_index + 1, second_index - first_index - 1);
  return scope_name;
}

void ProfilerAnalyzer::RecordData(const ProfilerDataPtr &data) noexcept {
  std::lock_guard<std::mutex> lock(data_mutex_);
  if (profiler_enable_) data_.emplace_back(data);
}

void ProfilerAnalyzer::StartStep() {
  Initialize();
  if (!profiler_enable()) return;
  std::lock_guard<std::mutex> lock(data_mutex_);
  ++step_;
  data_.clear();
}

void ProfilerAnalyzer::EndStep() {
  if (!profiler_enable()) return;
  std::lock_guard<std::mutex> lock(data_mutex_);
  if (data_.empty()) return;
  data_line_.emplace_back(step_, std::move(data_));
  data_.clear();
}

void ProfilerAnalyzer::Clear() noexcept {
  std::lock_guard<std::mutex> lock(data_mutex_);
  if (!init_ || !profiler_enable_ || data_line_.empty()) return;
  if (FILE *f = std::fopen(json_file_name_.c_str(), "w")) {
    std::fputs("[", f);
    bool first = true;
    for (const auto &[step, span] : data_line_)
      for (const auto &d : span) {
        std::fprintf(
            f, "%s{\"name\":\"%s::%s::%s\",\"ph\":\"X\",\"pid\":\"%d\",\"tid\":\"%llu\",\"ts\":%.3f,\"dur\":%.3f}",
            first ? "" : ",", module_name(d->module_), event_name(d->event_), d->op_name_.c_str(), d->pid_,
            (unsigned long long)d->tid_, d->start_time_ / 1000.0, d->dur_time_ / 1000.0);
        first = false;
      }
    std::fputs("]\n", f);
    std::fclose(f);
  }
  data_.clear();
  data_line_.clear();
  init_ = false;
}

}  // namespace runtime
}  // namespace mindspore
