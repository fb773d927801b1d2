// Reading a folder whose dump.json is not finished, for every command alike (docs/inspect.md, "Runs still going and
// damaged dumps"). dump.json is a journal (format/dump_json.h): a header line, then one complete kernel entry per line.
// The writer keeps it valid JSON at every moment; an older writer closed it only at the end, and a kill can tear the
// write of an entry. What a folder's end is:
//   - being written: the run writing the folder is still going (it holds the rank's lock, docs/lifecycle.md) and the
//     folder is its rank's newest step;
//   - killed: the run was killed or crashed with the folder its rank's newest step (it left the rank's lock, unheld);
//     what is there is read; `repair` sets aside the files of the kernels it was writing;
//   - not closed: the text ends before the closing (an older writer's journal, or a torn write); `repair` closes it;
//   - damaged: the text is wrong before its last line (not a journal the collector left).
// The commands read the complete kernels before that point and name the folder and what the rest is.
#pragma once
#include <cstdint>
#include <optional>
#include <string>

#include "tools/reader/dump_reader.h"

namespace msprobe::tools {

struct Shortfall {
  enum class Why { BeingWritten, Killed, NotClosed, Damaged };
  Why why = Why::NotClosed;
  std::string folder;    // the folder's label, "step1/rank0"
  uint64_t kernels = 0;  // complete kernels read before the end
  uint64_t at = 0;       // the byte of dump.json where reading stopped
  std::string owner;     // being written: the lock holder, "pid 1234"
  std::string error;     // damaged: what is wrong there

  // One line: "step1/rank0: being written by a running process (pid 1234): its 41 kernels written so far are read".
  std::string text() const { return folder + ": " + what(); }
  // The same without the folder: "being written by a running process (pid 1234): ...".
  std::string what() const;
  // Whether the dump itself is at fault (a folder being written is not).
  bool damage() const { return why != Why::BeingWritten; }
};

// Streams `dir`'s dump.json as read_dump_json does. When it ends before it is closed, or is damaged, the complete
// kernels before that point have been given to the callbacks and the shortfall is returned instead of a JsonError.
// `header`, when given, receives the header (also of an unfinished file). Other errors (no such file) still throw.
std::optional<Shortfall> read_dump_json_partial(const RankDir &dir, const DumpCallbacks &cb,
                                                DumpHeaderRead *header = nullptr);

// The kind of end a dump.json text has at byte `offset` where a parse stopped: not closed (nothing but the last line,
// cut or complete, after `offset`) or damaged (a line break followed by more text after it).
bool ends_at_last_line(std::string_view text, size_t offset);

}  // namespace msprobe::tools
