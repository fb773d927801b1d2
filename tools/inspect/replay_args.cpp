// replay: a kernel's recorded input_args decoded into the arguments the CPU references take.
#include <algorithm>
#include <optional>

#include "format/dump_json.h"
#include "format/format.h"
#include "tools/inspect/replay.h"
#include "tools/reader/tensor_data.h"

namespace msprobe::tools::replay {

Tensor load_tensor(const Folder &f, const TensorInfo &t) {
  if (!t.data_name) throw RefError(t.row_suffix() + ": tensor data not saved (no data_name)");
  if (!t.dtype) throw RefError(t.row_suffix() + ": unknown dtype '" + t.dtype_text + "'");
  try {
    const TensorFile file = open_tensor_file(f.dir->path / format::kTensorDir / *t.data_name, t);
    if (file.file_dtype == format::DType::Raw) throw TensorFileError("raw bytes of an unknown dtype");
    Tensor out;
    out.v = read_tensor_values(file);
    out.shape = t.shape_ok && static_cast<uint64_t>(numel(t.shape)) == out.v.size() ? t.shape : file.shape;
    out.dtype = t.dtype;
    return out;
  } catch (const TensorFileError &e) {
    throw RefError(t.row_suffix() + ": " + e.what());
  }
}

namespace {

using Kind = Arg::Kind;

// 2^64 - 1 wraps to -1, as the C argument.
int64_t as_int(const Json &e) {
  return e.is_number_unsigned() ? static_cast<int64_t>(e.get<uint64_t>()) : e.get<int64_t>();
}

Arg scalar_arg(const Json &x, const std::string &slot) {
  Arg a;
  if (x.is_boolean()) {
    a.kind = Kind::Bool;
    a.b = x.get<bool>();
    a.i = a.b;
    a.f = a.b;
  } else if (x.is_number_integer()) {
    a.kind = Kind::Int;
    a.i = as_int(x);
    a.f = static_cast<double>(a.i);
    a.b = a.i != 0;
  } else if (x.is_number()) {
    a.kind = Kind::Float;
    a.f = x.get<double>();
  } else if (x.is_string()) {
    a.kind = Kind::Text;
    a.text = x.get<std::string>();
  } else {
    throw RefError("input." + slot + ": a value the references do not use");
  }
  return a;
}

// A member of a sequence, as its leaf's type says (an aclScalarList's members each have theirs): a "float" leaf is a
// float even when its value is integral.
Arg member_arg(const Json &x, const std::string &type, const std::string &slot) {
  Arg a = scalar_arg(x, slot);
  if (type == format::value_type::kFloat && a.kind == Kind::Int) a.kind = Kind::Float;
  return a;
}

// A sequence: all ints or all bools read as an int or bool array (aclIntArray, aclBoolArray, or a scalar list of
// one kind), any other list of numbers as a scalar list; every member also in `scalars`.
Arg sequence_arg(const ValueArgRead &read, const std::string &slot) {
  Arg a;
  for (size_t i = 0; i < read.values.size(); ++i)
    a.scalars.push_back(
        member_arg(read.values[i], i < read.types.size() ? read.types[i] : read.type, slot + "." + std::to_string(i)));
  auto all = [&](auto pred) { return std::all_of(a.scalars.begin(), a.scalars.end(), pred); };
  if (all([](const Arg &s) { return s.kind == Kind::Bool; }) && !a.scalars.empty()) {
    a.kind = Kind::BoolList;
    for (const Arg &s : a.scalars) a.bools.push_back(s.b);
  } else if (all([](const Arg &s) { return s.kind == Kind::Int; })) {
    a.kind = Kind::IntList;
    for (const Arg &s : a.scalars) a.ints.push_back(s.i);
  } else if (all([](const Arg &s) { return s.kind == Kind::Int || s.kind == Kind::Float || s.kind == Kind::Bool; })) {
    a.kind = Kind::ScalarList;
  } else {
    throw RefError("input." + slot + ": an array value the references do not use");
  }
  return a;
}

}  // namespace

Arg make_arg(const Folder &f, const Json &v, const std::string &slot,
             const std::unordered_map<std::string, const TensorInfo *> &inputs,
             std::vector<std::unique_ptr<Tensor>> &store) {
  auto tensor_at = [&](const std::string &s) -> const Tensor * {
    auto it = inputs.find(s);
    if (it == inputs.end()) throw RefError("input." + s + ": not a tensor the reader recognizes");
    store.push_back(std::make_unique<Tensor>(load_tensor(f, *it->second)));
    return store.back().get();
  };
  Arg a;
  if (v.is_null()) return a;
  if (v.is_array()) {
    // A non-empty list of scalar leaves is a sequence (aclIntArray...); an empty list stays an empty tensor list,
    // which Call::int_list / bool_list also accept as an empty array.
    if (auto seq = read_value_arg(v); !seq || seq->values.empty()) {
      a.kind = Kind::TensorList;
      for (size_t i = 0; i < v.size(); ++i) a.tensors.push_back(tensor_at(slot + "." + std::to_string(i)));
      return a;
    }
  } else if (!v.is_object()) {
    throw RefError("input." + slot + ": not an object");
  } else if (inputs.count(slot)) {
    a.kind = Kind::Tensor;
    a.tensor = tensor_at(slot);
    return a;
  }
  const std::optional<ValueArgRead> read = read_value_arg(v);
  if (!read) throw RefError("input." + slot + ": a non-tensor argument without a value");
  return read->is_list ? sequence_arg(*read, slot) : scalar_arg(read->values.front(), slot);
}

}  // namespace msprobe::tools::replay
