// tools/reader/csv: quoting that round-trips through the record parser (with a record cut by a kill), the plain
// lines of mapping.csv, and the appending writer's file modes and sticky errors.
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <sstream>

#include "tools/reader/csv.h"

namespace mt = msprobe::tools;
namespace fs = std::filesystem;

namespace {

fs::path temp_path(const std::string &name) {
  const fs::path dir = fs::temp_directory_path() / ("tools_csv_" + std::to_string(::getpid()));
  fs::create_directories(dir);
  const fs::path p = dir / name;
  fs::remove(p);
  return p;
}

std::string slurp(const fs::path &p) {
  std::ifstream in(p, std::ios::binary);
  std::ostringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

unsigned mode_of(const fs::path &p) {
  struct stat st {};
  EXPECT_EQ(::stat(p.c_str(), &st), 0);
  return st.st_mode & 0777;
}

}  // namespace

TEST(Csv, CellsAreQuotedOnlyWhenNeeded) {
  EXPECT_EQ(mt::csv_cell("plain"), "plain");
  EXPECT_EQ(mt::csv_cell(""), "");
  EXPECT_EQ(mt::csv_cell("a,b"), "\"a,b\"");
  EXPECT_EQ(mt::csv_cell("say \"hi\""), "\"say \"\"hi\"\"\"");
  EXPECT_EQ(mt::csv_cell("two\nlines"), "\"two\nlines\"");
  EXPECT_EQ(mt::csv_cell("cr\r"), "\"cr\r\"");
  const std::vector<std::string> cells = {"a", "b,c", "", "\"q\""};
  EXPECT_EQ(mt::csv_row(cells), "a,\"b,c\",,\"\"\"q\"\"\"\n");
}

TEST(Csv, RecordsRoundTripAndACutRecordIsLeftOut) {
  const std::vector<std::vector<std::string>> rows = {
      {"API name", "Message"}, {"x,y", "line\nbreak"}, {"\"quoted\"", ""}, {"a", "b"}};
  std::string text;
  for (const auto &r : rows) text += mt::csv_row(r);
  const size_t whole = text.size();
  mt::CsvRecords got = mt::parse_csv(text);
  EXPECT_EQ(got.rows, rows);
  EXPECT_EQ(got.complete, whole);

  text += "cut,\"in the mid";
  got = mt::parse_csv(text);
  EXPECT_EQ(got.rows, rows);
  EXPECT_EQ(got.complete, whole);

  got = mt::parse_csv("a,b\r\nc\n");
  EXPECT_EQ(got.rows, (std::vector<std::vector<std::string>>{{"a", "b"}, {"c"}}));
  EXPECT_TRUE(mt::parse_csv("").rows.empty());
}

TEST(Csv, PlainLinesSplitAtTheFirstCommaOnly) {
  const auto lines = mt::plain_csv_lines("123.npy,long.name.npy\r\n\nbroken\n456.npy,x,\"y\".npy\nlast,");
  ASSERT_EQ(lines.size(), 4u);
  EXPECT_EQ(lines[0].number, 1u);
  EXPECT_EQ(lines[0].first, "123.npy");
  EXPECT_EQ(lines[0].rest, "long.name.npy");
  EXPECT_EQ(lines[1].number, 3u);
  EXPECT_EQ(lines[1].first, "broken");
  EXPECT_FALSE(lines[1].rest);
  EXPECT_EQ(lines[2].rest, "x,\"y\".npy");
  EXPECT_EQ(lines[3].number, 5u);
  EXPECT_EQ(lines[3].rest, "");
  EXPECT_TRUE(mt::plain_csv_lines("\n\r\n").empty());
}

TEST(Csv, AppenderModesFollowHowTheFileIsOpened) {
  const mode_t old = ::umask(022);
  const fs::path fresh = temp_path("new.csv"), replaced = temp_path("replaced.csv");
  {
    mt::CsvAppender a(fresh, mt::CsvAppender::Open::New);
    ASSERT_FALSE(a.failed());
    a.append("h\n");
    mt::CsvAppender b(replaced, mt::CsvAppender::Open::Replace);
    b.append("old\nrows\n");
    b.close();
    EXPECT_FALSE(b.failed());
  }
  EXPECT_EQ(mode_of(fresh), 0644u);
  EXPECT_EQ(mode_of(replaced), 0644u);
  ::umask(002);
  fs::remove(replaced);
  { mt::CsvAppender(replaced, mt::CsvAppender::Open::Replace).append("x\n"); }
  EXPECT_EQ(mode_of(replaced), 0664u);
  { mt::CsvAppender(replaced, mt::CsvAppender::Open::Replace).append("y\n"); }
  EXPECT_EQ(slurp(replaced), "y\n");
  ::umask(old);

  {
    mt::CsvAppender a(fresh, mt::CsvAppender::Open::Existing);
    a.append("r1\n");
    a.append("r2\n");
  }
  EXPECT_EQ(slurp(fresh), "h\nr1\nr2\n");

  mt::CsvAppender again(fresh, mt::CsvAppender::Open::New);  // it exists
  EXPECT_TRUE(again.failed());
  EXPECT_EQ(again.error(), EEXIST);
  mt::CsvAppender missing(temp_path("missing.csv"), mt::CsvAppender::Open::Existing);
  EXPECT_TRUE(missing.failed());
  EXPECT_EQ(missing.error(), ENOENT);
  missing.append("x\n");  // sticks: nothing written, the first error kept
  EXPECT_EQ(missing.error(), ENOENT);
  EXPECT_FALSE(fs::exists(missing.path()));
}

TEST(Csv, AWriteThatFailsSticks) {
  if (!fs::exists("/dev/full")) GTEST_SKIP() << "no /dev/full";
  mt::CsvAppender a("/dev/full", mt::CsvAppender::Open::Existing);
  ASSERT_FALSE(a.failed());
  a.append("row\n");
  EXPECT_TRUE(a.failed());
  EXPECT_EQ(a.error(), ENOSPC);
}
