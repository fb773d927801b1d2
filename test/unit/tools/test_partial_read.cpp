// A dump.json read before its end (tools/reader/partial_read.h): written by the collector's own journal writer and cut
// at every byte, it yields exactly the entries complete there, and says whether a running process is still writing it
// (its rank lock held), a killed run left it, or it is damaged before its last line.
#include <fcntl.h>
#include <gtest/gtest.h>
#include <sys/file.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>

#include "collector/journal.h"
#include "format/dump_json.h"
#include "tools/reader/partial_read.h"

namespace mt = msprobe::tools;
namespace mc = msprobe::format;
namespace fs = std::filesystem;
using Why = mt::Shortfall::Why;

namespace {

struct TempDir {
  fs::path path;
  TempDir() {
    path = fs::temp_directory_path() / ("tools_partial_read_" + std::to_string(::getpid()));
    fs::remove_all(path);
    fs::create_directories(path / "step0" / "rank0");
  }
  ~TempDir() { fs::remove_all(path); }
  fs::path folder() const { return path / "step0" / "rank0"; }
};

std::string slurp(const fs::path &p) {
  std::ifstream in(p, std::ios::binary);
  return std::string((std::istreambuf_iterator<char>(in)), {});
}

void put(const fs::path &p, std::string_view text) { std::ofstream(p, std::ios::binary) << text; }

// `n` entries written by the collector's journal writer; *ends gets the byte after each entry's member.
std::string journal(const fs::path &p, int n, std::vector<size_t> *ends) {
  msprobe::collector::DumpJsonWriter w;
  mc::DumpHeader h;
  h.task = mc::Task::Statistics;
  w.begin(p, h);
  for (int i = 0; i < n; ++i) {
    mc::KernelEntry e;
    e.name = "Add.Default." + std::to_string(i) + ".forward";
    mc::TensorSummary t;
    t.shape = {2, 3};
    t.stats.max = mc::StatValue::of_real(1.5 + i);
    e.input_args = mc::ArgList{mc::Arg{t}};
    e.output = mc::ArgList{};
    e.launch_index = static_cast<uint64_t>(i);
    w.append(e);
    // The journal keeps its closing after the last member: the member ends before it.
    ends->push_back(static_cast<size_t>(fs::file_size(p)) - mc::kDumpJsonSuffix.size());
  }
  w.finish();
  return slurp(p);
}

mt::RankDir dir_of(const TempDir &t) { return mt::find_rank_dirs(t.path).front(); }

std::pair<std::optional<mt::Shortfall>, std::vector<std::string>> read(const mt::RankDir &d) {
  std::vector<std::string> names;
  mt::DumpCallbacks cb;
  cb.on_record = [&](mt::KernelRecord &&k) {
    names.push_back(k.name);
    return true;
  };
  mt::DumpHeaderRead header;
  auto s = mt::read_dump_json_partial(d, cb, &header);
  EXPECT_EQ(header.task, "statistics");
  return {s, names};
}

TEST(PartialRead, EveryCutYieldsTheCompleteEntriesAndSaysSo) {
  TempDir t;
  std::vector<size_t> ends;
  const std::string full = journal(t.folder() / "dump.json", 4, &ends);
  const size_t header_end = full.find('\n') + 1;
  for (size_t cut = header_end; cut < full.size() - 1; ++cut) {
    put(t.folder() / "dump.json", full.substr(0, cut));
    const auto [s, names] = read(dir_of(t));
    size_t complete = 0;
    while (complete < ends.size() && ends[complete] <= cut) ++complete;
    ASSERT_TRUE(s) << cut;
    EXPECT_EQ(s->why, Why::NotClosed) << cut;  // no lock: a killed run left it
    EXPECT_EQ(s->kernels, complete) << cut;
    EXPECT_EQ(names.size(), complete) << cut;
    EXPECT_EQ(s->folder, "step0/rank0");
    EXPECT_TRUE(s->damage());
    EXPECT_NE(
        s->text().find("step0/rank0: dump.json was not closed (the run that wrote it was killed or crashed): its " +
                       std::to_string(complete)),
        std::string::npos)
        << s->text();
  }
  put(t.folder() / "dump.json", full);
  const auto [closed, names] = read(dir_of(t));
  EXPECT_FALSE(closed);
  EXPECT_EQ(names.size(), 4u);
}

TEST(PartialRead, AFolderWhoseLockIsHeldIsBeingWritten) {
  TempDir t;
  std::vector<size_t> ends;
  const std::string full = journal(t.folder() / "dump.json", 3, &ends);
  put(t.folder() / "dump.json", full.substr(0, ends[1] + 2));  // two entries, as a writer leaves them between lines
  const fs::path lock = t.path / ".msprobe_shim.rank0.lock";
  put(lock, "4242\n");
  const int fd = ::open(lock.c_str(), O_RDWR | O_CLOEXEC);
  ASSERT_GE(fd, 0);
  ASSERT_EQ(::flock(fd, LOCK_EX | LOCK_NB), 0);  // flock conflicts between two open files of one process
  const auto [s, names] = read(dir_of(t));
  ::close(fd);
  ASSERT_TRUE(s);
  EXPECT_EQ(s->why, Why::BeingWritten);
  EXPECT_FALSE(s->damage());
  EXPECT_EQ(s->kernels, 2u);
  EXPECT_EQ(s->owner, "pid 4242");
  EXPECT_EQ(s->text(),
            "step0/rank0: being written by a running process (pid 4242): its 2 kernels written so far are "
            "read, the rest is not written yet");
  // Let go (the run ended, killed): the same file is not closed.
  EXPECT_EQ(read(dir_of(t)).first->why, Why::NotClosed);
}

TEST(PartialRead, DamageBeforeTheLastLineIsDamage) {
  TempDir t;
  std::vector<size_t> ends;
  std::string text = journal(t.folder() / "dump.json", 4, &ends);
  text[ends[1] - 3] = '@';  // inside the second entry, with two complete lines after it
  put(t.folder() / "dump.json", text);
  const auto [s, names] = read(dir_of(t));
  ASSERT_TRUE(s);
  EXPECT_EQ(s->why, Why::Damaged);
  EXPECT_EQ(s->kernels, 1u);
  EXPECT_EQ(names, std::vector<std::string>{"Add.Default.0.forward"});
  EXPECT_NE(s->text().find("dump.json is damaged at byte "), std::string::npos) << s->text();
}

TEST(PartialRead, WhereAParseStopped) {
  EXPECT_TRUE(mt::ends_at_last_line("{\"a\": 1,\n\"b\": 2", 15));     // cut in the last line
  EXPECT_TRUE(mt::ends_at_last_line("{\"a\": 1,\n\"b\": 2,\n", 17));  // at the end, after a line break
  EXPECT_FALSE(mt::ends_at_last_line("{\"a\": @,\n\"b\": 2,\n", 6));  // more lines follow
  EXPECT_TRUE(mt::ends_at_last_line("", 0));
}

}  // namespace
