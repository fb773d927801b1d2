// The shim's configuration: every MSPROBE_* variable (valid, invalid, hostile), msprobe config.json files (valid
// examples, every field's errors, hostile files), precedence, the message format, and the log helper.
#include <errno.h>
#include <fcntl.h>
#include <gtest/gtest.h>
#include <pthread.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <filesystem>
#include <fstream>
#include <map>
#include <thread>

#include "shim/config/config.h"
#include "shim/base/log.h"

namespace fs = std::filesystem;
using namespace msprobe::shim;

namespace {

using Vars = std::map<std::string, std::string>;

ConfigLoad load(const Vars &vars) {
  return load_config([&](const char *name) -> const char * {
    const auto it = vars.find(name);
    return it == vars.end() ? nullptr : it->second.c_str();
  });
}

// Every message is one line: no line breaks, no other control bytes, a sane length.
void expect_one_line(const std::string &m) {
  for (const char c : m) {
    const unsigned char u = static_cast<unsigned char>(c);
    ASSERT_FALSE(u < 0x20 || u == 0x7f) << "control byte in: " << m;
  }
  EXPECT_EQ(m.find("\xe2\x80\xa8"), std::string::npos) << m;  // U+2028 LINE SEPARATOR
  EXPECT_LT(m.size(), 800u) << m;
  EXPECT_EQ(m.rfind("msprobe-shim: ", 0), std::string::npos) << "the prefix is added when printing: " << m;
}

void expect_all_one_line(const ConfigLoad &l) {
  for (const std::string &e : l.errors) expect_one_line(e);
  for (const std::string &w : l.warnings) expect_one_line(w);
}

// Exactly one error, naming `name`, the config disabled.
std::string one_error(const Vars &vars, const std::string &name) {
  const ConfigLoad l = load(vars);
  expect_all_one_line(l);
  EXPECT_FALSE(l.config.enabled);
  EXPECT_EQ(l.errors.size(), 1u) << ::testing::PrintToString(l.errors);
  if (l.errors.empty()) return "";
  EXPECT_NE(l.errors[0].find(name), std::string::npos) << l.errors[0];
  return l.errors[0];
}

ConfigLoad ok(const Vars &vars) {
  ConfigLoad l = load(vars);
  EXPECT_TRUE(l.errors.empty()) << ::testing::PrintToString(l.errors);
  EXPECT_TRUE(l.config.enabled);
  expect_all_one_line(l);
  return l;
}

class TempDir {
 public:
  TempDir() {
    std::string t = (fs::temp_directory_path() / "msprobe_config_XXXXXX").string();
    path_ = ::mkdtemp(t.data());
  }
  ~TempDir() {
    std::error_code ec;
    fs::permissions(path_, fs::perms::owner_all, ec);
    fs::remove_all(path_, ec);
  }
  std::string write(const std::string &name, const std::string &content) const {
    const std::string p = (fs::path(path_) / name).string();
    std::ofstream(p, std::ios::binary) << content;
    return p;
  }
  std::string path(const std::string &name) const { return (fs::path(path_) / name).string(); }
  const std::string &dir() const { return path_; }

 private:
  std::string path_;
};

// ---- defaults and MSPROBE_ENABLE ----------------------------------------------------------------------------------

TEST(Config, DefaultsWithAnEmptyEnvironment) {
  const ConfigLoad l = ok({});
  const Config &c = l.config;
  EXPECT_TRUE(l.warnings.empty());
  EXPECT_EQ(c.dump_path, "./msprobe_dump");
  EXPECT_EQ(c.task, Task::Statistics);
  EXPECT_TRUE(c.steps.all());
  EXPECT_TRUE(c.ranks.all());
  EXPECT_TRUE(c.list.empty());
  EXPECT_FALSE(c.scope.has_value());
  EXPECT_EQ(c.data_mode, DataMode::All);
  EXPECT_EQ(c.summary_mode, SummaryMode::Statistics);
  EXPECT_EQ(c.file_format, FileFormat::Npy);
  EXPECT_EQ(c.stack, StackMode::Mixed);
  EXPECT_EQ(c.compress, Compress::Off);
  EXPECT_EQ(c.buffer_bytes, 1024ull << 20);
  EXPECT_EQ(c.overflow_nums, 1);
  EXPECT_EQ(c.log_level, LogLevel::Warn);
  EXPECT_EQ(c.precision, Precision::Low);
  EXPECT_TRUE(c.config_path.empty());
  for (size_t f = 0; f < static_cast<size_t>(Field::kCount); ++f) {
    EXPECT_EQ(c.source(static_cast<Field>(f)), Source::Default);
    EXPECT_EQ(c.source_of(static_cast<Field>(f)), "default");
  }
  // The default step marker: optimizer kernels, whole op types only.
  ASSERT_FALSE(c.step_marker.empty());
  for (const char *op : {"ApplyAdamW", "ApplyAdamWV2", "ApplyAdam", "AdamW", "ApplyMomentum", "Sgd", "SGD", "Lamb",
                         "ApplyFusedEmaAdam", "ApplyRMSProp"}) {
    EXPECT_TRUE(c.step_marker.matches(op)) << op;
  }
  for (const char *op : {"Add", "Matmul", "ApplyTopKTopP", "ApplyAdamWV3", "applyadamw", "ForeachNorm", ""}) {
    EXPECT_FALSE(c.step_marker.matches(op)) << op;
  }
  EXPECT_EQ(c.step_marker.pattern(), kDefaultStepMarker);
}

TEST(Config, EnableZeroIsAQuietPassThrough) {
  for (const char *off : {"0", "false", "OFF", "no", " 0 "}) {
    const ConfigLoad l =
        load({{"MSPROBE_ENABLE", off}, {"MSPROBE_TASK", "garbage"}, {"MSPROBE_CONFIG", "/nonexistent"}});
    EXPECT_FALSE(l.config.enabled) << off;
    EXPECT_TRUE(l.errors.empty()) << off;
    EXPECT_TRUE(l.warnings.empty()) << off;
  }
  for (const char *on : {"1", "true", "On", "yes"}) EXPECT_TRUE(ok({{"MSPROBE_ENABLE", on}}).config.enabled) << on;
  EXPECT_EQ(one_error({{"MSPROBE_ENABLE", "2"}}, "MSPROBE_ENABLE"),
            "MSPROBE_ENABLE=\"2\" is not valid; accepted: 1 or 0 (also true/false, on/off, yes/no)");
  EXPECT_EQ(one_error({{"MSPROBE_ENABLE", ""}}, "MSPROBE_ENABLE"),
            "MSPROBE_ENABLE=\"\" is empty; accepted: 1 or 0 (also true/false, on/off, yes/no)");
  // An invalid MSPROBE_ENABLE does not hide the other errors.
  EXPECT_EQ(load({{"MSPROBE_ENABLE", "maybe"}, {"MSPROBE_TASK", "x"}}).errors.size(), 2u);
}

// ---- keyword variables --------------------------------------------------------------------------------------------

// A check that one field of the configuration has one value.
template <typename T>
std::function<bool(const Config &)> is(T Config::*field, T value) {
  return [field, value](const Config &c) { return c.*field == value; };
}

struct KeywordCase {
  const char *var;
  std::vector<std::pair<const char *, std::function<bool(const Config &)>>> valid;
  const char *accepted;
};

std::vector<KeywordCase> keyword_cases() {
  return {
      {"MSPROBE_TASK",
       {{"statistics", is(&Config::task, Task::Statistics)},
        {"tensor", is(&Config::task, Task::Tensor)},
        {"overflow_check", is(&Config::task, Task::OverflowCheck)},
        {"structure", is(&Config::task, Task::Structure)},
        {"flight", is(&Config::task, Task::Flight)},
        {" Tensor\t", is(&Config::task, Task::Tensor)}},
       "statistics, tensor, overflow_check, structure, flight"},
      {"MSPROBE_DATA_MODE",
       {{"all", is(&Config::data_mode, DataMode::All)},
        {"input", is(&Config::data_mode, DataMode::Input)},
        {"OUTPUT", is(&Config::data_mode, DataMode::Output)}},
       "all, input, output"},
      {"MSPROBE_SUMMARY_MODE",
       {{"statistics", is(&Config::summary_mode, SummaryMode::Statistics)},
        {"md5", is(&Config::summary_mode, SummaryMode::Md5)}},
       "statistics, md5"},
      {"MSPROBE_FILE_FORMAT",
       {{"npy", is(&Config::file_format, FileFormat::Npy)}, {"bin", is(&Config::file_format, FileFormat::Bin)}},
       "npy, bin"},
      {"MSPROBE_STACK",
       {{"off", is(&Config::stack, StackMode::Off)},
        {"native", is(&Config::stack, StackMode::Native)},
        {"python", is(&Config::stack, StackMode::Python)},
        {"mixed", is(&Config::stack, StackMode::Mixed)}},
       "off, native, python, mixed"},
      {"MSPROBE_COMPRESS",
       {{"off", is(&Config::compress, Compress::Off)}, {"lz4", is(&Config::compress, Compress::Lz4)}},
       "off, lz4"},
      {"MSPROBE_LOG_LEVEL",
       {{"error", is(&Config::log_level, LogLevel::Error)},
        {"warn", is(&Config::log_level, LogLevel::Warn)},
        {"warning", is(&Config::log_level, LogLevel::Warn)},
        {"info", is(&Config::log_level, LogLevel::Info)},
        {"DEBUG", is(&Config::log_level, LogLevel::Debug)},
        // msprobe's own numbers, so that an MSPROBE_LOG_LEVEL set for msprobe does not disable the shim
        {"0", is(&Config::log_level, LogLevel::Debug)},
        {"1", is(&Config::log_level, LogLevel::Info)},
        {"2", is(&Config::log_level, LogLevel::Warn)},
        {"3", is(&Config::log_level, LogLevel::Error)},
        {"4", is(&Config::log_level, LogLevel::Error)}},
       "error, warn, info, debug"},
      {"MSPROBE_PRECISION",
       {{"low", is(&Config::precision, Precision::Low)}, {"high", is(&Config::precision, Precision::High)}},
       "low, high"},
  };
}

std::string garbage_bytes() {
  std::string g = "\xff\xfe\x01\x1b[31mred\n\r\t\"\\";
  g += "\xe2\x80\xa8";  // U+2028
  g += "\xc3\xa9";      // a valid é
  return g;
}

TEST(Config, KeywordVariablesAcceptTheirValues) {
  for (const KeywordCase &k : keyword_cases()) {
    for (const auto &[value, check] : k.valid) {
      const ConfigLoad l = ok({{k.var, value}});
      EXPECT_TRUE(check(l.config)) << k.var << "=" << value;
    }
  }
  EXPECT_EQ(ok({{"MSPROBE_TASK", "tensor"}}).config.source_of(Field::Task), "MSPROBE_TASK");
  EXPECT_EQ(ok({{"MSPROBE_LOG_LEVEL", "info"}}).config.source(Field::LogLevel), Source::Env);
}

TEST(Config, KeywordVariablesRejectEverythingElse) {
  const std::string ten_kb(10 * 1024, 'x');
  for (const KeywordCase &k : keyword_cases()) {
    for (const std::string &bad : {std::string("tesnor"), std::string(""), std::string("   "), ten_kb, garbage_bytes(),
                                   std::string("tensor\nstatistics"), std::string("5"), std::string("all,input")}) {
      if (std::string(k.var) == "MSPROBE_LOG_LEVEL" && bad == "5") {
        one_error({{k.var, bad}}, k.var);
        continue;
      }
      const std::string e = one_error({{k.var, bad}}, k.var);
      EXPECT_NE(e.find(std::string("accepted: ") + k.accepted), std::string::npos) << e;
      EXPECT_EQ(e.rfind(std::string(k.var) + "=\"", 0), 0u) << e;  // starts with VAR="
      if (bad.size() > 1000) {
        EXPECT_NE(e.find("...\" (10240 bytes)"), std::string::npos) << e;
      }
    }
  }
}

// A keyword setting's accepted text is made from its keyword table (shim/config/keywords.h), and the launcher offers
// it as is: each word it lists, up to a note in parentheses, is one the variable takes.
TEST(Config, AcceptedTextListsWordsTheVariableTakes) {
  const std::vector<SettingVariable> variables = setting_variables();
  for (const KeywordCase &k : keyword_cases()) {
    const auto v = std::find_if(variables.begin(), variables.end(),
                                [&](const SettingVariable &s) { return std::string(s.name) == k.var; });
    ASSERT_NE(v, variables.end()) << k.var;
    const std::string_view words = v->accepted.substr(0, v->accepted.find(" ("));
    size_t start = 0, count = 0;
    while (start <= words.size()) {
      const size_t comma = std::min(words.find(", ", start), words.size());
      const std::string word(words.substr(start, comma - start));
      std::string why;
      EXPECT_TRUE(check_setting(k.var, word, &why)) << k.var << "=" << word << ": " << why;
      ++count;
      start = comma + 2;
    }
    EXPECT_GE(count, 2u) << k.var << ": " << v->accepted;
  }
}

TEST(Config, MessageFormatIsExact) {
  EXPECT_EQ(one_error({{"MSPROBE_TASK", "tesnor"}}, "MSPROBE_TASK"),
            "MSPROBE_TASK=\"tesnor\" is not valid; accepted: statistics, tensor, overflow_check, structure, flight");
  EXPECT_EQ(one_error({{"MSPROBE_DATA_MODE", "  "}}, "MSPROBE_DATA_MODE"),
            "MSPROBE_DATA_MODE=\"  \" is empty; accepted: all, input, output");
  EXPECT_EQ(
      one_error({{"MSPROBE_STACK", garbage_bytes()}}, "MSPROBE_STACK"),
      "MSPROBE_STACK=\"\\xff\\xfe\\x01\\x1b[31mred\\n\\r\\t\\\"\\\\\\u2028\xc3\xa9\" is not valid; accepted: off, "
      "native, python, mixed");
}

// ---- steps and ranks ----------------------------------------------------------------------------------------------

TEST(Config, StepsAndRanks) {
  for (const char *var : {"MSPROBE_STEP", "MSPROBE_RANK"}) {
    const ConfigLoad l = ok({{var, "0,2,4-6"}});
    const IndexSet &s = std::string(var) == "MSPROBE_STEP" ? l.config.steps : l.config.ranks;
    EXPECT_FALSE(s.all());
    for (int64_t i = -1; i < 10; ++i) EXPECT_EQ(s.contains(i), i == 0 || i == 2 || (i >= 4 && i <= 6)) << i;
    EXPECT_EQ(s.to_string(), "0,2,4-6");
  }
  EXPECT_EQ(ok({{"MSPROBE_STEP", " 0 , 2 , 4 - 6 "}}).config.steps.to_string(), "0,2,4-6");
  EXPECT_EQ(ok({{"MSPROBE_STEP", "3,1,2,2,10-12,13"}}).config.steps.to_string(), "1-3,10-13");
  EXPECT_EQ(ok({{"MSPROBE_STEP", "5-5"}}).config.steps.to_string(), "5");
  EXPECT_EQ(ok({{"MSPROBE_STEP", "0-1000000"}}).config.steps.to_string(), "0-1000000");
  EXPECT_TRUE(ok({{"MSPROBE_RANK", "ALL"}}).config.ranks.all());
  EXPECT_EQ(ok({{"MSPROBE_RANK", "1"}}).config.source_of(Field::Ranks), "MSPROBE_RANK");
}

TEST(Config, StepAndRankErrors) {
  const std::map<std::string, std::string> cases = {
      {"6-4", "the left boundary 6 is greater than the right boundary 4"},
      {"-1", "item \"-1\" is out of range [0, 1000000]"},
      {"1000001", "out of range [0, 1000000]"},
      {"99999999999999999999", "out of range [0, 1000000]"},
      {"1,,2", "item 2 is empty"},
      {"1,", "item 2 is empty"},
      {"a", "is not a number"},
      {"1-", "is not a number"},
      {"4-6-8", "is not a number"},
      {"0x10", "is not a number"},
      {"1.5", "is not a number"},
      {"+3", "is not a number"},
      {"", "is empty"},
  };
  for (const char *var : {"MSPROBE_STEP", "MSPROBE_RANK"}) {
    for (const auto &[value, why] : cases) {
      const std::string e = one_error({{var, value}}, var);
      EXPECT_NE(e.find(why), std::string::npos) << value << " -> " << e;
      EXPECT_NE(e.find("accepted: all, or numbers and ranges in [0, 1000000] such as 0,2,4-6"), std::string::npos) << e;
    }
  }
}

TEST(IndexSetTest, MergesAndSearches) {
  IndexSet s = IndexSet::none();
  EXPECT_FALSE(s.all());
  EXPECT_FALSE(s.contains(0));
  EXPECT_EQ(s.to_string(), "none");
  s.add(10, 12);
  s.add(1, 1);
  s.add(13, 13);  // touches 10-12
  s.add(5, 3);    // swapped bounds
  s.add(2, 2);    // bridges 1 and 3-5
  EXPECT_EQ(s.to_string(), "1-5,10-13");
  IndexSet extremes = IndexSet::none();  // no overflow at the int64 limits (UBSan-checked in development)
  extremes.add(INT64_MAX, INT64_MAX);
  extremes.add(INT64_MIN, INT64_MIN);
  extremes.add(INT64_MIN + 1, 0);
  extremes.add(1, INT64_MAX - 1);
  EXPECT_EQ(extremes.ranges().size(), 1u);
  EXPECT_TRUE(extremes.contains(INT64_MIN) && extremes.contains(INT64_MAX) && extremes.contains(0));
  IndexSet all;
  EXPECT_TRUE(all.all());
  EXPECT_TRUE(all.contains(123456789));
  all.add(7, 7);  // an explicit add turns "all" into exactly that
  EXPECT_EQ(all.to_string(), "7");
  // 100 000 items in descending order parse quickly (sorted once, not inserted one by one).
  std::string many;
  for (int i = 200000; i > 0; i -= 2) many += std::to_string(i) + ",";
  many += "0";
  const auto start = std::chrono::steady_clock::now();
  std::string why;
  const std::optional<IndexSet> big = parse_index_set(many, &why);
  ASSERT_TRUE(big) << why;
  EXPECT_LT(std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count(), 2.0);
  EXPECT_EQ(big->ranges().size(), 100001u);
  EXPECT_TRUE(big->contains(199998));
  EXPECT_FALSE(big->contains(199999));
  EXPECT_FALSE(big->contains(200001));
}

// ---- numbers and paths ---------------------------------------------------------------------------------------------

TEST(Config, BufferMb) {
  EXPECT_EQ(ok({{"MSPROBE_BUFFER_MB", "1"}}).config.buffer_bytes, 1ull << 20);
  EXPECT_EQ(ok({{"MSPROBE_BUFFER_MB", " 64 "}}).config.buffer_bytes, 64ull << 20);
  EXPECT_EQ(ok({{"MSPROBE_BUFFER_MB", "1048576"}}).config.buffer_bytes, 1ull << 40);
  EXPECT_EQ(ok({{"MSPROBE_BUFFER_MB", "2"}}).config.source_of(Field::BufferMb), "MSPROBE_BUFFER_MB");
  for (const char *bad : {"0", "-5", "1048577", "99999999999999999999", "18446744073709551616", "1e3", "12MB", "",
                          "0x10", "9223372036854775807", "-9223372036854775808"}) {
    const std::string e = one_error({{"MSPROBE_BUFFER_MB", bad}}, "MSPROBE_BUFFER_MB");
    EXPECT_NE(e.find("accepted: a whole number of MiB in [1, 1048576]"), std::string::npos) << e;
  }
  EXPECT_EQ(one_error({{"MSPROBE_BUFFER_MB", "99999999999999999999"}}, "MSPROBE_BUFFER_MB"),
            "MSPROBE_BUFFER_MB=\"99999999999999999999\" is not valid: out of range; accepted: a whole number of MiB in "
            "[1, 1048576]");
}

TEST(Config, OverflowNums) {
  const ConfigLoad never = ok({{"MSPROBE_OVERFLOW_NUMS", "-1"}, {"MSPROBE_TASK", "overflow_check"}});
  EXPECT_EQ(never.config.overflow_nums, -1);
  EXPECT_TRUE(never.warnings.empty());
  EXPECT_EQ(ok({{"MSPROBE_OVERFLOW_NUMS", "3"}, {"MSPROBE_TASK", "overflow_check"}}).config.overflow_nums, 3);
  EXPECT_EQ(ok({{"MSPROBE_OVERFLOW_NUMS", "2147483647"}, {"MSPROBE_TASK", "overflow_check"}}).config.overflow_nums,
            2147483647);
  for (const char *bad : {"0", "-2", "2147483648", "abc", "1.0", "", "99999999999999999999999"}) {
    const std::string e = one_error({{"MSPROBE_OVERFLOW_NUMS", bad}}, "MSPROBE_OVERFLOW_NUMS");
    EXPECT_NE(e.find("accepted: -1 (never stop) or a whole number in [1, 2147483647]"), std::string::npos) << e;
  }
  // Valid but pointless outside overflow_check: a warning, not an error.
  const ConfigLoad l = ok({{"MSPROBE_OVERFLOW_NUMS", "5"}});
  ASSERT_EQ(l.warnings.size(), 1u);
  EXPECT_NE(l.warnings[0].find("MSPROBE_OVERFLOW_NUMS has no effect"), std::string::npos);
  const ConfigLoad f = ok({{"MSPROBE_FILE_FORMAT", "bin"}});
  ASSERT_EQ(f.warnings.size(), 1u);
  EXPECT_NE(f.warnings[0].find("MSPROBE_FILE_FORMAT has no effect"), std::string::npos);
  EXPECT_TRUE(ok({{"MSPROBE_FILE_FORMAT", "bin"}, {"MSPROBE_TASK", "tensor"}}).warnings.empty());
  // The tasks that write tensor files, from the one statement of it (format::task_writes): overflow_check does.
  EXPECT_NE(f.warnings[0].find("only the tensor, overflow_check and flight tasks write tensor files"),
            std::string::npos)
      << f.warnings[0];
  for (const char *task : {"tensor", "overflow_check", "flight"})
    EXPECT_TRUE(ok({{"MSPROBE_FILE_FORMAT", "bin"}, {"MSPROBE_TASK", task}}).warnings.empty()) << task;
}

TEST(Config, FlightSettings) {
  const ConfigLoad d = ok({{"MSPROBE_TASK", "flight"}});
  EXPECT_EQ(d.config.flight_kernels, 0u);  // auto: as many as the budget holds
  EXPECT_FALSE(d.config.flight_on_exit);
  const ConfigLoad l =
      ok({{"MSPROBE_TASK", "flight"}, {"MSPROBE_FLIGHT_KERNELS", "64"}, {"MSPROBE_FLIGHT_ON_EXIT", "yes"},
          {"MSPROBE_OVERFLOW_NUMS", "2"}, {"MSPROBE_FILE_FORMAT", "bin"}});
  EXPECT_TRUE(l.warnings.empty()) << ::testing::PrintToString(l.warnings);
  EXPECT_EQ(l.config.flight_kernels, 64u);
  EXPECT_TRUE(l.config.flight_on_exit);
  EXPECT_EQ(l.config.overflow_nums, 2);
  EXPECT_EQ(ok({{"MSPROBE_TASK", "flight"}, {"MSPROBE_FLIGHT_KERNELS", "auto"}}).config.flight_kernels, 0u);
  EXPECT_EQ(ok({{"MSPROBE_TASK", "flight"}, {"MSPROBE_FLIGHT_KERNELS", "1000000"}}).config.flight_kernels, 1000000u);
  for (const char *bad : {"0", "-1", "1000001", "lots", "2.5"}) {
    const std::string e = one_error({{"MSPROBE_FLIGHT_KERNELS", bad}}, "MSPROBE_FLIGHT_KERNELS");
    EXPECT_NE(e.find("accepted: auto (as many as MSPROBE_BUFFER_MB holds) or a whole number in [1, 1000000]"),
              std::string::npos)
        << e;
  }
  EXPECT_NE(one_error({{"MSPROBE_FLIGHT_ON_EXIT", "maybe"}}, "MSPROBE_FLIGHT_ON_EXIT").find("accepted: 1 or 0"),
            std::string::npos);
  // Valid but pointless outside the flight task: a warning each.
  const ConfigLoad w = ok({{"MSPROBE_FLIGHT_KERNELS", "8"}, {"MSPROBE_FLIGHT_ON_EXIT", "1"}});
  ASSERT_EQ(w.warnings.size(), 2u) << ::testing::PrintToString(w.warnings);
  EXPECT_NE(w.warnings[0].find("MSPROBE_FLIGHT_KERNELS has no effect: it applies to the flight task"),
            std::string::npos);
}

TEST(ConfigJson, FlightSection) {
  TempDir d;
  const std::string p = d.write("c.json", R"J({
    "task": "flight", "dump_path": "/data/dump", "level": "L2",
    "flight": {"list": ["Matmul"], "kernels": 32, "on_exit": true, "overflow_nums": -1}
  })J");
  const ConfigLoad l = ok({{"MSPROBE_CONFIG", p}});
  EXPECT_TRUE(l.warnings.empty()) << ::testing::PrintToString(l.warnings);
  EXPECT_EQ(l.config.task, Task::Flight);
  EXPECT_EQ(l.config.flight_kernels, 32u);
  EXPECT_TRUE(l.config.flight_on_exit);
  EXPECT_EQ(l.config.overflow_nums, -1);
  EXPECT_EQ(l.config.source_of(Field::FlightKernels), "config.json field flight.kernels");
  const std::string bad = d.write("b.json", R"J({"task": "flight", "level": "L2", "dump_path": "/d", "flight": {"kernels": 0, "on_exit": "yes"}})J");
  const ConfigLoad b = load({{"MSPROBE_CONFIG", bad}});
  ASSERT_EQ(b.errors.size(), 2u) << ::testing::PrintToString(b.errors);
  EXPECT_NE(b.errors[0].find("field \"flight.kernels\" = 0 is not valid; accepted: \"auto\" or a whole number in [1, "
                            "1000000]"),
            std::string::npos)
      << b.errors[0];
  EXPECT_NE(b.errors[1].find("field \"flight.on_exit\" = \"yes\" is not valid: it is a string, not a boolean"),
            std::string::npos)
      << b.errors[1];
}

TEST(Config, DumpPath) {
  EXPECT_EQ(ok({{"MSPROBE_DUMP_PATH", "/tmp/d"}}).config.dump_path, "/tmp/d");
  EXPECT_EQ(ok({{"MSPROBE_DUMP_PATH", "/tmp/d"}}).config.source_of(Field::DumpPath), "MSPROBE_DUMP_PATH");
  EXPECT_EQ(ok({{"MSPROBE_DUMP_PATH", "\xe6\x95\xb0\xe6\x8d\xae/\xff"}}).config.dump_path,
            "\xe6\x95\xb0\xe6\x8d\xae/\xff");
  const ConfigLoad spaced = ok({{"MSPROBE_DUMP_PATH", " /tmp/d "}});
  EXPECT_EQ(spaced.config.dump_path, " /tmp/d ");  // used as written (it is a legal path) ...
  ASSERT_EQ(spaced.warnings.size(), 1u);           // ... with a warning
  EXPECT_NE(spaced.warnings[0].find("white space"), std::string::npos);
  EXPECT_EQ(one_error({{"MSPROBE_DUMP_PATH", ""}}, "MSPROBE_DUMP_PATH"),
            "MSPROBE_DUMP_PATH=\"\" is not valid: it is empty; accepted: a directory path (not empty, at most 4095 "
            "bytes, no NUL byte)");
  const std::string e = one_error({{"MSPROBE_DUMP_PATH", std::string(5000, 'd')}}, "MSPROBE_DUMP_PATH");
  EXPECT_NE(e.find("it is 5000 bytes long"), std::string::npos) << e;
  EXPECT_NE(e.find("(5000 bytes)"), std::string::npos) << e;
}

// ---- list, scope, step marker --------------------------------------------------------------------------------------

TEST(Config, List) {
  const ConfigLoad l = ok({{"MSPROBE_LIST", "Add, Matmul.Default.3 ,Mul.fwd,name-regex(Soft.{1,3}ax\\..*)"}});
  const KernelFilter &f = l.config.list;
  EXPECT_EQ(f.size(), 4u);
  EXPECT_TRUE(f.matches("add", "add.Default.0"));
  EXPECT_TRUE(f.matches("Matmul", "Matmul.Default.3"));
  EXPECT_FALSE(f.matches("Matmul", "Matmul.Default.2"));
  EXPECT_TRUE(f.matches("Mul", "Mul.fwd.9"));
  EXPECT_TRUE(f.matches("Softmax", "Softmax.x.0"));
  EXPECT_FALSE(f.matches("Sub", "Sub.Default.0"));
  EXPECT_EQ(l.config.source_of(Field::List), "MSPROBE_LIST");
  EXPECT_TRUE(ok({{"MSPROBE_LIST", "all"}}).config.list.empty());

  EXPECT_NE(one_error({{"MSPROBE_LIST", "Add,,Mul"}}, "MSPROBE_LIST").find("item 2 is empty"), std::string::npos);
  const std::string bad_re = one_error({{"MSPROBE_LIST", "Add,name-regex(a**)"}}, "MSPROBE_LIST");
  EXPECT_NE(bad_re.find("item 2 \"name-regex(a**)\": bad regular expression in name-regex(...): bad repetition"),
            std::string::npos)
      << bad_re;
  EXPECT_NE(one_error({{"MSPROBE_LIST", "name-regex(a"}}, "MSPROBE_LIST").find("no closing )"), std::string::npos);
  EXPECT_NE(one_error({{"MSPROBE_LIST", "name-regex(" + std::string(20000, 'a') + ")"}}, "MSPROBE_LIST")
                .find("longer than 16384 bytes"),
            std::string::npos);
  // A plain item with '(' is a valid op type that can never match: a warning (one line), not an error.
  const ConfigLoad parens = ok({{"MSPROBE_LIST", std::string(100000, '(')}});
  ASSERT_EQ(parens.warnings.size(), 1u);
  EXPECT_NE(parens.warnings[0].find("can never match"), std::string::npos);
  // Never-matching and duplicate items are warnings.
  const ConfigLoad w = ok({{"MSPROBE_LIST", "Default/network/Conv2D-op12,Add,Add"}});
  ASSERT_EQ(w.warnings.size(), 2u);
  EXPECT_NE(w.warnings[0].find("MSPROBE_LIST: item \"Default/network/Conv2D-op12\" can never match"), std::string::npos)
      << w.warnings[0];
  EXPECT_NE(w.warnings[1].find("listed twice"), std::string::npos);
  // 10 kB of items works.
  std::string many;
  for (int i = 0; i < 1000; ++i) many += "Op" + std::to_string(i) + ",";
  many += "Last";
  EXPECT_EQ(ok({{"MSPROBE_LIST", many}}).config.list.size(), 1001u);
}

TEST(Config, Scope) {
  const ConfigLoad l = ok({{"MSPROBE_SCOPE", "Matmul.Default.1, name-regex(Add\\..*)"}});
  ASSERT_TRUE(l.config.scope.has_value());
  EXPECT_TRUE(l.config.scope->first.matches("Matmul", "Matmul.Default.1"));
  EXPECT_FALSE(l.config.scope->first.matches("Matmul", "Matmul.Default.0"));
  EXPECT_TRUE(l.config.scope->second.matches("Add", "Add.x.4"));
  EXPECT_EQ(l.config.source_of(Field::Scope), "MSPROBE_SCOPE");
  EXPECT_FALSE(ok({{"MSPROBE_SCOPE", "none"}}).config.scope.has_value());
  EXPECT_NE(one_error({{"MSPROBE_SCOPE", "Add"}}, "MSPROBE_SCOPE").find("it has 1 item, not 2"), std::string::npos);
  EXPECT_NE(one_error({{"MSPROBE_SCOPE", "a,b,c"}}, "MSPROBE_SCOPE").find("it has 3 items, not 2"), std::string::npos);
  EXPECT_NE(one_error({{"MSPROBE_SCOPE", "a,"}}, "MSPROBE_SCOPE").find("item 2 is empty"), std::string::npos);
  EXPECT_NE(one_error({{"MSPROBE_SCOPE", "a,name-regex(a**)"}}, "MSPROBE_SCOPE").find("last item: "),
            std::string::npos);
  EXPECT_NE(one_error({{"MSPROBE_SCOPE", "a,name-regex([)"}}, "MSPROBE_SCOPE").find("has no closing )"),
            std::string::npos);
  EXPECT_NE(one_error({{"MSPROBE_SCOPE", ""}}, "MSPROBE_SCOPE").find("is empty"), std::string::npos);
}

TEST(Config, StepMarker) {
  const ConfigLoad l = ok({{"MSPROBE_STEP_MARKER", "MyOptim|Fused.*Adam"}});
  EXPECT_TRUE(l.config.step_marker.matches("MyOptim"));
  EXPECT_TRUE(l.config.step_marker.matches("FusedXAdam"));
  EXPECT_FALSE(l.config.step_marker.matches("ApplyAdamW"));
  EXPECT_EQ(l.config.source_of(Field::StepMarker), "MSPROBE_STEP_MARKER");
  EXPECT_TRUE(ok({{"MSPROBE_STEP_MARKER", "off"}}).config.step_marker.empty());
  const std::string e = one_error({{"MSPROBE_STEP_MARKER", "Adam("}}, "MSPROBE_STEP_MARKER");
  EXPECT_EQ(e,
            "MSPROBE_STEP_MARKER=\"Adam(\" is not valid: missing closing ) at offset 4; accepted: a regular "
            "expression over kernel op types (RE2 syntax), or off");
  one_error({{"MSPROBE_STEP_MARKER", std::string(10 * 1024, '(')}}, "MSPROBE_STEP_MARKER");
  one_error({{"MSPROBE_STEP_MARKER", "(a)\\1"}}, "MSPROBE_STEP_MARKER");
}

// ---- every error is one line naming its variable -------------------------------------------------------------------

TEST(Config, EveryEnvironmentErrorIsOneLineNamingItsVariable) {
  const std::vector<std::string> variables = {
      "MSPROBE_DUMP_PATH", "MSPROBE_CONFIG",   "MSPROBE_TASK",      "MSPROBE_STEP",          "MSPROBE_RANK",
      "MSPROBE_LIST",      "MSPROBE_SCOPE",    "MSPROBE_DATA_MODE", "MSPROBE_SUMMARY_MODE",  "MSPROBE_FILE_FORMAT",
      "MSPROBE_STACK",     "MSPROBE_COMPRESS", "MSPROBE_BUFFER_MB", "MSPROBE_OVERFLOW_NUMS", "MSPROBE_STEP_MARKER",
      "MSPROBE_LOG_LEVEL", "MSPROBE_ENABLE",   "MSPROBE_PRECISION"};
  const std::vector<std::string> hostile = {"",
                                            " ",
                                            "\n",
                                            "tesnor",
                                            garbage_bytes(),
                                            std::string(10 * 1024, 'z'),
                                            "-1",
                                            "99999999999999999999",
                                            "name-regex((",
                                            "a,b,c",
                                            std::string(5000, '/'),
                                            "\x80\x81\x82",
                                            "((((((((((((((((((((((((((((((((((((x"};
  size_t errors = 0;
  for (const std::string &var : variables) {
    for (const std::string &value : hostile) {
      const ConfigLoad l = load({{var, value}});
      expect_all_one_line(l);
      if (!l.errors.empty()) {
        EXPECT_FALSE(l.config.enabled);
      }
      for (const std::string &e : l.errors) {
        EXPECT_NE(e.find(var), std::string::npos) << e;
        EXPECT_NE(e.find("accepted: "), std::string::npos) << e;
        ++errors;
      }
    }
  }
  EXPECT_GT(errors, 150u);
  // All at once: every bad variable is reported, each on its own line.
  Vars all;
  for (const std::string &var : variables) all[var] = "tesnor";
  all["MSPROBE_ENABLE"] = "2";
  const ConfigLoad l = load(all);
  expect_all_one_line(l);
  EXPECT_FALSE(l.config.enabled);
  // Everything but MSPROBE_LIST / MSPROBE_STEP_MARKER ("tesnor" is a valid op type and regex) and MSPROBE_DUMP_PATH.
  EXPECT_EQ(l.errors.size(), variables.size() - 3) << ::testing::PrintToString(l.errors);
}

// ---- config.json ---------------------------------------------------------------------------------------------------

// msprobe's own shipped config.json, with level L2 (every section of every task present).
const char *kMsprobeDefault = R"({
    "task": "statistics",
    "dump_path": "./dump_path",
    "rank": [],
    "step": [],
    "level": "L2",
    "enable_dataloader": false,
    "tensor": {"scope": [], "list":[], "data_mode": ["all"], "file_format": "npy"},
    "statistics": {"scope": [], "list":[], "data_mode": ["all"], "summary_mode": "statistics"},
    "overflow_check": {"overflow_nums": 1, "check_mode":"all"},
    "run_ut": {"white_list": [], "black_list": [], "error_data_path": "./"},
    "grad_probe": {"grad_level": "L1", "param_list": [], "bounds": [-1, 0, 1]},
    "free_benchmark": {"scope": [], "list": [], "fuzz_device": "npu", "pert_mode": "improve_precision",
                       "handler_type": "check", "fuzz_level": "L1", "fuzz_stage": "forward", "if_preheat": false,
                       "preheat_step": 15, "max_sample": 20}
})";

TEST(ConfigJson, MsprobeStatisticsExample) {
  TempDir d;
  const std::string p = d.write("config.json", kMsprobeDefault);
  const ConfigLoad l = ok({{"MSPROBE_CONFIG", p}});
  EXPECT_TRUE(l.warnings.empty()) << ::testing::PrintToString(l.warnings);
  const Config &c = l.config;
  EXPECT_EQ(c.config_path, p);
  EXPECT_EQ(c.task, Task::Statistics);
  EXPECT_EQ(c.dump_path, "./dump_path");
  EXPECT_TRUE(c.steps.all());
  EXPECT_TRUE(c.ranks.all());
  EXPECT_TRUE(c.list.empty());
  EXPECT_FALSE(c.scope.has_value());
  EXPECT_EQ(c.data_mode, DataMode::All);
  EXPECT_EQ(c.summary_mode, SummaryMode::Statistics);
  EXPECT_EQ(c.source_of(Field::Task), "config.json field task");
  EXPECT_EQ(c.source_of(Field::DumpPath), "config.json field dump_path");
  EXPECT_EQ(c.source_of(Field::List), "config.json field statistics.list");
  EXPECT_EQ(c.source(Field::Stack), Source::Default);
}

TEST(ConfigJson, TensorWithListAndScope) {
  TempDir d;
  const std::string p = d.write("c.json", R"J({
    "task": "tensor", "dump_path": "/data/dump", "level": "L2", "rank": [1, "3-4"], "step": [0, "2-3", 9],
    "precision": "high", "async_dump": false,
    "tensor": {"list": ["Matmul", "Add.Default.0", "name-regex(Softmax\\..*)"],
               "scope": ["Matmul.Default.0", "name-regex(Add\\..*)"],
               "data_mode": ["input"], "file_format": "bin", "summary_mode": "md5"},
    "statistics": {"list": ["ShouldNotBeRead"]}
  })J");
  const ConfigLoad l = ok({{"MSPROBE_CONFIG", p}});
  EXPECT_TRUE(l.warnings.empty()) << ::testing::PrintToString(l.warnings);
  const Config &c = l.config;
  EXPECT_EQ(c.task, Task::Tensor);
  EXPECT_EQ(c.dump_path, "/data/dump");
  EXPECT_EQ(c.ranks.to_string(), "1,3-4");
  EXPECT_EQ(c.steps.to_string(), "0,2-3,9");
  EXPECT_EQ(c.precision, Precision::High);
  EXPECT_EQ(c.list.size(), 3u);
  EXPECT_TRUE(c.list.matches("MatMul", "MatMul.x.5"));
  EXPECT_TRUE(c.list.matches("Add", "Add.Default.0"));
  EXPECT_TRUE(c.list.matches("Softmax", "Softmax.Default.2"));
  EXPECT_FALSE(c.list.matches("ShouldNotBeRead", "ShouldNotBeRead.Default.0"));
  ASSERT_TRUE(c.scope.has_value());
  EXPECT_TRUE(c.scope->first.matches("Matmul", "Matmul.Default.0"));
  EXPECT_TRUE(c.scope->second.matches("Add", "Add.z.3"));
  EXPECT_EQ(c.data_mode, DataMode::Input);
  EXPECT_EQ(c.file_format, FileFormat::Bin);
  EXPECT_EQ(c.summary_mode, SummaryMode::Md5);
  EXPECT_EQ(c.source_of(Field::Scope), "config.json field tensor.scope");
  EXPECT_EQ(c.source_of(Field::FileFormat), "config.json field tensor.file_format");
  EXPECT_NE(describe(c).find("task=tensor (config.json field task)"), std::string::npos) << describe(c);
}

TEST(ConfigJson, OverflowCheck) {
  TempDir d;
  const std::string p = d.write("c.json", R"({"task": "overflow_check", "dump_path": "/d", "level": "L2",
      "overflow_check": {"overflow_nums": -1, "check_mode": "aicore"}})");
  const ConfigLoad l = ok({{"MSPROBE_CONFIG", p}});
  EXPECT_EQ(l.config.task, Task::OverflowCheck);
  EXPECT_EQ(l.config.overflow_nums, -1);
  EXPECT_EQ(l.config.source_of(Field::OverflowNums), "config.json field overflow_check.overflow_nums");
  ASSERT_EQ(l.warnings.size(), 1u);
  EXPECT_NE(l.warnings[0].find("field \"overflow_check.check_mode\" = \"aicore\" is ignored"), std::string::npos)
      << l.warnings[0];
  const std::string p2 = d.write("c2.json", R"({"task": "overflow_check", "dump_path": "/d", "level": "L2",
      "overflow_check": {"overflow_nums": 7}})");
  EXPECT_EQ(ok({{"MSPROBE_CONFIG", p2}}).config.overflow_nums, 7);
}

TEST(ConfigJson, EnvironmentOverridesTheFile) {
  TempDir d;
  const std::string p = d.write("c.json", R"({"task": "tensor", "dump_path": "/from/file", "level": "L2",
      "step": [1], "rank": [2], "precision": "high",
      "tensor": {"list": ["FromTensor"], "scope": ["A", "B"], "data_mode": ["output"], "file_format": "bin"},
      "statistics": {"list": ["FromStatistics"], "summary_mode": "md5"}})");
  // Without overrides, the file.
  const Config f = ok({{"MSPROBE_CONFIG", p}}).config;
  EXPECT_EQ(f.task, Task::Tensor);
  EXPECT_TRUE(f.list.matches("FromTensor", "FromTensor.Default.0"));
  // MSPROBE_TASK switches the section that is read, as msprobe reads the section of its task.
  const Config s = ok({{"MSPROBE_CONFIG", p}, {"MSPROBE_TASK", "statistics"}}).config;
  EXPECT_EQ(s.task, Task::Statistics);
  EXPECT_TRUE(s.list.matches("FromStatistics", "FromStatistics.Default.0"));
  EXPECT_FALSE(s.list.matches("FromTensor", "FromTensor.Default.0"));
  EXPECT_EQ(s.summary_mode, SummaryMode::Md5);
  EXPECT_FALSE(s.scope.has_value());
  EXPECT_EQ(s.source_of(Field::List), "config.json field statistics.list");
  // Each variable overrides its field; the rest still comes from the file.
  const Config o = ok({{"MSPROBE_CONFIG", p},
                       {"MSPROBE_DUMP_PATH", "/from/env"},
                       {"MSPROBE_STEP", "all"},
                       {"MSPROBE_RANK", "0-1"},
                       {"MSPROBE_LIST", "all"},
                       {"MSPROBE_SCOPE", "none"},
                       {"MSPROBE_DATA_MODE", "all"},
                       {"MSPROBE_PRECISION", "low"}})
                       .config;
  EXPECT_EQ(o.dump_path, "/from/env");
  EXPECT_TRUE(o.steps.all());
  EXPECT_EQ(o.ranks.to_string(), "0-1");
  EXPECT_TRUE(o.list.empty());
  EXPECT_FALSE(o.scope.has_value());
  EXPECT_EQ(o.data_mode, DataMode::All);
  EXPECT_EQ(o.precision, Precision::Low);
  EXPECT_EQ(o.file_format, FileFormat::Bin);  // not overridden
  EXPECT_EQ(o.task, Task::Tensor);
  EXPECT_EQ(o.source_of(Field::DumpPath), "MSPROBE_DUMP_PATH");
  EXPECT_EQ(o.source_of(Field::Steps), "MSPROBE_STEP");
  EXPECT_EQ(o.source_of(Field::FileFormat), "config.json field tensor.file_format");
  EXPECT_EQ(o.source_of(Field::Task), "config.json field task");
  // A broken file field is an error even when a variable overrides it: the file is wrong either way.
  const std::string bad = d.write("bad.json", R"({"task": "tesnor", "dump_path": "/d", "level": "L2"})");
  one_error({{"MSPROBE_CONFIG", bad}, {"MSPROBE_TASK", "tensor"}}, "field \"task\"");
}

std::string file_error(const std::string &json_text, const std::string &field, const Vars &extra = {}) {
  TempDir d;
  const std::string p = d.write("c.json", json_text);
  Vars v = extra;
  v["MSPROBE_CONFIG"] = p;
  const std::string e = one_error(v, "MSPROBE_CONFIG=\"" + p + "\"");
  EXPECT_NE(e.find("field \"" + field + "\""), std::string::npos) << e;
  EXPECT_NE(e.find("; accepted: "), std::string::npos) << e;
  return e;
}

TEST(ConfigJson, FieldErrors) {
  const std::string head = R"({"dump_path": "/d", "level": "L2", )";
  // level: must be "L2"; a file without it was written for msprobe's default L1.
  EXPECT_NE(file_error(R"({"dump_path": "/d", "level": "L1"})", "level")
                .find("= \"L1\" is not valid: msprobe-shim "
                      "dumps kernels, which is msprobe's "
                      "level L2; accepted: \"L2\""),
            std::string::npos);
  file_error(R"({"dump_path": "/d", "level": "mix"})", "level");
  file_error(R"({"dump_path": "/d", "level": "l2"})", "level");
  file_error(R"({"dump_path": "/d", "level": 2})", "level");
  EXPECT_NE(file_error(R"({"dump_path": "/d"})", "level").find("is missing (msprobe's default is L1"),
            std::string::npos);
  // dump_path: required by msprobe unless MSPROBE_DUMP_PATH gives it.
  file_error(R"({"level": "L2"})", "dump_path");
  {
    TempDir d;
    const std::string p = d.write("c.json", R"({"level": "L2"})");
    EXPECT_EQ(ok({{"MSPROBE_CONFIG", p}, {"MSPROBE_DUMP_PATH", "/e"}}).config.dump_path, "/e");
  }
  file_error(head + R"("dump_path2": 1, "dump_path": 5})", "dump_path");
  file_error(R"({"level": "L2", "dump_path": ""})", "dump_path");
  EXPECT_NE(file_error(R"({"level": "L2", "dump_path": "a\u0000b"})", "dump_path").find("NUL"), std::string::npos);
  // task
  EXPECT_NE(file_error(head + R"("task": "tesnor"})", "task")
                .find("= \"tesnor\" is not valid; accepted: statistics, tensor, overflow_check, structure, flight"),
            std::string::npos);
  EXPECT_NE(file_error(head + R"("task": "free_benchmark"})", "task").find("not a kernel dump"), std::string::npos);
  EXPECT_NE(file_error(head + R"("task": ["tensor"]})", "task").find("it is a list, not a string"), std::string::npos);
  // step and rank
  for (const char *f : {"step", "rank"}) {
    const std::string k = std::string("\"") + f + "\": ";
    EXPECT_NE(file_error(head + k + "[-1]}", std::string(f) + "[0]").find("out of range"), std::string::npos);
    file_error(head + k + "[1000001]}", std::string(f) + "[0]");
    file_error(head + k + "[18446744073709551615]}", std::string(f) + "[0]");
    file_error(head + k + "[99999999999999999999]}", std::string(f) + "[0]");  // a float in JSON
    EXPECT_NE(file_error(head + k + "[0, \"6-4\"]}", std::string(f) + "[1]").find("left boundary 6"),
              std::string::npos);
    file_error(head + k + "[1.5]}", std::string(f) + "[0]");
    file_error(head + k + "[true]}", std::string(f) + "[0]");
    file_error(head + k + "[[1]]}", std::string(f) + "[0]");
    file_error(head + k + "[\"x\"]}", std::string(f) + "[0]");
    EXPECT_NE(file_error(head + k + "\"0-3\"}", f).find("it is a string, not a list"), std::string::npos);
    file_error(head + k + "5}", f);
  }
  // the task section
  const std::string t = head + R"("task": "tensor", "tensor": )";
  file_error(t + "5}", "tensor");
  EXPECT_NE(file_error(t + R"({"data_mode": ["forward"]}})", "tensor.data_mode").find("API-level"), std::string::npos);
  file_error(t + R"({"data_mode": ["input", "output"]}})", "tensor.data_mode");
  file_error(t + R"({"data_mode": []}})", "tensor.data_mode");
  file_error(t + R"({"data_mode": ["sideways"]}})", "tensor.data_mode");
  {
    TempDir d;  // a bare string is accepted as well as a list of one
    EXPECT_EQ(ok({{"MSPROBE_CONFIG", d.write("c.json", t + R"({"data_mode": "output"}})")}}).config.data_mode,
              DataMode::Output);
  }
  file_error(t + R"({"scope": ["OnlyOne"]}})", "tensor.scope");
  file_error(t + R"({"scope": "A,B"}})", "tensor.scope");
  file_error(t + R"({"scope": ["A", 5]}})", "tensor.scope[1]");
  file_error(t + R"({"list": "Add"}})", "tensor.list");
  file_error(t + R"({"list": [1]}})", "tensor.list[0]");
  EXPECT_NE(file_error(t + R"({"list": ["Add", "name-regex(("]}})", "tensor.list[1]").find("no closing )"),
            std::string::npos);
  EXPECT_NE(file_error(t + R"J({"list": ["name-regex([z-a])"]}})J", "tensor.list[0]").find("bad character class range"),
            std::string::npos);
  file_error(t + R"({"list": [""]}})", "tensor.list[0]");
  file_error(t + R"({"file_format": "npz"}})", "tensor.file_format");
  file_error(t + R"({"summary_mode": "md6"}})", "tensor.summary_mode");
  file_error(t + R"({"summary_mode": ["max", "p99"]}})", "tensor.summary_mode");
  const std::string o = head + R"("task": "overflow_check", "overflow_check": )";
  for (const char *bad : {"0", "-2", "\"1\"", "1.5", "true", "2147483648", "18446744073709551615"}) {
    file_error(o + R"({"overflow_nums": )" + bad + "}}", "overflow_check.overflow_nums");
  }
  file_error(o + R"({"check_mode": "most"}})", "overflow_check.check_mode");
  // top level
  file_error(head + R"("async_dump": "yes"})", "async_dump");
  file_error(head + R"("precision": "medium"})", "precision");
}

TEST(ConfigJson, WarningsAndLenience) {
  TempDir d;
  const std::string p = d.write("c.json", R"({"dump_path": "/d", "level": "L2", "async_dump": true, "dumpath": "x",
      "step": null, "task": "statistics", "framework": "pytorch",
      "statistics": {"summary_mode": ["max", "min", "md5"], "data_mode": "input", "colour": 1, "tensor_list": []}})");
  const ConfigLoad l = ok({{"MSPROBE_CONFIG", p}});
  EXPECT_EQ(l.config.summary_mode, SummaryMode::Md5);
  EXPECT_EQ(l.config.data_mode, DataMode::Input);  // a bare string is accepted as well as ["input"]
  EXPECT_TRUE(l.config.steps.all());               // null = absent
  std::string all;
  for (const std::string &w : l.warnings) all += w + "\n";
  EXPECT_EQ(l.warnings.size(), 4u) << all;
  EXPECT_NE(all.find("field \"async_dump\" = true is ignored"), std::string::npos) << all;
  EXPECT_NE(all.find("field \"dumpath\" is not an msprobe config.json field; ignored"), std::string::npos) << all;
  EXPECT_NE(all.find("field \"statistics.colour\" is not an msprobe field of the statistics task"), std::string::npos)
      << all;
  EXPECT_NE(all.find("Max, Min, Mean and Norm are always all written"), std::string::npos) << all;
}

// ---- hostile files --------------------------------------------------------------------------------------------------

std::string config_error(const std::string &path) {
  const std::string e = one_error({{"MSPROBE_CONFIG", path}}, "MSPROBE_CONFIG=");
  EXPECT_NE(e.find("accepted: the path of a readable msprobe config.json"), std::string::npos) << e;
  return e;
}

TEST(ConfigJson, HostileFiles) {
  TempDir d;
  EXPECT_NE(config_error(d.path("missing.json")).find("cannot be opened: No such file or directory"),
            std::string::npos);
  EXPECT_NE(config_error(d.dir()).find("is a directory"), std::string::npos);
  EXPECT_NE(config_error("/dev/null").find("is not a regular file"), std::string::npos);
  EXPECT_NE(config_error(d.write("empty.json", "")).find("is an empty file"), std::string::npos);
  EXPECT_NE(config_error(d.write("ws.json", " \n\t ")).find("is an empty file"), std::string::npos);
  EXPECT_NE(config_error(d.write("open.json", "{"))
                .find("is not valid JSON: parse error at line 1, column 2: syntax error while parsing object key - "
                      "unexpected end of input"),
            std::string::npos);
  EXPECT_NE(config_error(d.write("trail.json", R"({"level": "L2"} x)")).find("is not valid JSON"), std::string::npos);
  EXPECT_NE(config_error(d.write("comment.json", "// c\n{}")).find("is not valid JSON"), std::string::npos);
  EXPECT_NE(config_error(d.write("nan.json", R"({"step": [NaN]})")).find("is not valid JSON"), std::string::npos);
  EXPECT_NE(config_error(d.write("big.json", R"({"step": [1e400]})")).find("number overflow"), std::string::npos);
  EXPECT_NE(config_error(d.write("utf8.json", "{\"a\": \"\xff\xfe\"}")).find("is not valid JSON"), std::string::npos);
  std::string binary;
  for (int i = 0; i < 4096; ++i) binary += static_cast<char>((i * 131 + 7) & 0xff);
  config_error(d.write("binary.json", binary));
  EXPECT_NE(config_error(d.write("array.json", "[1, 2]")).find("holds a list at the top level, not an object"),
            std::string::npos);
  config_error(d.write("string.json", "\"L2\""));
  config_error(d.write("number.json", "42"));
  // Deep nesting: refused by the iterative pre-pass, whatever the depth.
  const std::string deep = std::string(100000, '[') + std::string(100000, ']');
  EXPECT_NE(config_error(d.write("deep.json", deep)).find("deeper than 64 levels"), std::string::npos);
  std::string deep_obj;
  for (int i = 0; i < 100000; ++i) deep_obj += "{\"a\":";
  deep_obj += "1" + std::string(100000, '}');
  EXPECT_NE(config_error(d.write("deep_obj.json", deep_obj)).find("deeper than 64 levels"), std::string::npos);
  const std::string unbalanced = std::string(100000, '[');
  config_error(d.write("unbalanced.json", unbalanced));
  // 64 levels are fine (unknown fields only warn).
  std::string ok64 = R"({"level": "L2", "dump_path": "/d", "x": )" + std::string(63, '[') + std::string(63, ']') + "}";
  EXPECT_TRUE(ok({{"MSPROBE_CONFIG", d.write("ok64.json", ok64)}}).config.enabled);
  // Size cap, checked before reading: a sparse 1 GiB file and one just over 16 MiB.
  for (const auto &[name, size] : {std::pair{"huge.json", 1ll << 30}, std::pair{"over.json", (16ll << 20) + 1}}) {
    const std::string p = d.path(name);
    const int fd = ::open(p.c_str(), O_CREAT | O_WRONLY, 0644);
    ASSERT_GE(fd, 0);
    ASSERT_EQ(::ftruncate(fd, size), 0);
    ::close(fd);
    const auto start = std::chrono::steady_clock::now();
    EXPECT_NE(config_error(p).find("bytes, more than the 16 MiB"), std::string::npos);
    EXPECT_LT(std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count(), 1.0);
  }
  // A FIFO must neither hang open() nor read().
  const std::string fifo = d.path("fifo.json");
  ASSERT_EQ(::mkfifo(fifo.c_str(), 0644), 0);
  EXPECT_NE(config_error(fifo).find("is not a regular file"), std::string::npos);
  // MSPROBE_CONFIG itself: empty, huge, binary.
  EXPECT_NE(one_error({{"MSPROBE_CONFIG", ""}}, "MSPROBE_CONFIG").find("it is empty"), std::string::npos);
  one_error({{"MSPROBE_CONFIG", std::string(10 * 1024, 'p')}}, "MSPROBE_CONFIG");
  one_error({{"MSPROBE_CONFIG", garbage_bytes()}}, "MSPROBE_CONFIG");
  // Strings with line separators and control characters are escaped in messages.
  const std::string e = file_error("{\"dump_path\": \"/d\", \"level\": \"L2\", \"task\": \"a\\u2028b\\nc\"}", "task");
  EXPECT_NE(e.find("a\\u2028b\\nc"), std::string::npos) << e;
  // A field name with control characters is escaped too.
  const ConfigLoad w = ok({{"MSPROBE_CONFIG", d.write("key.json",
                                                      "{\"dump_path\": \"/d\", \"level\": \"L2\", "
                                                      "\"bad\\nkey\\u0007\": 1}")}});
  ASSERT_EQ(w.warnings.size(), 1u);
  EXPECT_NE(w.warnings[0].find("field \"bad\\nkey\\x07\""), std::string::npos) << w.warnings[0];
  // BOM and duplicate keys: accepted as JSON readers do (the last duplicate wins).
  const ConfigLoad b = ok({{"MSPROBE_CONFIG", d.write("bom.json",
                                                      "\xef\xbb\xbf{\"dump_path\": \"/d\", \"level\": "
                                                      "\"L2\", \"task\": \"statistics\", \"task\": "
                                                      "\"tensor\"}")}});
  EXPECT_EQ(b.config.task, Task::Tensor);
}

TEST(ConfigJson, LoadsOnA64KiBThreadStack) {
  // The first interposed call may come from any host thread: loading must not need a big stack.
  TempDir d;
  const std::string good = d.write("good.json", kMsprobeDefault);
  const std::string deep = d.write("deep.json", std::string(100000, '[') + std::string(100000, ']'));
  const Vars vars_good = {{"MSPROBE_CONFIG", good},
                          {"MSPROBE_LIST", "name-regex(" + std::string(16000, 'a') + ")"},
                          {"MSPROBE_STEP_MARKER", std::string(32, '(') + "x" + std::string(32, ')')}};
  const Vars vars_deep = {{"MSPROBE_CONFIG", deep}, {"MSPROBE_STEP_MARKER", std::string(10000, '(')}};
  size_t good_errors = 99, deep_errors = 0;
  pthread_attr_t attr;
  pthread_attr_init(&attr);
  pthread_attr_setstacksize(&attr, 64 * 1024);
  struct Job {
    const Vars *good, *deep;
    size_t *good_errors, *deep_errors;
  } job{&vars_good, &vars_deep, &good_errors, &deep_errors};
  pthread_t t;
  ASSERT_EQ(pthread_create(
                &t, &attr,
                [](void *p) -> void * {
                  Job *j = static_cast<Job *>(p);
                  *j->good_errors = load(*j->good).errors.size();
                  *j->deep_errors = load(*j->deep).errors.size();
                  return nullptr;
                },
                &job),
            0);
  pthread_join(t, nullptr);
  pthread_attr_destroy(&attr);
  EXPECT_EQ(good_errors, 0u);
  EXPECT_EQ(deep_errors, 2u);
}

TEST(ConfigJson, UnreadableFile) {
  if (::geteuid() == 0) GTEST_SKIP() << "root reads any file";
  TempDir d;
  const std::string p = d.write("c.json", "{}");
  ASSERT_EQ(::chmod(p.c_str(), 0), 0);
  EXPECT_NE(config_error(p).find("Permission denied"), std::string::npos);
}

TEST(ConfigJson, FileErrorsAreOneLineAndNameTheField) {
  // A file with many problems reports every one, each on one line naming MSPROBE_CONFIG and the field.
  TempDir d;
  const std::string p = d.write("c.json", R"({"level": "L1", "dump_path": 7, "task": "tensor", "step": [-1],
      "rank": ["9-1"], "precision": 1, "async_dump": 0,
      "tensor": {"list": [1], "scope": ["a"], "data_mode": ["x"], "file_format": "f", "summary_mode": 3}})");
  const ConfigLoad l = load({{"MSPROBE_CONFIG", p}});
  expect_all_one_line(l);
  EXPECT_FALSE(l.config.enabled);
  EXPECT_EQ(l.errors.size(), 11u) << ::testing::PrintToString(l.errors);
  for (const std::string &e : l.errors) {
    EXPECT_EQ(e.rfind("MSPROBE_CONFIG=\"" + p + "\": field \"", 0), 0u) << e;
    EXPECT_NE(e.find("; accepted: "), std::string::npos) << e;
  }
}

// ---- quote_value, unknown_variables, describe ----------------------------------------------------------------------

TEST(ConfigText, QuoteValue) {
  EXPECT_EQ(quote_value("plain"), "\"plain\"");
  EXPECT_EQ(quote_value("a\"b\\c"), "\"a\\\"b\\\\c\"");
  EXPECT_EQ(quote_value("l1\nl2\r\t\x01\x7f"), "\"l1\\nl2\\r\\t\\x01\\x7f\"");
  EXPECT_EQ(quote_value("\xe4\xb8\xad\xe6\x96\x87"), "\"\xe4\xb8\xad\xe6\x96\x87\"");  // valid UTF-8 kept
  EXPECT_EQ(quote_value("\xff\xc3(\xe2\x80\xa8\xc2\x85\xe2\x80\xae"), "\"\\xff\\xc3(\\u2028\\u0085\\u202e\"");
  EXPECT_EQ(quote_value("\xc0\xaf\xed\xa0\x80"), "\"\\xc0\\xaf\\xed\\xa0\\x80\"");  // overlong, surrogate
  EXPECT_EQ(quote_value(std::string(10240, 'x')), "\"" + std::string(100, 'x') + "...\" (10240 bytes)");
  EXPECT_EQ(quote_value(std::string(100, 'x')), "\"" + std::string(100, 'x') + "\"");
  EXPECT_EQ(quote_value(std::string("a\0b", 3)), "\"a\\x00b\"");
}

TEST(ConfigText, UnknownVariables) {
  const char *envp[] = {"MSPROBE_DUMPPATH=/x",
                        "MSPROBE_TASK=tensor",
                        "MSPROBE_FOO_BAR_BAZ=1",
                        "PATH=/bin",
                        "MSPROBE_STEPS=1",
                        "MSPROBE_LOG_LEVEL=1",
                        nullptr};
  const std::vector<std::string> w = unknown_variables(envp);
  ASSERT_EQ(w.size(), 3u) << ::testing::PrintToString(w);
  EXPECT_EQ(w[0], "\"MSPROBE_DUMPPATH\" is not a variable of msprobe-shim; ignored; did you mean MSPROBE_DUMP_PATH?");
  EXPECT_EQ(w[1], "\"MSPROBE_FOO_BAR_BAZ\" is not a variable of msprobe-shim; ignored");
  EXPECT_NE(w[2].find("did you mean MSPROBE_STEP?"), std::string::npos);
  EXPECT_TRUE(unknown_variables(nullptr).empty());
}

TEST(ConfigText, Describe) {
  const Config c = ok({{"MSPROBE_TASK", "tensor"}, {"MSPROBE_STEP", "0-2"}, {"MSPROBE_LIST", "Add"}}).config;
  const std::string s = describe(c);
  expect_one_line(s);
  EXPECT_NE(s.find("task=tensor (MSPROBE_TASK)"), std::string::npos) << s;
  EXPECT_NE(s.find("dump_path=\"./msprobe_dump\" step=0-2 (MSPROBE_STEP)"), std::string::npos) << s;
  EXPECT_NE(s.find("list=\"Add\" (MSPROBE_LIST)"), std::string::npos) << s;
  EXPECT_NE(s.find("step_marker=optimizer kernels"), std::string::npos) << s;
  EXPECT_STREQ(to_string(Task::OverflowCheck), "overflow_check");
  EXPECT_STREQ(to_string(LogLevel::Warn), "warn");
}

// ---- the log helper ------------------------------------------------------------------------------------------------

class LogCapture {
 public:
  LogCapture() {
    EXPECT_EQ(::pipe(fds_), 0);
    ::fcntl(fds_[0], F_SETFL, O_NONBLOCK);
    saved_ = log_level();
    set_log_fd(fds_[1]);
  }
  ~LogCapture() {
    set_log_fd(2);
    set_log_level(saved_);
    ::close(fds_[0]);
    ::close(fds_[1]);
  }
  std::string take() {
    std::string out;
    char buf[4096];
    ssize_t n;
    while ((n = ::read(fds_[0], buf, sizeof buf)) > 0) out.append(buf, static_cast<size_t>(n));
    return out;
  }

 private:
  int fds_[2];
  LogLevel saved_;
};

TEST(Log, LevelsPrefixAndOneLine) {
  LogCapture cap;
  set_log_level(LogLevel::Warn);
  log_error("bad %s=%d", "x", 3);
  log_warn("careful");
  log_info("hidden");
  log_debug("hidden too");
  EXPECT_EQ(cap.take(), "msprobe-shim: bad x=3\nmsprobe-shim: warning: careful\n");
  set_log_level(LogLevel::Debug);
  log_info("two\nlines\r");
  log_debug("d");
  EXPECT_EQ(cap.take(), "msprobe-shim: two lines \nmsprobe-shim: debug: d\n");
  set_log_level(LogLevel::Error);
  log_warn("no");
  log_error("yes");
  EXPECT_EQ(cap.take(), "msprobe-shim: yes\n");
  EXPECT_FALSE(log_enabled(LogLevel::Warn));
  EXPECT_TRUE(log_enabled(LogLevel::Error));
}

TEST(Log, LongMessagesAreCutAndErrnoIsKept) {
  LogCapture cap;
  set_log_level(LogLevel::Warn);
  const std::string big(5000, 'y');
  errno = EAGAIN;
  log_error("%s", big.c_str());
  EXPECT_EQ(errno, EAGAIN);
  const std::string out = cap.take();
  EXPECT_EQ(std::count(out.begin(), out.end(), '\n'), 1);
  EXPECT_LE(out.size(), 1025u);
  EXPECT_EQ(out.substr(out.size() - 4), "...\n");
  EXPECT_EQ(out.rfind("msprobe-shim: yyy", 0), 0u);
}

TEST(Log, ThreadsWriteWholeLines) {
  LogCapture cap;
  set_log_level(LogLevel::Warn);
  std::vector<std::thread> threads;
  for (int t = 0; t < 4; ++t) {
    threads.emplace_back([t] {
      for (int i = 0; i < 50; ++i) log_error("thread %d line %d", t, i);
    });
  }
  for (std::thread &t : threads) t.join();
  const std::string out = cap.take();
  EXPECT_EQ(std::count(out.begin(), out.end(), '\n'), 200);
  size_t start = 0;
  while (start < out.size()) {
    const size_t nl = out.find('\n', start);
    EXPECT_EQ(out.compare(start, 21, "msprobe-shim: thread "), 0);
    start = nl + 1;
  }
}

TEST(Log, ReportConfig) {
  LogCapture cap;
  report_config(load({{"MSPROBE_TASK", "tesnor"}, {"MSPROBE_LOG_LEVEL", "error"}, {"MSPROBE_OVERFLOW_NUMS", "3"}}));
  EXPECT_EQ(cap.take(),
            "msprobe-shim: MSPROBE_TASK=\"tesnor\" is not valid; accepted: statistics, tensor, overflow_check, "
            "structure, flight\nmsprobe-shim: the configuration is invalid: capture is disabled and the program runs as "
            "without msprobe-shim\n");  // the warning is below MSPROBE_LOG_LEVEL=error
  report_config(load({{"MSPROBE_LOG_LEVEL", "info"}}));
  const std::string info = cap.take();
  EXPECT_EQ(info.rfind("msprobe-shim: task=statistics dump_path=", 0), 0u) << info;
  report_config(load({{"MSPROBE_ENABLE", "0"}}));
  EXPECT_EQ(cap.take(), "");
}

}  // namespace
