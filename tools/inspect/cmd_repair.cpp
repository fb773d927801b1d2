// repair DIR: closes the journals a killed run left open and makes every file of a folder agree with dump.json.
#include <cstdio>
#include <map>
#include <optional>
#include <string>
#include <system_error>
#include <vector>

#include "format/dump_json.h"
#include "format/format.h"
#include "tools/inspect/cli.h"
#include "tools/inspect/commands.h"
#include "tools/inspect/folder_log.h"
#include "tools/reader/dump_reader.h"
#include "tools/reader/json_reader.h"
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
  dump_tensor_data/  in a folder whose dump.json was not closed, the files of the kernels being written when the
                  run died (the writer works on several at once), which no data_name names, and their mapping.csv
                  rows are taken out of it.
Nothing is deleted: files taken out of a folder (those tensor files, the original mapping.csv, temporaries of a
rewrite the kill cut short) are moved into its repair_set_aside/ folder, which no reader of the dump looks in, and
listed one a line. A folder begun with no kernel in it when the run died (no entry, no tensor file) is removed.
The rank lock files a killed run leaves in the dump root (.msprobe_shim.{rank}.lock) are removed. The folders a
run that is still going is writing (its lock is held, dump.json not closed) are left alone: repair them after the
run ends (the folders it has closed are finished, and left as they are).
Each json file changed is first copied to FILE.bak (FILE.bak.1, ... if that exists), then replaced atomically.
After a repair, 'msprobe-inspect verify' passes on what survived.

  --dry-run   say what would be done, change nothing (the files that would be set aside are listed)

Prints one line per file acted on. Exit status 0 when every folder is intact or repaired, 1 when one cannot be
(dump.json is not a journal, or not even its first line survived while the folder holds kernels) or is still
being written, 2 when DIR is not a dump (a root that holds only a run's rank lock is one: the run was killed, or
is still starting, before its first kernel was written).
)";

namespace {

struct RepairTally {
  int unrecoverable = 0, repaired = 0, intact = 0, removed = 0, busy = 0;
  uint64_t set_aside = 0;
};

// Folders begun with no dump.json yet: readers skip them, repair removes them.
void remove_unstarted(const fs::path &root, bool dry_run, RepairTally &t) {
  std::error_code ec;
  if (!fs::is_directory(root, ec)) return;
  for (const fs::path &p : remove_unstarted_rank_folders(root, dry_run)) {
    ++t.removed;
    std::printf("%s/%s: no kernel was written in it before the run ended (begun as it was killed): %s\n",
                p.parent_path().filename().string().c_str(), p.filename().string().c_str(),
                dry_run ? "would be removed" : "removed");
  }
}

// The newest step of each rank folder name among the folders found (taken once: a live run makes new steps meanwhile).
using NewestSteps = std::map<std::string, uint64_t>;
NewestSteps newest_steps(const std::vector<RankDir> &dirs) {
  NewestSteps out;
  for (const RankDir &d : dirs)
    if (d.step) out[d.path.filename().string()] = std::max(out[d.path.filename().string()], *d.step);
  return out;
}

// Whether a live run is done with the folder: a step before the newest of its rank (the writer's files are valid JSON
// at every moment, so only the step in progress is still being written).
bool finished_step(const RankDir &d, const NewestSteps &newest) {
  const auto it = newest.find(d.path.filename().string());
  return d.step && it != newest.end() && *d.step < it->second;
}

void repair_folder(const RankDir &d, const NewestSteps &newest, const FolderLog &log, bool dry_run, RepairTally &t) {
  if (std::optional<RankLock> lock = rank_lock_of(d.path); lock && lock->live) {
    // The run still holds the rank: a folder of a step it finished is left as it is, the one it writes is left alone.
    if (finished_step(d, newest)) {
      ++t.intact;
      return;
    }
    ++t.busy;
    log.say("being written by a running process (%s): left alone; repair it after the run ends",
            lock->owner_text().c_str());
    return;
  }
  const FolderRepair r = repair_rank_folder(d.path, dry_run);
  for (const std::string &line : r.lines) {
    if (r.removed)
      log.say("%s", line.c_str());
    else
      log.say_in("%s", line.c_str());
  }
  t.intact += r.intact;
  t.repaired += r.repaired;
  t.unrecoverable += r.unrecoverable;
  t.removed += r.removed;
  t.set_aside += r.set_aside;
}

// The rank lock files in the dump root (or above the step folder given).
std::vector<RankLock> root_locks(const fs::path &root) {
  std::error_code ec;
  fs::path lock_dir = root;
  if (parse_step_dir(fs::absolute(root, ec).lexically_normal().filename().string())) lock_dir = root.parent_path();
  return rank_locks_in(lock_dir);
}

// Lock files of runs that were killed. `no_folders`: the root holds no rank folder (a run killed, or still starting,
// before its first kernel was written), so a live lock is said here, there being no folder to say it for.
void remove_stale_locks(const fs::path &root, bool dry_run, bool no_folders, RepairTally &t) {
  for (const RankLock &lock : root_locks(root)) {
    if (lock.live) {
      if (no_folders) {
        ++t.busy;
        std::printf("%s: held by a running process (%s): left alone; repair after the run ends\n",
                    lock.path.filename().string().c_str(), lock.owner_text().c_str());
      }
      continue;
    }
    const bool gone = !dry_run && remove_stale_lock(lock);
    std::printf("%s: a killed run's rank lock (%s): %s\n", lock.path.filename().string().c_str(),
                lock.owner_text().c_str(),
                dry_run ? "would be removed"
                : gone  ? "removed"
                        : "could not be removed");
  }
}

}  // namespace

int run_repair(std::span<char *const> argv) {
  const DirAndFlag options = parse_dir_and_flag(argv, "--dry-run");
  const fs::path &root = options.dir;
  const bool dry = options.flag;  // a plain variable: clang 14 cannot capture a structured binding
  RepairTally t;
  remove_unstarted(root, dry, t);
  std::vector<RankDir> dirs;
  try {
    // find_rank_dirs needs dump.json to exist; an empty one still counts.
    dirs = find_rank_dirs(root);
  } catch (const InputError &) {
    // A run killed before its first kernel was written leaves no folder, only its rank lock: still its dump root.
    if (t.removed == 0 && root_locks(root).empty()) throw;
  }
  const NewestSteps newest = newest_steps(dirs);
  for_each_folder(dirs, [&](const RankDir &d, const FolderLog &log) { repair_folder(d, newest, log, dry, t); });
  remove_stale_locks(root, dry, dirs.empty(), t);
  std::printf("repair: %d file(s) intact, %d %s, %d cannot be repaired", t.intact, t.repaired,
              dry ? "to repair" : "repaired", t.unrecoverable);
  if (t.removed) std::printf(", %d empty folder(s) %s", t.removed, dry ? "to remove" : "removed");
  if (t.set_aside)
    std::printf(", %llu file(s) %s %s/ (nothing is deleted)", static_cast<unsigned long long>(t.set_aside),
                dry ? "to set aside in" : "set aside in", std::string(kSetAsideDir).c_str());
  if (t.busy) std::printf(", %d folder(s) still being written", t.busy);
  std::printf("\n");
  return t.unrecoverable || t.busy ? kExitFindings : kExitOk;
}

}  // namespace msprobe::tools
