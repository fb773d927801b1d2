#include "tools/inspect/cli.h"

#include <unistd.h>

#include <charconv>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <ctime>

#include "format/dump_json.h"
#include "tools/reader/dump_reader.h"

namespace msprobe::tools {

std::optional<std::string> Args::value(std::string_view name) const {
  auto it = values.find(name);
  if (it == values.end()) return std::nullopt;
  return it->second;
}

double Args::number(std::string_view name, double fallback, double lo, double hi) const {
  auto v = value(name);
  if (!v) return fallback;
  double d = 0;
  const char *b = v->data(), *e = v->data() + v->size();
  auto r = std::from_chars(b, e, d);
  if (r.ec != std::errc() || r.ptr != e || !std::isfinite(d))
    throw UsageError(std::string(name) + " '" + *v + "' is not a number");
  if (d < lo || d > hi)
    throw UsageError(std::string(name) + " '" + *v + "' is out of range [" + format::json_number(lo) + ", " +
                     format::json_number(hi) + "]");
  return d;
}

std::optional<uint64_t> Args::count(std::string_view name) const {
  auto v = value(name);
  if (!v) return std::nullopt;
  uint64_t n = 0;
  const char *b = v->data(), *e = v->data() + v->size();
  auto r = std::from_chars(b, e, n);
  if (r.ec != std::errc() || r.ptr != e || v->empty())
    throw UsageError(std::string(name) + " '" + *v + "' is not a non-negative integer");
  return n;
}

Args parse_args(std::span<char *const> argv, std::span<const OptionSpec> options) {
  Args a;
  bool only_positional = false;
  for (size_t i = 0; i < argv.size(); ++i) {
    std::string_view arg = argv[i];
    if (only_positional || arg.size() < 2 || arg[0] != '-') {
      a.positional.emplace_back(arg);
      continue;
    }
    if (arg == "--") {
      only_positional = true;
      continue;
    }
    std::string_view name = arg, inline_value;
    bool has_inline = false;
    if (const size_t eq = arg.find('='); eq != std::string_view::npos && arg.substr(0, 2) == "--") {
      name = arg.substr(0, eq);
      inline_value = arg.substr(eq + 1);
      has_inline = true;
    }
    const OptionSpec *spec = nullptr;
    for (const OptionSpec &o : options)
      if (o.name == name) spec = &o;
    if (spec == nullptr) throw UsageError("unknown option '" + std::string(name) + "'");
    if (!spec->takes_value) {
      if (has_inline) throw UsageError("option " + std::string(name) + " takes no value");
      a.flags.emplace(name);
      continue;
    }
    if (has_inline) {
      a.values[std::string(name)] = std::string(inline_value);
    } else {
      if (i + 1 >= argv.size()) throw UsageError("option " + std::string(name) + " needs a value");
      a.values[std::string(name)] = argv[++i];
    }
  }
  return a;
}

void expect_positional(const Args &args, size_t n, std::string_view what) {
  if (args.positional.size() < n) throw UsageError("missing argument: expected " + std::string(what));
  if (args.positional.size() > n)
    throw UsageError("unexpected argument '" + args.positional[n] + "' (expected " + std::string(what) + ")");
}

DirAndFlag parse_dir_and_flag(std::span<char *const> argv, std::string_view flag) {
  const OptionSpec options[] = {{flag, false}};
  const Args args = parse_args(argv, options);
  expect_positional(args, 1, "DIR");
  return {args.positional[0], args.flag(flag)};
}

bool say_shortfalls(std::string_view command, std::span<const Shortfall> shortfalls) {
  bool damage = false;
  for (const Shortfall &s : shortfalls) {
    std::fprintf(stderr, "msprobe-inspect %.*s: %s\n", static_cast<int>(command.size()), command.data(),
                 s.text().c_str());
    damage = damage || s.damage();
  }
  return damage;
}

// ---- Progress -------------------------------------------------------------------------------------------------------
Progress::Progress(std::string label, uint64_t total)
    : label_(std::move(label)),
      total_(total),
      enabled_(::isatty(STDERR_FILENO) == 1),
      start_(std::chrono::steady_clock::now()),
      last_(start_) {}

Progress::~Progress() { finish(); }

void Progress::update(uint64_t done) {
  if (!enabled_) return;
  const auto now = std::chrono::steady_clock::now();
  // Quiet for short scans; then at most ten redraws a second.
  if (now - start_ < std::chrono::milliseconds(300) || now - last_ < std::chrono::milliseconds(100)) return;
  last_ = now;
  const double pct = total_ ? 100.0 * static_cast<double>(std::min(done, total_)) / static_cast<double>(total_) : 0;
  const int width = 30, filled = static_cast<int>(pct / 100.0 * width);
  std::string bar(static_cast<size_t>(filled), '#');
  bar.append(static_cast<size_t>(width - filled), '.');
  std::fprintf(stderr, "\r%s [%s] %5.1f%%", label_.c_str(), bar.c_str(), pct);
  std::fflush(stderr);
  shown_ = true;
}

void Progress::finish() {
  if (!shown_) return;
  std::fprintf(stderr, "\r\033[K");
  std::fflush(stderr);
  shown_ = false;
}

// ---- Text -----------------------------------------------------------------------------------------------------------
std::string metric_text(std::optional<double> v) {
  if (!v) return "N/A";
  if (std::isnan(*v)) return "nan";
  if (std::isinf(*v)) return *v > 0 ? "inf" : "-inf";
  return format::json_number(*v);
}

std::string ranges_text(std::span<const uint64_t> v) {
  std::string out;
  for (size_t i = 0; i < v.size();) {
    size_t j = i;
    while (j + 1 < v.size() && v[j + 1] == v[j] + 1) ++j;
    if (!out.empty()) out += ", ";
    out += std::to_string(v[i]);
    if (j > i) out += (j == i + 1 ? ", " : "-") + std::to_string(v[j]);
    i = j + 1;
  }
  return out;
}

std::string timestamp_now() {
  const std::time_t t = std::time(nullptr);
  std::tm tm{};
  localtime_r(&t, &tm);
  char buf[32];
  std::strftime(buf, sizeof buf, "%Y%m%d%H%M%S", &tm);
  return buf;
}

ResultFiles new_result_files(const std::filesystem::path &out_dir, std::string_view result_prefix,
                             std::string_view details_prefix) {
  std::error_code ec;
  std::filesystem::create_directories(out_dir, ec);
  if (!std::filesystem::is_directory(out_dir, ec))
    throw InputError(out_dir.string() + ": cannot create the output folder");
  const std::string ts = timestamp_now();
  auto named = [&](std::string_view prefix, const std::string &suffix) {
    return out_dir / (std::string(prefix) + ts + suffix + ".csv");
  };
  ResultFiles f{named(result_prefix, ""), named(details_prefix, "")};
  for (int i = 1; std::filesystem::exists(f.result, ec) || std::filesystem::exists(f.details, ec); ++i)
    f = {named(result_prefix, "_" + std::to_string(i)), named(details_prefix, "_" + std::to_string(i))};
  return f;
}

}  // namespace msprobe::tools
