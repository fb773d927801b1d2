// The format facts: spellings msprobe's readers expect, sizes, folder names, npy descrs.
#include <gtest/gtest.h>

#include "format/format.h"

namespace mc = msprobe::format;
using mc::DType;
using mc::Framework;

namespace {

constexpr DType kAll[] = {DType::F32, DType::F16, DType::BF16, DType::F64, DType::I8,  DType::I16,  DType::I32,
                          DType::I64, DType::U8,  DType::U16,  DType::U32, DType::U64, DType::Bool, DType::Raw};

TEST(Format, ElementSizes) {
  const size_t expected[] = {4, 2, 2, 8, 1, 2, 4, 8, 1, 2, 4, 8, 1, 1};
  for (int i = 0; i < mc::kDTypeCount; ++i) EXPECT_EQ(mc::element_size(kAll[i]), expected[i]) << mc::dtype_id(kAll[i]);
  static_assert(mc::element_size(DType::BF16) == 2 && mc::npy_storage_dtype(DType::BF16) == DType::F32);
}

TEST(Format, DtypeSpellingsOfBothFrameworks) {
  EXPECT_EQ(mc::dtype_name(DType::F32, Framework::PyTorch), "torch.float32");
  EXPECT_EQ(mc::dtype_name(DType::BF16, Framework::PyTorch), "torch.bfloat16");
  EXPECT_EQ(mc::dtype_name(DType::Bool, Framework::PyTorch), "torch.bool");
  EXPECT_EQ(mc::dtype_name(DType::U8, Framework::PyTorch), "torch.uint8");
  EXPECT_EQ(mc::dtype_name(DType::F32, Framework::MindSpore), "Float32");
  EXPECT_EQ(mc::dtype_name(DType::BF16, Framework::MindSpore), "BFloat16");
  EXPECT_EQ(mc::dtype_name(DType::I64, Framework::MindSpore), "Int64");
  EXPECT_EQ(mc::dtype_name(DType::U16, Framework::MindSpore), "UInt16");
  EXPECT_EQ(mc::dtype_name(DType::Bool, Framework::MindSpore), "Bool");
  EXPECT_EQ(mc::dtype_name(DType::Raw, Framework::MindSpore), "unknown");
  for (DType t : kAll) {
    EXPECT_EQ(mc::parse_dtype_id(mc::dtype_id(t)), t);
    for (Framework f : {Framework::PyTorch, Framework::MindSpore}) {
      if (t == DType::Raw)
        EXPECT_FALSE(mc::parse_dtype_name(mc::dtype_name(t, f), f));
      else
        EXPECT_EQ(mc::parse_dtype_name(mc::dtype_name(t, f), f), t);
    }
  }
  EXPECT_FALSE(mc::parse_dtype_name("Float32", Framework::PyTorch));
}

TEST(Format, FrameworkAndTaskNames) {
  EXPECT_EQ(mc::framework_name(Framework::PyTorch), "pytorch");
  EXPECT_EQ(mc::framework_name(Framework::MindSpore), "mindspore");
  EXPECT_EQ(mc::parse_framework("mindspore"), Framework::MindSpore);
  EXPECT_FALSE(mc::parse_framework("acl"));
  EXPECT_EQ(mc::host_framework_name(mc::HostFramework::Acl), "acl");
  EXPECT_EQ(mc::tensor_type_name(Framework::PyTorch), "torch.Tensor");
  EXPECT_EQ(mc::tensor_type_name(Framework::MindSpore), "mindspore.Tensor");
  EXPECT_EQ(mc::task_name(mc::Task::OverflowCheck), "overflow_check");
  EXPECT_EQ(mc::parse_task("tensor"), mc::Task::Tensor);
  EXPECT_FALSE(mc::parse_task("Tensor"));
}

TEST(Format, Layout) {
  EXPECT_EQ(mc::step_dir_name(0), "step0");
  EXPECT_EQ(mc::step_dir_name(12345), "step12345");
  EXPECT_EQ(mc::rank_dir_name(3), "rank3");
  EXPECT_EQ(mc::rank_dir_name(std::nullopt), "rank");
  EXPECT_EQ(mc::kTensorDir, "dump_tensor_data");
  EXPECT_EQ(mc::io_name(mc::IoKind::Input), "input");
  EXPECT_EQ(mc::file_suffix(mc::FileFormat::Bin), "bin");
  EXPECT_EQ(mc::kMaxBasename, 255u);
}

TEST(Format, NpyDescrs) {
  EXPECT_EQ(mc::npy_descr(DType::F32), "<f4");
  EXPECT_EQ(mc::npy_descr(DType::BF16), "<f4");
  EXPECT_EQ(mc::npy_descr(DType::F16), "<f2");
  EXPECT_EQ(mc::npy_descr(DType::Bool), "|b1");
  EXPECT_EQ(mc::npy_descr(DType::I8), "|i1");
  EXPECT_EQ(mc::npy_descr(DType::I64), "<i8");
  EXPECT_EQ(mc::npy_descr(DType::U64), "<u8");
  EXPECT_EQ(mc::npy_descr(DType::Raw), "");
  EXPECT_FALSE(mc::npy_can_store(DType::Raw));
}

}  // namespace
