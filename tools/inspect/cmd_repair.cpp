// repair DIR: closes the journals a killed run left open.
#include <cstdio>
#include <string>
#include <system_error>
#include <vector>

#include "collector/format.h"
#include "collector/json_writer.h"
#include "tools/inspect/cli.h"
#include "tools/inspect/commands.h"
#include "tools/reader/dump_reader.h"
#include "tools/reader/repair.h"

namespace msprobe::tools {

const std::string_view kRepairHelp = R"(usage: msprobe-inspect repair DIR [--dry-run]

Rebuilds dump.json and construct.json of every step/rank folder after a crash, a SIGKILL or an os._exit cut
them short. The collector writes both as append-only journals (one complete kernel entry per line), so every
entry written before the crash survives; only an entry cut mid-line is dropped. stack.json is written whole
every second or so during a run: a folder that has none yet gets an empty one. Each file changed is first
copied to FILE.bak (FILE.bak.1, ... if that exists), then replaced atomically.

  --dry-run   say what would be done, change nothing

Prints one line per file that was not intact, with how many entries survived. Exit status 0 when every file is
intact or repaired, 1 when one cannot be (not a journal, or not even its first line survived), 2 when DIR is
not a dump.
)";

namespace {

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

}  // namespace

int run_repair(std::span<char *const> argv) {
  static const OptionSpec kOptions[] = {{"--dry-run", false}};
  const Args args = parse_args(argv, kOptions);
  expect_positional(args, 1, "DIR");
  const bool dry = args.flag("--dry-run");
  // find_rank_dirs needs dump.json to exist; an empty one still counts (repair reports it).
  const std::vector<RankDir> dirs = find_rank_dirs(args.positional[0]);
  int unrecoverable = 0, repaired = 0, intact = 0;
  for (const RankDir &d : dirs) {
    const std::pair<std::string_view, JournalKind> files[] = {{collector::kDumpJson, JournalKind::DumpJson},
                                                              {collector::kConstructJson, JournalKind::ConstructJson}};
    for (const auto &[name, kind] : files) {
      const fs::path path = d.path / name;
      std::error_code ec;
      if (!fs::exists(path, ec)) {
        if (kind == JournalKind::ConstructJson) {
          std::printf("%s/%s: missing (not rebuilt: run 'msprobe-inspect verify' to see what else is missing)\n",
                      d.label().c_str(), std::string(name).c_str());
          ++unrecoverable;
        }
        continue;
      }
      std::string content;
      {
        MappedFile f(path);
        content.assign(f.text());
      }
      const JournalRepair r = repair_journal(content, kind);
      const std::string label = d.label() + "/" + std::string(name);
      switch (r.state) {
        case JournalRepair::State::Intact: ++intact; break;
        case JournalRepair::State::Unrecoverable:
          ++unrecoverable;
          std::printf("%s: cannot repair: %s\n", label.c_str(), r.error.c_str());
          break;
        case JournalRepair::State::Repaired: {
          ++repaired;
          std::string bak_note;
          if (!dry) {
            const fs::path bak = free_backup_name(path);
            collector::write_file_atomic(bak, content);
            collector::write_file_atomic(path, r.text);
            bak_note = ", original kept as " + bak.filename().string();
          }
          const std::string dropped = r.dropped_bytes
                                          ? std::to_string(r.dropped_bytes) + " bytes of a cut entry dropped"
                                          : std::string("nothing was cut, the file was not closed");
          std::printf("%s: %s, %llu entries survived (%s%s)\n", label.c_str(), dry ? "would be repaired" : "repaired",
                      static_cast<unsigned long long>(r.entries), dropped.c_str(), bak_note.c_str());
          break;
        }
      }
    }
    // stack.json is rewritten whole now and then, not journaled: a folder begun in the last moments before a
    // SIGKILL may have none yet. Its stacks are lost; an empty one keeps the folder readable.
    const fs::path stack = d.path / collector::kStackJson;
    std::error_code ec;
    if (!fs::exists(stack, ec)) {
      ++repaired;
      if (!dry) collector::write_file_atomic(stack, "{}\n");
      std::printf("%s/%s: missing, %s empty (the stacks of its last kernels are lost)\n", d.label().c_str(),
                  std::string(collector::kStackJson).c_str(), dry ? "would be written" : "written");
    }
  }
  std::printf("repair: %d file(s) intact, %d %s, %d cannot be repaired\n", intact, repaired,
              dry ? "to repair" : "repaired", unrecoverable);
  return unrecoverable ? kExitFindings : kExitOk;
}

}  // namespace msprobe::tools
