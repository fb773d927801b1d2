// Rebuilding a dump folder after a killed run. The collector writes dump.json and construct.json as append-only
// journals (format/dump_json.h): the header line, then one complete member per line; a kernel's tensor files
// are written before its dump.json entry, and its construct.json member after it. stack.json is rewritten whole
// (atomically) now and then. A SIGKILL can therefore leave: a member cut mid-line at the end of either journal,
// dump.json one kernel ahead of construct.json, tensor files (and mapping.csv rows) of a kernel whose entry never
// reached dump.json, a stack.json that lags, temporaries of stack.json, and a folder begun with no kernel in it.
//
// dump.json is the truth: every other file of the folder is made to agree with it (docs/inspect.md, "repair").
#pragma once
#include <cstdint>
#include <filesystem>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <unordered_set>
#include <vector>

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

// Keeps every complete member, drops one cut mid-line, closes the file; checks the result is valid JSON.
JournalRepair repair_journal(std::string_view content, JournalKind kind);

// The keys of "data" of a valid dump.json, in file order. Throws JsonError.
std::vector<std::string> dump_kernel_names(std::string_view dump_json);
// Every data_name a valid dump.json names. Throws JsonError.
std::unordered_set<std::string> dump_data_names(std::string_view dump_json);

// construct.json for these kernels, in this order ({name: null, ...}, the collector's layout; names as given).
std::string construct_json_for(std::span<const std::string> names);

// construct.json made to agree with dump.json: its keys exactly `dump_names`, in that order.
struct ConstructReconcile {
  bool rebuilt = false;  // false: the file already agrees (left byte for byte)
  std::string text;      // the new file (rebuilt)
  std::string why;       // what was wrong ("it was cut mid-entry; it lacked 1 kernel of dump.json")
};
// `content` nullptr: the file is missing.
ConstructReconcile reconcile_construct(const std::string_view *content, std::span<const std::string> dump_names);

// stack.json ({"0": [[kernels], [frames]], ...}) without the kernels dump.json lacks; groups left with no kernel
// are dropped and the rest renumbered from 0. An invalid or unreadable file becomes {} (its stacks are lost).
struct StackReconcile {
  bool changed = false;
  bool was_invalid = false;
  std::string text;
  uint64_t dropped_names = 0;
};
StackReconcile reconcile_stack(std::string_view content, const std::unordered_set<std::string> &dump_names);

// mapping.csv keeping only the well-formed rows whose file a data_name names (a cut last row, rows of kernels
// that never reached dump.json go; repair keeps the whole original in kSetAsideDir).
struct MappingReconcile {
  bool changed = false;
  std::string text;
  uint64_t dropped_rows = 0;
};
MappingReconcile reconcile_mapping(std::string_view content, const std::unordered_set<std::string> &data_names);

// ---- Whole folders
// ---------------------------------------------------------------------------------------------------
// repair deletes no data: what it takes out of a folder (tensor files of kernels dump.json does not hold, the
// mapping.csv it rewrites, temporaries of a cut rewrite) is moved into this folder beside dump_tensor_data/, which no
// reader of the dump looks in. A name already there gets ".1", ".2"...
inline constexpr std::string_view kSetAsideDir = "repair_set_aside";

struct FolderRepair {
  std::vector<std::string> lines;  // one per file acted on, "dump.json: repaired, ..." (relative to the folder)
  int intact = 0, repaired = 0, unrecoverable = 0;
  uint64_t set_aside = 0;  // files moved into kSetAsideDir
  bool removed = false;    // the folder held no kernel and was removed
};
// Repairs one rank folder (step{N}/rank{R}/ holding dump.json, or one begun with none). dry_run changes nothing.
FolderRepair repair_rank_folder(const std::filesystem::path &dir, bool dry_run);

// The rank folders under `dir` (a dump root or a step folder) that a kill left without a dump.json: begun, no
// kernel written. They are removed (with a step folder left empty) unless dry_run; returns their paths.
std::vector<std::filesystem::path> remove_unstarted_rank_folders(const std::filesystem::path &dir, bool dry_run);

// Where a file's original is kept before it is replaced: FILE.bak, or FILE.bak.1, ... when that exists.
std::filesystem::path free_backup_name(const std::filesystem::path &path);

// ---- Rank locks
// ----------------------------------------------------------------------------------------------------
// A run holds `{dump root}/.msprobe_shim.{rank folder}.lock` while it writes that rank's folders and deletes it when
// its dump is closed (shim/capture/lifecycle.cpp); a SIGKILLed run leaves it behind, held by nobody.
struct RankLock {
  std::filesystem::path path;
  bool live = false;  // a running process holds it: its folders are being written
  std::string owner;  // what the file says (the owner's pid), for messages
  std::string owner_text() const { return owner.empty() ? "pid unknown" : "pid " + owner; }  // "pid 1234"
};
// The lock a run writing `rank_folder` (step{N}/rank{R}) holds or left behind; nullopt when there is none.
std::optional<RankLock> rank_lock_of(const std::filesystem::path &rank_folder);
// The lock files in a dump root.
std::vector<RankLock> rank_locks_in(const std::filesystem::path &root);
// Deletes a lock nobody holds (taking it first, so a run that starts meanwhile is never left without one).
// False when it turned out to be live, or could not be removed.
bool remove_stale_lock(const RankLock &lock);

}  // namespace msprobe::tools
