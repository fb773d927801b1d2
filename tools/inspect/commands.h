// The msprobe-inspect commands. Each takes argv after its own name and returns the exit code (cli.h); bad usage is
// thrown as UsageError, unreadable input as InputError / JsonError / std::system_error (main turns them into one
// line on stderr and exit 2).
#pragma once
#include <span>
#include <string_view>

namespace msprobe::tools {

struct Command {
  std::string_view name;
  std::string_view summary;  // one line for the command list
  std::string_view help;     // the full --help text
  int (*run)(std::span<char *const> argv);
};

int run_summary(std::span<char *const> argv);
int run_show(std::span<char *const> argv);
int run_verify(std::span<char *const> argv);
int run_repair(std::span<char *const> argv);
int run_compare(std::span<char *const> argv);
int run_convert(std::span<char *const> argv);
int run_replay(std::span<char *const> argv);
int run_report(std::span<char *const> argv);

extern const std::string_view kSummaryHelp, kShowHelp, kVerifyHelp, kRepairHelp, kCompareHelp, kConvertHelp,
    kReplayHelp, kReportHelp;

}  // namespace msprobe::tools
