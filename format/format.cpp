#include "format/format.h"

#include <array>

namespace msprobe::format {
namespace {

struct DTypeSpelling {
  std::string_view id, torch, mindspore, descr;
};

// Indexed by DType. torch and MindSpore spellings are str(dtype) in each framework.
constexpr std::array<DTypeSpelling, kDTypeCount> kSpellings = {{
    {"float32", "torch.float32", "Float32", "<f4"},
    {"float16", "torch.float16", "Float16", "<f2"},
    {"bfloat16", "torch.bfloat16", "BFloat16", "<f4"},  // npy holds bf16 widened to float32
    {"float64", "torch.float64", "Float64", "<f8"},
    {"int8", "torch.int8", "Int8", "|i1"},
    {"int16", "torch.int16", "Int16", "<i2"},
    {"int32", "torch.int32", "Int32", "<i4"},
    {"int64", "torch.int64", "Int64", "<i8"},
    {"uint8", "torch.uint8", "UInt8", "|u1"},
    {"uint16", "torch.uint16", "UInt16", "<u2"},
    {"uint32", "torch.uint32", "UInt32", "<u4"},
    {"uint64", "torch.uint64", "UInt64", "<u8"},
    {"bool", "torch.bool", "Bool", "|b1"},
    // The narrow floats, held widened to float32 in npy files. torch has float8_e5m2, float8_e4m3fn,
    // float8_e8m0fnu and float4_e2m1fn_x2; the others are torch_npu's (c10_npu custom dtypes, HiFloat8Tensor for
    // hifloat8 as msprobe writes it). MindSpore names its types Float8E4M3FN, Float8E5M2, HiFloat8; the rest by the
    // same pattern.
    {"hifloat8", "torch_npu.HiFloat8Tensor", "HiFloat8", "<f4"},
    {"float8_e5m2", "torch.float8_e5m2", "Float8E5M2", "<f4"},
    {"float8_e4m3fn", "torch.float8_e4m3fn", "Float8E4M3FN", "<f4"},
    {"float8_e8m0", "torch.float8_e8m0fnu", "Float8E8M0", "<f4"},
    {"float6_e3m2", "torch_npu.float6_e3m2", "Float6E3M2", "<f4"},
    {"float6_e2m3", "torch_npu.float6_e2m3", "Float6E2M3", "<f4"},
    {"float4_e2m1", "torch.float4_e2m1fn_x2", "Float4E2M1", "<f4"},
    {"float4_e1m2", "torch_npu.float4_e1m2fn_x2", "Float4E1M2", "<f4"},
    {"raw", "unknown", "unknown", ""},
}};

const DTypeSpelling &spelling(DType t) { return kSpellings[static_cast<size_t>(t)]; }

}  // namespace

std::string_view dtype_id(DType t) { return spelling(t).id; }

std::optional<DType> parse_dtype_id(std::string_view s) {
  for (int i = 0; i < kDTypeCount; ++i)
    if (kSpellings[i].id == s) return static_cast<DType>(i);
  return std::nullopt;
}

std::string_view framework_name(Framework f) { return f == Framework::PyTorch ? "pytorch" : "mindspore"; }

std::optional<Framework> parse_framework(std::string_view s) {
  if (s == "pytorch") return Framework::PyTorch;
  if (s == "mindspore") return Framework::MindSpore;
  return std::nullopt;
}

std::string_view host_framework_name(HostFramework f) {
  switch (f) {
    case HostFramework::PyTorch: return "pytorch";
    case HostFramework::MindSpore: return "mindspore";
    case HostFramework::Acl: return "acl";
  }
  return "acl";
}

std::string_view tensor_type_name(Framework f) { return f == Framework::PyTorch ? "torch.Tensor" : "mindspore.Tensor"; }

std::string_view dtype_name(DType t, Framework f) {
  return f == Framework::PyTorch ? spelling(t).torch : spelling(t).mindspore;
}

std::optional<DType> parse_dtype_name(std::string_view s, Framework f) {
  for (int i = 0; i < kDTypeCount - 1; ++i) {  // "unknown" does not name Raw back
    const auto &sp = kSpellings[i];
    if ((f == Framework::PyTorch ? sp.torch : sp.mindspore) == s) return static_cast<DType>(i);
  }
  return std::nullopt;
}

std::optional<Task> parse_task(std::string_view s) {
  for (Task t : {Task::Statistics, Task::Tensor, Task::OverflowCheck, Task::Structure, Task::Flight})
    if (task_name(t) == s) return t;
  return std::nullopt;
}

std::string step_dir_name(uint64_t step) { return "step" + std::to_string(step); }

std::string rank_dir_name(std::optional<uint32_t> rank) {
  return rank ? "rank" + std::to_string(*rank) : std::string("rank");
}

namespace {
constexpr std::string_view kRankLockPrefix = ".msprobe_shim.", kRankLockSuffix = ".lock";
}

std::string rank_lock_name(std::string_view rank_dir) {
  return std::string(kRankLockPrefix).append(rank_dir).append(kRankLockSuffix);
}

bool is_rank_lock_name(std::string_view name) {
  return name.size() > kRankLockPrefix.size() + kRankLockSuffix.size() && name.starts_with(kRankLockPrefix) &&
         name.ends_with(kRankLockSuffix);
}

namespace {
constexpr std::string_view kRunMarkerSuffix = ".run.json";
}

std::string run_marker_name(std::string_view rank_dir) {
  return std::string(kRankLockPrefix).append(rank_dir).append(kRunMarkerSuffix);
}

bool is_run_marker_name(std::string_view name) {
  return name.size() > kRankLockPrefix.size() + kRunMarkerSuffix.size() && name.starts_with(kRankLockPrefix) &&
         name.ends_with(kRunMarkerSuffix);
}

std::string rank_dir_of_run_marker(std::string_view name) {
  if (!is_run_marker_name(name)) return {};
  return std::string(
      name.substr(kRankLockPrefix.size(), name.size() - kRankLockPrefix.size() - kRunMarkerSuffix.size()));
}

std::string_view io_name(IoKind io) { return io == IoKind::Input ? "input" : "output"; }

std::string_view npy_descr(DType t) { return spelling(t).descr; }

}  // namespace msprobe::format
