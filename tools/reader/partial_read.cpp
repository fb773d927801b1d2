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
    return std::nullopt;
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
