// The stand-in's data dump (adump: inside libascendcl.so of CANN 8.x, libascend_dump.so of 9.x, src/ascend_dump/): the
// config of aclmdlSetDump (dump_config.cpp), the device-side producer of dump files (dump_file.cpp), and the record
// thread that delivers their chunks to the acldumpRegCallback callback or to disk (dump_server.cpp). What the ACL
// runtime (libacl_rt.so of 9.x) and the model API (libacl_mdl.so) call is exported (FAKECANN_API). Facts:
// shared/reference/cann_dump.md.
#pragma once
#include <cstdint>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "acl/acl_base.h"
#include "acl/acl_dump.h"
#include "fakecann/export.h"

namespace fakecann::dump {

// Bits of the statistic items (adump's statItem, cann_dump.md §3.6).
enum StatItem : uint64_t {
  kMax = 1u << 0,
  kMin = 1u << 1,
  kAvg = 1u << 2,
  kNan = 1u << 3,
  kNegInf = 1u << 4,
  kPosInf = 1u << 5,
  kL2norm = 1u << 6,
};
inline constexpr uint64_t kCompatibleStats = kMax | kMin | kAvg | kNan | kNegInf | kPosInf;

struct ListItem {
  bool has_model = false;
  std::string model_name;
  bool has_layers = false;
  std::vector<std::string> layers;
};

struct FAKECANN_API Config {
  std::string path;                     // dump_path as given
  bool inputs = false, outputs = true;  // dump_mode (default output)
  bool op_switch = false;
  bool level_op = true, level_kernel = true;  // dump_level (default all): single-op dumps of the API, its kernels
  bool stats = false;  // dump_data
  uint64_t stat_items = kCompatibleStats;
  std::vector<ListItem> list;
  std::vector<std::pair<uint64_t, uint64_t>> steps;  // dump_step ranges; empty = every step
  std::string time_dir;                              // YYYYMMDDhhmmss (local) of the SetDump call

  // Model kernels are dumped when dump_list selects them, or with an empty dump_list when dump_op_switch is on
  // (what msprobe's graph-mode config relies on).
  bool model_dump() const { return !list.empty() || op_switch; }
  bool selects(const std::string &model, const std::string &alt_model, const std::string &op) const;
  bool step_selected(uint64_t step) const;
};

// Reads and validates a dump config file as aclmdlSetDump does. ACL_SUCCESS with *out empty (nullptr) when the
// file configures nothing; else ACL_ERROR_INVALID_FILE / ACL_ERROR_PARSE_FILE / ACL_ERROR_INVALID_DUMP_CONFIG.
FAKECANN_API aclError load_config(const char *path, std::shared_ptr<const Config> *out, std::string *why);

// The config in force (set by aclmdlSetDump, cleared by aclmdlFinalizeDump), or nullptr.
FAKECANN_API std::shared_ptr<const Config> active_config();
FAKECANN_API void set_active_config(std::shared_ptr<const Config> c);
// acldumpGetPath's answer from now on (the ACL runtime's aclmdlSetDump or aclInit put a config in force).
FAKECANN_API void note_dump_path(const std::string &path);

// ---- the record server: one thread, one queue of chunks ----

// Starts the record thread (aclmdlInitDump); captures the cwd for relative file names.
FAKECANN_API void server_start();
// Stops accepting chunks and returns once every queued chunk was delivered (aclmdlFinalizeDump).
FAKECANN_API void server_stop();
// Largest chunk payload: 128 MiB, or FAKE_CANN_DUMP_CHUNK_BYTES (a stand-in test knob).
uint64_t chunk_limit();
// acldumpRegCallback: false (and ignored) when a callback is already registered. Unregister: false if none was.
using DumpCallback = int32_t (*)(const acldumpChunk *, int32_t);
bool register_callback(DumpCallback cb);
bool unregister_callback();
// Queues one chunk; blocks while the queue is full. False (chunk dropped) when no server runs.
bool push_chunk(const std::string &file, std::vector<uint8_t> data, bool last);

// ---- the device-side producer ----

struct Tensor {
  aclDataType dtype;
  aclFormat format;
  std::vector<int64_t> shape;
  const void *device;  // device address
  uint64_t bytes;
};

struct Kernel {
  std::string op_type, op_name;
  uint32_t task_id = 0;
  int32_t stream_id = 0;
  std::vector<Tensor> inputs, outputs;
};

// The host-side message describing a kernel's dump task (adump's OpMappingInfo): the stand-in serializes the
// kernel's DumpData header, which is what the dump kernel needs to know.
std::vector<uint8_t> op_mapping_info(const Kernel &k);

// Runs on a stream worker after the kernel: produces the kernel's dump file (tensor mode: u64 header length +
// DumpData + tensor bytes; stats mode: OpStatsResult records) under `dir` and queues it as chunks.
FAKECANN_API void dump_kernel(const Config &c, const std::string &dir, const Kernel &k);

// adump's binary statistics record (OpStatsResult, cann_dump.md §3.6): the device writes one per <= 10 tensors as a
// `.bin` chunk of exactly this size, the record thread turns it into CSV text.
struct TensorStatsResult {
  int64_t size;
  int32_t dType;   // OutputDataType (proto numbering)
  int32_t format;  // OutputFormat
  int32_t shapeSize;
  uint32_t shape[25];
  uint32_t result;  // 0 ok, 1 failed
  int32_t statsLen;
  int64_t stats[64];  // slot k: the k-th item of Max, Min, Avg, Nan, NegInf, PosInf, L2norm
  int32_t io;         // 0 input, 1 output
  int32_t index;
};
inline constexpr int kMaxStatsResultNum = 10;
struct OpStatsResult {
  int32_t tensorNum;
  int32_t res;
  uint64_t statItem;
  TensorStatsResult stat[kMaxStatsResultNum];
};

// aclDataType -> the dump proto's OutputDataType (a different numbering: ACL_FLOAT 0 is DT_FLOAT 1), and its name.
int proto_dtype(aclDataType t);
const char *proto_dtype_name(int proto);
// aclFormat -> OutputFormat (shared numbers for the formats ACL has), and its name without "FORMAT_".
int proto_format(aclFormat f);
const char *proto_format_name(int proto);

// The CSV text of one record, with the header line when `header`.
std::string stats_csv(const OpStatsResult &r, bool header);

// aclInit done and not finalized (acl_rt/acl_init.cpp).
bool acl_initialized();
// aclInit's dump (acl_rt/dump_switches.cpp): a non-empty config file starts the server and applies its "dump" section;
// the error code of aclInit. release_init_dump: aclFinalize stops the server aclInit started.
aclError apply_init_dump(const char *configPath);
void release_init_dump();

// `name` with ' ', '.', '/', '\' replaced by '_' (file name fields).
std::string sanitize(const std::string &name);

}  // namespace fakecann::dump
