// The tools' JSON reader: Python's NaN / Infinity / -Infinity tokens, exact numbers, strings, streaming, errors.
#include <gtest/gtest.h>

#include <bit>
#include <cmath>
#include <limits>
#include <random>
#include <string>
#include <vector>

#include "format/dump_json.h"
#include "tools/reader/json_reader.h"

namespace mt = msprobe::tools;
namespace mc = msprobe::format;
using mt::Json;

namespace {

TEST(JsonReader, AcceptsPythonNonFiniteTokensOutsideStrings) {
  const Json j = mt::parse_json(R"({"Max": NaN, "Min": -Infinity, "Norm": Infinity, "s": "NaN", "l": [NaN, 1]})");
  EXPECT_TRUE(j["Max"].is_number_float());
  EXPECT_TRUE(std::isnan(j["Max"].get<double>()));
  EXPECT_EQ(j["Min"].get<double>(), -std::numeric_limits<double>::infinity());
  EXPECT_EQ(j["Norm"].get<double>(), std::numeric_limits<double>::infinity());
  // The same letters inside a string stay a string.
  EXPECT_EQ(j["s"].get<std::string>(), "NaN");
  EXPECT_TRUE(std::isnan(j["l"][0].get<double>()));
  EXPECT_EQ(j["l"][1].get<int64_t>(), 1);
}

TEST(JsonReader, NlohmannAloneRefusesWhatWeAccept) {
  // Why this reader exists: the dump's own numbers are not JSON to nlohmann.
  EXPECT_THROW(
      {
        const auto j = nlohmann::json::parse(R"({"Max": NaN})");
        (void)j;
      },
      nlohmann::json::parse_error);
  EXPECT_NO_THROW((void)mt::parse_json(R"({"Max": NaN})"));
}

TEST(JsonReader, RejectsNearMissesOfTheTokens) {
  for (const char *bad :
       {"nan", "Nan", "inf", "-NaN", "+Infinity", "Infinit", "NaNx",      "[1,]",  "{\"a\":1,}", "01",
        "1.",  ".5",  "1e",  "--1",  "\"\\x\"",   "\"abc",   "{\"a\" 1}", "[1 2]", "tru",        "nul"}) {
    EXPECT_FALSE(mt::is_valid_json(bad)) << bad;
  }
}

TEST(JsonReader, NumbersRoundTripExactlyFromTheWritersRepr) {
  std::mt19937_64 rng(42);
  std::uniform_int_distribution<uint64_t> bits;
  for (int i = 0; i < 20000; ++i) {
    double v = std::bit_cast<double>(bits(rng));
    if (i % 3 == 0) v = static_cast<double>(static_cast<float>(v));  // float32 values, as the statistics are
    const std::string text = mc::json_number(v);
    const Json j = mt::parse_json(text);
    ASSERT_TRUE(j.is_number()) << text;
    const double back = j.get<double>();
    if (std::isnan(v))
      EXPECT_TRUE(std::isnan(back)) << text;
    else
      EXPECT_EQ(std::bit_cast<uint64_t>(back), std::bit_cast<uint64_t>(v)) << text;
  }
}

TEST(JsonReader, IntegersKeepTheirKind) {
  const Json j = mt::parse_json("[0, -1, 9223372036854775807, -9223372036854775808, 18446744073709551615, 1.0, 1e2]");
  EXPECT_TRUE(j[0].is_number_integer());
  EXPECT_EQ(j[1].get<int64_t>(), -1);
  EXPECT_EQ(j[2].get<int64_t>(), std::numeric_limits<int64_t>::max());
  EXPECT_EQ(j[3].get<int64_t>(), std::numeric_limits<int64_t>::min());
  EXPECT_TRUE(j[4].is_number_unsigned());
  EXPECT_EQ(j[4].get<uint64_t>(), std::numeric_limits<uint64_t>::max());
  EXPECT_TRUE(j[5].is_number_float());
  EXPECT_EQ(j[6].get<double>(), 100.0);
  // Out of double range: IEEE overflow / underflow, as Python's float() does.
  EXPECT_EQ(mt::parse_json("1e999").get<double>(), std::numeric_limits<double>::infinity());
  EXPECT_EQ(mt::parse_json("-1e999").get<double>(), -std::numeric_limits<double>::infinity());
  EXPECT_EQ(mt::parse_json("1e-999").get<double>(), 0.0);
}

TEST(JsonReader, StringsDecodeWhatTheWriterEncodes) {
  const std::string samples[] = {
      "plain",    "q\"b\\s/",     "a\nb\tc\r\b\f",   std::string("\x01\x1f\x7f", 3), std::string("\0x", 2),
      "\xc3\xa9", "\xe4\xb8\xad", "\xf0\x9f\x98\x80"};
  for (const std::string &s : samples) {
    std::string text;
    mc::append_json_string(text, s);
    EXPECT_EQ(mt::parse_json(text).get<std::string>(), s) << text;
  }
  // A lone surrogate (Python writes one for some inputs) becomes U+FFFD.
  EXPECT_EQ(mt::parse_json(R"("\ud800x")").get<std::string>(), "\xef\xbf\xbdx");
  EXPECT_EQ(mt::parse_json(R"("\/")").get<std::string>(), "/");
}

TEST(JsonReader, ObjectsKeepMemberOrder) {
  const Json j = mt::parse_json(R"({"z": 1, "a": 2, "m": {"y": null, "b": true}})");
  std::vector<std::string> keys;
  for (const auto &[k, v] : j.items()) keys.push_back(k);
  EXPECT_EQ(keys, (std::vector<std::string>{"z", "a", "m"}));
  EXPECT_EQ(mt::to_json_text(j), R"({"z": 1, "a": 2, "m": {"y": null, "b": true}})");
}

TEST(JsonReader, WritesNonFiniteBackAsPythonDoes) {
  const Json j = mt::parse_json(R"({"a": [NaN, Infinity, -Infinity, 0.1, -0.0, 1e-05]})");
  EXPECT_EQ(mt::to_json_text(j), R"({"a": [NaN, Infinity, -Infinity, 0.1, -0.0, 1e-05]})");
}

TEST(JsonReader, StreamsMembersOneAtATime) {
  const std::string text =
      R"({"task": "tensor", "data": {"A.x.0": {"v": NaN}, "B.x.0": {"v": [1, {"k": 2}]}}, "z": 3})";
  mt::JsonStream s(text);
  std::vector<std::string> seen;
  s.members([&](std::string &&key) {
    if (key == "data") {
      s.members([&](std::string &&name) {
        const Json e = s.value();
        seen.push_back(name + "=" + mt::to_json_text(e));
      });
    } else {
      s.skip();
      seen.push_back(key);
    }
  });
  s.finish();
  EXPECT_EQ(seen, (std::vector<std::string>{"task", "A.x.0={\"v\": NaN}", "B.x.0={\"v\": [1, {\"k\": 2}]}", "z"}));
}

TEST(JsonReader, ErrorsSayWhere) {
  try {
    (void)mt::parse_json("{\n  \"a\": 1,\n  \"b\": [1, 2\n}");
    FAIL() << "no error";
  } catch (const mt::JsonError &e) {
    const std::string what = e.what();
    EXPECT_NE(what.find("line 4, column 1"), std::string::npos) << what;
    EXPECT_NE(what.find("expected ',' or ']'"), std::string::npos) << what;
    EXPECT_EQ(e.offset(), 25u);
  }
  std::string why;
  EXPECT_FALSE(mt::is_valid_json("{\"a\": 1} x", &why));
  EXPECT_NE(why.find("after the end"), std::string::npos) << why;
  EXPECT_FALSE(mt::is_valid_json("", &why));
}

TEST(JsonReader, DeepNestingIsAnErrorNotACrash) {
  const std::string deep = std::string(100000, '[') + std::string(100000, ']');
  std::string why;
  EXPECT_FALSE(mt::is_valid_json(deep, &why));
  EXPECT_NE(why.find("nesting deeper"), std::string::npos);
  EXPECT_THROW((void)mt::parse_json(deep), mt::JsonError);
}

TEST(JsonReader, DuplicateKeysAreKeptAndLookupFindsTheFirst) {
  const Json j = mt::parse_json(R"({"a": 1, "a": 2})");
  EXPECT_EQ(j.size(), 2u);
  EXPECT_EQ(j.find("a")->get<int64_t>(), 1);
}

}  // namespace
