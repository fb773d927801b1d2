#include "tools/reader/repair.h"

#include <fcntl.h>
#include <sys/file.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <optional>
#include <system_error>

#include "format/dump_json.h"
#include "format/format.h"
#include "format/io.h"
#include "tools/reader/dump_reader.h"
#include "tools/reader/json_reader.h"

namespace msprobe::tools {
namespace fs = std::filesystem;

namespace {

// Entries in a valid file; throws JsonError when it is not one.
uint64_t count_entries(std::string_view text, JournalKind kind) {
  uint64_t n = 0;
  if (kind == JournalKind::DumpJson) {
    DumpCallbacks cb;
    cb.on_kernel = [&](EntryRead &&) {
      ++n;
      return true;
    };
    stream_dump_json(text, cb);
    return n;
  }
  JsonStream s(text);
  s.members([&](std::string &&) {
    ++n;
    s.skip();
  });
  s.finish();
  return n;
}

// The keys of a valid JSON object, in order. Throws JsonError.
std::vector<std::string> object_keys(std::string_view text) {
  std::vector<std::string> keys;
  JsonStream s(text);
  s.members([&](std::string &&key) {
    keys.push_back(std::move(key));
    s.skip();
  });
  s.finish();
  return keys;
}

std::string plural(uint64_t n, const char *one, const char *many) {
  return std::to_string(n) + " " + (n == 1 ? one : many);
}

std::optional<std::string> read_if_exists(const fs::path &path) {
  std::error_code ec;
  if (!fs::is_regular_file(path, ec)) return std::nullopt;
  MappedFile f(path);
  return std::string(f.text());
}

// Keeps the original as FILE.bak (when there is one), then replaces the file atomically. Returns the note for
// the message.
std::string replace_keeping_backup(const fs::path &path, const std::optional<std::string> &original,
                                   std::string_view text) {
  std::string note;
  if (original) {
    const fs::path bak = free_backup_name(path);
    format::write_file_atomic(bak, *original);
    note = ", original kept as " + bak.filename().string();
  }
  format::write_file_atomic(path, text);
  return note;
}

bool is_temporary_of_ours(std::string_view name) {
  for (std::string_view f : {format::kDumpJson, format::kConstructJson, format::kStackJson}) {
    if (name.size() > f.size() + 5 && name.substr(0, f.size()) == f && name.substr(f.size(), 5) == ".tmp.") return true;
  }
  return false;
}

bool dir_is_empty(const fs::path &dir) {
  std::error_code ec;
  return fs::is_directory(dir, ec) && fs::directory_iterator(dir, ec) == fs::directory_iterator();
}

// A folder the collector had begun (made the folder, opened its journals) when the run was killed, before any
// kernel went into it: nothing but journals without a complete member and an empty tensor folder.
bool holds_no_kernel(const fs::path &dir, const std::optional<std::string> &dump) {
  if (dump && dump->find('\n') != std::string::npos) return false;  // the header is there: repairable
  std::error_code ec;
  for (fs::directory_iterator it(dir, ec), end; !ec && it != end; it.increment(ec)) {
    const std::string name = it->path().filename().string();
    if (name == format::kDumpJson || is_temporary_of_ours(name)) continue;
    if (name == format::kTensorDir && dir_is_empty(it->path())) continue;
    if (name == format::kConstructJson || name == format::kStackJson) {
      const std::optional<std::string> text = read_if_exists(it->path());
      if (!text) return false;
      if (name == format::kStackJson) {
        if (*text != "{\n}\n" && *text != "{}\n") return false;
        continue;
      }
      const JournalRepair c = repair_journal(*text, JournalKind::ConstructJson);
      if (c.state != JournalRepair::State::Unrecoverable && c.entries == 0) continue;
      if (text->find('\n') == std::string::npos) continue;  // cut in its header line: nothing after it
      return false;
    }
    return false;
  }
  return !ec;
}

void remove_folder_and_empty_step(const fs::path &dir) {
  fs::remove_all(dir);
  const fs::path step = dir.parent_path();
  if (parse_step_dir(step.filename().string()) && dir_is_empty(step)) fs::remove(step);
}

}  // namespace

fs::path free_backup_name(const fs::path &path) {
  fs::path bak = path;
  bak += ".bak";
  std::error_code ec;
  for (int i = 1; fs::exists(bak, ec); ++i) {
    bak = path;
    bak += ".bak." + std::to_string(i);
  }
  return bak;
}

JournalRepair repair_journal(std::string_view content, JournalKind kind) {
  JournalRepair r;
  const std::string_view suffix =
      kind == JournalKind::DumpJson ? format::kDumpJsonSuffix : format::kConstructJsonSuffix;
  try {
    r.entries = count_entries(content, kind);
    r.state = JournalRepair::State::Intact;
    return r;
  } catch (const JsonError &) {
  }
  std::optional<std::string> fixed = format::repair_journal_text(content, suffix);
  if (!fixed) {
    r.state = JournalRepair::State::Unrecoverable;
    r.error = content.empty() ? "the file is empty: nothing to recover"
                              : "not even the header line is complete: nothing to recover";
    return r;
  }
  try {
    r.entries = count_entries(*fixed, kind);
  } catch (const JsonError &e) {
    r.state = JournalRepair::State::Unrecoverable;
    r.error = std::string("not a journal the collector wrote (damaged inside, not cut at the end): ") + e.what();
    return r;
  }
  r.state = JournalRepair::State::Repaired;
  const size_t kept = fixed->size() - suffix.size();
  r.dropped_bytes = content.size() > kept ? content.size() - kept : 0;
  r.text = std::move(*fixed);
  return r;
}

std::vector<std::string> dump_kernel_names(std::string_view dump_json) {
  std::vector<std::string> names;
  DumpCallbacks cb;
  cb.on_kernel = [&](EntryRead &&k) {
    names.push_back(std::move(k.name));
    return true;
  };
  stream_dump_json(dump_json, cb);
  return names;
}

std::unordered_set<std::string> dump_data_names(std::string_view dump_json) {
  std::unordered_set<std::string> out;
  DumpCallbacks cb;
  cb.on_record = [&](KernelRecord &&k) {
    for (TensorInfo &t : k.tensors)
      if (t.data_name) out.insert(std::move(*t.data_name));
    return true;
  };
  stream_dump_json(dump_json, cb);
  return out;
}

std::string construct_json_for(std::span<const std::string> names) {
  std::string s(format::kConstructJsonPrefix);
  for (size_t i = 0; i < names.size(); ++i) {
    s += i ? ",\n" : "\n";
    format::append_json_string(s, names[i]);
    s += ": null";
  }
  s += format::kConstructJsonSuffix;
  return s;
}

ConstructReconcile reconcile_construct(const std::string_view *content, std::span<const std::string> dump_names) {
  ConstructReconcile out;
  std::vector<std::string> keys;
  std::string why;
  if (!content) {
    why = "it was missing";
  } else {
    const JournalRepair r = repair_journal(*content, JournalKind::ConstructJson);
    switch (r.state) {
      case JournalRepair::State::Intact: keys = object_keys(*content); break;
      case JournalRepair::State::Repaired:
        keys = object_keys(r.text);
        why = r.dropped_bytes ? "it was cut mid-entry" : "it was not closed";
        break;
      case JournalRepair::State::Unrecoverable: why = "it could not be read: " + r.error; break;
    }
  }
  const bool same = std::equal(keys.begin(), keys.end(), dump_names.begin(), dump_names.end());
  if (content && why.empty() && same) return out;  // agrees: left as it is
  if (!keys.empty() || (content && why.empty())) {
    const std::unordered_set<std::string> in_dump(dump_names.begin(), dump_names.end());
    const std::unordered_set<std::string> in_construct(keys.begin(), keys.end());
    const auto lacked = std::count_if(dump_names.begin(), dump_names.end(),
                                      [&](const std::string &n) { return !in_construct.count(n); });
    const auto extra = std::count_if(keys.begin(), keys.end(), [&](const std::string &n) { return !in_dump.count(n); });
    auto add = [&](const std::string &s) { why += (why.empty() ? "" : "; ") + s; };
    if (lacked) add("it lacked " + plural(static_cast<uint64_t>(lacked), "kernel", "kernels") + " of dump.json");
    if (extra) add("it named " + plural(static_cast<uint64_t>(extra), "kernel", "kernels") + " dump.json lacks");
    if (!same && !lacked && !extra)
      add(keys.size() == dump_names.size() ? "its kernels were in another order" : "it named kernels twice");
  }
  out.rebuilt = true;
  out.why = std::move(why);
  out.text = construct_json_for(dump_names);
  return out;
}

StackReconcile reconcile_stack(std::string_view content, const std::unordered_set<std::string> &dump_names) {
  StackReconcile out;
  Json j;
  try {
    j = parse_json(content);
  } catch (const JsonError &) {
    out.changed = out.was_invalid = true;
    out.text = "{}\n";
    return out;
  }
  if (!j.is_object()) return out;  // not the collector's layout: left alone (verify only asks for valid JSON)
  // Grouped, as the collector writes it: {"0": [[kernels], [frames]], ...}.
  std::vector<std::pair<std::vector<std::string>, const Json *>> groups;
  for (auto it = j.begin(); it != j.end(); ++it) {
    const Json &v = it.value();
    if (!v.is_array() || v.size() != 2 || !v[0].is_array() || !v[1].is_array()) return out;
    std::vector<std::string> kept;
    for (const Json &n : v[0]) {
      if (!n.is_string()) return out;
      if (dump_names.count(n.get<std::string>()))
        kept.push_back(n.get<std::string>());
      else
        ++out.dropped_names;
    }
    groups.emplace_back(std::move(kept), &v[1]);
  }
  if (out.dropped_names == 0) return out;
  out.changed = true;
  std::string s = "{";
  size_t g = 0;
  for (const auto &[names, frames] : groups) {
    if (names.empty()) continue;
    s += g ? ",\n" : "\n";
    format::append_json_string(s, std::to_string(g++));
    s += ": [[";
    for (size_t i = 0; i < names.size(); ++i) {
      if (i) s += ", ";
      format::append_json_string(s, names[i]);
    }
    s += "], [";
    for (size_t i = 0; i < frames->size(); ++i) {
      if (i) s += ", ";
      const Json &f = (*frames)[i];
      if (f.is_string())
        format::append_json_string(s, f.get<std::string>());
      else
        s += to_json_text(f);
    }
    s += "]]";
  }
  s += "\n}\n";
  out.text = std::move(s);
  return out;
}

MappingReconcile reconcile_mapping(std::string_view content, const std::unordered_set<std::string> &data_names) {
  MappingReconcile out;
  for (size_t pos = 0; pos < content.size();) {
    const size_t nl = content.find('\n', pos);
    if (nl == std::string_view::npos) {  // a row cut short: the collector ends every row with '\n'
      ++out.dropped_rows;
      break;
    }
    std::string_view line = content.substr(pos, nl - pos);
    pos = nl + 1;
    std::string_view row = line;
    if (!row.empty() && row.back() == '\r') row.remove_suffix(1);
    if (row.empty()) continue;
    const size_t comma = row.find(',');
    if (comma == std::string_view::npos || comma + 1 == row.size() ||
        !data_names.count(std::string(row.substr(0, comma)))) {
      ++out.dropped_rows;
      continue;
    }
    out.text.append(line);
    out.text += '\n';
  }
  out.changed = out.dropped_rows != 0;
  return out;
}

namespace {

// Moves `file` into the folder's kSetAsideDir under a name not taken there; returns that name. dry_run: the name only.
std::string set_aside(const fs::path &dir, const fs::path &file, bool dry_run) {
  const fs::path aside = dir / kSetAsideDir;
  fs::path to = aside / file.filename();
  std::error_code ec;
  for (int i = 1; fs::exists(to, ec); ++i) to = aside / (file.filename().string() + "." + std::to_string(i));
  if (!dry_run) {
    fs::create_directories(aside);
    fs::rename(file, to);
  }
  return to.filename().string();
}

// Temporaries of a rewrite the kill cut short (stack.json's, or a killed repair's): set aside, they may hold stacks
// the last whole stack.json lacks.
void set_aside_temporaries(const fs::path &dir, bool dry_run, FolderRepair &out) {
  std::vector<fs::path> tmps;
  std::error_code ec;
  for (fs::directory_iterator it(dir, ec), end; !ec && it != end; it.increment(ec))
    if (is_temporary_of_ours(it->path().filename().string())) tmps.push_back(it->path());
  std::sort(tmps.begin(), tmps.end());
  for (const fs::path &t : tmps) {
    const std::string to = set_aside(dir, t, dry_run);
    ++out.set_aside;
    out.lines.push_back(t.filename().string() + ": temporary of a rewrite cut short, " +
                        (dry_run ? "would be moved to " : "moved to ") + std::string(kSetAsideDir) + "/" + to);
  }
}

// dump.json: the truth everything else is made to agree with.
JournalRepair repair_dump_json(const fs::path &dir, const std::optional<std::string> &dump, bool dry_run,
                               FolderRepair &out) {
  JournalRepair d = repair_journal(*dump, JournalKind::DumpJson);
  switch (d.state) {
    case JournalRepair::State::Intact: ++out.intact; break;
    case JournalRepair::State::Unrecoverable:
      ++out.unrecoverable;
      out.lines.push_back(std::string(format::kDumpJson) + ": cannot repair: " + d.error);
      break;
    case JournalRepair::State::Repaired: {
      ++out.repaired;
      const std::string note = dry_run ? "" : replace_keeping_backup(dir / format::kDumpJson, dump, d.text);
      const std::string dropped = d.dropped_bytes ? std::to_string(d.dropped_bytes) + " bytes of a cut entry dropped"
                                                  : std::string("nothing was cut, the file was not closed");
      out.lines.push_back(std::string(format::kDumpJson) + ": " + (dry_run ? "would be repaired" : "repaired") + ", " +
                          std::to_string(d.entries) + " entries survived (" + dropped + note + ")");
      break;
    }
  }
  return d;
}

// construct.json: exactly dump.json's kernels, in its order. The collector appends to it after dump.json, so a kill
// between the two leaves it one kernel behind; rebuilding it from dump.json loses nothing.
void repair_construct_json(const fs::path &dir, const std::vector<std::string> &names, bool dry_run,
                           FolderRepair &out) {
  const fs::path path = dir / format::kConstructJson;
  const std::optional<std::string> text = read_if_exists(path);
  const std::string_view view = text ? std::string_view(*text) : std::string_view();
  const ConstructReconcile c = reconcile_construct(text ? &view : nullptr, names);
  if (!c.rebuilt) {
    ++out.intact;
    return;
  }
  ++out.repaired;
  const std::string note = dry_run ? "" : replace_keeping_backup(path, text, c.text);
  out.lines.push_back(std::string(format::kConstructJson) + ": " + (dry_run ? "would be rebuilt" : "rebuilt") +
                      " from dump.json, " + std::to_string(names.size()) + " entries (" + c.why + note + ")");
}

// stack.json: rewritten whole by the collector, so it only lags; it must not name a kernel dump.json lacks.
void repair_stack_json(const fs::path &dir, const std::unordered_set<std::string> &names, bool dry_run,
                       FolderRepair &out) {
  const fs::path path = dir / format::kStackJson;
  const std::optional<std::string> text = read_if_exists(path);
  if (!text) {
    ++out.repaired;
    if (!dry_run) format::write_file_atomic(path, "{}\n");
    out.lines.push_back(std::string(format::kStackJson) + ": missing, " + (dry_run ? "would be written" : "written") +
                        " empty (the stacks of its last kernels are lost)");
    return;
  }
  const StackReconcile s = reconcile_stack(*text, names);
  if (!s.changed) {
    ++out.intact;
    return;
  }
  ++out.repaired;
  const std::string note = dry_run ? "" : replace_keeping_backup(path, text, s.text);
  out.lines.push_back(std::string(format::kStackJson) + ": " +
                      (s.was_invalid ? std::string("not valid JSON, ") + (dry_run ? "would be replaced" : "replaced") +
                                           " by an empty one (its stacks are lost" + note + ")"
                                     : std::string(dry_run ? "would drop " : "dropped ") +
                                           plural(s.dropped_names, "kernel", "kernels") + " dump.json lacks (" +
                                           (note.empty() ? std::string("") : note.substr(2)) + ")"));
}

// The kernel a tensor file belongs to: its name (or, for a renamed long one, its mapping.csv original) up to
// ".input." / ".output.".
std::string kernel_of_file(const std::string &name, const std::vector<MappingRow> &mapping) {
  std::string original = name;
  for (const MappingRow &r : mapping)
    if (r.new_name == name && !r.original_name.empty()) original = r.original_name;
  for (const char *io : {".output.", ".input."})
    if (const size_t at = original.rfind(io); at != std::string::npos) return original.substr(0, at);
  return original;
}

// dump_tensor_data/: a kernel's files are written before its entry, and the writer writes several kernels at once, so a
// kill leaves the files (and mapping.csv rows) of the kernels being written. Only a folder of a killed run (its
// dump.json cut, or its rank's lock left behind unheld: the writer's journals are valid JSON at every moment) has such
// leftovers; in any other, verify reports any orphan and nothing is touched. Nothing is deleted: the files go to
// kSetAsideDir, listed one a line, and mapping.csv's original with them.
void repair_tensor_dir(const fs::path &dir, std::string_view dump_text, bool dry_run, FolderRepair &out) {
  const fs::path tensor_dir = dir / format::kTensorDir;
  const std::unordered_set<std::string> data_names = dump_data_names(dump_text);
  const std::vector<MappingRow> rows = read_mapping_csv(tensor_dir);
  if (const std::optional<std::string> mapping = read_if_exists(tensor_dir / format::kMappingCsv)) {
    const MappingReconcile m = reconcile_mapping(*mapping, data_names);
    if (m.changed) {
      ++out.repaired;
      ++out.set_aside;
      const std::string kept = set_aside(dir, tensor_dir / format::kMappingCsv, dry_run);
      if (!dry_run) format::write_file_atomic(tensor_dir / format::kMappingCsv, m.text);
      out.lines.push_back(std::string(format::kTensorDir) + "/" + std::string(format::kMappingCsv) + ": " +
                          (dry_run ? "would drop " : "dropped ") + plural(m.dropped_rows, "row", "rows") +
                          " of files no data_name names (the original " + (dry_run ? "would be" : "is") + " in " +
                          std::string(kSetAsideDir) + "/" + kept + ")");
    }
  }
  std::vector<fs::path> orphans;
  std::error_code ec;
  for (fs::directory_iterator it(tensor_dir, ec), end; !ec && it != end; it.increment(ec)) {
    const std::string name = it->path().filename().string();
    if (name != format::kMappingCsv && !data_names.count(name)) orphans.push_back(it->path());
  }
  if (orphans.empty()) return;
  std::sort(orphans.begin(), orphans.end());
  std::unordered_set<std::string> kernels;
  for (const fs::path &o : orphans) kernels.insert(kernel_of_file(o.filename().string(), rows));
  out.lines.push_back(std::string(format::kTensorDir) + ": " + plural(orphans.size(), "file", "files") + " of " +
                      plural(kernels.size(), "kernel", "kernels") + " that never reached dump.json " +
                      (dry_run ? "would be moved to " : "moved to ") + std::string(kSetAsideDir) + "/:");
  for (const fs::path &o : orphans) {
    const std::string to = set_aside(dir, o, dry_run);
    ++out.set_aside;
    out.lines.push_back(std::string(format::kTensorDir) + "/" + o.filename().string() + " -> " +
                        std::string(kSetAsideDir) + "/" + to);
  }
}

}  // namespace

FolderRepair repair_rank_folder(const fs::path &dir, bool dry_run) {
  FolderRepair out;
  const std::optional<std::string> dump = read_if_exists(dir / format::kDumpJson);

  // A folder begun with no kernel in it: nothing to keep.
  if (holds_no_kernel(dir, dump)) {
    if (!dry_run) remove_folder_and_empty_step(dir);
    out.lines.push_back(std::string("no kernel was written in it before the run ended (begun as it was killed): ") +
                        (dry_run ? "would be removed" : "removed"));
    out.removed = true;
    return out;
  }
  set_aside_temporaries(dir, dry_run, out);
  if (!dump) {
    ++out.unrecoverable;
    out.lines.push_back(std::string(format::kDumpJson) + ": cannot repair: missing");
    return out;
  }
  const JournalRepair d = repair_dump_json(dir, dump, dry_run, out);
  if (d.state == JournalRepair::State::Unrecoverable) return out;  // nothing to make the other files agree with
  const bool repaired = d.state == JournalRepair::State::Repaired;
  const std::string_view dump_text = repaired ? d.text : *dump;
  const std::vector<std::string> names = dump_kernel_names(dump_text);
  repair_construct_json(dir, names, dry_run, out);
  repair_stack_json(dir, std::unordered_set<std::string>(names.begin(), names.end()), dry_run, out);
  // The writer's journals are valid JSON at every moment: a killed run is known by the rank lock it left, unheld.
  const std::optional<RankLock> lock = rank_lock_of(dir);
  if (repaired || (lock && !lock->live)) repair_tensor_dir(dir, dump_text, dry_run, out);
  return out;
}

std::vector<fs::path> remove_unstarted_rank_folders(const fs::path &dir, bool dry_run) {
  std::vector<fs::path> steps, out;
  std::error_code ec;
  const fs::path abs = fs::absolute(dir, ec).lexically_normal();
  const fs::path name = abs.filename().empty() ? abs.parent_path().filename() : abs.filename();
  if (parse_step_dir(name.string())) {
    steps.push_back(dir);
  } else {
    for (fs::directory_iterator it(dir, ec), end; !ec && it != end; it.increment(ec))
      if (it->is_directory(ec) && parse_step_dir(it->path().filename().string())) steps.push_back(it->path());
  }
  for (const fs::path &step : steps) {
    for (fs::directory_iterator it(step, ec), end; !ec && it != end; it.increment(ec)) {
      std::optional<uint32_t> rank;
      if (!it->is_directory(ec) || !parse_rank_dir(it->path().filename().string(), &rank)) continue;
      if (fs::exists(it->path() / format::kDumpJson, ec)) continue;
      if (std::optional<RankLock> lock = rank_lock_of(it->path()); lock && lock->live) continue;  // just begun
      if (holds_no_kernel(it->path(), std::nullopt)) out.push_back(it->path());
    }
  }
  std::sort(out.begin(), out.end());
  if (!dry_run)
    for (const fs::path &p : out) remove_folder_and_empty_step(p);
  return out;
}

namespace {

// Opens `path` and tries the lock the shim takes; an open descriptor holding it, -1 with *live when a running
// process holds it (or -1 alone when the file cannot be opened).
int try_lock(const fs::path &path, bool *live, std::string *owner) {
  *live = false;
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NOFOLLOW);
  if (fd < 0) return -1;
  char buf[32] = {};
  if (::pread(fd, buf, sizeof buf - 1, 0) > 0) *owner = std::string(buf, strcspn(buf, "\n"));
  if (::flock(fd, LOCK_EX | LOCK_NB) == 0) return fd;
  *live = errno == EWOULDBLOCK;
  ::close(fd);
  return -1;
}

std::optional<RankLock> probe(const fs::path &path) {
  std::error_code ec;
  if (!fs::is_regular_file(fs::symlink_status(path, ec))) return std::nullopt;
  RankLock l;
  l.path = path;
  const int fd = try_lock(path, &l.live, &l.owner);
  if (fd >= 0) ::close(fd);
  return l;
}

}  // namespace

std::optional<RankLock> rank_lock_of(const fs::path &rank_folder) {
  std::error_code ec;
  const fs::path folder = fs::absolute(rank_folder, ec).lexically_normal();
  const fs::path name = folder.filename().empty() ? folder.parent_path().filename() : folder.filename();
  const fs::path step = (folder.filename().empty() ? folder.parent_path() : folder).parent_path();
  if (!parse_step_dir(step.filename().string())) return std::nullopt;
  return probe(step.parent_path() / format::rank_lock_name(name.string()));
}

std::vector<RankLock> rank_locks_in(const fs::path &root) {
  std::vector<RankLock> out;
  std::error_code ec;
  for (fs::directory_iterator it(root, ec), end; !ec && it != end; it.increment(ec)) {
    if (format::is_rank_lock_name(it->path().filename().string()))
      if (std::optional<RankLock> l = probe(it->path())) out.push_back(std::move(*l));
  }
  std::sort(out.begin(), out.end(), [](const RankLock &a, const RankLock &b) { return a.path < b.path; });
  return out;
}

bool remove_stale_lock(const RankLock &lock) {
  bool live = false;
  std::string owner;
  const int fd = try_lock(lock.path, &live, &owner);
  if (fd < 0) return false;
  // Deleted while held, as the shim does: a run that opened the file meanwhile sees it is no longer at the path.
  const bool removed = ::unlink(lock.path.c_str()) == 0;
  ::close(fd);
  return removed;
}

}  // namespace msprobe::tools
