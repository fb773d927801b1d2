// repair DIR: closes the journals a killed run left open and makes every file of a folder agree with dump.json.
#include <cstdio>
#include <optional>
#include <string>
#include <system_error>
#include <vector>

#include "format/format.h"
#include "format/dump_json.h"
#include "tools/inspect/cli.h"
#include "tools/inspect/commands.h"
#include "tools/reader/dump_reader.h"
#include "tools/reader/repair.h"

namespace msprobe::tools {

const std::string_view kRepairHelp = R"(usage: msprobe-inspect repair DIR [--dry-run]

Rebuilds the step/rank folders of a dump after a crash, a SIGKILL or an os._exit cut its writing short.
dump.json is the truth, and every other file is made to agree with it:
  dump.json       an append-only journal (one complete kernel entry per line): every entry written before the
                  crash survives, only an entry cut mid-line is dropped, and the file is closed;
  construct.json  rebuilt from dump.json when it does not name exactly dump.json's kernels in dump.json's order
                  (it is appended to just after dump.json, so a kill can leave it one kernel behind);
  stack.json      written whole every second or so: a folder with none gets an empty one, and kernels that
                  dump.json lacks are dropped from it;
  dump_tensor_data/  in a folder whose dump.json was not closed, the files (and mapping.csv rows) of the kernel
                  being written when the run died, which no data_name names, are removed.
A folder begun with no kernel in it when the run died is removed, and so are temporaries of cut rewrites.
The rank lock files a killed run leaves in the dump root (.msprobe_shim.{rank}.lock) are removed. The folders of
a rank whose run is still going (its lock is held) are left alone: repair them after the run ends.
Each json file changed is first copied to FILE.bak (FILE.bak.1, ... if that exists), then replaced atomically.
After a repair, 'msprobe-inspect verify' passes on what survived.

  --dry-run   say what would be done, change nothing

Prints one line per file acted on. Exit status 0 when every folder is intact or repaired, 1 when one cannot be
(dump.json is not a journal, or not even its first line survived while the folder holds kernels) or is still
being written, 2 when DIR is not a dump.
)";

int run_repair(std::span<char *const> argv) {
  static const OptionSpec kOptions[] = {{"--dry-run", false}};
  const Args args = parse_args(argv, kOptions);
  expect_positional(args, 1, "DIR");
  const bool dry = args.flag("--dry-run");
  const fs::path root = args.positional[0];
  int unrecoverable = 0, repaired = 0, intact = 0, removed = 0;
  // Folders begun with no dump.json yet: readers skip them, repair removes them.
  std::error_code ec;
  if (fs::is_directory(root, ec)) {
    for (const fs::path &p : remove_unstarted_rank_folders(root, dry)) {
      ++removed;
      std::printf("%s/%s: no kernel was written in it before the run ended (begun as it was killed): %s\n",
                  p.parent_path().filename().string().c_str(), p.filename().string().c_str(),
                  dry ? "would be removed" : "removed");
    }
  }
  std::vector<RankDir> dirs;
  try {
    // find_rank_dirs needs dump.json to exist; an empty one still counts.
    dirs = find_rank_dirs(root);
  } catch (const InputError &) {
    if (removed == 0) throw;
  }
  int busy = 0;
  for (const RankDir &d : dirs) {
    if (std::optional<RankLock> lock = rank_lock_of(d.path); lock && lock->live) {
      ++busy;
      std::printf("%s: being written by a running process (%s): left alone; repair it after the run ends\n",
                  d.label().c_str(), lock->owner.empty() ? "pid unknown" : ("pid " + lock->owner).c_str());
      continue;
    }
    const FolderRepair r = repair_rank_folder(d.path, dry);
    for (const std::string &line : r.lines)
      std::printf("%s%s%s\n", d.label().c_str(), r.removed ? ": " : "/", line.c_str());
    intact += r.intact;
    repaired += r.repaired;
    unrecoverable += r.unrecoverable;
    removed += r.removed;
  }
  // Lock files of runs that were killed: in the dump root (or above the step folder given).
  fs::path lock_dir = root;
  if (parse_step_dir(fs::absolute(root, ec).lexically_normal().filename().string())) lock_dir = root.parent_path();
  for (const RankLock &lock : rank_locks_in(lock_dir)) {
    if (lock.live) continue;
    const bool gone = !dry && remove_stale_lock(lock);
    std::printf("%s: a killed run's rank lock (%s): %s\n", lock.path.filename().string().c_str(),
                lock.owner.empty() ? "pid unknown" : ("pid " + lock.owner).c_str(),
                dry    ? "would be removed"
                : gone ? "removed"
                       : "could not be removed");
  }
  std::printf("repair: %d file(s) intact, %d %s, %d cannot be repaired", intact, repaired,
              dry ? "to repair" : "repaired", unrecoverable);
  if (removed) std::printf(", %d empty folder(s) %s", removed, dry ? "to remove" : "removed");
  if (busy) std::printf(", %d folder(s) still being written", busy);
  std::printf("\n");
  return unrecoverable || busy ? kExitFindings : kExitOk;
}

}  // namespace msprobe::tools
