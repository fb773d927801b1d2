// A dump folder's files (collector/dump_files.h): tensor files under their names, long names replaced by random digits
// with a mapping.csv row, symlinks never followed, an existing file never replaced.
#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <random>
#include <regex>
#include <set>

#include "collector/dump_files.h"

namespace mcol = msprobe::collector;
namespace fs = std::filesystem;

namespace {

class DumpDir : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() / ("collector_naming_" + std::to_string(::getpid()));
    fs::remove_all(dir_);
    fs::create_directories(dir_);
  }
  void TearDown() override { fs::remove_all(dir_); }
  fs::path dir_;
};

TEST_F(DumpDir, ShortNamesAreUsedAsIs) {
  auto f = mcol::create_dump_file(dir_, "Add.Default.0.input.0.npy");
  ASSERT_GE(f.fd, 0);
  EXPECT_EQ(f.file_name, "Add.Default.0.input.0.npy");
  EXPECT_FALSE(f.renamed());
  EXPECT_EQ(::write(f.fd, "abc", 3), 3);
  ::close(f.fd);
  f = mcol::create_dump_file(dir_, "Add.Default.0.input.0.npy");  // truncates
  ::close(f.fd);
  EXPECT_EQ(fs::file_size(dir_ / "Add.Default.0.input.0.npy"), 0u);
  const std::string exactly255 = std::string(251, 'k') + ".npy";
  f = mcol::create_dump_file(dir_, exactly255);
  ::close(f.fd);
  EXPECT_EQ(f.file_name, exactly255);
  for (std::string_view bad : {"..", ".", "a/../../etc", ""})
    EXPECT_THROW(mcol::create_dump_file(dir_, bad), std::invalid_argument) << bad;
}

TEST_F(DumpDir, SymlinksAreNeverFollowed) {
  { std::ofstream(dir_ / "victim") << "precious"; }
  fs::create_symlink(dir_ / "victim", dir_ / "Add.Default.0.input.0.npy");
  EXPECT_THROW(mcol::create_dump_file(dir_, "Add.Default.0.input.0.npy"), std::system_error);
  fs::create_symlink(dir_ / "victim", dir_ / "mapping.csv");
  EXPECT_THROW(mcol::append_mapping_row(dir_, "a,b"), std::system_error);
  std::ifstream in(dir_ / "victim");
  std::string content;
  in >> content;
  EXPECT_EQ(content, "precious");
}

TEST_F(DumpDir, LongNamesGetRandomDigitsAndAMappingRow) {
  const std::string original = std::string(256, 'M') + ".output.0.npy";
  auto f = mcol::create_dump_file(dir_, original);
  ASSERT_GE(f.fd, 0);
  ::close(f.fd);
  EXPECT_TRUE(std::regex_match(f.file_name, std::regex("[0-9]{32}\\.npy"))) << f.file_name;
  EXPECT_EQ(f.mapping_row, f.file_name + "," + original);
  EXPECT_TRUE(fs::exists(dir_ / f.file_name));
  mcol::append_mapping_row(dir_, f.mapping_row);
  mcol::append_mapping_row(dir_, "x,y");
  std::ifstream in(dir_ / "mapping.csv");
  std::string content((std::istreambuf_iterator<char>(in)), {});
  EXPECT_EQ(content, f.mapping_row + "\nx,y\n");  // no header
}

TEST_F(DumpDir, LongNamesNeverReplaceAnExistingFile) {
  const std::string original = std::string(400, 'Z') + ".npy";
  std::mt19937_64 a(42), b(42);  // same seed: b's first draw collides with a's file
  auto first = mcol::create_dump_file(dir_, original, a);
  ::close(first.fd);
  { std::ofstream(dir_ / first.file_name) << "keep"; }
  auto second = mcol::create_dump_file(dir_, original, b);
  ::close(second.fd);
  EXPECT_NE(first.file_name, second.file_name);
  std::ifstream in(dir_ / first.file_name);
  std::string kept;
  in >> kept;
  EXPECT_EQ(kept, "keep");
  std::set<std::string> names;
  for (int i = 0; i < 50; ++i) {
    auto f = mcol::create_dump_file(dir_, original);
    ::close(f.fd);
    names.insert(f.file_name);
  }
  EXPECT_EQ(names.size(), 50u);
}

}  // namespace
