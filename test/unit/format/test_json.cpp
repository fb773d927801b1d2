// dump.json / stack.json / construct.json text: numbers, escaping, key order, the journal text and its repair.
// (The journals that append it to files are the collector's: test/unit/collector/test_journal.cpp.)
// (Python's json module parses the same output in test_collector_formats.py.)
#include <gtest/gtest.h>
#include <unistd.h>

#include <cmath>
#include <filesystem>
#include <fstream>
#include <limits>

#include "format/dump_json.h"
#include "format/io.h"

namespace mc = msprobe::format;
namespace fs = std::filesystem;
using mc::DType;
using mc::Framework;

namespace {

std::string slurp(const fs::path &p) {
  std::ifstream in(p, std::ios::binary);
  return std::string((std::istreambuf_iterator<char>(in)), {});
}

std::string str(std::string_view s) {
  std::string out;
  mc::append_json_string(out, s);
  return out;
}

TEST(Json, NumbersLikePythonRepr) {
  const std::pair<double, const char *> cases[] = {
      {1.0, "1.0"},
      {-0.0, "-0.0"},
      {0.0, "0.0"},
      {0.1, "0.1"},
      {1.5, "1.5"},
      {static_cast<double>(std::sqrt(5.0f)), "2.2360680103302"},
      {static_cast<double>(0.1f), "0.10000000149011612"},
      {1e-4, "0.0001"},
      {1e-5, "1e-05"},
      {1.5e-7, "1.5e-07"},
      {123456789.0, "123456789.0"},
      {1e15, "1000000000000000.0"},
      {1e16, "1e+16"},
      {1.2345678901234567e16, "1.2345678901234568e+16"},
      {65504.0, "65504.0"},
      {1e300, "1e+300"},
      {5e-324, "5e-324"},
      {std::numeric_limits<double>::max(), "1.7976931348623157e+308"},
      {std::numeric_limits<double>::quiet_NaN(), "NaN"},
      {std::numeric_limits<double>::infinity(), "Infinity"},
      {-std::numeric_limits<double>::infinity(), "-Infinity"},
  };
  for (const auto &[v, text] : cases) EXPECT_EQ(mc::json_number(v), text);
  std::string s;
  mc::append_json_integer(s, int64_t{-9223372036854775807} - 1);
  EXPECT_EQ(s, "-9223372036854775808");
  s.clear();
  mc::append_json_integer(s, uint64_t{18446744073709551615u});
  EXPECT_EQ(s, "18446744073709551615");
}

TEST(Json, StringsLikeJsonDumpEnsureAscii) {
  EXPECT_EQ(str("plain"), "\"plain\"");
  EXPECT_EQ(str("q\"b\\s/"), "\"q\\\"b\\\\s/\"");
  EXPECT_EQ(str("a\nb\tc\r\b\f"), "\"a\\nb\\tc\\r\\b\\f\"");
  EXPECT_EQ(str(std::string("\x01\x1f\x7f", 3)), "\"\\u0001\\u001f\\u007f\"");
  EXPECT_EQ(str(std::string("\0", 1)), "\"\\u0000\"");
  EXPECT_EQ(str("\xc3\xa9"), "\"\\u00e9\"");                    // é
  EXPECT_EQ(str("\xe4\xb8\xad"), "\"\\u4e2d\"");                // 中
  EXPECT_EQ(str("\xf0\x9f\x98\x80"), "\"\\ud83d\\ude00\"");     // 😀 as a surrogate pair
  EXPECT_EQ(str("\xff"), "\"\\ufffd\"");                        // invalid byte
  EXPECT_EQ(str("\xc0\xaf"), "\"\\ufffd\\ufffd\"");             // overlong '/'
  EXPECT_EQ(str("\xed\xa0\x80"), "\"\\ufffd\\ufffd\\ufffd\"");  // UTF-8 encoded surrogate
  EXPECT_EQ(str("\xe4\xb8"), "\"\\ufffd\\ufffd\"");             // truncated sequence
  // Plain runs between escapes, at either end, and after text already in the buffer (runs are appended whole).
  EXPECT_EQ(str("ab\"cd\\ef\ngh\xe4\xb8\xadij"), "\"ab\\\"cd\\\\ef\\ngh\\u4e2dij\"");
  EXPECT_EQ(str("\"x\n"), "\"\\\"x\\n\"");
  std::string out = "[";
  mc::append_json_string(out, "File a.py, line 3, in f");
  EXPECT_EQ(out, "[\"File a.py, line 3, in f\"");
}

mc::TensorSummary tensor() {
  mc::TensorSummary t;
  t.dtype = DType::F32;
  t.shape = {2, 3};
  const float data[] = {1, 2, 3, 4, 5, 6};
  t.stats = mc::compute_stats(DType::F32, data, 6);
  return t;
}

TEST(Json, TensorKeysInMsprobeOrder) {
  mc::TensorSummary t = tensor();
  std::string s;
  mc::append_tensor_summary(s, t, Framework::MindSpore);
  EXPECT_EQ(s,
            "{\"type\": \"mindspore.Tensor\", \"dtype\": \"Float32\", \"shape\": [2, 3], \"Max\": 6.0, \"Min\": 1.0, "
            "\"Mean\": 3.5, \"Norm\": 9.539392471313477}");
  t.md5 = "2e3fa576";
  t.data_name = "Add.Default.0.input.0.npy";
  t.format = "ND";
  t.stride = std::vector<int64_t>{3, 1};
  t.offset = 0;
  t.dtype = DType::BF16;
  s.clear();
  mc::append_tensor_summary(s, t, Framework::PyTorch);
  EXPECT_EQ(s,
            "{\"type\": \"torch.Tensor\", \"dtype\": \"torch.bfloat16\", \"shape\": [2, 3], \"Max\": 6.0, "
            "\"Min\": 1.0, \"Mean\": 3.5, \"Norm\": 9.539392471313477, \"md5\": \"2e3fa576\", "
            "\"data_name\": \"Add.Default.0.input.0.npy\", \"format\": \"ND\", \"stride\": [3, 1], \"offset\": 0}");
  // Empty, bool, 0-d int, NaN.
  mc::TensorSummary e;
  e.dtype = DType::Bool;
  e.shape = {0};
  s.clear();
  mc::append_tensor_summary(s, e, Framework::MindSpore);
  EXPECT_EQ(s,
            "{\"type\": \"mindspore.Tensor\", \"dtype\": \"Bool\", \"shape\": [0], \"Max\": null, \"Min\": null, "
            "\"Mean\": null, \"Norm\": null}");
  const uint8_t b[] = {1, 0};
  e.shape = {2};
  e.stats = mc::compute_stats(DType::Bool, b, 2);
  s.clear();
  mc::append_tensor_summary(s, e, Framework::MindSpore);
  EXPECT_NE(s.find("\"Max\": true, \"Min\": false, \"Mean\": null, \"Norm\": null"), std::string::npos) << s;
  const int64_t seven = 7;
  e.dtype = DType::I64;
  e.shape = {};
  e.stats = mc::compute_stats(DType::I64, &seven, std::span<const int64_t>{});
  s.clear();
  mc::append_tensor_summary(s, e, Framework::MindSpore);
  EXPECT_NE(s.find("\"shape\": [], \"Max\": 7, \"Min\": 7, \"Mean\": 7, \"Norm\": 7}"), std::string::npos) << s;
  const float nan[] = {1, NAN};
  e.dtype = DType::F32;
  e.shape = {2};
  e.stats = mc::compute_stats(DType::F32, nan, 2);
  e.dtype_name = "-weird";  // free text is made csv-safe
  s.clear();
  mc::append_tensor_summary(s, e, Framework::MindSpore);
  EXPECT_NE(s.find("\"dtype\": \" -weird\""), std::string::npos) << s;
  EXPECT_NE(s.find("\"Max\": NaN, \"Min\": NaN, \"Mean\": NaN, \"Norm\": NaN"), std::string::npos) << s;
}

mc::KernelEntry entry(std::string name) {
  mc::KernelEntry e;
  e.name = std::move(name);
  mc::ArgList list;
  list.push_back(mc::Arg{tensor()});
  list.push_back(mc::Arg{});
  e.input_args = mc::ArgList{mc::Arg{tensor()}, mc::Arg{}, mc::Arg{mc::ValueArg{"float", 2.0}},
                             mc::Arg{mc::ValueArg{"tuple", std::vector<int64_t>{1, -2}}}, mc::Arg{std::move(list)}};
  e.output = mc::ArgList{mc::Arg{tensor()}};
  e.launch_index = 5;
  e.task_id = 3;
  e.stream_id = 1;
  e.timestamp_us = 1733905446819790;
  e.notes.emplace_back("host_op", "aclnnAdd");
  e.launch_extra.emplace_back("device", int64_t{0});
  return e;
}

TEST(Json, KernelEntryLayout) {
  const std::string s = mc::kernel_entry_json(entry("Add.Default.0.forward"), Framework::MindSpore);
  const std::string t =
      "{\"type\": \"mindspore.Tensor\", \"dtype\": \"Float32\", \"shape\": [2, 3], \"Max\": 6.0, \"Min\": 1.0, "
      "\"Mean\": 3.5, \"Norm\": 9.539392471313477}";
  EXPECT_EQ(s, "\"Add.Default.0.forward\": {\"input_args\": [" + t + ", null, {\"type\": \"float\", \"value\": 2.0}, " +
                   "[{\"type\": \"int\", \"value\": 1}, {\"type\": \"int\", \"value\": -2}], [" + t +
                   ", null]], \"output\": [" + t +
                   "], \"launch\": {\"index\": 5, \"task_id\": 3, \"stream_id\": 1, \"timestamp\": 1733905446819790, "
                   "\"device\": 0}, \"host_op\": \"aclnnAdd\"}");
  EXPECT_EQ(s.find('\n'), std::string::npos);
  mc::KernelEntry only_out = entry("X.Default.0");
  only_out.input_args.reset();
  EXPECT_EQ(mc::kernel_entry_json(only_out, Framework::MindSpore).find("input_args"), std::string::npos);
  mc::KernelEntry v;
  v.name = "V.Default.0";
  v.input_args = mc::ArgList{mc::Arg{mc::ValueArg{"bool", true}},
                             mc::Arg{mc::ValueArg{"str", std::string("=1")}},
                             mc::Arg{mc::ValueArg{"list", std::vector<double>{0.5, NAN}}},
                             mc::Arg{mc::ValueArg{"list", std::vector<bool>{true, false}}},
                             mc::Arg{mc::ValueArg{"int", int64_t{-3}}},
                             mc::Arg{mc::ValueArg{"NoneType", {}}}};
  // Literals pick the intended alternative (no const char* -> bool, no int -> double).
  const mc::ValueArg lit_s{"str", "abc"}, lit_i{"int", 3}, lit_b{"bool", true};
  EXPECT_TRUE(std::holds_alternative<std::string>(lit_s.value));
  EXPECT_TRUE(std::holds_alternative<int64_t>(lit_i.value));
  EXPECT_TRUE(std::holds_alternative<bool>(lit_b.value));
  EXPECT_NE(mc::kernel_entry_json(v, Framework::MindSpore)
                .find("[{\"type\": \"bool\", \"value\": true}, {\"type\": \"str\", \"value\": \" =1\"}, "
                      "[{\"type\": \"float\", \"value\": 0.5}, {\"type\": \"float\", \"value\": NaN}], "
                      "[{\"type\": \"bool\", \"value\": true}, {\"type\": \"bool\", \"value\": false}], "
                      "{\"type\": \"int\", \"value\": -3}, {\"type\": \"NoneType\", \"value\": null}]"),
            std::string::npos);
}

// msprobe's compare reads a leaf without statistics as its value: a list value aborts it (issue 17). Sequences
// are lists of scalar leaves; a named one (an aclop attribute) names each leaf; an empty one is []; a null value
// (an array handle the shim did not know) keeps the ACL type.
TEST(Json, SequencesAreListsOfScalarLeaves) {
  mc::KernelEntry v;
  v.name = "S.Default.0";
  v.input_args = mc::ArgList{mc::Arg{mc::ValueArg{"aclIntArray", std::vector<int64_t>{64}}},
                             mc::Arg{mc::ValueArg{"list[int]", std::vector<int64_t>{1, 2}, "axes"}},
                             mc::Arg{mc::ValueArg{"aclIntArray", std::vector<int64_t>{}}},
                             mc::Arg{mc::ValueArg{"aclIntArray", std::monostate{}}},
                             mc::Arg{mc::ValueArg{"int", int64_t{7}, "k"}}};
  v.launch_extra.emplace_back("shape_extra", std::vector<int64_t>{1, 2});  // not an argument: a plain list
  EXPECT_EQ(
      mc::kernel_entry_json(v, Framework::MindSpore),
      "\"S.Default.0\": {\"input_args\": [[{\"type\": \"int\", \"value\": 64}], "
      "[{\"type\": \"int\", \"value\": 1, \"name\": \"axes\"}, {\"type\": \"int\", \"value\": 2, \"name\": \"axes\"}], "
      "[], {\"type\": \"aclIntArray\", \"value\": null}, {\"type\": \"int\", \"value\": 7, \"name\": \"k\"}], "
      "\"launch\": {\"index\": 0, \"task_id\": 0, \"stream_id\": 0, \"timestamp\": 0, \"shape_extra\": [1, 2]}}");
}

class FileDir : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() / ("collector_json_" + std::to_string(::getpid()));
    fs::remove_all(dir_);
    fs::create_directories(dir_);
  }
  void TearDown() override { fs::remove_all(dir_); }
  fs::path dir_;
};

TEST(Json, RepairKeepsEveryCompleteEntry) {
  const std::string head = mc::dump_json_prefix({}) + "\n";
  const std::string e0 = mc::kernel_entry_json(entry("Add.Default.0"), Framework::MindSpore);
  const std::string e1 = mc::kernel_entry_json(entry("Add.Default.1"), Framework::MindSpore);
  const std::string full = head + e0 + ",\n" + e1;
  const std::string suffix(mc::kDumpJsonSuffix);
  for (size_t cut = 0; cut <= full.size(); ++cut) {
    const auto r = mc::repair_journal_text(full.substr(0, cut), suffix);
    if (cut < head.size()) {
      EXPECT_FALSE(r) << cut;
      continue;
    }
    ASSERT_TRUE(r) << cut;
    std::string expect = head;
    if (cut >= head.size() + e0.size()) expect += e0;
    if (cut == full.size()) expect += ",\n" + e1;
    EXPECT_EQ(*r, expect + suffix) << cut;
  }
  EXPECT_EQ(*mc::repair_journal_text(full + suffix, suffix), full + suffix);  // finished files stay as they are
  const std::string cons = "{\n\"A.Default.0\": null,\n\"A.Default.1\": nu";
  EXPECT_EQ(*mc::repair_journal_text(cons, mc::kConstructJsonSuffix), "{\n\"A.Default.0\": null\n}\n");
}

TEST(Json, StackAndConstructFiles) {
  const mc::StackGroup groups[] = {
      {{"Add.Default.0", "Add.Default.1"}, {"File /t.py, line 4, in f, \n y = x + 1", "+0x1a libfoo.so"}},
      {{"Mul.Default.0"}, {}},
  };
  EXPECT_EQ(mc::stack_json(groups),
            "{\n\"0\": [[\"Add.Default.0\", \"Add.Default.1\"], [\"File /t.py, line 4, in f, \\n y = x + 1\", "
            "\" +0x1a libfoo.so\"]],\n\"1\": [[\"Mul.Default.0\"], []]\n}\n");
  EXPECT_EQ(mc::stack_json({}), "{\n}\n");
  const std::string names[] = {"A.Default.0", "B.Default.0"};
  EXPECT_EQ(mc::construct_json(names), "{\n\"A.Default.0\": null,\n\"B.Default.0\": null\n}\n");
}

TEST_F(FileDir, AtomicWriteReplaces) {
  mc::write_file_atomic(dir_ / "stack.json", "{}\n");
  mc::write_file_atomic(dir_ / "stack.json", "{\"0\": [[], []]}\n");
  EXPECT_EQ(slurp(dir_ / "stack.json"), "{\"0\": [[], []]}\n");
  size_t files = 0;
  for ([[maybe_unused]] const auto &e : fs::directory_iterator(dir_)) ++files;
  EXPECT_EQ(files, 1u);  // no temporaries left
}

}  // namespace
