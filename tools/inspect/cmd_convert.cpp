// convert DIR: .bin tensor files (MSPROBE_FILE_FORMAT=bin) and .lz4 ones (MSPROBE_COMPRESS=lz4) to .npy, dump.json
// and mapping.csv updated to match.
#include <cstdio>
#include <set>
#include <string>
#include <system_error>
#include <unordered_map>
#include <vector>

#include "format/dump_json.h"
#include "format/format.h"
#include "format/io.h"
#include "format/lz4.h"
#include "format/naming.h"
#include "format/npy.h"
#include "tools/inspect/cli.h"
#include "tools/inspect/commands.h"
#include "tools/inspect/folder_log.h"
#include "tools/reader/dump_reader.h"
#include "tools/reader/partial_read.h"
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
  return (has_format ? base.substr(0, dot) : base) + "." + std::string(format::file_suffix(format::FileFormat::Npy));
}

struct ConvertTally {
  uint64_t converted = 0, failed = 0, already_npy = 0;
  uint64_t busy = 0, damaged = 0;  // folders being written (left alone), not closed or damaged (converted in part)
  std::set<std::string> tasks;     // dump.json's task of every folder, to say why there was nothing to convert
};

// A tensor file to turn into .npy.
struct Job {
  std::string kernel;
  TensorInfo tensor;
};

// The folder's .bin and .lz4 tensor files; npy ones are counted, others reported and left alone.
std::vector<Job> plan_folder(const RankDir &d, const FolderLog &log, ConvertTally &t) {
  std::vector<Job> jobs;
  DumpCallbacks cb;
  cb.on_header = [&](const DumpHeaderRead &h) { t.tasks.insert(h.task); };
  cb.on_record = [&](KernelRecord &&k) {
    for (TensorInfo &ti : k.tensors) {
      if (!ti.data_name) continue;
      switch (tensor_file_kind(*ti.data_name)) {
        case TensorFileKind::Bin:
        case TensorFileKind::Lz4: jobs.push_back({k.name, std::move(ti)}); break;
        case TensorFileKind::Npy: ++t.already_npy; break;
        case TensorFileKind::Unknown:
          log.say("%s/%s: not a .bin or .npy file; left as is", std::string(format::kTensorDir).c_str(),
                  ti.data_name->c_str());
          ++t.failed;
          break;
      }
    }
    return true;
  };
  const std::optional<Shortfall> partial = read_dump_json_partial(d, cb);
  if (partial && !partial->damage()) {
    // Its writer appends to dump.json: replacing the file would take the rest of its kernels from it.
    log.say("%s; left alone: convert it after the run ends", partial->what().c_str());
    ++t.busy;
    return {};
  }
  if (partial) {
    log.say("%s; the files of those are converted", partial->what().c_str());
    ++t.damaged;
  }
  return jobs;
}

// The new name of one converted file (written beside it; the old one stays until the folder is done).
std::string convert_file(const fs::path &tensor_dir, const Job &j) {
  const std::string &old_name = *j.tensor.data_name;
  if (!format::is_safe_file_name(old_name)) throw TensorFileError("data_name is not a plain file name");
  const TensorFile f = open_tensor_file(tensor_dir / old_name, j.tensor);
  const bool no_npy_form = f.file_dtype == format::DType::Raw || !format::npy_can_store(f.file_dtype);
  if (no_npy_form && !f.compressed)
    throw TensorFileError("dtype " + j.tensor.dtype_text + " has no npy form; left as .bin");
  if (f.compressed && (no_npy_form || f.kind == TensorFileKind::Npy)) {
    // The content is the file an uncompressed run writes (npy, or raw bytes): decompressed as is.
    std::string content;
    format::lz4_decompress_file(tensor_dir / old_name,
                                [&](const void *p, size_t n) { content.append(static_cast<const char *>(p), n); });
    const std::string new_name = no_npy_form ? without_lz4(old_name) : with_npy_suffix(old_name);
    format::write_file_atomic(tensor_dir / new_name, content);
    return new_name;
  }
  std::string data;
  data.reserve(static_cast<size_t>(f.data_bytes));
  read_tensor_chunks(f, [&](const void *p, uint64_t n) {
    data.append(static_cast<const char *>(p), format::storage_bytes(f.file_dtype, n));
  });
  const std::string new_name = with_npy_suffix(old_name);
  const fs::path tmp = tensor_dir / (new_name + ".tmp");
  format::write_npy_file(tmp, f.file_dtype, f.shape, data.data());
  fs::rename(tmp, tensor_dir / new_name);
  return new_name;
}

// What converting a folder's files did.
struct Converted {
  std::unordered_map<std::string, std::string> renames;  // quoted old data_name -> quoted new one
  std::unordered_map<std::string, std::string> done;     // old name -> new name
  std::vector<fs::path> to_remove;
};

Converted convert_files(const RankDir &d, const std::vector<Job> &jobs, const FolderLog &log, ConvertTally &t) {
  const fs::path tensor_dir = d.path / format::kTensorDir;
  Converted c;
  for (const Job &j : jobs) {
    const std::string &old_name = *j.tensor.data_name;
    try {
      const std::string new_name = convert_file(tensor_dir, j);
      c.renames.emplace(json_quoted(old_name), json_quoted(new_name));
      c.done.emplace(old_name, new_name);
      c.to_remove.push_back(tensor_dir / old_name);
      ++t.converted;
    } catch (const std::exception &e) {
      const std::string where = std::string(format::kTensorDir) + "/" + old_name;
      log.say("%s: %s", where.c_str(), e.what());
      ++t.failed;
    }
  }
  return c;
}

// dump.json: only the data_name tokens change; everything else stays byte for byte. Returns the fields replaced
// and where the original is kept.
std::pair<uint64_t, fs::path> rename_in_dump_json(const RankDir &d, const Converted &c) {
  const fs::path dump_path = d.path / format::kDumpJson;
  std::string original;
  {
    MappedFile m(dump_path);
    original.assign(m.text());
  }
  uint64_t replaced = 0;
  const std::string updated = replace_string_tokens(original, c.renames, &replaced);
  const fs::path bak = free_backup_name(dump_path);
  format::write_file_atomic(bak, original);
  format::write_file_atomic(dump_path, updated);
  return {replaced, bak};
}

// mapping.csv: a renamed long name keeps its row, with both names' suffixes changed.
void rename_in_mapping_csv(const fs::path &tensor_dir, const Converted &c, bool keep_bin) {
  const std::vector<MappingRow> rows = read_mapping_csv(tensor_dir);
  if (rows.empty()) return;
  std::string csv;
  for (const MappingRow &r : rows) {
    auto it = c.done.find(r.new_name);
    if (it == c.done.end() || keep_bin) csv += r.new_name + "," + r.original_name + "\n";
    if (it != c.done.end())
      csv += it->second + "," +
             (tensor_file_kind(it->second) == TensorFileKind::Npy ? with_npy_suffix(r.original_name)
                                                                  : without_lz4(r.original_name)) +
             "\n";
  }
  format::write_file_atomic(tensor_dir / format::kMappingCsv, csv);
}

void convert_folder(const RankDir &d, const FolderLog &log, bool keep_bin, ConvertTally &t) {
  const std::vector<Job> jobs = plan_folder(d, log, t);
  if (jobs.empty()) return;
  const Converted c = convert_files(d, jobs, log, t);
  if (c.renames.empty()) return;
  const auto [replaced, bak] = rename_in_dump_json(d, c);
  rename_in_mapping_csv(d.path / format::kTensorDir, c, keep_bin);
  if (!keep_bin)
    for (const fs::path &p : c.to_remove) {
      std::error_code ec;
      fs::remove(p, ec);
      if (ec) log.say("cannot remove %s: %s", p.string().c_str(), ec.message().c_str());
    }
  log.say("%zu file(s) converted to npy, dump.json updated (%llu data_name fields; original kept as %s)", c.done.size(),
          static_cast<unsigned long long>(replaced), bak.filename().string().c_str());
}

}  // namespace

int run_convert(std::span<char *const> argv) {
  const DirAndFlag options = parse_dir_and_flag(argv, "--keep-bin");
  const bool keep_bin = options.flag;  // a plain variable: clang 14 cannot capture a structured binding
  const std::vector<RankDir> dirs = find_rank_dirs(options.dir);
  ConvertTally t;
  for_each_folder(dirs, [&](const RankDir &d, const FolderLog &log) { convert_folder(d, log, keep_bin, t); });
  std::printf("convert: %llu converted, %llu already npy, %llu not converted",
              static_cast<unsigned long long>(t.converted), static_cast<unsigned long long>(t.already_npy),
              static_cast<unsigned long long>(t.failed));
  if (t.busy) std::printf(", %llu folder(s) still being written", static_cast<unsigned long long>(t.busy));
  if (t.damaged) std::printf(", %llu folder(s) read in part", static_cast<unsigned long long>(t.damaged));
  std::printf("\n");
  if (t.converted + t.already_npy + t.failed == 0 && !t.busy) {
    std::string tasks;
    for (const std::string &task : t.tasks) tasks += (tasks.empty() ? "" : ", ") + task;
    std::printf(
        "nothing to convert: no tensor of this dump has a file (task %s). convert turns the .bin and .lz4 tensor "
        "files of a tensor-task dump (MSPROBE_TASK=tensor with MSPROBE_FILE_FORMAT=bin or MSPROBE_COMPRESS=lz4) "
        "into .npy\n",
        tasks.empty() ? "?" : tasks.c_str());
  }
  return t.failed || t.busy || t.damaged ? kExitFindings : kExitOk;
}

}  // namespace msprobe::tools
