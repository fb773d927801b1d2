#include "tools/reader/dump_reader.h"

#include <algorithm>
#include <charconv>
#include <cstdio>
#include <fstream>
#include <sstream>
#include <system_error>
#include <utility>

#include "format/dump_json.h"
#include "format/naming.h"
#include "tools/reader/csv.h"

namespace msprobe::tools {
namespace ck = format::json_key;
using format::DType;
using format::IoKind;
using format::StatValue;

namespace {

// "step" and "rank": the folder names of step 0 / rank 0 without their number, so the spelling stays in format.h.
std::string without_zero(std::string s) {
  if (!s.empty() && s.back() == '0') s.pop_back();
  return s;
}
const std::string &step_prefix() {
  static const std::string p = without_zero(format::step_dir_name(0));
  return p;
}
const std::string &rank_prefix() {
  static const std::string p = without_zero(format::rank_dir_name(0));
  return p;
}

template <typename T>
std::optional<T> parse_number_suffix(std::string_view name, std::string_view prefix) {
  if (name.size() <= prefix.size() || name.substr(0, prefix.size()) != prefix) return std::nullopt;
  std::string_view digits = name.substr(prefix.size());
  if (digits.size() > 1 && digits[0] == '0') return std::nullopt;
  T v{};
  auto r = std::from_chars(digits.data(), digits.data() + digits.size(), v);
  if (r.ec != std::errc() || r.ptr != digits.data() + digits.size()) return std::nullopt;
  return v;
}

bool has_dump_json(const fs::path &dir) {
  std::error_code ec;
  return fs::is_regular_file(dir / format::kDumpJson, ec);
}

std::vector<fs::path> sorted_children(const fs::path &dir) {
  std::vector<fs::path> out;
  std::error_code ec;
  for (fs::directory_iterator it(dir, ec), end; !ec && it != end; it.increment(ec)) {
    std::error_code e2;
    if (it->is_directory(e2)) out.push_back(it->path());
  }
  std::sort(out.begin(), out.end());
  return out;
}

void add_rank_dirs(const fs::path &step_dir, std::optional<uint64_t> step, std::vector<RankDir> &out) {
  for (const fs::path &child : sorted_children(step_dir)) {
    std::optional<uint32_t> rank;
    if (!parse_rank_dir(child.filename().string(), &rank) || !has_dump_json(child)) continue;
    out.push_back(RankDir{child, step, rank, true});
  }
}

struct StopStreaming {};

std::optional<uint64_t> as_u64(const Json *j) {
  if (j == nullptr) return std::nullopt;
  if (j->is_number_unsigned()) return j->get<uint64_t>();
  if (j->is_number_integer() && j->get<int64_t>() >= 0) return static_cast<uint64_t>(j->get<int64_t>());
  return std::nullopt;
}

const Json *member(const Json &obj, std::string_view key) {
  if (!obj.is_object()) return nullptr;
  auto it = obj.find(std::string(key));
  return it == obj.end() ? nullptr : &*it;
}

// The entry's launch order: "launch": {"index": ..} since dumps carry a direction token, "launch_index" at the top
// level before.
std::optional<uint64_t> entry_launch_index(const Json &entry) {
  if (const Json *launch = member(entry, ck::kLaunch)) return as_u64(member(*launch, ck::kIndex));
  return as_u64(member(entry, ck::kLegacyLaunchIndex));
}

std::optional<std::string> string_member(const Json &obj, std::string_view key) {
  const Json *j = member(obj, key);
  if (j == nullptr || !j->is_string()) return std::nullopt;
  return j->get<std::string>();
}

// One tensor dict read member by member: msprobe's leaf rule (a dict with "dtype" and "shape" is a tensor), shared
// by the tree reader (a Json object's members) and the streaming one (the members as the text holds them). Of
// duplicate keys the first counts, as a Json lookup finds it.
class TensorObjectReader {
 public:
  enum class Field { Type, Dtype, Shape, Max, Min, Mean, Norm, Md5, DataName };

  TensorObjectReader(IoKind io, const std::string &slot) {
    t_.io = io;
    t_.slot = slot;
  }

  // The field `key` names when a tensor uses it and it was not read yet; nullopt: skip the member.
  std::optional<Field> wanted(std::string_view key) const {
    const std::optional<Field> f = field_of(key);
    if (!f || (seen_ & bit(*f))) return std::nullopt;
    return f;
  }

  void read(Field f, const Json &v) {
    seen_ |= bit(f);
    switch (f) {
      case Field::Type:
        if (v.is_string()) t_.type = v.get<std::string>();
        break;
      case Field::Dtype: t_.dtype_text = v.is_string() ? v.get<std::string>() : to_json_text(v); break;
      case Field::Shape: read_shape(v); break;
      case Field::Max:
      case Field::Min:
      case Field::Mean:
      case Field::Norm: t_.stats[static_cast<size_t>(f) - static_cast<size_t>(Field::Max)] = stat_from_json(&v); break;
      case Field::Md5:
      case Field::DataName:
        if (v.is_string()) (f == Field::Md5 ? t_.md5 : t_.data_name) = v.get<std::string>();
        break;
    }
  }

  // Adds the tensor to `out` when the dict was one.
  void finish(const DumpHeaderRead &header, std::vector<TensorInfo> &out) {
    if (!(seen_ & bit(Field::Dtype)) || !(seen_ & bit(Field::Shape))) return;
    t_.dtype = parse_any_dtype(t_.dtype_text, header.framework_kind);
    out.push_back(std::move(t_));
  }

 private:
  static std::optional<Field> field_of(std::string_view key) {
    static constexpr std::pair<std::string_view, Field> kFields[] = {
        {ck::kType, Field::Type}, {ck::kDtype, Field::Dtype}, {ck::kShape, Field::Shape},
        {ck::kMax, Field::Max},   {ck::kMin, Field::Min},     {ck::kMean, Field::Mean},
        {ck::kNorm, Field::Norm}, {ck::kMd5, Field::Md5},     {ck::kDataName, Field::DataName}};
    for (const auto &[name, f] : kFields)
      if (key == name) return f;
    return std::nullopt;
  }
  static unsigned bit(Field f) { return 1u << static_cast<unsigned>(f); }

  void read_shape(const Json &v) {
    if (!v.is_array()) {
      t_.shape_ok = false;
      return;
    }
    for (const Json &d : v) {
      if (!d.is_number_integer()) {
        t_.shape_ok = false;
        return;
      }
      t_.shape.push_back(d.get<int64_t>());
    }
  }

  TensorInfo t_;
  unsigned seen_ = 0;
};

void walk_arg(const Json &v, IoKind io, const std::string &slot, const DumpHeaderRead &header,
              std::vector<TensorInfo> &out) {
  if (v.is_array()) {
    for (size_t i = 0; i < v.size(); ++i) walk_arg(v[i], io, slot + "." + std::to_string(i), header, out);
    return;
  }
  if (!v.is_object()) return;
  TensorObjectReader tensor(io, slot);
  for (const auto &[key, value] : v.items())
    if (const auto f = tensor.wanted(key)) tensor.read(*f, value);
  tensor.finish(header, out);
}

void walk_args(const Json *args, IoKind io, const DumpHeaderRead &header, std::vector<TensorInfo> &out) {
  if (args == nullptr) return;
  if (args->is_array()) {
    for (size_t i = 0; i < args->size(); ++i) walk_arg((*args)[i], io, std::to_string(i), header, out);
  } else if (args->is_object() && member(*args, ck::kDtype) == nullptr) {
    for (const auto &[k, v] : args->items()) walk_arg(v, io, k, header, out);  // msprobe's input_kwargs
  } else if (args->is_object()) {
    walk_arg(*args, io, "0", header, out);
  }
}

// ---- The DOM-free reading of an entry (KernelRecord): the same leaf rule as walk_arg, on the cursor. ----
void stream_tensor_object(JsonStream &s, IoKind io, const std::string &slot, const DumpHeaderRead &header,
                          std::vector<TensorInfo> &out) {
  TensorObjectReader tensor(io, slot);
  s.members([&](std::string &&key) {
    if (const auto f = tensor.wanted(key))
      tensor.read(*f, s.value());
    else
      s.skip();
  });
  tensor.finish(header, out);
}

void stream_arg(JsonStream &s, IoKind io, const std::string &slot, const DumpHeaderRead &header,
                std::vector<TensorInfo> &out, int depth = 0) {
  const char c = s.peek();
  if (c == '{') return stream_tensor_object(s, io, slot, header, out);
  if (c != '[') return s.skip();
  if (depth > 64) return s.skip();  // no real argument nests this deep; skip() bounds its own depth
  s.elements([&](size_t i) { stream_arg(s, io, slot + "." + std::to_string(i), header, out, depth + 1); });
}

void stream_args(JsonStream &s, IoKind io, const DumpHeaderRead &header, std::vector<TensorInfo> &out) {
  const char c = s.peek();
  if (c == '[') {
    s.elements([&](size_t i) { stream_arg(s, io, std::to_string(i), header, out); });
  } else if (c == '{') {
    // A dict here is rare (msprobe's input_kwargs, or one bare tensor): the DOM rule decides.
    const Json v = s.value();
    walk_args(&v, io, header, out);
  } else {
    s.skip();
  }
}

// The member of FlightFields that `key` fills, null for another key.
std::string *flight_field(FlightFields &f, std::string_view key) {
  if (key == ck::kFlightTrigger) return &f.trigger;
  if (key == ck::kFlightTriggerKernel) return &f.trigger_kernel;
  if (key == ck::kFlightNote) return &f.note;
  if (key == ck::kOverflow) return &f.overflow;
  return nullptr;
}

KernelRecord stream_record(JsonStream &s, std::string &&name, const DumpHeaderRead &header) {
  KernelRecord k;
  k.name = std::move(name);
  k.offset = s.offset();
  std::vector<TensorInfo> inputs, kwargs, outputs;
  bool have_input_args = false;
  s.members([&](std::string &&key) {
    if (key == ck::kInputArgs) {
      have_input_args = true;
      inputs.clear();
      stream_args(s, IoKind::Input, header, inputs);
    } else if (key == "input" && !have_input_args) {
      stream_args(s, IoKind::Input, header, inputs);
    } else if (key == "input_kwargs") {
      stream_args(s, IoKind::Input, header, kwargs);
    } else if (key == ck::kOutput) {
      stream_args(s, IoKind::Output, header, outputs);
    } else if (key == ck::kLaunch) {
      const Json v = s.value();
      k.launch_index = as_u64(member(v, ck::kIndex));
      k.timestamp = as_u64(member(v, ck::kTimestamp));
    } else if (key == ck::kLegacyLaunchIndex) {
      const Json v = s.value();
      if (!k.launch_index) k.launch_index = as_u64(&v);
    } else if (key == ck::kTimestamp) {
      const Json v = s.value();
      if (!k.timestamp) k.timestamp = as_u64(&v);
    } else if (key == format::comm_key::kComm) {
      k.comm = comm_from_json(s.value());
    } else if (std::string *field = flight_field(k.flight, key)) {
      const Json v = s.value();
      if (v.is_string()) *field = v.get<std::string>();
    } else {
      s.skip();
    }
  });
  k.tensors = std::move(inputs);
  for (auto *v : {&kwargs, &outputs})
    for (TensorInfo &t : *v) k.tensors.push_back(std::move(t));
  return k;
}

}  // namespace

std::optional<format::CommInfo> comm_from_json(const Json &v) {
  namespace k = format::comm_key;
  const Json *name = member(v, k::kName);
  const std::optional<uint64_t> rank = as_u64(member(v, k::kRank)), size = as_u64(member(v, k::kSize));
  if (name == nullptr || !name->is_string() || !rank || !size || *rank > UINT32_MAX || *size > UINT32_MAX)
    return std::nullopt;
  format::CommInfo c;
  c.name = name->get<std::string>();
  c.rank = static_cast<uint32_t>(*rank);
  c.size = static_cast<uint32_t>(*size);
  if (const Json *ranks = member(v, k::kRanks); ranks && ranks->is_array()) {
    c.ranks.emplace();
    for (const Json &r : *ranks) {
      const std::optional<uint64_t> g = as_u64(&r);
      if (!g || *g > UINT32_MAX) {
        c.ranks.reset();
        break;
      }
      c.ranks->push_back(static_cast<uint32_t>(*g));
    }
  }
  auto u32 = [](std::optional<uint64_t> x) -> std::optional<uint32_t> {
    if (!x || *x > UINT32_MAX) return std::nullopt;
    return static_cast<uint32_t>(*x);
  };
  c.seq = as_u64(member(v, k::kSeq));
  c.peer = u32(as_u64(member(v, k::kPeer)));
  c.pair_seq = as_u64(member(v, k::kPairSeq));
  c.root = u32(as_u64(member(v, k::kRoot)));
  return c;
}

// ---- Layout ---------------------------------------------------------------------------------------------------------
std::string RankDir::label() const {
  if (!rank_named) return path.filename().string();
  std::string r = rank_label();
  return step ? format::step_dir_name(*step) + "/" + r : r;
}

std::string RankDir::rank_label() const {
  if (!rank_named) return path.filename().string();
  return format::rank_dir_name(rank);
}

std::optional<uint64_t> parse_step_dir(std::string_view name) {
  return parse_number_suffix<uint64_t>(name, step_prefix());
}

bool parse_rank_dir(std::string_view name, std::optional<uint32_t> *rank) {
  if (name == format::rank_dir_name(std::nullopt)) {
    rank->reset();
    return true;
  }
  auto r = parse_number_suffix<uint32_t>(name, rank_prefix());
  if (!r) return false;
  *rank = *r;
  return true;
}

std::optional<uint64_t> parse_step_text(std::string_view text) {
  if (auto s = parse_step_dir(text)) return s;
  return parse_number_suffix<uint64_t>(text, "");
}

std::optional<std::optional<uint32_t>> parse_rank_text(std::string_view text) {
  std::optional<uint32_t> rank;
  if (parse_rank_dir(text, &rank)) return rank;
  if (auto r = parse_number_suffix<uint32_t>(text, "")) return std::optional<uint32_t>(*r);
  return std::nullopt;
}

std::vector<RankDir> find_rank_dirs(const fs::path &dir) {
  std::error_code ec;
  if (!fs::exists(dir, ec)) throw InputError(dir.string() + ": no such file or directory");
  if (!fs::is_directory(dir, ec)) {
    // A file of a rank folder (its dump.json, stack.json...) stands for the folder.
    const fs::path folder = dir.has_parent_path() ? dir.parent_path() : fs::path(".");
    if (fs::is_regular_file(dir, ec) && has_dump_json(folder)) return find_rank_dirs(folder);
    throw InputError(dir.string() + ": not a directory (nor a file of a folder holding " +
                     std::string(format::kDumpJson) + ")");
  }
  std::vector<RankDir> out;
  if (has_dump_json(dir)) {
    RankDir r{dir, std::nullopt, std::nullopt, false};
    const fs::path abs = fs::absolute(dir, ec).lexically_normal();
    fs::path name = abs.filename().empty() ? abs.parent_path().filename() : abs.filename();
    fs::path parent = abs.filename().empty() ? abs.parent_path().parent_path() : abs.parent_path();
    if (parse_rank_dir(name.string(), &r.rank)) {
      r.rank_named = true;
      r.step = parse_step_dir(parent.filename().string());
    }
    out.push_back(std::move(r));
    return out;
  }
  {
    const fs::path abs = fs::absolute(dir, ec).lexically_normal();
    const fs::path name = abs.filename().empty() ? abs.parent_path().filename() : abs.filename();
    add_rank_dirs(dir, parse_step_dir(name.string()), out);
  }
  if (out.empty()) {
    for (const fs::path &child : sorted_children(dir)) {
      auto step = parse_step_dir(child.filename().string());
      if (step) add_rank_dirs(child, step, out);
    }
  }
  if (out.empty())
    throw InputError(dir.string() + ": no dump found (expected " + std::string(format::kDumpJson) + ", rank*/" +
                     std::string(format::kDumpJson) + " or step*/rank*/" + std::string(format::kDumpJson) + ")");
  std::stable_sort(out.begin(), out.end(), [](const RankDir &a, const RankDir &b) {
    const uint64_t sa = a.step.value_or(0), sb = b.step.value_or(0);
    if (sa != sb) return sa < sb;
    // "rank" (no number) sorts first.
    const int64_t ra = a.rank ? static_cast<int64_t>(*a.rank) : -1, rb = b.rank ? static_cast<int64_t>(*b.rank) : -1;
    return ra < rb;
  });
  return out;
}

// ---- dump.json ------------------------------------------------------------------------------------------------------
StatValue stat_from_json(const Json *j) {
  if (j == nullptr) return StatValue::null();
  switch (j->type()) {
    case Json::value_t::boolean: return StatValue::of_bool(j->get<bool>());
    case Json::value_t::number_integer: return StatValue::of_integer(j->get<int64_t>());
    case Json::value_t::number_unsigned: return StatValue::of_unsigned(j->get<uint64_t>());
    case Json::value_t::number_float: return StatValue::of_real(j->get<double>());
    default: return StatValue::null();
  }
}

uint64_t TensorInfo::element_count() const {
  uint64_t n = 1;
  for (int64_t d : shape) n *= d < 0 ? 0 : static_cast<uint64_t>(d);
  return n;
}

std::string TensorInfo::row_suffix() const { return std::string(format::io_name(io)) + "." + slot; }

std::optional<DType> parse_any_dtype(std::string_view text, format::Framework preferred) {
  using format::Framework;
  if (auto d = format::parse_dtype_name(text, preferred)) return d;
  const Framework other = preferred == Framework::MindSpore ? Framework::PyTorch : Framework::MindSpore;
  if (auto d = format::parse_dtype_name(text, other)) return d;
  return format::parse_dtype_id(text);
}

namespace {
bool is_scalar_json(const Json &j) { return j.is_null() || j.is_boolean() || j.is_number() || j.is_string(); }

// {"type": .., "value": scalar} and not a tensor (msprobe's leaf rule reads it as its value).
const Json *scalar_leaf_value(const Json &v) {
  if (!v.is_object() || member(v, ck::kDtype) != nullptr || member(v, ck::kShape) != nullptr) return nullptr;
  const Json *value = member(v, ck::kValue);
  return value != nullptr && is_scalar_json(*value) ? value : nullptr;
}
}  // namespace

std::optional<ValueArgRead> read_value_arg(const Json &v) {
  ValueArgRead r;
  if (v.is_array()) {
    r.is_list = true;
    for (const Json &e : v) {
      const Json *value = scalar_leaf_value(e);
      if (value == nullptr) return std::nullopt;
      r.types.push_back(string_member(e, ck::kType).value_or(""));
      if (r.values.empty()) r.type = r.types.back();
      r.values.push_back(*value);
    }
    return r;
  }
  if (!v.is_object() || member(v, ck::kDtype) != nullptr || member(v, ck::kShape) != nullptr) return std::nullopt;
  const Json *value = member(v, ck::kValue);
  if (value == nullptr) return std::nullopt;
  r.type = string_member(v, ck::kType).value_or("");
  if (value->is_array()) {  // the old form
    r.is_list = true;
    for (const Json &e : *value) {
      if (!is_scalar_json(e)) return std::nullopt;
      r.values.push_back(e);
    }
  } else if (is_scalar_json(*value)) {
    r.values.push_back(*value);
  } else {
    return std::nullopt;
  }
  r.types.assign(r.values.size(), r.type);
  return r;
}

std::vector<TensorInfo> entry_tensors(const Json &entry, const DumpHeaderRead &header) {
  std::vector<TensorInfo> out;
  const Json *inputs = member(entry, ck::kInputArgs);
  if (inputs == nullptr) inputs = member(entry, "input");  // msprobe accepts both spellings
  walk_args(inputs, IoKind::Input, header, out);
  walk_args(member(entry, "input_kwargs"), IoKind::Input, header, out);
  walk_args(member(entry, ck::kOutput), IoKind::Output, header, out);
  return out;
}

FlightFields flight_fields(const Json &entry) {
  FlightFields f;
  if (!entry.is_object()) return f;
  for (const auto &[key, v] : entry.items())
    if (std::string *field = flight_field(f, key); field && v.is_string()) *field = v.get<std::string>();
  return f;
}

DumpHeaderRead stream_dump_json(std::string_view text, const DumpCallbacks &cb) {
  JsonStream s(text);
  DumpHeaderRead h;
  bool header_sent = false;
  auto send_header = [&] {
    if (auto f = format::parse_framework(h.framework)) h.framework_kind = *f;
    if (cb.on_header) cb.on_header(h);
    header_sent = true;
  };
  size_t count = 0;
  try {
    s.members([&](std::string &&key) {
      if (key == ck::kData) {
        if (!header_sent) send_header();
        if (s.peek() != '{')
          throw JsonError("\"data\" is not an object at " + JsonStream::where(text, s.offset()), s.offset());
        s.members([&](std::string &&name) {
          if (cb.on_record) {
            if (s.peek() != '{')
              throw JsonError("kernel " + name + " is not an object at " + JsonStream::where(text, s.offset()),
                              s.offset());
            if (!cb.on_record(stream_record(s, std::move(name), h))) throw StopStreaming{};
          } else {
            EntryRead k;
            k.offset = s.offset();
            k.entry = s.value();
            k.name = std::move(name);
            k.launch_index = entry_launch_index(k.entry);
            if (cb.on_kernel && !cb.on_kernel(std::move(k))) throw StopStreaming{};
          }
          if (cb.on_progress && (++count & 1023) == 0) cb.on_progress(s.offset());
        });
        return;
      }
      Json v = s.value();
      auto str = [&](std::string &field) {
        if (v.is_string()) field = v.get<std::string>();
      };
      if (key == ck::kTask)
        str(h.task);
      else if (key == ck::kLevel)
        str(h.level);
      else if (key == ck::kFramework)
        str(h.framework);
      else if (key == ck::kHostFramework)
        str(h.host_framework);
      else if (key == ck::kDumpDataDir && v.is_string())
        h.dump_data_dir = v.get<std::string>();
    });
    s.finish();
  } catch (const StopStreaming &) {
    return h;
  }
  if (auto f = format::parse_framework(h.framework)) h.framework_kind = *f;
  if (!header_sent && cb.on_header) cb.on_header(h);
  if (cb.on_progress) cb.on_progress(text.size());
  return h;
}

DumpHeaderRead read_dump_json(const RankDir &rank, const DumpCallbacks &callbacks) {
  const fs::path path = rank.path / format::kDumpJson;
  MappedFile file(path);
  try {
    return stream_dump_json(file.text(), callbacks);
  } catch (const JsonError &e) {
    throw JsonError(path.string() + ": " + e.what(), e.offset());
  }
}

// ---- stack.json -----------------------------------------------------------------------------------------------------
namespace {
std::vector<std::string> frames_of(const Json &list) {
  std::vector<std::string> out;
  if (!list.is_array()) return out;
  for (const Json &f : list) out.push_back(f.is_string() ? f.get<std::string>() : to_json_text(f));
  return out;
}
}  // namespace

std::optional<std::vector<std::string>> find_stack(const RankDir &rank, std::string_view kernel) {
  const fs::path path = rank.path / format::kStackJson;
  std::error_code ec;
  if (!fs::is_regular_file(path, ec)) return std::nullopt;
  MappedFile file(path);
  JsonStream s(file.text());
  std::optional<std::vector<std::string>> found;
  try {
    s.members([&](std::string &&key) {
      Json v = s.value();
      // Grouped: {"0": [[names...], [frames...]]}; flat: {name: [frames...]}.
      if (v.is_array() && v.size() == 2 && v[0].is_array() && v[1].is_array()) {
        for (const Json &n : v[0]) {
          if (n.is_string() && n.get_ref<const std::string &>() == kernel) {
            found = frames_of(v[1]);
            throw StopStreaming{};
          }
        }
      } else if (key == kernel) {
        found = frames_of(v);
        throw StopStreaming{};
      }
    });
  } catch (const StopStreaming &) {
  } catch (const JsonError &e) {
    throw JsonError(path.string() + ": " + e.what(), e.offset());
  }
  return found;
}

// ---- construct.json -------------------------------------------------------------------------------------------------
std::vector<std::string> read_construct_names(const fs::path &path) {
  MappedFile file(path);
  JsonStream s(file.text());
  std::vector<std::string> names;
  try {
    s.members([&](std::string &&key) {
      names.push_back(std::move(key));
      s.skip();
    });
    s.finish();
  } catch (const JsonError &e) {
    throw JsonError(path.string() + ": " + e.what(), e.offset());
  }
  return names;
}

// ---- mapping.csv ----------------------------------------------------------------------------------------------------
std::vector<MappingRow> read_mapping_csv(const fs::path &tensor_dir) {
  std::vector<MappingRow> rows;
  std::ifstream in(tensor_dir / format::kMappingCsv, std::ios::binary);
  if (!in) return rows;
  std::ostringstream read;
  read << in.rdbuf();
  const std::string text = read.str();
  for (const PlainCsvLine &l : plain_csv_lines(text))
    rows.push_back({std::string(l.first), std::string(l.rest.value_or("")), l.number});
  return rows;
}

// ---- Picking a kernel -----------------------------------------------------------------------------------------------
KernelSelection select_kernel(std::span<const KernelRef> kernels, std::string_view selector) {
  KernelSelection out;
  if (selector.empty()) {
    out.error = "empty kernel name";
    return out;
  }
  for (const KernelRef &k : kernels) {
    if (k.name == selector) {
      out.name = k.name;
      return out;
    }
  }
  // A name without its direction token ("Add.Default.1" for "Add.Default.1.forward"), before prefixes: it is the
  // prefix of "Add.Default.10.forward" too.
  for (const KernelRef &k : kernels) {
    if (format::kernel_stem(k.name) == selector) {
      out.name = k.name;
      return out;
    }
  }
  // OpType#k
  if (const size_t hash = selector.rfind('#'); hash != std::string_view::npos) {
    const std::string_view op = selector.substr(0, hash), index = selector.substr(hash + 1);
    uint64_t k = 0;
    auto r = std::from_chars(index.data(), index.data() + index.size(), k);
    if (op.empty() || index.empty() || r.ec != std::errc() || r.ptr != index.data() + index.size()) {
      out.error = "bad selector '" + std::string(selector) + "': expected OpType#k with k a number from 0";
      return out;
    }
    std::vector<const KernelRef *> of_type;
    for (const KernelRef &kr : kernels)
      if (op_type_of(kr.name) == op) of_type.push_back(&kr);
    std::stable_sort(of_type.begin(), of_type.end(),
                     [](const KernelRef *a, const KernelRef *b) { return a->launch_index < b->launch_index; });
    if (of_type.empty()) {
      out.error = "no kernel of op type '" + std::string(op) + "'";
    } else if (k >= of_type.size()) {
      out.error = "only " + std::to_string(of_type.size()) + " kernel(s) of op type '" + std::string(op) +
                  "' (k counts from 0)";
    } else {
      out.name = of_type[k]->name;
    }
    return out;
  }
  std::vector<const KernelRef *> matches;
  for (const KernelRef &k : kernels)
    if (k.name.size() > selector.size() && std::string_view(k.name).substr(0, selector.size()) == selector)
      matches.push_back(&k);
  if (matches.size() == 1) {
    out.name = matches[0]->name;
    return out;
  }
  if (matches.empty()) {
    out.error = "no kernel named or starting with '" + std::string(selector) + "'";
    return out;
  }
  std::stable_sort(matches.begin(), matches.end(),
                   [](const KernelRef *a, const KernelRef *b) { return a->launch_index < b->launch_index; });
  out.error = "'" + std::string(selector) + "' is the prefix of " + std::to_string(matches.size()) + " kernels";
  for (size_t i = 0; i < matches.size() && i < 10; ++i) out.candidates.push_back(matches[i]->name);
  return out;
}

// ---- Small helpers --------------------------------------------------------------------------------------------------
std::string shape_text(std::span<const int64_t> shape) {
  std::string s = "[";
  for (size_t i = 0; i < shape.size(); ++i) {
    if (i) s += ", ";
    s += std::to_string(shape[i]);
  }
  return s + "]";
}

std::string stat_text(const StatValue &v) {
  std::string s;
  format::append_stat_value(s, v);
  return s;
}

std::string human_bytes(uint64_t bytes) {
  static const char *units[] = {"B", "KiB", "MiB", "GiB", "TiB"};
  double v = static_cast<double>(bytes);
  int u = 0;
  while (v >= 1024.0 && u < 4) {
    v /= 1024.0;
    ++u;
  }
  char buf[32];
  if (u == 0)
    std::snprintf(buf, sizeof buf, "%llu B", static_cast<unsigned long long>(bytes));
  else
    std::snprintf(buf, sizeof buf, "%.1f %s", v, units[u]);
  return buf;
}

}  // namespace msprobe::tools
