// Parsing and checking of the stand-in's model file (model_file.h).
#include "model_file.h"

#include <cstring>
#include <fstream>
#include <iterator>
#include <map>
#include <nlohmann/json.hpp>

#include "fakecann/dtype.h"

namespace fakecann::model {
namespace {

using nlohmann::json;

struct Bad {
  std::string why;
};
[[noreturn]] void bad(const std::string &why) { throw Bad{why}; }

const json &field(const json &j, const char *key) {
  if (!j.is_object() || !j.contains(key)) bad(std::string("missing field \"") + key + "\"");
  return j.at(key);
}

std::vector<uint8_t> from_hex(const std::string &hex) {
  if (hex.size() % 2 != 0) bad("weight hex string of odd length");
  std::vector<uint8_t> out(hex.size() / 2);
  for (size_t i = 0; i < out.size(); ++i) out[i] = (uint8_t)std::stoul(hex.substr(2 * i, 2), nullptr, 16);
  return out;
}

Tensor parse_tensor(const json &j) {
  Tensor t;
  t.name = field(j, "name").get<std::string>();
  t.dtype = (aclDataType)field(j, "dtype").get<int>();
  t.format = (aclFormat)j.value("format", (int)ACL_FORMAT_ND);
  t.shape = field(j, "shape").get<std::vector<int64_t>>();
  uint64_t n = 1;
  for (int64_t d : t.shape) {
    if (d < 0) bad("tensor " + t.name + ": dynamic shapes are not supported");
    n *= (uint64_t)d;
  }
  if (!dtype_is_numeric(t.dtype)) bad("tensor " + t.name + ": unsupported dtype " + std::to_string((int)t.dtype));
  t.bytes = n * dtype_size(t.dtype);
  return t;
}

AclAttrValue parse_attr(const std::string &name, const json &j) {
  if (!j.is_object() || j.size() != 1) bad("attr " + name + ": expected {\"<type>\": value}");
  const std::string &type = j.begin().key();
  const json &v = j.begin().value();
  if (type == "bool") return v.get<bool>();
  if (type == "int") return v.get<int64_t>();
  if (type == "float") return v.get<float>();
  if (type == "string") return v.get<std::string>();
  if (type == "dtype") return (aclDataType)v.get<int>();
  if (type == "list_int") return v.get<std::vector<int64_t>>();
  if (type == "list_float") return v.get<std::vector<float>>();
  bad("attr " + name + ": unknown type " + type);
}

using Index = std::map<std::string, size_t>;

size_t lookup(const Index &index, const std::string &name, const std::string &what) {
  auto it = index.find(name);
  if (it == index.end()) bad(what + " names an undeclared tensor " + name);
  return it->second;
}

// Binds a node's tensors and checks it by its op's rules; `ready` marks tensors holding values so far.
Node parse_node(const json &j, Definition &def, const Index &index, std::vector<bool> &ready) {
  Node n;
  n.type = field(j, "type").get<std::string>();
  n.name = field(j, "name").get<std::string>();
  std::vector<aclop::Arg> in, out;
  for (const auto &name : field(j, "inputs").get<std::vector<std::string>>()) {
    size_t t = lookup(index, name, "node " + n.name + " input");
    if (!ready[t]) bad("node " + n.name + " reads " + name + " before any node writes it");
    n.inputs.push_back(t);
    const Tensor &x = def.tensors[t];
    in.push_back({true, x.dtype, x.format, x.shape});
  }
  for (const auto &name : field(j, "outputs").get<std::vector<std::string>>()) {
    size_t t = lookup(index, name, "node " + n.name + " output");
    Role r = def.tensors[t].role;
    if (ready[t] || r == Role::Input || r == Role::Weight) bad("node " + n.name + " writes " + name + " a second time");
    ready[t] = true;
    n.outputs.push_back(t);
    const Tensor &y = def.tensors[t];
    out.push_back({true, y.dtype, y.format, y.shape});
  }
  if (j.contains("attrs"))
    for (const auto &[key, value] : j.at("attrs").items()) n.attrs[key] = parse_attr(key, value);
  aclop::NodeCheck c = aclop::check_node(n.type, in, out, n.attrs);
  if (c.kernel == nullptr) bad("node " + n.name + ": " + c.why);
  n.kernel = c.kernel;
  return n;
}

void bind_roles(const json &g, Definition &def, const Index &index, std::vector<bool> &ready) {
  auto names = [&](const char *key, Role role, std::vector<size_t> &list) {
    for (const auto &name : field(g, key).get<std::vector<std::string>>()) {
      size_t t = lookup(index, name, key);
      if (def.tensors[t].role != Role::Internal) bad("tensor " + name + " has two roles");
      def.tensors[t].role = role;
      def.tensors[t].io_index = list.size();
      list.push_back(t);
    }
  };
  names("inputs", Role::Input, def.inputs);
  names("outputs", Role::Output, def.outputs);
  for (size_t t : def.inputs) ready[t] = true;
  if (g.contains("weights"))
    for (const auto &[name, hex] : g.at("weights").items()) {
      Tensor &w = def.tensors[lookup(index, name, "weights")];
      if (w.role != Role::Internal) bad("weight " + name + " has two roles");
      w.role = Role::Weight;
      w.weight = from_hex(hex.get<std::string>());
      if (w.weight.size() != w.bytes) bad("weight " + name + " holds the wrong number of bytes");
      ready[lookup(index, name, "weights")] = true;
    }
}

void parse_graph(const json &g, Definition &def) {
  def.name = field(g, "name").get<std::string>();
  if (def.name.empty()) bad("the model has no name");
  Index index;
  for (const json &t : field(g, "tensors")) {
    def.tensors.push_back(parse_tensor(t));
    if (!index.emplace(def.tensors.back().name, def.tensors.size() - 1).second)
      bad("tensor " + def.tensors.back().name + " declared twice");
  }
  std::vector<bool> ready(def.tensors.size(), false);
  bind_roles(g, def, index, ready);
  for (const json &n : field(g, "nodes")) def.nodes.push_back(parse_node(n, def, index, ready));
  for (size_t t : def.outputs)
    if (!ready[t]) bad("model output " + def.tensors[t].name + " is written by no node");
  if (def.nodes.empty()) bad("the model has no nodes");
}

}  // namespace

aclError parse(const void *data, size_t size, Definition *out, std::string *why) {
  const size_t magic = sizeof kMagic - 1;
  if (data == nullptr || size < magic || std::memcmp(data, kMagic, magic) != 0) {
    *why = "not a stand-in model file (magic FAKEOM01)";
    return ACL_ERROR_PARSE_MODEL;
  }
  const char *text = static_cast<const char *>(data) + magic;
  try {
    Definition def;
    parse_graph(json::parse(text, text + (size - magic)), def);
    *out = std::move(def);
    return ACL_SUCCESS;
  } catch (const Bad &b) {
    *why = b.why;
  } catch (const std::exception &e) {  // nlohmann: syntax and type errors
    *why = e.what();
  }
  return ACL_ERROR_PARSE_MODEL;
}

aclError parse_file(const char *path, Definition *out, std::string *why) {
  std::ifstream f(path, std::ios::binary);
  if (!f) {
    *why = std::string("cannot read model file ") + path;
    return ACL_ERROR_READ_MODEL_FAILURE;
  }
  std::vector<char> bytes((std::istreambuf_iterator<char>(f)), std::istreambuf_iterator<char>());
  return parse(bytes.data(), bytes.size(), out, why);
}

}  // namespace fakecann::model
