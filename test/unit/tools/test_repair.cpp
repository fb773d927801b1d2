// Journal repair: a dump.json / construct.json written by the collector's journal writers and cut at every byte
// must come back as valid JSON holding exactly the entries that were complete at the cut.
#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <limits>

#include "collector/json_writer.h"
#include "tools/reader/dump_reader.h"
#include "tools/reader/json_reader.h"
#include "tools/reader/repair.h"

namespace mt = msprobe::tools;
namespace mc = msprobe::collector;
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
  mc::DumpJsonWriter w;
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
    j.member_ends.push_back(static_cast<size_t>(fs::file_size(p)));
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
  cb.on_kernel = [&](mt::KernelEntry &&k) {
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
  mc::ConstructJsonWriter w;
  w.begin(p);
  std::vector<size_t> ends;
  for (int i = 0; i < 6; ++i) {
    w.append("Add.Default." + std::to_string(i));
    ends.push_back(static_cast<size_t>(fs::file_size(p)));
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

}  // namespace
