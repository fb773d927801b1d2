// show DIR KERNEL: one kernel entry, readable.
#include <algorithm>
#include <cstdio>
#include <optional>
#include <string>
#include <system_error>
#include <vector>

#include "format/dump_json.h"
#include "format/format.h"
#include "format/stack_text.h"
#include "tools/inspect/cli.h"
#include "tools/inspect/commands.h"
#include "tools/reader/dump_reader.h"

namespace msprobe::tools {

const std::string_view kShowHelp = R"(usage: msprobe-inspect show DIR KERNEL [--step N] [--rank R] [--json]

One kernel of a dump: its arguments (tensors with dtype, shape and statistics; scalars and attributes with their
values), its launch fields, its tensor files (with size, or "missing"), and its stack when stack.json records one.

  KERNEL     a full kernel name (Gelu.Default.0), a unique prefix of one (Gelu.Def), or OpType#k: the k-th
             kernel of that op type in launch order, counting from 0 (Gelu#0 is the first Gelu)
  --step N   look in step N (N or stepN; default: every step, the first holding the kernel)
  --rank R   look in rank R (R or rankR; "rank" is the folder of a process whose rank is not known; default:
             every rank folder, in order, the first holding the kernel)
  --json     print {"folder", "kernel", "entry", "stack"} as JSON (NaN written as msprobe does)
)";

namespace ck = format::json_key;

namespace {

// --rank: "3", "rank3", or "rank" (the folder of a process whose rank is not known), as the folders are named.
std::optional<uint32_t> parse_rank_option(const std::string &v) {
  if (const auto rank = parse_rank_text(v)) return *rank;
  throw UsageError("--rank '" + v + "' is not a rank: give its number (3) or its folder's name (rank3, or rank for " +
                   "the folder without a number)");
}

// --step: "1" or "step1".
uint64_t parse_step_option(const std::string &v) {
  if (const auto step = parse_step_text(v)) return *step;
  throw UsageError("--step '" + v + "' is not a step: give its number (1) or its folder's name (step1)");
}

// The folders --step and --rank allow, in dump order; InputError naming what the dump has when there is none.
std::vector<const RankDir *> candidate_dirs(const std::vector<RankDir> &dirs, const Args &args) {
  const std::optional<std::string> step_text = args.value("--step"), rank_text = args.value("--rank");
  std::optional<uint64_t> step;
  std::optional<std::optional<uint32_t>> rank;  // engaged: --rank given; its value nullopt for the folder "rank"
  if (step_text) step = parse_step_option(*step_text);
  if (rank_text) rank.emplace(parse_rank_option(*rank_text));
  std::vector<const RankDir *> out;
  for (const RankDir &d : dirs)
    if ((!step || d.step == step) && (!rank || (d.rank_named && d.rank == *rank))) out.push_back(&d);
  if (!out.empty()) return out;
  std::string what;
  if (step) what += " step " + std::to_string(*step);
  if (rank) what += " " + format::rank_dir_name(*rank);
  std::string have;
  for (const RankDir &d : dirs) have += (have.empty() ? "" : ", ") + d.label();
  throw InputError("no folder for" + what + " (the dump has: " + have + ")");
}

std::string value_text(const Json &v) {
  if (v.is_string()) return v.get<std::string>();
  return to_json_text(v);
}

struct Printer {
  const RankDir &dir;
  const DumpHeaderRead &header;
  std::vector<MappingRow> mapping;

  std::string file_line(const std::string &data_name) const {
    const fs::path p = dir.path / format::kTensorDir / data_name;
    std::error_code ec;
    std::string s = "file " + std::string(format::kTensorDir) + "/" + data_name;
    const uint64_t size = fs::file_size(p, ec);
    s += ec ? " (missing)" : " (" + human_bytes(size) + ")";
    for (const MappingRow &r : mapping)
      if (r.new_name == data_name) s += "\n            long name: " + r.original_name;
    return s;
  }

  void print_arg(const Json &v, const std::string &slot, int depth) const {
    const std::string pad(static_cast<size_t>(4 + 2 * depth), ' ');
    if (v.is_null()) {
      std::printf("%s%-4s absent\n", pad.c_str(), slot.c_str());
      return;
    }
    if (auto seq = v.is_array() && !v.empty() ? read_value_arg(v) : std::nullopt) {
      // A sequence of scalar leaves (an int array...) on one line, as the old single-leaf form printed; one whose
      // members differ in type (an aclScalarList may mix them) names each: "[int, float, bool] [2, 0.25, true]".
      std::string type = seq->type + "[]";
      if (std::any_of(seq->types.begin(), seq->types.end(), [&](const std::string &t) { return t != seq->type; })) {
        type = "[";
        for (size_t i = 0; i < seq->types.size(); ++i) type += (i ? ", " : "") + seq->types[i];
        type += "]";
      }
      std::printf("%s%-4s %s %s\n", pad.c_str(), slot.c_str(), type.c_str(), to_json_text(Json(seq->values)).c_str());
      return;
    }
    if (v.is_array()) {
      std::printf("%s%-4s list of %zu\n", pad.c_str(), slot.c_str(), v.size());
      for (size_t i = 0; i < v.size(); ++i) print_arg(v[i], slot + "." + std::to_string(i), depth + 1);
      return;
    }
    if (!v.is_object()) {
      std::printf("%s%-4s %s\n", pad.c_str(), slot.c_str(), value_text(v).c_str());
      return;
    }
    auto get = [&](std::string_view k) -> const Json * {
      auto it = v.find(std::string(k));
      return it == v.end() ? nullptr : &*it;
    };
    const Json *type = get(ck::kType);
    const std::string type_text = type ? value_text(*type) : "?";
    if (get(ck::kDtype) && get(ck::kShape)) {
      std::printf("%s%-4s %s %s %s\n", pad.c_str(), slot.c_str(), type_text.c_str(),
                  value_text(*get(ck::kDtype)).c_str(), to_json_text(*get(ck::kShape)).c_str());
      std::string stats;
      for (std::string_view k : {ck::kMax, ck::kMin, ck::kMean, ck::kNorm}) {
        const Json *s = get(k);
        stats += std::string(k) + " " + (s ? to_json_text(*s) : "-") + "  ";
      }
      std::printf("%s     %s\n", pad.c_str(), stats.c_str());
      std::string extra;
      for (const auto &[k, x] : v.items()) {
        if (k == ck::kType || k == ck::kDtype || k == ck::kShape || k == ck::kMax || k == ck::kMin || k == ck::kMean ||
            k == ck::kNorm || k == ck::kDataName)
          continue;
        extra += k + " " + value_text(x) + "  ";
      }
      if (!extra.empty()) std::printf("%s     %s\n", pad.c_str(), extra.c_str());
      if (const Json *dn = get(ck::kDataName); dn && dn->is_string())
        std::printf("%s     %s\n", pad.c_str(), file_line(dn->get<std::string>()).c_str());
      return;
    }
    const Json *value = get(ck::kValue);
    std::printf("%s%-4s %s %s\n", pad.c_str(), slot.c_str(), type_text.c_str(),
                value ? to_json_text(*value).c_str() : to_json_text(v).c_str());
  }

  void print_args(const Json *args, std::string_view title) const {
    if (args == nullptr) return;
    std::printf("  %.*s\n", static_cast<int>(title.size()), title.data());
    if (args->is_array()) {
      if (args->empty()) std::printf("    (none)\n");
      for (size_t i = 0; i < args->size(); ++i) print_arg((*args)[i], std::to_string(i), 0);
    } else if (args->is_object()) {
      for (const auto &[k, v] : args->items()) print_arg(v, k, 0);
    }
  }
};

struct ShowOptions {
  std::string dir, selector;
  bool json = false;
  Args args;  // --step and --rank, read once the dump is found (a dump that is missing is the error to report first)
};

ShowOptions parse_options(std::span<char *const> argv) {
  static const OptionSpec kOptions[] = {{"--json", false}, {"--step", true}, {"--rank", true}};
  Args args = parse_args(argv, kOptions);
  expect_positional(args, 2, "DIR KERNEL");
  const bool json = args.flag("--json");
  return {args.positional[0], args.positional[1], json, std::move(args)};
}

// The kernel to show, with all that is printed about it.
struct Shown {
  RankDir dir;
  DumpHeaderRead header;
  EntryRead kernel;
  std::optional<std::vector<std::string>> stack;
};

// The kernel `selector` names in `dir`; a folder read only in part (a run still writing it, a killed run) is added to
// `partial`, and its error says where the rest is.
KernelSelection select_in(const RankDir &dir, const std::string &selector, std::vector<Shortfall> &partial) {
  std::vector<KernelRef> refs;
  DumpCallbacks names;
  names.on_kernel = [&](EntryRead &&k) {
    refs.push_back({std::move(k.name), k.launch_index.value_or(UINT64_MAX)});
    return true;
  };
  const std::optional<Shortfall> s = read_dump_json_partial(dir, names);
  KernelSelection sel = select_kernel(refs, selector);
  if (s) {
    partial.push_back(*s);
    if (!sel.name) sel.error += " among the " + std::to_string(s->kernels) + " read (" + s->what() + ")";
  }
  return sel;
}

// The first folder (in dump order, among those --step / --rank allow) in which `selector` names a kernel: a process
// may write a rank's kernels in two folders (those before HCCL knew its rank in "rank", the rest in rank0).
std::pair<const RankDir *, std::string> selected(const std::vector<const RankDir *> &dirs, const std::string &selector,
                                                 std::vector<Shortfall> &partial) {
  std::optional<std::string> first_error;
  for (const RankDir *dir : dirs) {
    const KernelSelection sel = select_in(*dir, selector, partial);
    if (sel.name) return {dir, *sel.name};
    std::string msg = dir->label() + ": " + sel.error;
    for (const std::string &c : sel.candidates) msg += "\n  " + c;
    if (sel.candidates.size() < 10 && !sel.candidates.empty()) msg += "\n(give more of the name)";
    if (!sel.candidates.empty()) throw InputError(msg);  // ambiguous: the user must say more
    if (!first_error) first_error = msg;
  }
  if (dirs.size() > 1) {
    std::string looked;
    for (const RankDir *d : dirs) looked += (looked.empty() ? "" : ", ") + d->label();
    *first_error += "\n(none in any of the " + std::to_string(dirs.size()) + " folders looked in: " + looked + ")";
  }
  throw InputError(*first_error);
}

Shown find_kernel(const ShowOptions &o) {
  const std::vector<RankDir> dirs = find_rank_dirs(o.dir);
  std::vector<Shortfall> partial;
  const auto [dir, name] = selected(candidate_dirs(dirs, o.args), o.selector, partial);
  // Only the shown folder's state matters here (the others were looked in and passed over).
  for (const Shortfall &p : partial)
    if (p.folder == dir->label()) say_shortfalls("show", std::span(&p, 1));
  Shown s;
  s.dir = *dir;
  std::optional<EntryRead> found;
  DumpCallbacks cb;
  cb.on_header = [&](const DumpHeaderRead &h) { s.header = h; };
  cb.on_kernel = [&](EntryRead &&k) {
    if (k.name != name) return true;
    found = std::move(k);
    return false;
  };
  read_dump_json_partial(s.dir, cb);
  if (!found) throw InputError(s.dir.label() + ": kernel " + name + " vanished while reading");
  s.kernel = std::move(*found);
  s.stack = find_stack(s.dir, s.kernel.name);
  return s;
}

void print_json(const Shown &s) {
  std::string o = "{\"folder\": ";
  format::append_json_string(o, s.dir.label());
  o += ", \"kernel\": ";
  format::append_json_string(o, s.kernel.name);
  o += ", \"entry\": " + to_json_text(s.kernel.entry) + ", \"stack\": ";
  if (s.stack) {
    Json frames = Json::array();
    for (const std::string &f : *s.stack) frames.push_back(f);
    o += to_json_text(frames);
  } else {
    o += "null";
  }
  o += "}\n";
  std::fwrite(o.data(), 1, o.size(), stdout);
}

void print_text(const Shown &s) {
  const RankDir &dir = s.dir;
  Printer p{dir, s.header, read_mapping_csv(dir.path / format::kTensorDir)};
  std::printf("%s  (%s, %s)\n", s.kernel.name.c_str(), dir.label().c_str(), s.header.task.c_str());
  std::string fields;
  for (const auto &[k, v] : s.kernel.entry.items()) {
    if (k == ck::kInputArgs || k == "input" || k == "input_kwargs" || k == ck::kOutput) continue;
    if (k == ck::kLaunch && v.is_object()) {
      // The launch object's members on the same line, as dumps before it held them ("launch_index 19   task_id ..").
      for (const auto &[lk, lv] : v.items())
        fields += (lk == ck::kIndex ? std::string(ck::kLegacyLaunchIndex) : lk) + " " + value_text(lv) + "   ";
      continue;
    }
    fields += k + " " + value_text(v) + "   ";
  }
  if (!fields.empty()) std::printf("  %s\n", fields.c_str());
  auto member = [&](std::string_view k) -> const Json * {
    auto it = s.kernel.entry.find(std::string(k));
    return it == s.kernel.entry.end() ? nullptr : &*it;
  };
  p.print_args(member(ck::kInputArgs) ? member(ck::kInputArgs) : member("input"), "input_args");
  p.print_args(member("input_kwargs"), "input_kwargs");
  p.print_args(member(ck::kOutput), "output");
  if (!s.stack) {
    std::printf("  stack: not recorded\n");
  } else {
    std::printf("  stack (%zu frames)\n%s", s.stack->size(), format::stack_text(*s.stack, "    ").c_str());
  }
}

}  // namespace

int run_show(std::span<char *const> argv) {
  const ShowOptions options = parse_options(argv);
  const Shown s = find_kernel(options);
  if (options.json)
    print_json(s);
  else
    print_text(s);
  return kExitOk;
}

}  // namespace msprobe::tools
