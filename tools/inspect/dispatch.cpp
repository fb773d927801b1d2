// msprobe-inspect's commands and their dispatch, shared by msprobe-inspect (main.cpp) and msprobe-inspect-mpi
// (tools/mpi/main_mpi.cpp); docs/inspect.md.
#include <cstdio>
#include <cstring>
#include <exception>
#include <string>
#include <system_error>

#include "format/format.h"
#include "tools/inspect/cli.h"
#include "tools/inspect/commands.h"
#include "tools/inspect/transport.h"
#include "tools/reader/dump_reader.h"
#include "tools/reader/json_reader.h"

namespace {
using namespace msprobe::tools;

const Command kCommands[] = {
    {"summary", "what a dump holds: steps, ranks, kernels per op type, files, first NaN/Inf per rank", kSummaryHelp,
     run_summary},
    {"show", "one kernel: arguments, statistics, files, stack", kShowHelp, run_show},
    {"verify", "check that every file, shape, dtype, statistic and CRC matches dump.json", kVerifyHelp, run_verify},
    {"repair", "rebuild a dump cut short by a crash (dump.json is the truth)", kRepairHelp, run_repair},
    {"compare", "match the kernels of two dumps and find where they first diverge", kCompareHelp, run_compare},
    {"convert", "turn .bin tensor files into .npy", kConvertHelp, run_convert},
    {"replay", "re-run kernels on their dumped inputs with CPU references (msprobe's pre-check)", kReplayHelp,
     run_replay},
    {"first-nan", "where NaN/Inf began across ranks and steps, and how it spread (mpirun-able)", kFirstNanHelp,
     run_first_nan},
    {"first-diff", "where two runs first part across ranks, and how it spread (mpirun-able)", kFirstDiffHelp,
     run_first_diff},
    {"report", "one HTML file that shows the dump: overview, values over launch order, first NaN, differences",
     kReportHelp, run_report},
};

void print_usage(FILE *out) {
  std::fprintf(out,
               "usage: msprobe-inspect COMMAND [ARGS...]\n"
               "       msprobe-inspect COMMAND --help\n"
               "       msprobe-inspect --version\n\n"
               "Reads the step{N}/rank{R}/ dumps written by msprobe-shim. DIR may be the dump root, one step{N}\n"
               "folder or one rank folder.\n\ncommands:\n");
  for (const Command &c : kCommands)
    std::fprintf(out, "  %-10s %.*s\n", std::string(c.name).c_str(), static_cast<int>(c.summary.size()),
                 c.summary.data());
  std::fprintf(out,
               "\nexit status: 0 done, 1 the command found problems (verify, repair, convert, replay, first-nan,\n"
               "first-diff), 2 bad usage or "
               "unreadable input\n");
}

}  // namespace

namespace msprobe::tools {

int inspect_main(int argc, char **argv) {
  if (argc < 2) {
    print_usage(stderr);
    return kExitUsage;
  }
  const std::string_view cmd = argv[1];
  if (cmd == "--version" || cmd == "version") {
    std::printf("msprobe-inspect %s\n", MSPROBE_VERSION);
    return kExitOk;
  }
  if (cmd == "--help" || cmd == "-h" || cmd == "help") {
    if (cmd == "help" && argc > 2) {
      for (const Command &c : kCommands)
        if (c.name == argv[2]) {
          std::fwrite(c.help.data(), 1, c.help.size(), stdout);
          return kExitOk;
        }
    }
    print_usage(stdout);
    return kExitOk;
  }
  for (const Command &c : kCommands) {
    if (c.name != cmd) continue;
    for (int i = 2; i < argc; ++i) {
      if (std::strcmp(argv[i], "--") == 0) break;
      if (std::strcmp(argv[i], "--help") == 0 || std::strcmp(argv[i], "-h") == 0) {
        std::fwrite(c.help.data(), 1, c.help.size(), stdout);
        return kExitOk;
      }
    }
    const std::string prefix = "msprobe-inspect " + std::string(c.name) + ": ";
    // Under MPI every process meets the same bad usage; one says so.
    auto say = [](const std::string &message) {
      if (transport().rank() == 0) std::fputs(message.c_str(), stderr);
    };
    try {
      return c.run(std::span<char *const>(argv + 2, static_cast<size_t>(argc - 2)));
    } catch (const UsageError &e) {
      say(prefix + "error: " + e.what() + "\n(see 'msprobe-inspect " + std::string(c.name) + " --help')\n");
    } catch (const InputError &e) {
      say(prefix + "error: " + e.what() + "\n");
    } catch (const JsonError &e) {
      const std::string what = e.what();
      const bool journal = what.find(msprobe::format::kDumpJson) != std::string::npos ||
                           what.find(msprobe::format::kConstructJson) != std::string::npos;
      say(prefix + "error: invalid JSON: " + what +
          (journal ? "\n(if a crash cut it short, 'msprobe-inspect repair' rebuilds it)" : "") + "\n");
    } catch (const std::system_error &e) {
      say(prefix + "error: " + e.what() + "\n");
    } catch (const std::exception &e) {
      say(prefix + "error: " + e.what() + "\n");
    }
    return kExitUsage;
  }
  std::fprintf(stderr, "msprobe-inspect: unknown command '%s'\n\n", argv[1]);
  print_usage(stderr);
  return kExitUsage;
}

}  // namespace msprobe::tools
