// Kernel names, file names, csv-safe text and the long-name rule.
#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <random>
#include <regex>
#include <set>

#include "format/naming.h"

namespace mc = msprobe::format;
namespace fs = std::filesystem;

namespace {

TEST(Naming, SanitizesNameParts) {
  EXPECT_EQ(mc::sanitize_name_part("MatMul", "x"), "MatMul");
  EXPECT_EQ(mc::sanitize_name_part("Default/network-Net/Conv2D-op12", "x"), "Default_network-Net_Conv2D-op12");
  EXPECT_EQ(mc::sanitize_name_part("a\\b.c d", "x"), "a_b_c_d");
  EXPECT_EQ(mc::sanitize_name_part("..", "x"), "__");
  EXPECT_EQ(mc::sanitize_name_part(".", "x"), "_");
  EXPECT_EQ(mc::sanitize_name_part("/", "x"), "_");
  EXPECT_EQ(mc::sanitize_name_part("-rf", "x"), "_rf");    // a leading '-' is replaced
  EXPECT_EQ(mc::sanitize_name_part("--x-", "x"), "_-x-");  // only the first character matters
  EXPECT_EQ(mc::sanitize_name_part("+1", "x"), "_1");
  EXPECT_EQ(mc::sanitize_name_part("=cmd|'/C calc'!A0", "x"), "_cmd___C_calc__A0");
  EXPECT_EQ(mc::sanitize_name_part("@x;%y", "x"), "_x__y");
  EXPECT_EQ(mc::sanitize_name_part("h\xc3\xa9llo", "x"), "h__llo");  // each UTF-8 byte
  EXPECT_EQ(mc::sanitize_name_part(std::string("a\0b\n", 4), "x"), "a_b_");
  EXPECT_EQ(mc::sanitize_name_part("", "Default"), "Default");
  std::string garbage;
  for (int i = 0; i < 256; ++i) garbage += static_cast<char>(i);
  const std::string s = mc::sanitize_name_part(garbage, "x");
  EXPECT_TRUE(std::regex_match(s, std::regex("[A-Za-z0-9_][A-Za-z0-9_-]*")));
  EXPECT_EQ(s.size(), 256u);
  const std::string long_name(10 * 1024, '.');
  EXPECT_EQ(mc::sanitize_name_part(long_name, "x"), std::string(10 * 1024, '_'));
}

TEST(Naming, KernelAndFileNames) {
  EXPECT_EQ(mc::kernel_base_name("Add", "train.step/forward"), "Add.train_step_forward");
  EXPECT_EQ(mc::kernel_base_name("Add", ""), "Add.Default");
  EXPECT_EQ(mc::kernel_base_name("", ""), "Unknown.Default");
  EXPECT_EQ(mc::kernel_base_name("-Add", "-x"), "_Add._x");
  EXPECT_EQ(mc::kernel_name("Add.Default", 12), "Add.Default.12.forward");
  EXPECT_EQ(mc::tensor_file_name("Add.Default.0.forward", mc::IoKind::Output, 1, "npy"),
            "Add.Default.0.forward.output.1.npy");
  EXPECT_EQ(mc::tensor_file_suffix(mc::FileFormat::Npy, mc::DType::BF16), "npy");
  EXPECT_EQ(mc::tensor_file_suffix(mc::FileFormat::Npy, mc::DType::Raw), "bin");
  EXPECT_EQ(mc::tensor_file_suffix(mc::FileFormat::Bin, mc::DType::F32), "bin");
  EXPECT_TRUE(mc::is_safe_file_name("Add.Default.0.input.0.npy"));
  for (std::string_view bad : {std::string_view(""), std::string_view("."), std::string_view(".."),
                               std::string_view("a/b"), std::string_view("/"), std::string_view("a\0b", 3)})
    EXPECT_FALSE(mc::is_safe_file_name(bad)) << bad;
}

// msprobe since 2026 drops every entry whose last or second-to-last '.'-token is not a direction: every name
// carries one. Readers take names of either form apart the same way.
TEST(Naming, KernelNamesCarryADirectionAndReadBackInBothForms) {
  const std::string name = mc::kernel_name(mc::kernel_base_name("Matmul", "net.fc1"), 3);
  EXPECT_EQ(name, "Matmul.net_fc1.3.forward");
  EXPECT_EQ(mc::op_type_of(name), "Matmul");
  EXPECT_EQ(mc::kernel_stem(name), "Matmul.net_fc1.3");
  EXPECT_EQ(mc::kernel_base_of(name), "Matmul.net_fc1");
  // A dump written before the token existed.
  EXPECT_EQ(mc::kernel_stem("Matmul.net_fc1.3"), "Matmul.net_fc1.3");
  EXPECT_EQ(mc::kernel_base_of("Matmul.net_fc1.3"), "Matmul.net_fc1");
  EXPECT_EQ(mc::op_type_of("Matmul.net_fc1.3"), "Matmul");
  // Only a whole last token is a direction; an OpName that merely ends in "forward" is kept.
  EXPECT_EQ(mc::kernel_stem("Add.Module_forward.0"), "Add.Module_forward.0");
  EXPECT_EQ(mc::kernel_base_of("Add.Module_forward.0.forward"), "Add.Module_forward");
  EXPECT_EQ(mc::kernel_base_of("Add"), "");
}

TEST(Naming, OrdinalsCountPerStepRankAndName) {
  mc::KernelOrdinals o;
  EXPECT_EQ(o.next(0, 0, "Add.Default"), 0u);
  EXPECT_EQ(o.next(0, 0, "Add.Default"), 1u);
  EXPECT_EQ(o.next(0, 0, "Mul.Default"), 0u);
  EXPECT_EQ(o.next(0, 1, "Add.Default"), 0u);             // another rank
  EXPECT_EQ(o.next(0, std::nullopt, "Add.Default"), 0u);  // no rank
  EXPECT_EQ(o.next(1, 0, "Add.Default"), 0u);             // next step starts again
  EXPECT_EQ(o.next(0, 0, "Add.Default"), 2u);
  o.drop_steps_before(1);
  EXPECT_EQ(o.next(1, 0, "Add.Default"), 1u);  // step 1 kept
  EXPECT_EQ(o.next(0, 0, "Add.Default"), 0u);  // step 0 forgotten
}

TEST(Naming, CsvSafeText) {
  // msprobe's Const.STRING_BLACKLIST, applied the way its compare applies it.
  const std::regex blacklist(
      "^([\\+\\-=%@]|\xef\xbc\x8b|\xef\xbc\x8d|\xef\xbc\x9d|\xef\xbc\x85|\xef\xbc\xa0)|"
      ";([\\+\\-=%@]|\xef\xbc\x8b|\xef\xbc\x8d|\xef\xbc\x9d|\xef\xbc\x85|\xef\xbc\xa0)");
  EXPECT_EQ(mc::csv_safe_text("+0x1a libfoo.so"), " +0x1a libfoo.so");
  EXPECT_EQ(mc::csv_safe_text("=SUM(A1)"), " =SUM(A1)");
  EXPECT_EQ(mc::csv_safe_text("a;-b;c;@d"), "a; -b;c; @d");
  EXPECT_EQ(mc::csv_safe_text("\xef\xbc\x8b"
                              "x"),
            " \xef\xbc\x8b"
            "x");  // full-width plus
  EXPECT_EQ(mc::csv_safe_text("File a.py, line 3, in f, \n x = -1"), "File a.py, line 3, in f, \n x = -1");
  EXPECT_EQ(mc::csv_safe_text(""), "");
  EXPECT_EQ(mc::csv_safe_text(";"), ";");
  for (std::string s : {"-", "%%", ";+", "x;=;=", "@;@", "\xef\xbc\xa0;\xef\xbc\x9d"}) {
    EXPECT_FALSE(mc::is_csv_safe(s)) << s;
    EXPECT_TRUE(std::regex_search(s, blacklist)) << s;
    const std::string fixed = mc::csv_safe_text(s);
    EXPECT_TRUE(mc::is_csv_safe(fixed)) << fixed;
    EXPECT_FALSE(std::regex_search(fixed, blacklist)) << fixed;
  }
}

TEST(Naming, LongNameReplacement) {
  std::mt19937_64 rng(1);
  const std::string original = std::string(300, 'A') + ".input.0.npy";
  const std::string r = mc::long_name_replacement(original, rng);
  EXPECT_TRUE(std::regex_match(r, std::regex("[0-9]{32}\\.npy"))) << r;
  EXPECT_NE(mc::long_name_replacement(original, rng), r);
  EXPECT_TRUE(std::regex_match(mc::long_name_replacement(std::string(300, 'A'), rng), std::regex("[0-9]{32}")));
  // A suffix that is not a short word is dropped rather than carried into the name.
  EXPECT_TRUE(std::regex_match(mc::long_name_replacement("x." + std::string(300, 'B'), rng), std::regex("[0-9]{32}")));
}

}  // namespace
