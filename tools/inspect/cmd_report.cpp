// report ROOT [--against B] -o FILE: the dump drawn as one self-contained HTML file (report.h).
#include <cstdio>
#include <optional>
#include <string>
#include <system_error>

#include "format/io.h"
#include "tools/inspect/cli.h"
#include "tools/inspect/commands.h"
#include "tools/inspect/report.h"
#include "tools/inspect/report_marks.h"
#include "tools/reader/dump_reader.h"

namespace msprobe::tools {

const std::string_view kReportHelp =
    R"(usage: msprobe-inspect report ROOT [--against B] [-o FILE] [--atol X] [--cos X] [--stat-rtol X]

Writes one HTML file that shows the dump: it opens from the disk in any browser, offline (Chart.js and the data are
inside the file; nothing is fetched).

  - an overview: steps x ranks, each with its kernel count and how many kernels' outputs hold NaN or Inf;
  - for a rank and a step (or all its steps): the outputs' Norm, Max and Min of every kernel over launch order (log
    scale), NaN and Inf marked, the kernel's name on hover, its tensors and stack (stack.json) on click;
  - the first NaN: the first kernel whose outputs hold NaN/Inf from finite inputs, with its stack, its tensors'
    statistics and the route it spread by;
  - with --against B: each kernel's relative difference from the same kernel of B over launch order (the largest of
    its outputs' Max/Min/Mean/Norm relative differences), the first divergence (compare's verdicts) marked, and the
    kernels that differ most, with their stacks;
  - a flight record's kernels and its trigger (MSPROBE_TASK=flight).

  ROOT, B         dump roots (step*/rank*/), step folders or rank folders
  -o, --out FILE  the report (default: report.html)
  --atol X, --cos X, --stat-rtol X
                  compare's thresholds for the first divergence (defaults 0.0001, 0.99, 0.0001)

Large dumps stay usable: the page draws at most a few points per pixel column, keeping each column's smallest and
largest value, and every NaN/Inf kernel is marked on its own.
)";

namespace {

// The page, written whole or not at all; an error names the file asked for, not the temporary it is written through.
void write_report(const fs::path &out, const std::string &html) {
  const fs::path folder = out.has_parent_path() ? out.parent_path() : fs::path(".");
  std::error_code ec;
  if (!fs::is_directory(folder, ec))
    throw InputError(out.string() + ": cannot be written: its folder " + folder.string() + " does not exist");
  try {
    format::write_file_atomic(out, html);
  } catch (const std::system_error &e) {
    throw InputError(out.string() + ": cannot be written: " + e.code().message());
  }
}

}  // namespace

int run_report(std::span<char *const> argv) {
  static const OptionSpec kOptions[] = {{"--against", true}, {"-o", true},    {"--out", true},
                                        {"--atol", true},    {"--cos", true}, {"--stat-rtol", true}};
  const Args args = parse_args(argv, kOptions);
  expect_positional(args, 1, "ROOT (a dump)");
  if (args.value("-o") && args.value("--out")) throw UsageError("give -o or --out, not both");
  const fs::path root = args.positional[0];
  const std::optional<fs::path> against = args.value("--against");
  const fs::path out = args.value("-o").value_or(args.value("--out").value_or("report.html"));
  Thresholds th;
  th.atol = args.number("--atol", th.atol, 0, 1e308);
  th.cosine = args.number("--cos", th.cosine, -1, 1);
  th.stat_rtol = args.number("--stat-rtol", th.stat_rtol, 0, 1e308);

  report::Report r = report::read_report(root, against, th);
  r.first_nan = report::first_nan(root);
  if (against) r.first_diff = report::first_diff(root, *against, th);
  const std::string html = report::page_html(r);
  write_report(out, html);

  uint64_t kernels = 0, nan = 0, inf = 0;
  for (const report::FolderData &f : r.folders) kernels += f.kernels.size(), nan += f.nan, inf += f.inf;
  std::printf("report: %zu folder(s), %llu kernels; outputs with NaN in %llu, with Inf in %llu\n", r.folders.size(),
              static_cast<unsigned long long>(kernels), static_cast<unsigned long long>(nan),
              static_cast<unsigned long long>(inf));
  auto mark_line = [](const char *what, const std::optional<report::Mark> &m) {
    if (!m) return;
    std::string where = m->at.step ? "step" + std::to_string(*m->at.step) + "/" + m->at.rank : m->at.rank;
    std::printf("%s: %s %s (launch_index %s)\n", what, where.c_str(), m->at.kernel.c_str(),
                m->at.launch_index ? std::to_string(*m->at.launch_index).c_str() : "?");
  };
  mark_line("first NaN", r.first_nan);
  if (against) {
    std::printf("against: %s\n", against->string().c_str());
    if (r.first_diff)
      mark_line("first divergence", r.first_diff);
    else
      std::printf("first divergence: none (every matched kernel passes)\n");
  }
  if (!r.flight.empty()) std::printf("flight records: %zu\n", r.flight.size());
  for (const std::string &p : r.partial) std::printf("read in part: %s\n", p.c_str());
  std::printf("written: %s (%s)\n", out.string().c_str(), human_bytes(html.size()).c_str());
  return r.damaged ? kExitFindings : kExitOk;
}

}  // namespace msprobe::tools
