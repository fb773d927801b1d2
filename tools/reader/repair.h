// Rebuilding dump.json / construct.json after a killed run. The collector writes both as append-only journals
// (collector/json_writer.h): the header line, then one complete member per line; collector::repair_journal_text()
// keeps every complete member and closes the file. This adds the check that the result really is valid JSON and
// counts what survived.
#pragma once
#include <cstdint>
#include <string>
#include <string_view>

namespace msprobe::tools {

struct JournalRepair {
  enum class State { Intact, Repaired, Unrecoverable };
  State state = State::Intact;
  std::string text;            // the valid file (state Repaired)
  uint64_t entries = 0;        // kernel entries (dump.json: members of "data"; construct.json: members)
  uint64_t dropped_bytes = 0;  // bytes of the original that did not survive (a cut member)
  std::string error;           // why (state Unrecoverable)
};

enum class JournalKind { DumpJson, ConstructJson };

JournalRepair repair_journal(std::string_view content, JournalKind kind);

}  // namespace msprobe::tools
