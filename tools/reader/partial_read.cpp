#include "tools/reader/partial_read.h"

#include "format/format.h"
#include "tools/reader/json_reader.h"
#include "tools/reader/repair.h"

namespace msprobe::tools {

std::string Shortfall::what() const {
  const std::string n = std::to_string(kernels) + (kernels == 1 ? " kernel" : " kernels");
  switch (why) {
    case Why::BeingWritten:
      return "being written by a running process (" + owner + "): its " + n +
             " written so far are read, the rest is not written yet";
    case Why::Killed:
      return "the run that wrote it was killed or crashed (its rank lock is left): its " + n +
             " are read, the kernels it was writing are not ('msprobe-inspect repair' sets their files aside)";
    case Why::NotClosed:
      return std::string(format::kDumpJson) + " was not closed (the run that wrote it was killed or " +
             "crashed): its " + n + " before byte " + std::to_string(at) +
             " are read, a kernel cut there is not ('msprobe-inspect repair' closes it)";
    case Why::Damaged: break;
  }
  return std::string(format::kDumpJson) + " is damaged at byte " + std::to_string(at) + " (" + error + "): its " + n +
         " before the damage are read, the rest is not";
}

bool ends_at_last_line(std::string_view text, size_t offset) {
  if (offset > text.size()) return true;
  const size_t nl = text.find('\n', offset);
  return nl == std::string_view::npos || text.find_first_not_of(" \t\r\n", nl) == std::string_view::npos;
}

namespace {

// Whether the folder is its rank's newest step in its dump root (what a live run writes now, what a killed one was).
bool newest_step_of_rank(const RankDir &dir) {
  if (!dir.step) return false;
  const std::filesystem::path root = dir.path.parent_path().parent_path();
  const std::string rank_dir = dir.path.filename().string();
  std::error_code ec;
  for (std::filesystem::directory_iterator it(root, ec), end; !ec && it != end; it.increment(ec)) {
    const std::optional<uint64_t> step = parse_step_dir(it->path().filename().string());
    std::error_code e;
    if (step && *step > *dir.step && std::filesystem::is_directory(it->path() / rank_dir, e)) return false;
  }
  return true;
}

// A dump.json that reads whole may still be a live run's current folder, or the one a killed run was writing.
std::optional<Shortfall> live_or_killed(const RankDir &dir, uint64_t kernels, uint64_t bytes) {
  const std::optional<RankLock> lock = rank_lock_of(dir.path);
  if (!lock || !newest_step_of_rank(dir)) return std::nullopt;
  Shortfall s;
  s.folder = dir.label();
  s.kernels = kernels;
  s.at = bytes;
  s.why = lock->live ? Shortfall::Why::BeingWritten : Shortfall::Why::Killed;
  if (lock->live) s.owner = lock->owner_text();
  return s;
}

}  // namespace

std::optional<Shortfall> read_dump_json_partial(const RankDir &dir, const DumpCallbacks &cb, DumpHeaderRead *header) {
  uint64_t kernels = 0;
  DumpCallbacks counted = cb;
  if (cb.on_record)
    counted.on_record = [&](KernelRecord &&k) {
      ++kernels;
      return cb.on_record(std::move(k));
    };
  else
    counted.on_kernel = [&](EntryRead &&k) {
      ++kernels;
      return cb.on_kernel ? cb.on_kernel(std::move(k)) : true;
    };
  DumpHeaderRead seen;
  counted.on_header = [&](const DumpHeaderRead &h) {
    seen = h;
    if (cb.on_header) cb.on_header(h);
  };
  const MappedFile file(dir.path / format::kDumpJson);
  try {
    stream_dump_json(file.text(), counted);
    if (header) *header = seen;
    return live_or_killed(dir, kernels, file.text().size());
  } catch (const JsonError &e) {
    if (header) *header = seen;
    Shortfall s;
    s.folder = dir.label();
    s.kernels = kernels;
    s.at = e.offset();
    if (!ends_at_last_line(file.text(), e.offset())) {
      s.why = Shortfall::Why::Damaged;
      s.error = e.what();
    } else if (const std::optional<RankLock> lock = rank_lock_of(dir.path); lock && lock->live) {
      s.why = Shortfall::Why::BeingWritten;
      s.owner = lock->owner_text();
    }
    return s;
  }
}

}  // namespace msprobe::tools
