// convert DIR: .bin tensor files (MSPROBE_FILE_FORMAT=bin) and .lz4 ones (MSPROBE_COMPRESS=lz4) to .npy, dump.json
// and mapping.csv updated to match.
#include <cstdio>
#include <string>
#include <system_error>
#include <unordered_map>
#include <vector>

#include "format/format.h"
#include "format/dump_json.h"
#include "format/lz4.h"
#include "format/naming.h"
#include "format/npy.h"
#include "tools/inspect/cli.h"
#include "tools/inspect/commands.h"
#include "tools/reader/dump_reader.h"
#include "tools/reader/repair.h"
#include "tools/reader/tensor_data.h"

namespace msprobe::tools {

const std::string_view kConvertHelp = R"(usage: msprobe-inspect convert DIR [--keep-bin]

Turns the .bin tensor files of a dump (MSPROBE_FILE_FORMAT=bin: the tensor's raw bytes) and its compressed
.npy.lz4 / .bin.lz4 files (MSPROBE_COMPRESS=lz4) into .npy files that numpy and msprobe's compare read. A
.npy.lz4 becomes exactly the .npy an uncompressed run writes; for .bin the dtype and shape come from dump.json,
and bfloat16 is widened to float32 as the collector does for npy. In each folder converted, dump.json's data_name
fields and mapping.csv rows are updated to the new names (the old dump.json is kept as dump.json.bak) and the
.bin / .lz4 files are removed.

  --keep-bin   keep the .bin and .lz4 files (verify then reports them as orphans)

Tensors of a type with no npy form (raw bytes) stay .bin (a .bin.lz4 of one is decompressed to .bin). Exit status
0 when every file was converted, 1 when some could not be, 2 when DIR is not a dump.
)";

namespace {

std::string json_quoted(std::string_view s) {
  std::string out;
  format::append_json_string(out, s);
  return out;
}

// Replaces JSON string tokens (whole "..." tokens, escapes respected) found in `repl`; one pass over the text.
std::string replace_string_tokens(std::string_view text, const std::unordered_map<std::string, std::string> &repl,
                                  uint64_t *count) {
  std::string out;
  out.reserve(text.size());
  size_t i = 0;
  while (i < text.size()) {
    if (text[i] != '"') {
      const size_t next = text.find('"', i);
      const size_t end = next == std::string_view::npos ? text.size() : next;
      out.append(text.substr(i, end - i));
      i = end;
      continue;
    }
    size_t j = i + 1;
    while (j < text.size() && text[j] != '"') j += text[j] == '\\' ? 2 : 1;
    const size_t end = std::min(j + 1, text.size());
    const std::string token(text.substr(i, end - i));
    auto it = repl.find(token);
    if (it != repl.end()) {
      out += it->second;
      ++*count;
    } else {
      out += token;
    }
    i = end;
  }
  return out;
}

std::string without_lz4(const std::string &name) {
  if (tensor_file_kind(name) != TensorFileKind::Lz4) return name;
  return name.substr(0, name.size() - format::kLz4Suffix.size() - 1);
}

// x.bin, x.npy.lz4, x.bin.lz4 -> x.npy; a renamed long name "{digits}.lz4" -> "{digits}.npy".
std::string with_npy_suffix(const std::string &name) {
  const std::string base = without_lz4(name);
  const size_t dot = base.rfind('.');
  const bool has_format = dot != std::string::npos && (tensor_file_kind(base) == TensorFileKind::Npy ||
                                                       tensor_file_kind(base) == TensorFileKind::Bin);
  return (has_format ? base.substr(0, dot) : base) + "." +
         std::string(format::file_suffix(format::FileFormat::Npy));
}

}  // namespace

int run_convert(std::span<char *const> argv) {
  static const OptionSpec kOptions[] = {{"--keep-bin", false}};
  const Args args = parse_args(argv, kOptions);
  expect_positional(args, 1, "DIR");
  const bool keep_bin = args.flag("--keep-bin");
  const std::vector<RankDir> dirs = find_rank_dirs(args.positional[0]);
  uint64_t converted = 0, failed = 0, already_npy = 0;
  for (const RankDir &d : dirs) {
    const fs::path tensor_dir = d.path / format::kTensorDir;
    struct Job {
      std::string kernel;
      TensorInfo tensor;
    };
    std::vector<Job> jobs;
    DumpHeader header;
    DumpCallbacks cb;
    cb.on_header = [&](const DumpHeader &h) { header = h; };
    cb.on_record = [&](KernelRecord &&k) {
      for (TensorInfo &t : k.tensors) {
        if (!t.data_name) continue;
        switch (tensor_file_kind(*t.data_name)) {
          case TensorFileKind::Bin:
          case TensorFileKind::Lz4: jobs.push_back({k.name, std::move(t)}); break;
          case TensorFileKind::Npy: ++already_npy; break;
          case TensorFileKind::Unknown:
            std::printf("%s: %s/%s: not a .bin or .npy file; left as is\n", d.label().c_str(),
                        std::string(format::kTensorDir).c_str(), t.data_name->c_str());
            ++failed;
            break;
        }
      }
      return true;
    };
    read_dump_json(d, cb);
    if (jobs.empty()) continue;

    std::unordered_map<std::string, std::string> renames;  // quoted old data_name -> quoted new one
    std::unordered_map<std::string, std::string> done;     // old name -> new name
    std::vector<fs::path> to_remove;
    for (const Job &j : jobs) {
      const std::string &old_name = *j.tensor.data_name;
      const std::string where = d.label() + ": " + std::string(format::kTensorDir) + "/" + old_name;
      try {
        if (!format::is_safe_file_name(old_name)) throw TensorFileError("data_name is not a plain file name");
        const TensorFile f = open_tensor_file(tensor_dir / old_name, j.tensor);
        const bool no_npy_form = f.file_dtype == format::DType::Raw || !format::npy_can_store(f.file_dtype);
        if (no_npy_form && !f.compressed)
          throw TensorFileError("dtype " + j.tensor.dtype_text + " has no npy form; left as .bin");
        if (f.compressed && (no_npy_form || f.kind == TensorFileKind::Npy)) {
          // The content is the file an uncompressed run writes (npy, or raw bytes): decompressed as is.
          std::string content;
          format::lz4_decompress_file(
              tensor_dir / old_name, [&](const void *p, size_t n) { content.append(static_cast<const char *>(p), n); });
          const std::string new_name = no_npy_form ? without_lz4(old_name) : with_npy_suffix(old_name);
          format::write_file_atomic(tensor_dir / new_name, content);
          renames.emplace(json_quoted(old_name), json_quoted(new_name));
          done.emplace(old_name, new_name);
          to_remove.push_back(tensor_dir / old_name);
          ++converted;
          continue;
        }
        std::string data;
        data.reserve(static_cast<size_t>(f.data_bytes));
        read_tensor_chunks(f, [&](const void *p, uint64_t n) {
          data.append(static_cast<const char *>(p), n * format::element_size(f.file_dtype));
        });
        const std::string new_name = with_npy_suffix(old_name);
        const fs::path tmp = tensor_dir / (new_name + ".tmp");
        format::write_npy_file(tmp, f.file_dtype, f.shape, data.data());
        fs::rename(tmp, tensor_dir / new_name);
        renames.emplace(json_quoted(old_name), json_quoted(new_name));
        done.emplace(old_name, new_name);
        to_remove.push_back(tensor_dir / old_name);
        ++converted;
      } catch (const std::exception &e) {
        std::printf("%s: %s\n", where.c_str(), e.what());
        ++failed;
      }
    }
    if (renames.empty()) continue;

    // dump.json: only the data_name tokens change; everything else stays byte for byte.
    const fs::path dump_path = d.path / format::kDumpJson;
    std::string original;
    {
      MappedFile m(dump_path);
      original.assign(m.text());
    }
    uint64_t replaced = 0;
    const std::string updated = replace_string_tokens(original, renames, &replaced);
    const fs::path bak = free_backup_name(dump_path);
    format::write_file_atomic(bak, original);
    format::write_file_atomic(dump_path, updated);

    // mapping.csv: a renamed long name keeps its row, with both names' suffixes changed.
    std::vector<MappingRow> rows = read_mapping_csv(tensor_dir);
    if (!rows.empty()) {
      std::string csv;
      for (const MappingRow &r : rows) {
        auto it = done.find(r.new_name);
        if (it == done.end() || keep_bin) csv += r.new_name + "," + r.original_name + "\n";
        if (it != done.end())
          csv += it->second + "," +
                 (tensor_file_kind(it->second) == TensorFileKind::Npy ? with_npy_suffix(r.original_name)
                                                                      : without_lz4(r.original_name)) +
                 "\n";
      }
      format::write_file_atomic(tensor_dir / format::kMappingCsv, csv);
    }
    if (!keep_bin)
      for (const fs::path &p : to_remove) {
        std::error_code ec;
        fs::remove(p, ec);
        if (ec) std::printf("%s: cannot remove %s: %s\n", d.label().c_str(), p.string().c_str(), ec.message().c_str());
      }
    std::printf("%s: %zu file(s) converted to npy, dump.json updated (%llu data_name fields; original kept as %s)\n",
                d.label().c_str(), done.size(), static_cast<unsigned long long>(replaced),
                bak.filename().string().c_str());
  }
  std::printf("convert: %llu converted, %llu already npy, %llu not converted\n",
              static_cast<unsigned long long>(converted), static_cast<unsigned long long>(already_npy),
              static_cast<unsigned long long>(failed));
  return failed ? kExitFindings : kExitOk;
}

}  // namespace msprobe::tools
