#include "tools/reader/repair.h"

#include "collector/json_writer.h"
#include "tools/reader/dump_reader.h"
#include "tools/reader/json_reader.h"

namespace msprobe::tools {
namespace {

// Entries in a valid file; throws JsonError when it is not one.
uint64_t count_entries(std::string_view text, JournalKind kind) {
  uint64_t n = 0;
  if (kind == JournalKind::DumpJson) {
    DumpCallbacks cb;
    cb.on_kernel = [&](KernelEntry &&) {
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

}  // namespace

JournalRepair repair_journal(std::string_view content, JournalKind kind) {
  JournalRepair r;
  const std::string_view suffix =
      kind == JournalKind::DumpJson ? collector::kDumpJsonSuffix : collector::kConstructJsonSuffix;
  try {
    r.entries = count_entries(content, kind);
    r.state = JournalRepair::State::Intact;
    return r;
  } catch (const JsonError &) {
  }
  std::optional<std::string> fixed = collector::repair_journal_text(content, suffix);
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

}  // namespace msprobe::tools
