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
int run_first_nan(std::span<char *const> argv);
int run_first_diff(std::span<char *const> argv);
int run_report(std::span<char *const> argv);

extern const std::string_view kSummaryHelp, kShowHelp, kVerifyHelp, kRepairHelp, kCompareHelp, kConvertHelp,
    kReplayHelp, kFirstNanHelp, kFirstDiffHelp, kReportHelp;

// The whole program after main(): the command named by argv[1] (msprobe-inspect and msprobe-inspect-mpi share it).
// Errors are printed by process 0 of the transport only (transport.h).
int inspect_main(int argc, char **argv);

}  // namespace msprobe::tools
