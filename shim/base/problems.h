// What the shim met and went on from, by kind: the first of each kind is said on stderr with what it costs the dump,
// every one is counted, and the exit line lists the counts (Session::shutdown). Nothing the shim catches is
// swallowed without a word: every catch in a hook or in the capture body reports here.
//
// Safe anywhere a hook runs: no allocation, one relaxed atomic add per report, the text through log.h.
#pragma once
#include <cstdint>
#include <string>

namespace msprobe::shim {

enum class Problem : uint8_t {
  KernelNotRecorded,       // describing a launch, deciding it or handing it over threw: the kernel is missing
  StackNotTaken,           // a launch's call stack could not be taken: the kernel is named Default, without a stack
  LaunchNotTracked,        // a launch's own bookkeeping failed (aclnn phase 2): passed through, not captured
  ArgumentsNotKept,        // phase 1's arguments could not be kept: its kernel is captured without arguments
  ArgumentsNotFound,       // no header declares an aclnn op and the header-less rule could not place its arguments
  DescriptorNotKept,       // a tensor, scalar, list, allocation, attribute or binary was not recorded when made
  CommunicatorNotKept,     // an HCCL communicator or call number was not recorded: its kernels lack "comm"
  GraphNotFollowed,        // a model load, execution or graph capture could not be followed
  FrameworkRecordNotRead,  // a framework's record of a launch (MindSpore's profiler) could not be read
  Count_
};

// Counts `kind`; the first time, says it with `detail` (the exception's text, or what failed).
void report_problem(Problem kind, const char *detail) noexcept;
uint64_t problem_count(Problem kind) noexcept;
// "3 kernels not recorded, 1 descriptor not kept" (empty when nothing happened): the exit line's part.
std::string problem_summary();

}  // namespace msprobe::shim
