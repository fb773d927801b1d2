// Test-only driver: exposes the collector's format functions to test_collector_formats.py, which checks them
// against numpy, zlib and Python's json/repr. Each command works in batch (one process for many cases).
//
//   stats <manifest>            lines "dtype shape low|high data.bin" -> one JSON object per line
//   npy <manifest>              lines "dtype shape data.bin out.npy [v2]"
//   npyinfo <file.npy>          the header as JSON, or "error: ..." and exit code 2
//   repr                        stdin: hex bit patterns of doubles -> json_number() per line
//   half <in> <out>             every uint16 of <in> through half_to_float -> float32 file
//   tohalf|tobf16 <in> <out>    float32 file -> fp16 / bf16 (round to nearest even)
//   names                       stdin: "hex(op_type),hex(op_name)" -> kernel_base_name per line
//   csvsafe                     stdin: hex(text) -> hex(csv_safe_text) per line
//   create <dir> <hex(basename)> creates the file, appends the mapping row; prints file_name and mapping_row
//   journal <dir> <framework>   writes dir/dump.json entry by entry, snapshotting the file (valid JSON) after each
//                               step, then dir/stack.json, dir/construct.json and repaired cuts of the journal
// shape: "scalar" for 0-d, else comma-separated dims ("0", "5", "2,3").
#include <unistd.h>

#include <cinttypes>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <limits>
#include <sstream>
#include <string>
#include <vector>

#include "collector/dump_files.h"
#include "collector/journal.h"
#include "format/half.h"
#include "format/dump_json.h"
#include "format/io.h"
#include "format/naming.h"
#include "format/npy.h"
#include "format/stats.h"

namespace mc = msprobe::format;
namespace fs = std::filesystem;

namespace {

std::string slurp(const fs::path &p) {
  std::ifstream in(p, std::ios::binary);
  return std::string((std::istreambuf_iterator<char>(in)), {});
}

void spit(const fs::path &p, std::string_view s) { std::ofstream(p, std::ios::binary).write(s.data(), s.size()); }

std::vector<int64_t> parse_shape(const std::string &s) {
  std::vector<int64_t> dims;
  if (s == "scalar") return dims;
  std::stringstream ss(s);
  for (std::string d; std::getline(ss, d, ',');) dims.push_back(std::stoll(d));
  return dims;
}

mc::DType parse_dtype(const std::string &s) {
  const auto t = mc::parse_dtype_id(s);
  if (!t) throw std::runtime_error("unknown dtype " + s);
  return *t;
}

std::string unhex(const std::string &h) {
  std::string out;
  for (size_t i = 0; i + 1 < h.size(); i += 2) out += static_cast<char>(std::stoi(h.substr(i, 2), nullptr, 16));
  return out;
}

std::string hex(std::string_view s) {
  static const char kHex[] = "0123456789abcdef";
  std::string out;
  for (unsigned char c : s) out += kHex[c >> 4], out += kHex[c & 15];
  return out;
}

int cmd_stats(const fs::path &manifest) {
  std::ifstream in(manifest);
  for (std::string line; std::getline(in, line);) {
    std::istringstream ls(line);
    std::string dtype, shape, precision, path;
    ls >> dtype >> shape >> precision >> path;
    const mc::DType t = parse_dtype(dtype);
    const std::string data = slurp(path);
    const auto dims = parse_shape(shape);
    const auto s =
        mc::compute_stats(t, data.data(), dims, precision == "high" ? mc::StatPrecision::High : mc::StatPrecision::Low);
    std::string out = "{\"Max\": ";
    mc::append_stat_value(out, s.max);
    out += ", \"Min\": ";
    mc::append_stat_value(out, s.min);
    out += ", \"Mean\": ";
    mc::append_stat_value(out, s.mean);
    out += ", \"Norm\": ";
    mc::append_stat_value(out, s.norm);
    out += ", \"count\": " + std::to_string(s.count) + ", \"nan\": " + std::to_string(s.nan_count) +
           ", \"pinf\": " + std::to_string(s.pos_inf_count) + ", \"ninf\": " + std::to_string(s.neg_inf_count);
    out += ", \"crc\": \"" + mc::crc32_hex(mc::crc32_update(0, data.data(), data.size())) + "\"";
    if (t == mc::DType::BF16) {
      const uint32_t c =
          mc::crc32_update_bf16_as_f32(0, reinterpret_cast<const uint16_t *>(data.data()), data.size() / 2);
      out += ", \"crc_bf16_as_f32\": \"" + mc::crc32_hex(c) + "\"";
    }
    std::cout << out << "}\n";
  }
  return 0;
}

int cmd_npy(const fs::path &manifest) {
  std::ifstream in(manifest);
  for (std::string line; std::getline(in, line);) {
    std::istringstream ls(line);
    std::string dtype, shape, data_path, out_path, version;
    ls >> dtype >> shape >> data_path >> out_path >> version;
    const std::string data = slurp(data_path);
    mc::write_npy_file(out_path, parse_dtype(dtype), parse_shape(shape), data.data(),
                       {.min_major = static_cast<uint8_t>(version == "v2" ? 2 : 1)});
  }
  return 0;
}

int cmd_npyinfo(const fs::path &path) {
  try {
    const auto i = mc::read_npy_info(path);
    std::string out = "{\"major\": " + std::to_string(i.major) + ", \"descr\": ";
    mc::append_json_string(out, i.descr);
    out += ", \"dtype\": ";
    mc::append_json_string(out, mc::dtype_id(i.dtype));
    out += ", \"fortran_order\": " + std::string(i.fortran_order ? "true" : "false") + ", \"shape\": [";
    for (size_t k = 0; k < i.shape.size(); ++k) out += (k ? ", " : "") + std::to_string(i.shape[k]);
    out += "], \"data_offset\": " + std::to_string(i.data_offset) +
           ", \"data_bytes\": " + std::to_string(i.data_bytes) + "}";
    std::cout << out << "\n";
    return 0;
  } catch (const std::exception &e) {
    std::cout << "error: " << e.what() << "\n";
    return 2;
  }
}

int cmd_repr() {
  for (std::string line; std::getline(std::cin, line);) {
    const uint64_t bits = std::stoull(line, nullptr, 16);
    double d;
    std::memcpy(&d, &bits, 8);
    std::cout << mc::json_number(d) << "\n";
  }
  return 0;
}

int cmd_convert(const std::string &what, const fs::path &in_path, const fs::path &out_path) {
  const std::string in = slurp(in_path);
  std::string out;
  if (what == "half") {
    for (size_t i = 0; i + 2 <= in.size(); i += 2) {
      uint16_t h;
      std::memcpy(&h, in.data() + i, 2);
      const float f = mc::half_to_float(h);
      out.append(reinterpret_cast<const char *>(&f), 4);
    }
  } else {
    for (size_t i = 0; i + 4 <= in.size(); i += 4) {
      float f;
      std::memcpy(&f, in.data() + i, 4);
      const uint16_t h = what == "tohalf" ? mc::float_to_half(f) : mc::float_to_bf16(f);
      out.append(reinterpret_cast<const char *>(&h), 2);
    }
  }
  spit(out_path, out);
  return 0;
}

int cmd_names() {
  for (std::string line; std::getline(std::cin, line);) {
    const size_t comma = line.find(',');
    std::cout << mc::kernel_base_name(unhex(line.substr(0, comma)), unhex(line.substr(comma + 1))) << "\n";
  }
  return 0;
}

int cmd_csvsafe() {
  for (std::string line; std::getline(std::cin, line);) std::cout << hex(mc::csv_safe_text(unhex(line))) << "\n";
  return 0;
}

int cmd_create(const fs::path &dir, const std::string &hex_name) {
  auto f = msprobe::collector::create_dump_file(dir, unhex(hex_name));
  const std::string payload = "payload";
  if (::write(f.fd, payload.data(), payload.size()) != static_cast<ssize_t>(payload.size())) return 1;
  ::close(f.fd);
  if (f.renamed()) msprobe::collector::append_mapping_row(dir, f.mapping_row);
  std::cout << f.file_name << "\n" << f.mapping_row << "\n";
  return 0;
}

// Entries that cover every kind of value the writer emits.
std::vector<mc::KernelEntry> sample_entries() {
  std::vector<mc::KernelEntry> out;
  auto tensor = [](mc::DType t, std::vector<int64_t> shape, const void *data, uint64_t n) {
    mc::TensorSummary s;
    s.dtype = t;
    s.stats = mc::compute_stats(t, data, n, shape.empty());
    s.shape = std::move(shape);
    return s;
  };
  const float f[] = {1.0f, 2.0f};
  const float nan_inf[] = {1.0f, NAN, INFINITY, -INFINITY};
  const float inf_only[] = {INFINITY, 1.0f, -INFINITY};
  const uint8_t b[] = {1, 0, 1};
  const int64_t i0 = -42;
  const uint16_t h[] = {mc::float_to_half(1.0f), mc::float_to_half(4.0f), mc::float_to_half(2.0f)};

  mc::KernelEntry e;
  e.name = mc::kernel_name(mc::kernel_base_name("Add", "Default"), 0);
  auto t0 = tensor(mc::DType::F32, {2}, f, 2);
  t0.md5 = mc::crc32_hex(mc::crc32_update(0, f, sizeof f));
  t0.data_name = e.name + ".input.0.npy";
  t0.format = "ND";
  t0.stride = std::vector<int64_t>{1};
  t0.offset = 0;
  e.input_args =
      mc::ArgList{mc::Arg{t0}, mc::Arg{tensor(mc::DType::F16, {3}, h, 3)}, mc::Arg{mc::ValueArg{"float", 1.0}}};
  e.output = mc::ArgList{mc::Arg{tensor(mc::DType::F32, {4}, nan_inf, 4)}};
  e.launch_index = 0;
  e.task_id = 0;
  e.stream_id = 0;
  e.timestamp_us = 1733905446819790;
  out.push_back(e);

  mc::KernelEntry g;
  g.name = mc::kernel_name(mc::kernel_base_name("Mixed", "net/layer.0 fwd"), 3);
  mc::ArgList list{mc::Arg{tensor(mc::DType::Bool, {3}, b, 3)}, mc::Arg{}, mc::Arg{tensor(mc::DType::I64, {}, &i0, 1)}};
  g.input_args = mc::ArgList{mc::Arg{std::move(list)},
                             mc::Arg{tensor(mc::DType::F32, {0}, nullptr, 0)},
                             mc::Arg{tensor(mc::DType::F32, {3}, inf_only, 3)},
                             mc::Arg{mc::ValueArg{"tuple", std::vector<int64_t>{-1, 9223372036854775807}}},
                             mc::Arg{mc::ValueArg{"str", std::string("-\"quoted\"\n\xe4\xb8\xad\xff")}},
                             mc::Arg{mc::ValueArg{"list", std::vector<double>{0.1, -0.0, 1e-07, 1e16, NAN}}},
                             mc::Arg{mc::ValueArg{"list", std::vector<bool>{false, true}}},
                             mc::Arg{mc::ValueArg{"bool", false}},
                             mc::Arg{mc::ValueArg{"NoneType", {}}}};
  g.output.reset();  // data_mode "input"
  g.launch_index = 1;
  g.task_id = 7;
  g.stream_id = 2;
  g.timestamp_us = 1733905446819800;
  g.notes.emplace_back("host_api", "aclnnMixed");
  g.launch_extra.emplace_back("device", int64_t{0});
  out.push_back(g);

  mc::KernelEntry r;
  r.name = mc::kernel_name(mc::kernel_base_name("Custom", "Default"), 0);
  mc::TensorSummary raw = tensor(mc::DType::Raw, {2}, "abcd", 4);
  raw.dtype_name = "Complex64";
  r.input_args = mc::ArgList{};
  r.output = mc::ArgList{mc::Arg{raw}};
  out.push_back(r);
  return out;
}

int cmd_journal(const fs::path &dir, const std::string &framework) {
  const auto fw = mc::parse_framework(framework);
  if (!fw) throw std::runtime_error("bad framework");
  mc::DumpHeader h;
  h.task = mc::Task::Tensor;
  h.framework = *fw;
  h.host_framework = *fw == mc::Framework::PyTorch ? mc::HostFramework::PyTorch : mc::HostFramework::Acl;
  h.dump_data_dir = (dir / "dump_tensor_data").string();
  const auto entries = sample_entries();
  msprobe::collector::DumpJsonWriter w;
  w.begin(dir / "dump.json", h);
  const std::string suffix(mc::kDumpJsonSuffix);
  spit(dir / "snap_0.json", slurp(dir / "dump.json"));  // valid JSON as it is, at every moment
  for (size_t i = 0; i < entries.size(); ++i) {
    w.append(entries[i]);
    spit(dir / ("snap_" + std::to_string(i + 1) + ".json"), slurp(dir / "dump.json"));
  }
  // Every cut of the journal (a write torn by a kill), repaired.
  std::string unfinished = slurp(dir / "dump.json");
  unfinished.resize(unfinished.size() - suffix.size());
  fs::create_directories(dir / "repaired");
  for (size_t cut = 0; cut <= unfinished.size(); cut += 7) {
    const auto fixed = mc::repair_journal_text(unfinished.substr(0, cut), suffix);
    if (fixed) spit(dir / "repaired" / (std::to_string(cut) + ".json"), *fixed);
  }
  w.finish();

  std::vector<mc::StackGroup> groups(2);
  groups[0].kernels = {entries[0].name, entries[2].name};
  groups[0].frames = {"File /w/train.py, line 42, in forward, \n output = F.relu(x)", "+0x1a libfoo.so",
                      "@decorated;=x",
                      "\xef\xbc\x8b"
                      "fullwidth"};
  groups[1].kernels = {entries[1].name};
  groups[1].frames = {"The call stack retrieval failed."};
  msprobe::format::write_file_atomic(dir / "stack.json", mc::stack_json(groups));
  msprobe::collector::ConstructJsonWriter c;
  c.begin(dir / "construct.json");
  for (const auto &e : entries) c.append(e.name);
  c.finish();
  return 0;
}

}  // namespace

int main(int argc, char **argv) {
  try {
    const std::vector<std::string> a(argv + 1, argv + argc);
    if (a.size() == 2 && a[0] == "stats") return cmd_stats(a[1]);
    if (a.size() == 2 && a[0] == "npy") return cmd_npy(a[1]);
    if (a.size() == 2 && a[0] == "npyinfo") return cmd_npyinfo(a[1]);
    if (a.size() == 1 && a[0] == "repr") return cmd_repr();
    if (a.size() == 3 && (a[0] == "half" || a[0] == "tohalf" || a[0] == "tobf16")) return cmd_convert(a[0], a[1], a[2]);
    if (a.size() == 1 && a[0] == "names") return cmd_names();
    if (a.size() == 1 && a[0] == "csvsafe") return cmd_csvsafe();
    if (a.size() == 3 && a[0] == "create") return cmd_create(a[1], a[2]);
    if (a.size() == 3 && a[0] == "journal") return cmd_journal(a[1], a[2]);
    std::cerr << "usage: see the comment at the top of collector_probe.cpp\n";
    return 64;
  } catch (const std::exception &e) {
    std::cerr << "collector_probe: " << e.what() << "\n";
    return 1;
  }
}
