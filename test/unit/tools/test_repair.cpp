// Journal repair: a dump.json / construct.json written by the collector's journal writers and cut at every byte
// must come back as valid JSON holding exactly the entries that were complete at the cut.
#include <fcntl.h>
#include <gtest/gtest.h>
#include <sys/file.h>
#include <unistd.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <limits>
#include <set>
#include <unordered_set>

#include "collector/journal.h"
#include "format/dump_json.h"
#include "tools/reader/dump_reader.h"
#include "tools/reader/json_reader.h"
#include "tools/reader/repair.h"

namespace mt = msprobe::tools;
namespace mc = msprobe::format;
namespace fs = std::filesystem;
using State = mt::JournalRepair::State;

namespace {

std::string slurp(const fs::path &p) {
  std::ifstream in(p, std::ios::binary);
  return std::string((std::istreambuf_iterator<char>(in)), {});
}

struct Journal {
  std::string text;                 // the finished file
  std::vector<size_t> member_ends;  // offset just past each member (before ",\n" or the suffix)
  std::vector<std::string> names;
};

// Writes `n` entries with the collector's writer, recording where each member ends on disk.
Journal make_dump_journal(int n) {
  const fs::path p = fs::temp_directory_path() / ("tools_repair_" + std::to_string(::getpid()) + ".json");
  msprobe::collector::DumpJsonWriter w;
  mc::DumpHeader h;
  h.task = mc::Task::Tensor;
  w.begin(p, h);
  Journal j;
  for (int i = 0; i < n; ++i) {
    mc::KernelEntry e;
    e.name = "Op" + std::to_string(i % 3) + ".Default." + std::to_string(i / 3);
    mc::TensorSummary t;
    t.shape = {2, i};
    t.stats.max = mc::StatValue::of_real(i % 2 ? std::numeric_limits<double>::quiet_NaN() : 1.5);
    t.stats.min = mc::StatValue::of_real(-std::numeric_limits<double>::infinity());
    t.data_name = e.name + ".input.0.npy";
    e.input_args = mc::ArgList{mc::Arg{t}, mc::Arg{mc::ValueArg{"str", std::string("a \"quoted\" {brace}")}}};
    e.output = mc::ArgList{};
    e.launch_index = static_cast<uint64_t>(i);
    w.append(e);
    // The journal keeps its closing after the last member: the member ends before it.
    j.member_ends.push_back(static_cast<size_t>(fs::file_size(p)) - mc::kDumpJsonSuffix.size());
    j.names.push_back(e.name);
  }
  w.finish();
  j.text = slurp(p);
  fs::remove(p);
  return j;
}

std::vector<std::string> dump_names(std::string_view text) {
  std::vector<std::string> names;
  mt::DumpCallbacks cb;
  cb.on_kernel = [&](mt::EntryRead &&k) {
    names.push_back(k.name);
    return true;
  };
  mt::stream_dump_json(text, cb);
  return names;
}

TEST(Repair, IntactFilesAreLeftAlone) {
  const Journal j = make_dump_journal(5);
  const auto r = mt::repair_journal(j.text, mt::JournalKind::DumpJson);
  EXPECT_EQ(r.state, State::Intact);
  EXPECT_EQ(r.entries, 5u);
  EXPECT_TRUE(r.text.empty());
}

TEST(Repair, DumpJsonCutAtEveryByteKeepsEveryCompleteEntry) {
  const Journal j = make_dump_journal(7);
  const size_t header_end = j.text.find('\n') + 1;
  for (size_t cut = 0; cut < j.text.size(); ++cut) {
    const std::string_view content(j.text.data(), cut);
    const auto r = mt::repair_journal(content, mt::JournalKind::DumpJson);
    if (cut < header_end) {
      EXPECT_EQ(r.state, State::Unrecoverable) << cut;
      EXPECT_FALSE(r.error.empty());
      continue;
    }
    size_t complete = 0;
    while (complete < j.member_ends.size() && j.member_ends[complete] <= cut) ++complete;
    ASSERT_NE(r.state, State::Unrecoverable) << "cut at " << cut << ": " << r.error;
    ASSERT_EQ(r.entries, complete) << "cut at " << cut;
    if (r.state == State::Repaired) {
      std::string why;
      ASSERT_TRUE(mt::is_valid_json(r.text, &why)) << cut << ": " << why;
      const auto names = dump_names(r.text);
      EXPECT_EQ(names, std::vector<std::string>(j.names.begin(), j.names.begin() + static_cast<long>(complete)));
      // The complete entries are kept byte for byte.
      if (complete) {
        EXPECT_EQ(r.text.substr(0, j.member_ends[complete - 1]), j.text.substr(0, j.member_ends[complete - 1]));
      }
      EXPECT_EQ(r.dropped_bytes + r.text.size() - mc::kDumpJsonSuffix.size(), cut) << cut;
    }
  }
}

TEST(Repair, ConstructJsonCutAtEveryByte) {
  const fs::path p = fs::temp_directory_path() / ("tools_repair_c_" + std::to_string(::getpid()) + ".json");
  msprobe::collector::ConstructJsonWriter w;
  w.begin(p);
  std::vector<size_t> ends;
  for (int i = 0; i < 6; ++i) {
    w.append("Add.Default." + std::to_string(i));
    ends.push_back(static_cast<size_t>(fs::file_size(p)) - mc::kConstructJsonSuffix.size());
  }
  w.finish();
  const std::string text = slurp(p);
  fs::remove(p);
  for (size_t cut = 2; cut < text.size(); ++cut) {
    const auto r = mt::repair_journal(std::string_view(text.data(), cut), mt::JournalKind::ConstructJson);
    size_t complete = 0;
    while (complete < ends.size() && ends[complete] <= cut) ++complete;
    ASSERT_NE(r.state, State::Unrecoverable) << cut << ": " << r.error;
    EXPECT_EQ(r.entries, complete) << cut;
    if (r.state == State::Repaired) {
      const mt::Json parsed = mt::parse_json(r.text);
      EXPECT_EQ(parsed.size(), complete);
    }
  }
}

TEST(Repair, DamageInsideIsNotHiddenAndEmptyFilesAreReported) {
  Journal j = make_dump_journal(4);
  // Break the second entry, keep the file's end: not a cut journal.
  const size_t brace = j.text.find("\": {", j.member_ends[0]) + 3;
  ASSERT_EQ(j.text[brace], '{');
  j.text[brace] = '[';
  const auto r = mt::repair_journal(j.text, mt::JournalKind::DumpJson);
  EXPECT_EQ(r.state, State::Unrecoverable);
  EXPECT_NE(r.error.find("damaged inside"), std::string::npos) << r.error;
  const auto empty = mt::repair_journal("", mt::JournalKind::DumpJson);
  EXPECT_EQ(empty.state, State::Unrecoverable);
  EXPECT_NE(empty.error.find("empty"), std::string::npos);
}

// ---- A folder's files made to agree with dump.json ------------------------------------------------------------------
std::vector<std::string> keys_of(const std::string &text) {
  std::vector<std::string> keys;
  const mt::Json j = mt::parse_json(text);
  for (auto it = j.begin(); it != j.end(); ++it) keys.push_back(it.key());
  return keys;
}

std::string construct_journal(const std::vector<std::string> &names, size_t n) {
  std::string s = std::string(mc::kConstructJsonPrefix) + "\n";
  for (size_t i = 0; i < n; ++i) s += (i ? ",\n\"" : "\"") + names[i] + "\": null";
  return s;
}

// The collector appends each kernel to dump.json, then to construct.json. A kill at any byte of that sequence of
// writes (a torn line in either, construct.json one kernel behind) repairs to a construct.json whose keys are
// exactly dump.json's, in order, and dump.json keeps every kernel whose entry was complete.
TEST(RepairFolder, KillAnywhereInTheTwoJournalsGivesAgreeingFiles) {
  const Journal dump = make_dump_journal(6);
  msprobe::collector::ConstructJsonWriter cw;
  const fs::path cp = fs::temp_directory_path() / ("tools_repair_k_" + std::to_string(::getpid()) + ".json");
  cw.begin(cp);
  std::vector<size_t> construct_ends;
  for (const std::string &n : dump.names) {
    cw.append(n);
    construct_ends.push_back(static_cast<size_t>(fs::file_size(cp)));
  }
  cw.finish();
  const std::string construct = slurp(cp);
  fs::remove(cp);
  const size_t dump_header = dump.text.find('\n') + 1, construct_header = construct.find('\n') + 1;
  // The file sizes after each write, in the order the collector makes them.
  struct Point {
    size_t dump, construct;
  };
  std::vector<Point> points{{dump_header, construct_header}};
  for (size_t k = 0; k < dump.names.size(); ++k) {
    const size_t d0 = points.back().dump, c0 = points.back().construct;
    for (size_t d = d0 + 1; d <= dump.member_ends[k]; ++d) points.push_back({d, c0});
    for (size_t c = c0 + 1; c <= construct_ends[k]; ++c) points.push_back({dump.member_ends[k], c});
  }
  for (const Point &p : points) {
    const std::string_view d(dump.text.data(), p.dump), c(construct.data(), p.construct);
    const auto r = mt::repair_journal(d, mt::JournalKind::DumpJson);
    ASSERT_NE(r.state, State::Unrecoverable) << p.dump << ": " << r.error;
    const std::string fixed = r.state == State::Repaired ? r.text : std::string(d);
    const std::vector<std::string> names = mt::dump_kernel_names(fixed);
    size_t complete = 0;
    while (complete < dump.member_ends.size() && dump.member_ends[complete] <= p.dump) ++complete;
    ASSERT_EQ(names, std::vector<std::string>(dump.names.begin(), dump.names.begin() + static_cast<long>(complete)));
    const mt::ConstructReconcile cr = mt::reconcile_construct(&c, names);
    const std::string out = cr.rebuilt ? cr.text : std::string(c);
    std::string why;
    ASSERT_TRUE(mt::is_valid_json(out, &why)) << p.dump << "/" << p.construct << ": " << why;
    EXPECT_EQ(keys_of(out), names) << p.dump << "/" << p.construct;
  }
}

TEST(RepairFolder, ConstructBehindDumpIsCompleted) {
  const std::vector<std::string> names{"Add.Default.0", "Gelu.Default.0", "Mul.Default.0"};
  const std::string c = construct_journal(names, 2);  // killed between the journals: one kernel behind
  const std::string_view view(c);
  const mt::ConstructReconcile r = mt::reconcile_construct(&view, names);
  ASSERT_TRUE(r.rebuilt);
  EXPECT_EQ(keys_of(r.text), names);
  EXPECT_NE(r.why.find("it lacked 1 kernel of dump.json"), std::string::npos) << r.why;
  EXPECT_EQ(r.text, mc::construct_json(names));  // the collector's own layout
}

TEST(RepairFolder, ConstructAheadOfDumpIsCut) {
  const std::vector<std::string> names{"Add.Default.0", "Gelu.Default.0", "Mul.Default.0"};
  // construct.json has all three, dump.json lost its last entry (cut mid-line).
  const std::string c = construct_journal(names, 3) + ",\n\"Mu";
  const std::string_view view(c);
  const std::vector<std::string> dump_names(names.begin(), names.begin() + 2);
  const mt::ConstructReconcile r = mt::reconcile_construct(&view, dump_names);
  ASSERT_TRUE(r.rebuilt);
  EXPECT_EQ(keys_of(r.text), dump_names);
  EXPECT_NE(r.why.find("cut mid-entry"), std::string::npos) << r.why;
  EXPECT_NE(r.why.find("it named 1 kernel dump.json lacks"), std::string::npos) << r.why;
}

TEST(RepairFolder, AgreeingConstructIsLeftAloneOtherwiseRebuilt) {
  const std::vector<std::string> names{"Add.Default.0", "Gelu.Default.0"};
  const std::string closed = mc::construct_json(names);
  std::string_view view(closed);
  EXPECT_FALSE(mt::reconcile_construct(&view, names).rebuilt);
  // Closed but in another order, not closed, missing, empty, garbage: rebuilt.
  const std::string swapped = mc::construct_json(std::vector<std::string>{names[1], names[0]});
  view = swapped;
  EXPECT_NE(mt::reconcile_construct(&view, names).why.find("another order"), std::string::npos);
  const std::string open = construct_journal(names, 2);
  view = open;
  auto r = mt::reconcile_construct(&view, names);
  EXPECT_TRUE(r.rebuilt);
  EXPECT_EQ(r.why, "it was not closed");
  r = mt::reconcile_construct(nullptr, names);
  EXPECT_TRUE(r.rebuilt);
  EXPECT_EQ(r.why, "it was missing");
  for (std::string bad : {std::string(), std::string("{"), std::string("[1, 2]\n")}) {
    view = bad;
    r = mt::reconcile_construct(&view, names);
    ASSERT_TRUE(r.rebuilt) << bad;
    EXPECT_EQ(keys_of(r.text), names) << bad;
  }
}

TEST(RepairFolder, StackJsonLosesKernelsDumpJsonLacks) {
  std::vector<mc::StackGroup> groups(3);
  groups[0] = {{"A.Default.0", "B.Default.0"}, {"train.py:10 step", "frame \"q\""}};
  groups[1] = {{"C.Default.0"}, {"train.py:20"}};
  groups[2] = {{"D.Default.0"}, {"train.py:30"}};
  const std::string text = mc::stack_json(groups);
  // All known: left alone.
  auto r = mt::reconcile_stack(text, {"A.Default.0", "B.Default.0", "C.Default.0", "D.Default.0"});
  EXPECT_FALSE(r.changed);
  // B and C unknown: B leaves group 0, group 1 goes, group 2 becomes "1".
  r = mt::reconcile_stack(text, {"A.Default.0", "D.Default.0"});
  ASSERT_TRUE(r.changed);
  EXPECT_EQ(r.dropped_names, 2u);
  std::vector<mc::StackGroup> want{groups[0], groups[2]};
  want[0].kernels = {"A.Default.0"};
  EXPECT_EQ(r.text, mc::stack_json(want));
  // Not JSON (never written by the collector, which renames whole files into place): {}.
  r = mt::reconcile_stack("{\"0\": [[", {});
  EXPECT_TRUE(r.changed && r.was_invalid);
  EXPECT_EQ(r.text, "{}\n");
  // Some other valid layout: left alone (verify only asks for valid JSON).
  EXPECT_FALSE(mt::reconcile_stack("{\"A.Default.0\": [\"f\"]}", {}).changed);
}

TEST(RepairFolder, MappingKeepsOnlyRowsOfNamedFiles) {
  const std::string text = "ab12.npy,Long.Name.input.0.npy\ncd34.npy,Lost.Name.input.0.npy\nef56.npy,Cut.Na";
  const auto r = mt::reconcile_mapping(text, {"ab12.npy", "ef56.npy"});
  EXPECT_TRUE(r.changed);
  EXPECT_EQ(r.dropped_rows, 2u);  // a row of a kernel dump.json lacks, a torn last row
  EXPECT_EQ(r.text, "ab12.npy,Long.Name.input.0.npy\n");
  EXPECT_FALSE(mt::reconcile_mapping("ab12.npy,x\n", {"ab12.npy"}).changed);
}

struct TempDir {
  fs::path path;
  TempDir() {
    path = fs::temp_directory_path() / ("tools_repair_dir_" + std::to_string(::getpid()));
    fs::remove_all(path);
    fs::create_directories(path);
  }
  ~TempDir() { fs::remove_all(path); }
};

void put(const fs::path &p, std::string_view text) {
  fs::create_directories(p.parent_path());
  std::ofstream(p, std::ios::binary) << text;
}

// A folder as a SIGKILL leaves it: dump.json cut in its 4th entry, construct.json three kernels in (and one torn),
// stack.json naming a kernel whose entry was cut, the cut kernel's tensor file, a stack.json temporary. Repair takes
// out of the folder what dump.json does not hold, and deletes none of it.
TEST(RepairFolder, WholeFolderAgreesWithDumpJsonAfterRepair) {
  TempDir t;
  const fs::path dir = t.path / "step0" / "rank0";
  const Journal j = make_dump_journal(4);
  put(dir / "dump.json", j.text.substr(0, j.member_ends[2] + 10));
  put(dir / "construct.json", construct_journal(j.names, 2) + ",\n\"Op2.Def");
  put(dir / "stack.json", mc::stack_json(std::vector<mc::StackGroup>{{{j.names[0], j.names[3]}, {"f"}}}));
  put(dir / "stack.json.tmp.123.4", "{\n\"0\"");
  for (int i = 0; i < 4; ++i) put(dir / "dump_tensor_data" / (j.names[i] + ".input.0.npy"), "x");
  put(dir / "dump_tensor_data" / "mapping.csv", j.names[3] + ".input.0.npy,Long\n");

  const mt::FolderRepair dry = mt::repair_rank_folder(dir, true);
  EXPECT_EQ(slurp(dir / "dump.json"), j.text.substr(0, j.member_ends[2] + 10));  // --dry-run changes nothing
  EXPECT_TRUE(fs::exists(dir / "stack.json.tmp.123.4"));

  const mt::FolderRepair r = mt::repair_rank_folder(dir, false);
  EXPECT_EQ(r.lines.size(), dry.lines.size());  // the same actions, said as done
  EXPECT_EQ(r.unrecoverable, 0);
  const std::vector<std::string> names(j.names.begin(), j.names.begin() + 3);
  EXPECT_EQ(mt::dump_kernel_names(slurp(dir / "dump.json")), names);
  EXPECT_EQ(keys_of(slurp(dir / "construct.json")), names);
  EXPECT_EQ(slurp(dir / "stack.json"), mc::stack_json(std::vector<mc::StackGroup>{{{j.names[0]}, {"f"}}}));
  EXPECT_FALSE(fs::exists(dir / "stack.json.tmp.123.4"));
  EXPECT_TRUE(fs::exists(dir / "dump.json.bak"));
  EXPECT_TRUE(fs::exists(dir / "construct.json.bak"));
  std::set<std::string> files;
  for (const auto &e : fs::directory_iterator(dir / "dump_tensor_data")) files.insert(e.path().filename().string());
  EXPECT_EQ(files, (std::set<std::string>{j.names[0] + ".input.0.npy", j.names[1] + ".input.0.npy",
                                          j.names[2] + ".input.0.npy", "mapping.csv"}));
  EXPECT_EQ(slurp(dir / "dump_tensor_data" / "mapping.csv"), "");
  // Nothing was deleted: the cut kernel's file, the original mapping.csv and the temporary are set aside, and the
  // dry run listed the file it would move.
  const fs::path aside = dir / std::string(mt::kSetAsideDir);
  EXPECT_EQ(r.set_aside, 3u);
  EXPECT_EQ(slurp(aside / (j.names[3] + ".input.0.npy")), "x");
  EXPECT_EQ(slurp(aside / "mapping.csv"), j.names[3] + ".input.0.npy,Long\n");
  EXPECT_EQ(slurp(aside / "stack.json.tmp.123.4"), "{\n\"0\"");
  const std::string listed =
      "dump_tensor_data/" + j.names[3] + ".input.0.npy -> repair_set_aside/" + j.names[3] + ".input.0.npy";
  EXPECT_NE(std::find(dry.lines.begin(), dry.lines.end(), listed), dry.lines.end());
  EXPECT_NE(std::find(r.lines.begin(), r.lines.end(), listed), r.lines.end());
  // A second run finds everything intact.
  const mt::FolderRepair again = mt::repair_rank_folder(dir, false);
  EXPECT_EQ(again.repaired, 0) << (again.lines.empty() ? "" : again.lines[0]);
  EXPECT_EQ(again.intact, 3);
}

// A closed dump.json with an unnamed file: nothing is deleted (verify reports the orphan).
TEST(RepairFolder, ClosedDumpKeepsItsFiles) {
  TempDir t;
  const fs::path dir = t.path / "step0" / "rank";
  const Journal j = make_dump_journal(2);
  put(dir / "dump.json", j.text);
  put(dir / "construct.json", mc::construct_json(j.names));
  put(dir / "stack.json", "{\n}\n");
  put(dir / "dump_tensor_data" / "stray.npy", "x");
  const mt::FolderRepair r = mt::repair_rank_folder(dir, false);
  EXPECT_EQ(r.repaired, 0);
  EXPECT_EQ(r.intact, 3);
  EXPECT_TRUE(fs::exists(dir / "dump_tensor_data" / "stray.npy"));
}

// Folders begun as the run was killed, before any kernel went into them, are removed (with their step folder
// when it is left empty); a folder whose dump.json lost its header but holds tensor files is not.
TEST(RepairFolder, FoldersBegunWithNoKernelAreRemoved) {
  TempDir t;
  fs::create_directories(t.path / "step3" / "rank0");  // no dump.json yet
  put(t.path / "step4" / "rank0" / "dump.json", "");   // opened, header not written
  put(t.path / "step4" / "rank0" / "construct.json", "");
  put(t.path / "step5" / "rank0" / "dump.json", "{\"task\": \"tensor\", \"le");  // header cut
  put(t.path / "step6" / "rank0" / "dump.json", "");
  put(t.path / "step6" / "rank0" / "dump_tensor_data" / "A.Default.0.input.0.npy", "x");

  EXPECT_EQ(mt::remove_unstarted_rank_folders(t.path, true).size(), 1u);
  EXPECT_TRUE(fs::exists(t.path / "step3" / "rank0"));
  EXPECT_EQ(mt::remove_unstarted_rank_folders(t.path, false), std::vector<fs::path>{t.path / "step3" / "rank0"});
  EXPECT_FALSE(fs::exists(t.path / "step3"));

  for (const char *step : {"step4", "step5"}) {
    const mt::FolderRepair r = mt::repair_rank_folder(t.path / step / "rank0", false);
    EXPECT_TRUE(r.removed) << step;
    EXPECT_FALSE(fs::exists(t.path / step)) << step;
  }
  const mt::FolderRepair kept = mt::repair_rank_folder(t.path / "step6" / "rank0", false);
  EXPECT_FALSE(kept.removed);
  EXPECT_EQ(kept.unrecoverable, 1);
  EXPECT_TRUE(fs::exists(t.path / "step6" / "rank0" / "dump_tensor_data" / "A.Default.0.input.0.npy"));
}

// The rank lock of a run (shim/capture/lifecycle.cpp): held, it marks folders being written; left by a killed run, it
// is stale and goes. flock conflicts between two descriptions of one file even within a process, so the test holds the
// lock itself.
TEST(RankLocks, HeldMeansLiveAndStaleOnesAreRemoved) {
  TempDir t;
  put(t.path / "step0" / "rank1" / "dump.json", "{}");
  put(t.path / "step0" / "rank" / "dump.json", "{}");
  const fs::path lock = t.path / ".msprobe_shim.rank1.lock";
  put(lock, "4242\n");
  put(t.path / "notes.txt", "not a lock");
  EXPECT_FALSE(mt::rank_lock_of(t.path / "step0" / "rank").has_value());  // no lock file: nothing to say
  const int fd = ::open(lock.c_str(), O_RDWR | O_CLOEXEC);
  ASSERT_GE(fd, 0);
  ASSERT_EQ(::flock(fd, LOCK_EX | LOCK_NB), 0);
  std::optional<mt::RankLock> held = mt::rank_lock_of(t.path / "step0" / "rank1");
  ASSERT_TRUE(held.has_value());
  EXPECT_TRUE(held->live);
  EXPECT_EQ(held->owner, "4242");
  ASSERT_EQ(mt::rank_locks_in(t.path).size(), 1u);
  EXPECT_FALSE(mt::remove_stale_lock(*held));  // a live run's lock stays
  EXPECT_TRUE(fs::exists(lock));
  ::close(fd);  // the run ended without deleting it (SIGKILL)
  std::vector<mt::RankLock> stale = mt::rank_locks_in(t.path);
  ASSERT_EQ(stale.size(), 1u);
  EXPECT_FALSE(stale[0].live);
  EXPECT_TRUE(mt::remove_stale_lock(stale[0]));
  EXPECT_FALSE(fs::exists(lock));
  EXPECT_TRUE(fs::exists(t.path / "notes.txt"));
}

}  // namespace
