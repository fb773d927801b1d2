// NameRegex (the RE2-subset engine behind name-regex(...) and MSPROBE_STEP_MARKER), KernelFilter items and the
// splitting of MSPROBE_LIST values. The engine is checked against libstdc++'s std::regex (ECMAScript) on random
// patterns, on the main thread's big stack where std::regex is safe for small patterns.
#include <gtest/gtest.h>
#include <pthread.h>

#include <chrono>
#include <functional>
#include <random>
#include <regex>

#include "shim/config/kernel_filter.h"

using msprobe::shim::KernelFilter;
using msprobe::shim::NameRegex;
using msprobe::shim::split_filter_items;

namespace {

NameRegex re(std::string_view pattern) {
  std::string why;
  std::optional<NameRegex> r = NameRegex::compile(pattern, &why);
  EXPECT_TRUE(r.has_value()) << pattern << ": " << why;
  return r ? *r : NameRegex{};
}

std::string compile_error(std::string_view pattern) {
  std::string why;
  const std::optional<NameRegex> r = NameRegex::compile(pattern, &why);
  EXPECT_FALSE(r.has_value()) << pattern;
  EXPECT_FALSE(why.empty()) << pattern;
  EXPECT_EQ(why.find('\n'), std::string::npos);
  return why;
}

// Runs fn on a thread with a small stack, the way a hook may run on a host thread.
void on_small_stack(size_t bytes, const std::function<void()> &fn) {
  pthread_attr_t attr;
  pthread_attr_init(&attr);
  pthread_attr_setstacksize(&attr, bytes);
  pthread_t t;
  auto *arg = new std::function<void()>(fn);
  ASSERT_EQ(pthread_create(
                &t, &attr,
                [](void *p) -> void * {
                  auto *f = static_cast<std::function<void()> *>(p);
                  (*f)();
                  delete f;
                  return nullptr;
                },
                arg),
            0);
  pthread_join(t, nullptr);
  pthread_attr_destroy(&attr);
}

TEST(NameRegex, FullMatchSemantics) {
  EXPECT_TRUE(re("Matmul").matches("Matmul"));
  EXPECT_FALSE(re("Matmul").matches("MatmulV2"));  // whole name, as RE2 FullMatch
  EXPECT_FALSE(re("Matmul").matches("xMatmul"));
  EXPECT_TRUE(re("Mat.*").matches("Matmul.Default.0"));
  EXPECT_TRUE(re("Default/.+").matches("Default/net/Conv2D-op1"));
  EXPECT_FALSE(re("Default/.+").matches("Default/"));
  EXPECT_TRUE(re("").matches(""));
  EXPECT_FALSE(re("").matches("a"));
  EXPECT_FALSE(NameRegex{}.matches(""));  // empty object: nothing
  EXPECT_TRUE(NameRegex{}.empty());
}

TEST(NameRegex, Syntax) {
  EXPECT_TRUE(re("a|b|cd").matches("cd"));
  EXPECT_FALSE(re("a|b|cd").matches("c"));
  EXPECT_TRUE(re("(ab)+").matches("ababab"));
  EXPECT_FALSE(re("(ab)+").matches(""));
  EXPECT_TRUE(re("(?:ab)*c").matches("c"));
  EXPECT_TRUE(re("a?b").matches("b"));
  EXPECT_TRUE(re("a{3}").matches("aaa"));
  EXPECT_FALSE(re("a{3}").matches("aa"));
  EXPECT_TRUE(re("a{2,}").matches("aaaaa"));
  EXPECT_FALSE(re("a{2,}").matches("a"));
  EXPECT_TRUE(re("a{1,3}").matches("aaa"));
  EXPECT_FALSE(re("a{1,3}").matches("aaaa"));
  EXPECT_TRUE(re("a{0}b").matches("b"));
  EXPECT_TRUE(re("a*?b+?c??").matches("aabb"));  // lazy forms: same yes/no answer
  EXPECT_TRUE(re("a{").matches("a{"));           // '{' not starting a count is a literal (RE2)
  EXPECT_TRUE(re("a{x}").matches("a{x}"));
  EXPECT_TRUE(re("a{1,x}").matches("a{1,x}"));
  EXPECT_TRUE(re("[a-c]+").matches("abcab"));
  EXPECT_FALSE(re("[a-c]+").matches("abd"));
  EXPECT_TRUE(re("[^a-c]").matches("d"));
  EXPECT_FALSE(re("[^a-c]").matches("b"));
  EXPECT_TRUE(re("[]a]+").matches("]a]"));  // a leading ']' is a literal
  EXPECT_TRUE(re("[a-]+").matches("-a-"));
  EXPECT_TRUE(re("[\\d_]+").matches("12_3"));
  EXPECT_TRUE(re("[[:alpha:]]+[[:digit:]]").matches("Conv2"));
  EXPECT_TRUE(re("[[:^digit:]]").matches("x"));
  EXPECT_TRUE(re("\\d+\\.\\w+\\s\\S").matches("12.ab_ x"));
  EXPECT_FALSE(re("\\D").matches("5"));
  EXPECT_TRUE(re("\\W").matches("."));
  EXPECT_TRUE(re("\\x41\\t").matches("A\t"));
  EXPECT_TRUE(re("\\(\\)\\[\\]\\{\\}\\.\\*\\+\\?\\|\\^\\$\\\\/").matches("()[]{}.*+?|^$\\/"));
  EXPECT_TRUE(re("^abc$").matches("abc"));
  EXPECT_FALSE(re("a^b").matches("ab"));   // ^ only at the start
  EXPECT_FALSE(re("a$b").matches("ab"));
  EXPECT_TRUE(re("\\Aab\\z").matches("ab"));
  EXPECT_FALSE(re(".").matches("\n"));
  EXPECT_TRUE(re("(a|)+b").matches("aab"));  // empty alternatives inside loops terminate
  EXPECT_TRUE(re("(a*)*b").matches("b"));
  EXPECT_TRUE(re("((a*)*)*").matches("aaaa"));
  EXPECT_TRUE(re("\xe4\xb8\xad.*").matches("\xe4\xb8\xad\xe6\x96\x87"));  // bytes: UTF-8 literals work
}

TEST(NameRegex, CaseInsensitiveFlag) {
  EXPECT_TRUE(re("(?i)applyadamw").matches("ApplyAdamW"));
  EXPECT_TRUE(re("(?i)adam|sgd").matches("SGD"));  // literal fast path
  EXPECT_TRUE(re("(?i)[a-c]+x").matches("ABCX"));
  EXPECT_FALSE(re("(?i)[^a]").matches("A"));
  EXPECT_FALSE(re("adam").matches("ADAM"));
}

TEST(NameRegex, LiteralAlternationFastPathAgreesWithNfa) {
  const NameRegex fast = re("ApplyAdamW|Sgd|Lamb");
  const NameRegex slow = re("(?:ApplyAdamW|Sgd|Lamb)$");  // an anchor forces the NFA
  for (const char *s : {"ApplyAdamW", "Sgd", "Lamb", "ApplyAdam", "ApplyAdamWV2", "", "sgd", "LambX"}) {
    EXPECT_EQ(fast.matches(s), slow.matches(s)) << s;
  }
}

TEST(NameRegex, ErrorsAreMessagesNotExceptions) {
  EXPECT_NE(compile_error("(").find("missing closing )"), std::string::npos);
  EXPECT_NE(compile_error("a)").find("unexpected )"), std::string::npos);
  EXPECT_NE(compile_error("[a").find("missing closing ]"), std::string::npos);
  EXPECT_NE(compile_error("a**").find("bad repetition operator"), std::string::npos);
  EXPECT_NE(compile_error("a{2}{3}").find("bad repetition operator"), std::string::npos);
  EXPECT_NE(compile_error("*a").find("missing argument"), std::string::npos);
  EXPECT_NE(compile_error("a|?").find("missing argument"), std::string::npos);
  EXPECT_NE(compile_error("a{1001}").find("at most 1000"), std::string::npos);
  EXPECT_NE(compile_error("a{3,2}").find("min > max"), std::string::npos);
  EXPECT_NE(compile_error("a{99999999999999999999}").find("at most 1000"), std::string::npos);
  EXPECT_NE(compile_error("[z-a]").find("bad character class range"), std::string::npos);
  EXPECT_NE(compile_error("(a)\\1").find("unsupported escape"), std::string::npos);  // no back-references
  EXPECT_NE(compile_error("\\b").find("unsupported escape"), std::string::npos);
  EXPECT_NE(compile_error("\\pL").find("unsupported escape"), std::string::npos);
  EXPECT_NE(compile_error("(?=a)").find("unsupported group"), std::string::npos);
  EXPECT_NE(compile_error("a(?i)b").find("unsupported group"), std::string::npos);
  EXPECT_NE(compile_error("\\").find("trailing"), std::string::npos);
  EXPECT_NE(compile_error("\\xZ1").find("hex"), std::string::npos);
  EXPECT_NE(compile_error("[[:nope:]]").find("unknown character class"), std::string::npos);
  EXPECT_NE(compile_error("^*").find("empty-width"), std::string::npos);
  EXPECT_NE(compile_error(std::string(33, '(') + "a" + std::string(33, ')')).find("nested deeper"), std::string::npos);
  EXPECT_NE(compile_error(std::string(NameRegex::kMaxPatternBytes + 1, 'a')).find("longer than"), std::string::npos);
  EXPECT_NE(compile_error("(a{1000}){1000}").find("too large"), std::string::npos);
  EXPECT_NE(compile_error("((a{100}){100}){100}").find("too large"), std::string::npos);
  EXPECT_NE(compile_error("a\n(").find("missing closing )"), std::string::npos);  // message stays one line
  // Deepest allowed nesting compiles.
  EXPECT_TRUE(re(std::string(32, '(') + "a" + std::string(32, ')')).matches("a"));
}

TEST(NameRegex, HostilePatternsAndInputsOnA64KiBStack) {
  // std::regex overflows such a stack with a 1000-character pattern; ours must not, whatever the input.
  bool done = false;
  on_small_stack(64 * 1024, [&] {
    std::string why;
    const std::string big_literal(NameRegex::kMaxPatternBytes, 'a');
    auto r1 = NameRegex::compile(big_literal, &why);
    ASSERT_TRUE(r1);
    EXPECT_TRUE(r1->matches(big_literal));
    std::string opt;  // 8000 x "a?" then "b": a 16 000-instruction NFA with long epsilon chains
    for (int i = 0; i < 8000; ++i) opt += "a?";
    opt += "b";
    auto r2 = NameRegex::compile(opt, &why);
    ASSERT_TRUE(r2) << why;
    EXPECT_TRUE(r2->matches(std::string(4000, 'a') + "b"));
    EXPECT_FALSE(r2->matches(std::string(8001, 'a') + "b"));
    auto r3 = NameRegex::compile(std::string(32, '(') + ".*x" + std::string(32, ')'), &why);
    ASSERT_TRUE(r3);
    const std::string long_text(1 << 20, 'y');
    EXPECT_FALSE(r3->matches(long_text));
    EXPECT_TRUE(r3->matches(long_text + "x"));
    std::string alts = "a";
    for (int i = 0; i < 1200; ++i) alts += "|a" + std::to_string(i) + "(b|c)";
    auto r4 = NameRegex::compile(alts, &why);
    ASSERT_TRUE(r4) << why;
    EXPECT_TRUE(r4->matches("a1199c"));
    EXPECT_FALSE(r4->matches("a1200c"));
    // Deeply nested garbage is an error, not a crash.
    EXPECT_FALSE(NameRegex::compile(std::string(10000, '('), &why));
    EXPECT_FALSE(NameRegex::compile(std::string(10000, '['), &why));
    done = true;
  });
  EXPECT_TRUE(done);
}

TEST(NameRegex, LinearTimeOnBacktrackingKillers) {
  const auto start = std::chrono::steady_clock::now();
  EXPECT_FALSE(re("(a*)*b").matches(std::string(20000, 'a')));
  EXPECT_FALSE(re("(a|aa)+c").matches(std::string(20000, 'a')));
  EXPECT_FALSE(re("(.*a){20}").matches(std::string(2000, 'a').substr(0, 19)));
  const double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  EXPECT_LT(secs, 5.0);
}

// ---- differential test against std::regex (ECMAScript, full match) ----------------------------------------------

std::string random_pattern(std::mt19937 &rng, int depth) {
  const auto pick = [&](int n) { return static_cast<int>(rng() % static_cast<unsigned>(n)); };
  std::string out;
  const int items = 1 + pick(3);
  for (int i = 0; i < items; ++i) {
    std::string atom;
    switch (pick(depth > 2 ? 5 : 7)) {
      case 0: atom = "a"; break;
      case 1: atom = "b"; break;
      case 2: atom = "."; break;
      case 3: atom = pick(2) ? "[ab]" : "[^a]"; break;
      case 4: atom = "c"; break;
      case 5: atom = "(" + random_pattern(rng, depth + 1) + ")"; break;
      default: atom = "(?:" + random_pattern(rng, depth + 1) + "|" + random_pattern(rng, depth + 1) + ")"; break;
    }
    switch (pick(8)) {
      case 0: atom += "*"; break;
      case 1: atom += "+"; break;
      case 2: atom += "?"; break;
      case 3: atom += "{" + std::to_string(pick(3)) + "," + std::to_string(2 + pick(2)) + "}"; break;
      case 4: atom += "{" + std::to_string(pick(3)) + "}"; break;
      default: break;
    }
    out += atom;
  }
  if (pick(6) == 0) out += "|" + random_pattern(rng, depth + 1);
  return out;
}

TEST(NameRegex, AgreesWithStdRegexOnRandomPatterns) {
  std::mt19937 rng(12345);
  int compared = 0;
  for (int p = 0; p < 1500; ++p) {
    const std::string pattern = random_pattern(rng, 0);
    std::regex ref;
    try {
      // libstdc++'s polynomial (breadth-first) executor: the default backtracking one takes exponential time on
      // the nested counted repeats these patterns have.
      ref = std::regex(pattern, std::regex::ECMAScript | std::regex_constants::__polynomial);
    } catch (const std::regex_error &) {
      continue;
    }
    std::string why;
    const std::optional<NameRegex> ours = NameRegex::compile(pattern, &why);
    ASSERT_TRUE(ours) << pattern << ": " << why;
    for (int s = 0; s < 40; ++s) {
      std::string text;
      const int len = static_cast<int>(rng() % 7);
      for (int i = 0; i < len; ++i) text += "abcd"[rng() % 4];
      ASSERT_EQ(ours->matches(text), std::regex_match(text, ref)) << "pattern " << pattern << " text " << text;
      ++compared;
    }
  }
  EXPECT_GT(compared, 40000);
}

// ---- KernelFilter -----------------------------------------------------------------------------------------------

KernelFilter filter(std::initializer_list<const char *> items) {
  KernelFilter f;
  for (const char *i : items) {
    std::string why;
    EXPECT_TRUE(f.add_item(i, &why)) << i << ": " << why;
  }
  return f;
}

TEST(KernelFilter, OpTypesAreCaseInsensitive) {
  const KernelFilter f = filter({"Matmul", "add"});
  EXPECT_TRUE(f.matches("Matmul", "Matmul.Default.0"));
  EXPECT_TRUE(f.matches("MATMUL", "MATMUL.Default.0"));
  EXPECT_TRUE(f.matches("Add", "Add.forward.7"));
  EXPECT_FALSE(f.matches("AddRmsNorm", "AddRmsNorm.Default.0"));  // no substring matching
  EXPECT_FALSE(f.matches("Mul", "Mul.Default.0"));
  EXPECT_TRUE(f.may_match_type("ADD"));
  EXPECT_FALSE(f.may_match_type("Mul"));
  EXPECT_EQ(f.size(), 2u);
  EXPECT_EQ(f.to_string(), "Matmul,add");
}

TEST(KernelFilter, FullAndBaseNames) {
  const KernelFilter f = filter({"Matmul.Default.3", "Add.train_step_forward"});
  EXPECT_TRUE(f.matches("Matmul", "Matmul.Default.3"));
  EXPECT_FALSE(f.matches("Matmul", "Matmul.Default.4"));
  EXPECT_FALSE(f.matches("Matmul", "matmul.Default.3"));  // names are exact
  EXPECT_TRUE(f.matches("Add", "Add.train_step_forward.0"));
  EXPECT_TRUE(f.matches("Add", "Add.train_step_forward.12"));
  EXPECT_FALSE(f.matches("Add", "Add.train_step.0"));
  EXPECT_TRUE(f.may_match_type("Matmul"));
  EXPECT_TRUE(f.may_match_type("Add"));
  EXPECT_FALSE(f.may_match_type("Mul"));
}

// Issue 27: kernels are named {OpType}.{OpName}.{n}.forward; a kernel item may name one with or without the token.
TEST(KernelFilter, NamesWithTheirDirectionToken) {
  const KernelFilter f = filter({"Matmul.Default.3", "Relu.Default.1.forward", "Add.train_step_forward"});
  EXPECT_TRUE(f.matches("Matmul", "Matmul.Default.3.forward"));
  EXPECT_FALSE(f.matches("Matmul", "Matmul.Default.30.forward"));
  EXPECT_TRUE(f.matches("Relu", "Relu.Default.1.forward"));
  EXPECT_FALSE(f.matches("Relu", "Relu.Default.10.forward"));
  EXPECT_TRUE(f.matches("Add", "Add.train_step_forward.0.forward"));
  EXPECT_TRUE(f.matches("Add", "Add.train_step_forward.12.forward"));
  EXPECT_FALSE(f.matches("Add", "Add.train_step.0.forward"));
  EXPECT_TRUE(f.may_match_type("Relu"));
  KernelFilter g;
  std::string why, note;
  EXPECT_TRUE(g.add_item("Add.forward", &why, &note));  // a direction needs OpType.OpName.n before it
  EXPECT_NE(note.find("can never match"), std::string::npos);
  note.clear();
  EXPECT_TRUE(g.add_item("Add.x.0.forward", &why, &note));
  EXPECT_TRUE(note.empty()) << note;
  const KernelFilter re = filter({"name-regex(Mat.*\\.forward)"});
  EXPECT_TRUE(re.matches("Matmul", "Matmul.Default.0.forward"));
}

TEST(KernelFilter, NameRegexItems) {
  const KernelFilter f = filter({"name-regex(Mat.{1,3}ul\\..*)", " name-regex(Add\\.fwd_[0-9]+\\.0) "});
  EXPECT_TRUE(f.matches("Matmul", "Matmul.Default.0"));
  EXPECT_TRUE(f.matches("MatMul", "MatMul.x.1"));
  EXPECT_FALSE(f.matches("BatchMatmul", "BatchMatmul.Default.0"));  // full match
  EXPECT_TRUE(f.matches("Add", "Add.fwd_12.0"));
  EXPECT_FALSE(f.matches("Add", "Add.fwd_12.1"));
  EXPECT_TRUE(f.may_match_type("Anything"));
  EXPECT_EQ(f.to_string(), "name-regex(Mat.{1,3}ul\\..*),name-regex(Add\\.fwd_[0-9]+\\.0)");
}

TEST(KernelFilter, ItemErrorsAndWarnings) {
  KernelFilter f;
  std::string why, note;
  EXPECT_FALSE(f.add_item("", &why));
  EXPECT_EQ(why, "empty item");
  EXPECT_FALSE(f.add_item("   ", &why));
  EXPECT_FALSE(f.add_item("name-regex((", &why));
  EXPECT_NE(why.find("no closing"), std::string::npos);
  EXPECT_FALSE(f.add_item("name-regex(a**)", &why));
  EXPECT_NE(why.find("bad regular expression in name-regex(...): bad repetition operator"), std::string::npos) << why;
  EXPECT_FALSE(f.add_item("name-regex(a)b", &why));
  EXPECT_NE(why.find("unexpected text"), std::string::npos);
  EXPECT_TRUE(f.empty());
  EXPECT_TRUE(f.add_item("Default/network/Conv2D-op12", &why, &note));  // MindSpore scope name: valid, never matches
  EXPECT_NE(note.find("can never match"), std::string::npos);
  note.clear();
  EXPECT_TRUE(f.add_item("a.b.c.d", &why, &note));
  EXPECT_NE(note.find("can never match"), std::string::npos);
  note.clear();
  EXPECT_TRUE(f.add_item("Add", &why, &note));
  EXPECT_TRUE(note.empty());
  EXPECT_TRUE(f.add_item("Add", &why, &note));
  EXPECT_NE(note.find("listed twice"), std::string::npos);
  EXPECT_EQ(f.size(), 3u);
  EXPECT_FALSE(KernelFilter{}.matches("Add", "Add.Default.0"));  // empty filter: callers treat it as "all"
}

TEST(KernelFilter, SplitsEnvironmentValues) {
  std::vector<std::string> items;
  std::string why;
  ASSERT_TRUE(split_filter_items(" Add , Matmul.Default.0,name-regex(Mat.{1,3}),name-regex([,)]x\\)y(a,b)) ", &items, &why))
      << why;
  EXPECT_EQ(items, (std::vector<std::string>{"Add", "Matmul.Default.0", "name-regex(Mat.{1,3})",
                                             "name-regex([,)]x\\)y(a,b))"}));
  items.clear();
  ASSERT_TRUE(split_filter_items("name-regex([[:alpha:]]+),Mul", &items, &why)) << why;
  EXPECT_EQ(items, (std::vector<std::string>{"name-regex([[:alpha:]]+)", "Mul"}));
  items.clear();
  ASSERT_TRUE(split_filter_items("name-regex([]),]) ,  Mul", &items, &why)) << why;  // ']' first in a class
  EXPECT_EQ(items, (std::vector<std::string>{"name-regex([]),])", "Mul"}));
  items.clear();
  EXPECT_FALSE(split_filter_items("Add,,Mul", &items, &why));
  EXPECT_EQ(why, "item 2 is empty");
  EXPECT_FALSE(split_filter_items("Add,", &items, &why));
  EXPECT_EQ(why, "item 2 is empty");
  EXPECT_FALSE(split_filter_items("name-regex(a,b", &items, &why));
  EXPECT_NE(why.find("no closing"), std::string::npos);
  EXPECT_FALSE(split_filter_items("name-regex(a)b,c", &items, &why));
  EXPECT_NE(why.find("unexpected text"), std::string::npos);
}

}  // namespace
