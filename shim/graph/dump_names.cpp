// Tables and name parsing of CANN's dump files (dump_names.h; cann_dump.md §3.3-3.5).
#include "shim/graph/dump_names.h"

#include <array>
#include <charconv>

namespace msprobe::shim::graph {
namespace {

// OutputDataType 0..42 (dump_data.proto, adump's dump_task.proto adds 41, 42).
constexpr std::array<std::string_view, 43> kDTypeNames = {
    "DT_UNDEFINED",     "DT_FLOAT",       "DT_FLOAT16",       "DT_INT8",           "DT_UINT8",       "DT_INT16",
    "DT_UINT16",        "DT_INT32",       "DT_INT64",         "DT_UINT32",         "DT_UINT64",      "DT_BOOL",
    "DT_DOUBLE",        "DT_STRING",      "DT_DUAL_SUB_INT8", "DT_DUAL_SUB_UINT8", "DT_COMPLEX64",   "DT_COMPLEX128",
    "DT_QINT8",         "DT_QINT16",      "DT_QINT32",        "DT_QUINT8",         "DT_QUINT16",     "DT_RESOURCE",
    "DT_STRING_REF",    "DT_DUAL",        "DT_VARIANT",       "DT_BF16",           "DT_INT4",        "DT_UINT1",
    "DT_INT2",          "DT_UINT2",       "DT_COMPLEX32",     "DT_HIFLOAT8",       "DT_FLOAT8_E5M2", "DT_FLOAT8_E4M3FN",
    "DT_FLOAT8_E8M0",   "DT_FLOAT6_E3M2", "DT_FLOAT6_E2M3",   "DT_FLOAT4_E2M1",    "DT_FLOAT4_E1M2", "DT_HIFLOAT4",
    "DT_HIFLOAT4_SCALE"};

// OutputFormat 0..49 without the "FORMAT_" prefix (dump_data.proto's spellings); 255 is FORMAT_MAX.
constexpr std::array<std::string_view, 50> kFormatNames = {"NCHW",
                                                           "NHWC",
                                                           "ND",
                                                           "NC1HWC0",
                                                           "FRACTAL_Z",
                                                           "NC1C0HWPAD",
                                                           "NHWC1C0",
                                                           "FSR_NCHW",
                                                           "FRACTAL_DECONV",
                                                           "C1HWNC0",
                                                           "FRACTAL_DECONV_TRANSPOSE",
                                                           "FRACTAL_DECONV_SP_STRIDE_TRANS",
                                                           "NC1HWC0_C04",
                                                           "FRACTAL_Z_C04",
                                                           "CHWN",
                                                           "FRACTAL_DECONV_SP_STRIDE8_TRANS",
                                                           "HWCN",
                                                           "NC1KHKWHWC0",
                                                           "BN_WEIGHT",
                                                           "FILTER_HWCK",
                                                           "HASHTABLE_LOOKUP_LOOKUPS",
                                                           "HASHTABLE_LOOKUP_KEYS",
                                                           "HASHTABLE_LOOKUP_VALUE",
                                                           "HASHTABLE_LOOKUP_OUTPUT",
                                                           "HASHTABLE_LOOKUP_HITS",
                                                           "C1HWNCoC0",
                                                           "MD",
                                                           "NDHWC",
                                                           "FRACTAL_ZZ",
                                                           "FRACTAL_NZ",
                                                           "NCDHW",
                                                           "DHWCN",
                                                           "NDC1HWC0",
                                                           "FRACTAL_Z_3D",
                                                           "CN",
                                                           "NC",
                                                           "DHWNC",
                                                           "FRACTAL_Z_3D_TRANSPOSE",
                                                           "FRACTAL_ZN_LSTM",
                                                           "FRACTAL_Z_G",
                                                           "RESERVED",
                                                           "ALL",
                                                           "NULL",
                                                           "ND_RNN_BIAS",
                                                           "FRACTAL_ZN_RNN",
                                                           "YUV",
                                                           "YUV_A",
                                                           "NCL",
                                                           "FRACTAL_Z_WINO",
                                                           "C1HWC0"};

template <typename T>
std::optional<T> digits(std::string_view s) {
  T v{};
  if (s.empty() || s.size() > 20) return std::nullopt;
  for (char c : s)
    if (c < '0' || c > '9') return std::nullopt;
  auto [end, ec] = std::from_chars(s.data(), s.data() + s.size(), v);
  if (ec != std::errc() || end != s.data() + s.size()) return std::nullopt;
  return v;
}

bool parse_ffts(const std::vector<std::string_view> &f, size_t at, FftsSuffix *out) {
  auto context = digits<uint32_t>(f[at + 1]), thread = digits<uint32_t>(f[at + 2]),
       device = digits<uint32_t>(f[at + 3]);
  if (f[at].empty() || !context || !thread || !device) return false;
  *out = FftsSuffix{std::string(f[at]), *context, *thread, *device};
  return true;
}

bool set_error(std::string *error, std::string text) {
  if (error) *error = std::move(text);
  return false;
}

}  // namespace

format::DType proto_dtype(int32_t value) {
  using format::DType;
  switch (value) {
    case 1: return DType::F32;
    case 2: return DType::F16;
    case 3: return DType::I8;
    case 4: return DType::U8;
    case 5: return DType::I16;
    case 6: return DType::U16;
    case 7: return DType::I32;
    case 8: return DType::I64;
    case 9: return DType::U32;
    case 10: return DType::U64;
    case 11: return DType::Bool;
    case 12: return DType::F64;
    case 27: return DType::BF16;
    default: return DType::Raw;
  }
}

std::string proto_dtype_name(int32_t value) {
  if (value >= 0 && static_cast<size_t>(value) < kDTypeNames.size()) return std::string(kDTypeNames[value]);
  return "DT_" + std::to_string(value);
}

std::optional<int32_t> proto_dtype_value(std::string_view name) {
  for (size_t i = 0; i < kDTypeNames.size(); ++i)
    if (kDTypeNames[i] == name) return static_cast<int32_t>(i);
  return std::nullopt;
}

std::string proto_format_name(int32_t value) {
  if (value >= 0 && static_cast<size_t>(value) < kFormatNames.size()) return std::string(kFormatNames[value]);
  if (value == 255) return "MAX";
  return "FORMAT_" + std::to_string(value);
}

bool proto_format_is_plain(int32_t value) {
  switch (value) {
    case 0:   // NCHW
    case 1:   // NHWC
    case 2:   // ND
    case 14:  // CHWN
    case 16:  // HWCN
    case 27:  // NDHWC
    case 30:  // NCDHW
    case 31:  // DHWCN
    case 34:  // CN
    case 35:  // NC
    case 36:  // DHWNC
    case 47:  // NCL
      return true;
    default: return false;
  }
}

std::vector<std::string_view> split_fields(std::string_view s, char sep) {
  std::vector<std::string_view> out;
  for (size_t start = 0;;) {
    const size_t end = s.find(sep, start);
    out.push_back(s.substr(start, end == std::string_view::npos ? std::string_view::npos : end - start));
    if (end == std::string_view::npos) return out;
    start = end + 1;
  }
}

std::string one_line(std::string text) {
  for (char &c : text)
    if (static_cast<unsigned char>(c) < 0x20 || c == 0x7f) c = '?';
  return text;
}

std::string_view base_name(std::string_view path) {
  const size_t slash = path.rfind('/');
  return slash == std::string_view::npos ? path : path.substr(slash + 1);
}

std::optional<DumpName> parse_dump_name(std::string_view base, std::string *error) {
  const std::vector<std::string_view> f = split_fields(base, '.');
  const size_t n = f.size();
  if (n != 5 && n != 6 && n != 9 && n != 10) {
    set_error(error, "dump file name '" + std::string(base) + "' has " + std::to_string(n) +
                         " dot-separated fields (5, 6, 9 or 10 expected)");
    return std::nullopt;
  }
  const size_t core = n == 5 || n == 9 ? 5 : 6;
  DumpName d;
  d.op_type = f[0], d.op_name = f[1];
  auto task = digits<uint32_t>(f[core - 3]), stream = digits<uint32_t>(f[core - 2]);
  auto time = digits<uint64_t>(f[core - 1]);
  if (core == 6) d.name_dump_number = digits<uint64_t>(f[2]);
  bool ok = !d.op_type.empty() && !d.op_name.empty() && task && stream && time && (core == 5 || d.name_dump_number);
  if (ok && n > core) ok = parse_ffts(f, core, &d.ffts.emplace());
  if (!ok) {
    set_error(error, "dump file name '" + std::string(base) + "' is not {op_type}.{op_name}.{task_id}.{stream_id}." +
                         "{timestamp} (empty name or non-numeric field)");
    return std::nullopt;
  }
  d.task_id = *task, d.stream_id = *stream, d.timestamp = *time;
  return d;
}

DumpPlace parse_dump_place(std::string_view path) {
  std::vector<std::string_view> p = split_fields(path, '/');
  p.pop_back();  // the file
  auto is_time = [](std::string_view s) { return s.size() == 14 && digits<uint64_t>(s).has_value(); };
  const size_t n = p.size();
  DumpPlace place;
  auto fill = [&](size_t time_at, bool model, bool step) {
    place.time = p[time_at];
    place.device_id = digits<uint32_t>(p[time_at + 1]);
    if (model) place.model_name = p[time_at + 2], place.model_id = digits<uint32_t>(p[time_at + 3]);
    if (step) place.dump_number = digits<uint64_t>(p[time_at + 4]);
  };
  auto numeric = [&](size_t i) { return digits<uint64_t>(p[i]).has_value(); };
  if (n >= 5 && is_time(p[n - 5]) && numeric(n - 4) && !p[n - 3].empty() && numeric(n - 2) && numeric(n - 1)) {
    fill(n - 5, true, true);
  } else if (n >= 4 && is_time(p[n - 4]) && numeric(n - 3) && !p[n - 2].empty() && numeric(n - 1)) {
    fill(n - 4, true, false);
  } else if (n >= 2 && is_time(p[n - 2]) && numeric(n - 1)) {
    fill(n - 2, false, false);
  }
  return place;
}

}  // namespace msprobe::shim::graph
