// libFuzzer target: the strict .npy reader (format/npy.h parse_npy_header) that msprobe-inspect and the tests
// use on dump_tensor_data files, and the tools' file opener (tools/reader/tensor_data.h) on the same bytes.
#include <unistd.h>

#include <cstdint>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <string_view>
#include <system_error>

#include "format/npy.h"
#include "tools/reader/tensor_data.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  using namespace msprobe;
  const std::string_view bytes(reinterpret_cast<const char *>(data), size);
  try {
    const format::NpyInfo info = format::parse_npy_header(bytes);
    // What a reader relies on: the data starts after the header and its size is the product of the shape.
    if (info.data_offset > bytes.size() || info.data_bytes != info.element_count * info.item_size) std::abort();
  } catch (const format::NpyError &) {
  }
  // The whole file path: open, size check, chunked read, statistics (one file per process, rewritten each run).
  static const struct Scratch {
    std::filesystem::path path =
        std::filesystem::temp_directory_path() / ("fuzz_npy." + std::to_string(::getpid()) + ".npy");
    ~Scratch() {
      std::error_code ec;
      std::filesystem::remove(path, ec);
    }
  } scratch;
  const std::filesystem::path &path = scratch.path;
  {
    std::ofstream out(path, std::ios::binary | std::ios::trunc);
    out.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
  }
  try {
    tools::TensorInfo t;
    t.dtype_text = "Float32";
    t.dtype = format::DType::F32;
    const tools::TensorFile f = tools::open_tensor_file(path, t);
    if (f.data_bytes <= (uint64_t{1} << 20)) {
      (void)tools::recompute(f, f.file_dtype, f.shape.empty(), format::Framework::MindSpore);
    }
  } catch (const tools::TensorFileError &) {
  } catch (const format::NpyError &) {
  }
  return 0;
}
