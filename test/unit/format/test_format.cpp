// The format facts: spellings msprobe's readers expect, sizes, folder names, npy descrs.
#include <gtest/gtest.h>

#include <iterator>

#include "format/format.h"

namespace mc = msprobe::format;
using mc::DType;
using mc::Framework;

namespace {

constexpr DType kAll[] = {DType::F32,    DType::F16,    DType::BF16,   DType::F64,      DType::I8,     DType::I16,
                          DType::I32,    DType::I64,    DType::U8,     DType::U16,      DType::U32,    DType::U64,
                          DType::Bool,   DType::HiF8,   DType::F8E5M2, DType::F8E4M3FN, DType::F8E8M0, DType::F6E3M2,
                          DType::F6E2M3, DType::F4E2M1, DType::F4E1M2, DType::Raw};
static_assert(std::size(kAll) == mc::kDTypeCount);

TEST(Format, ElementSizes) {
  const unsigned bits[] = {32, 16, 16, 64, 8, 16, 32, 64, 8, 16, 32, 64, 8, 8, 8, 8, 8, 6, 6, 4, 4, 8};
  for (int i = 0; i < mc::kDTypeCount; ++i) {
    EXPECT_EQ(mc::element_bits(kAll[i]), bits[i]) << mc::dtype_id(kAll[i]);
    EXPECT_EQ(mc::element_size(kAll[i]), (bits[i] + 7) / 8) << mc::dtype_id(kAll[i]);
  }
  static_assert(mc::element_size(DType::BF16) == 2 && mc::npy_storage_dtype(DType::BF16) == DType::F32);
  // Sub-byte elements are packed: sized by bit width.
  EXPECT_EQ(mc::storage_bytes(DType::F4E2M1, 5), 3u);
  EXPECT_EQ(mc::storage_bytes(DType::F6E3M2, 4), 3u);
  EXPECT_EQ(mc::storage_bytes(DType::F6E2M3, 5), 4u);
  EXPECT_EQ(mc::storage_bytes(DType::HiF8, 5), 5u);
  EXPECT_EQ(mc::whole_byte_elements(DType::F4E1M2), 2u);
  EXPECT_EQ(mc::whole_byte_elements(DType::F6E3M2), 4u);
  EXPECT_EQ(mc::whole_byte_elements(DType::F8E4M3FN), 1u);
}

TEST(Format, NarrowFloatsAreFloatsHeldAsFloat32) {
  for (DType t : kAll) {
    const bool narrow = t >= DType::HiF8 && t <= DType::F4E1M2;
    EXPECT_EQ(mc::is_narrow_float(t), narrow) << mc::dtype_id(t);
    if (!narrow) continue;
    EXPECT_TRUE(mc::is_floating(t));
    EXPECT_TRUE(mc::npy_can_store(t));
    EXPECT_EQ(mc::npy_storage_dtype(t), DType::F32);
    EXPECT_EQ(mc::npy_descr(t), "<f4");
  }
}

// As msprobe writes them (reference/cann_source.md §4): torch's own dtype where torch has one, torch_npu's otherwise;
// MindSpore's type names.
TEST(Format, NarrowFloatSpellings) {
  EXPECT_EQ(mc::dtype_name(DType::F8E4M3FN, Framework::PyTorch), "torch.float8_e4m3fn");
  EXPECT_EQ(mc::dtype_name(DType::F8E5M2, Framework::PyTorch), "torch.float8_e5m2");
  EXPECT_EQ(mc::dtype_name(DType::F8E8M0, Framework::PyTorch), "torch.float8_e8m0fnu");
  EXPECT_EQ(mc::dtype_name(DType::HiF8, Framework::PyTorch), "torch_npu.HiFloat8Tensor");
  EXPECT_EQ(mc::dtype_name(DType::F4E2M1, Framework::PyTorch), "torch.float4_e2m1fn_x2");
  EXPECT_EQ(mc::dtype_name(DType::F4E1M2, Framework::PyTorch), "torch_npu.float4_e1m2fn_x2");
  EXPECT_EQ(mc::dtype_name(DType::F6E3M2, Framework::PyTorch), "torch_npu.float6_e3m2");
  EXPECT_EQ(mc::dtype_name(DType::F8E4M3FN, Framework::MindSpore), "Float8E4M3FN");
  EXPECT_EQ(mc::dtype_name(DType::F8E5M2, Framework::MindSpore), "Float8E5M2");
  EXPECT_EQ(mc::dtype_name(DType::HiF8, Framework::MindSpore), "HiFloat8");
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
