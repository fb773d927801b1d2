// dump.json and construct.json as journals (collector/journal.h): valid JSON on disk after begin and after every
// append (a live run's files can be read), one write per batch, closed by the destructor.
#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>

#include <nlohmann/json.hpp>

#include "collector/journal.h"

namespace mc = msprobe::format;
namespace mcol = msprobe::collector;
namespace fs = std::filesystem;
using mc::Framework;

namespace {

std::string slurp(const fs::path &p) {
  std::ifstream in(p, std::ios::binary);
  return std::string((std::istreambuf_iterator<char>(in)), {});
}

// An entry with a tensor, a value and a note.
mc::KernelEntry entry(std::string name) {
  mc::KernelEntry e;
  e.name = std::move(name);
  mc::TensorSummary t;
  t.shape = {2, 3};
  e.input_args = mc::ArgList{mc::Arg{t}, mc::Arg{mc::ValueArg{"float", 2.0}}};
  e.output = mc::ArgList{mc::Arg{t}};
  e.launch_index = 5;
  e.timestamp_us = 1733905446819790;
  e.notes.emplace_back("host_op", "aclnnAdd");
  return e;
}

class JournalDir : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() / ("collector_journal_" + std::to_string(::getpid()));
    fs::remove_all(dir_);
    fs::create_directories(dir_);
  }
  void TearDown() override { fs::remove_all(dir_); }
  fs::path dir_;
};

TEST_F(JournalDir, DumpJsonIsValidJsonAfterEveryAppend) {
  mcol::DumpJsonWriter w;
  mc::DumpHeader h;
  h.task = mc::Task::Tensor;
  h.dump_data_dir = "/abs/step0/rank0/dump_tensor_data";
  w.begin(dir_ / "dump.json", h);
  const std::string head =
      "{\"task\": \"tensor\", \"level\": \"L2\", \"framework\": \"mindspore\", \"host_framework\": \"acl\", "
      "\"dump_data_dir\": \"/abs/step0/rank0/dump_tensor_data\", \"data\": {\n";
  const std::string tail(mc::kDumpJsonSuffix);
  EXPECT_EQ(slurp(dir_ / "dump.json"), head + tail);  // an empty dump, valid before any kernel
  EXPECT_TRUE(nlohmann::json::parse(slurp(dir_ / "dump.json"))["data"].empty());
  w.append(entry("Add.Default.0"));
  const std::string e0 = mc::kernel_entry_json(entry("Add.Default.0"), Framework::MindSpore);
  EXPECT_EQ(slurp(dir_ / "dump.json"), head + e0 + tail);
  w.append(entry("Add.Default.1"));
  const std::string e1 = mc::kernel_entry_json(entry("Add.Default.1"), Framework::MindSpore);
  EXPECT_EQ(slurp(dir_ / "dump.json"), head + e0 + ",\n" + e1 + tail);
  EXPECT_EQ(nlohmann::json::parse(slurp(dir_ / "dump.json"))["data"].size(), 2u);  // readable while still open
  EXPECT_EQ(w.journal().entries(), 2u);
  w.finish();
  EXPECT_EQ(slurp(dir_ / "dump.json"), head + e0 + ",\n" + e1 + tail);
  w.finish();  // idempotent
  EXPECT_EQ(slurp(dir_ / "dump.json"), head + e0 + ",\n" + e1 + tail);
}

TEST_F(JournalDir, DestructorClosesAndBatchesAreOneWrite) {
  {
    mcol::ConstructJsonWriter c;
    c.begin(dir_ / "construct.json");
    c.append("Add.Default.0");
    c.append("Mul.Default.0");
  }
  EXPECT_EQ(slurp(dir_ / "construct.json"), "{\n\"Add.Default.0\": null,\n\"Mul.Default.0\": null\n}\n");
  mcol::JsonJournal j;
  j.begin(dir_ / "j.json", "{", "\n}\n");
  const std::string batch[] = {"\"a\": null", "\"b\": null"};
  j.append_batch(batch);
  j.append_batch(batch);
  j.finish();
  EXPECT_EQ(slurp(dir_ / "j.json"), "{\n\"a\": null,\n\"b\": null,\n\"a\": null,\n\"b\": null\n}\n");
  EXPECT_THROW(j.append("\"c\": null"), std::logic_error);
}

}  // namespace
