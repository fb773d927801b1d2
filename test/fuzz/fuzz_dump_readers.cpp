// libFuzzer target: the readers msprobe-inspect runs on a dump it did not write (tools/reader): dump.json streamed
// kernel by kernel and record by record, construct.json, mapping.csv, and the journal repair of a cut
// dump.json / construct.json. The first byte picks the reader; a reader may refuse the input with its documented
// exception, nothing else.
#include <unistd.h>

#include <cstdint>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <string_view>
#include <system_error>

#include "tools/reader/dump_reader.h"
#include "tools/reader/json_reader.h"
#include "tools/reader/repair.h"

namespace {

namespace fs = std::filesystem;

// One folder per process for the readers that take a path, removed at exit.
const fs::path &scratch_dir() {
  static const struct Scratch {
    fs::path dir = fs::temp_directory_path() / ("fuzz_dump_readers." + std::to_string(::getpid()));
    Scratch() { fs::create_directories(dir); }
    ~Scratch() {
      std::error_code ec;
      fs::remove_all(dir, ec);
    }
  } scratch;
  return scratch.dir;
}

void write_file(const fs::path &path, std::string_view bytes) {
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
}

void dump_json(std::string_view text) {
  using namespace msprobe::tools;
  DumpHeaderRead header;
  DumpCallbacks by_entry;
  by_entry.on_header = [&](const DumpHeaderRead &h) { header = h; };
  by_entry.on_kernel = [&](EntryRead &&k) {
    for (const TensorInfo &t : entry_tensors(k.entry, header)) {
      (void)t.element_count();
      (void)t.row_suffix();
      for (const auto &s : t.stats) (void)stat_text(s);
    }
    // Non-tensor arguments, sequences in the new form (lists of scalar leaves) and the old (a list value).
    if (auto it = k.entry.find("input_args"); it != k.entry.end() && it->is_array())
      for (const Json &a : *it)
        if (auto v = read_value_arg(a)) (void)to_json_text(Json(v->values));
    (void)op_type_of(k.name);
    return true;
  };
  DumpCallbacks by_record;
  by_record.on_record = [](KernelRecord &&r) { return !r.name.empty() || r.tensors.size() < 1000000; };
  try {
    (void)stream_dump_json(text, by_entry);
  } catch (const JsonError &) {
  } catch (const InputError &) {
  }
  try {
    (void)stream_dump_json(text, by_record);
  } catch (const JsonError &) {
  } catch (const InputError &) {
  }
  std::string why;
  if (is_valid_json(text, &why)) {
    Json j = parse_json(text);
    (void)to_json_text(j);
  } else if (why.empty()) {
    std::abort();
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  using namespace msprobe::tools;
  if (size == 0) return 0;
  const std::string_view text(reinterpret_cast<const char *>(data) + 1, size - 1);
  switch (data[0] % 4) {
    case 0: dump_json(text); break;
    case 1: {
      const fs::path path = scratch_dir() / "construct.json";
      write_file(path, text);
      try {
        (void)read_construct_names(path);
      } catch (const JsonError &) {
      } catch (const InputError &) {
      } catch (const std::system_error &) {
      }
      break;
    }
    case 2: {
      write_file(scratch_dir() / "mapping.csv", text);
      for (const MappingRow &r : read_mapping_csv(scratch_dir()))
        if (r.line == 0) std::abort();
      break;
    }
    case 3:
      for (JournalKind kind : {JournalKind::DumpJson, JournalKind::ConstructJson}) {
        const JournalRepair r = repair_journal(text, kind);
        // A repaired file is valid JSON, or the repair says it is not recoverable.
        if (r.state == JournalRepair::State::Repaired && !is_valid_json(r.text)) std::abort();
        if (r.state == JournalRepair::State::Unrecoverable && r.error.empty()) std::abort();
      }
      break;
  }
  return 0;
}
