#include "collector/msprobe_writer.h"

#include <sys/stat.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <chrono>
#include <map>
#include <mutex>
#include <random>
#include <shared_mutex>
#include <thread>
#include <vector>

#include "collector/dump_files.h"
#include "collector/journal.h"
#include "collector/race_journal.h"
#include "collector/report.h"
#include "collector/tensor_view.h"
#include "format/dump_json.h"
#include "format/io.h"
#include "format/lz4.h"
#include "format/naming.h"
#include "format/npy.h"

namespace msprobe::collector {
namespace {

namespace fs = std::filesystem;
using namespace msprobe::format;
using record::CapturedArg;
using record::CapturedList;
using record::KernelCapture;
using record::TensorCapture;

// Creates every missing folder of `p` with msprobe's mode (0750; the umask may only take more away). The user's
// dump root may be a symlink they made, but every folder below `root` (step{N}, rank{R}, dump_tensor_data) must be
// a real directory of this user: a symlink or a folder someone else planted in a shared dump tree is refused, never
// followed, so that nothing is written outside the dump directory.
void make_dir(const fs::path &root, const fs::path &p) {
  size_t root_parts = 0;
  for (const fs::path &part : root) root_parts += !part.empty();
  fs::path partial;
  size_t depth = 0;
  for (const fs::path &part : p) {
    if (part.empty()) continue;
    partial /= part;
    if (::mkdir(partial.c_str(), kDirMode) != 0 && errno != EEXIST)
      throw std::system_error(errno, std::generic_category(), "cannot create " + partial.string());
    if (++depth <= root_parts) continue;
    struct stat st {};
    if (::lstat(partial.c_str(), &st) != 0)
      throw std::system_error(errno, std::generic_category(), "cannot create " + partial.string());
    if (S_ISLNK(st.st_mode))
      throw std::system_error(ELOOP, std::generic_category(), "refusing " + partial.string() + ", a symbolic link");
    if (!S_ISDIR(st.st_mode) || st.st_uid != ::geteuid())
      throw std::system_error(EPERM, std::generic_category(),
                              "refusing " + partial.string() + ", not a directory of this user");
  }
  std::error_code ec;
  if (!fs::is_directory(p, ec)) throw std::system_error(ENOTDIR, std::generic_category(), p.string());
}

// Long names get random file names: one generator per writer thread.
std::mt19937_64 &thread_rng() {
  thread_local std::mt19937_64 rng{std::random_device{}()};
  return rng;
}

// step{N}/rank{R}/: its journals and tensor folder.
struct RankWriter {
  fs::path dir, tensor_dir;
  DumpHeader header;  // as begun: rewritten in place when a folder without a rank is given one
  DumpJsonWriter dump;
  ConstructJsonWriter construct;
  // stack.json: groups in order of first use, each with its kernels in write order.
  std::vector<uint64_t> stack_order;
  std::map<uint64_t, std::vector<std::string>> stack_kernels;
  bool stacks_dirty = true;
  bool tensor_dir_made = false;     // under MsprobeWriter::mu_
  std::atomic<bool> broken{false};  // read by every writer thread
};

// A kernel's folder and its dump.json member, made on a writer thread.
struct Encoded final : EncodedKernel {
  RankWriter *folder = nullptr;
  std::string member;
};

class MsprobeWriter final : public DumpWriter {
 public:
  explicit MsprobeWriter(MsprobeWriterOptions options) : options_(std::move(options)), races_(options_.stacks) {}

  void check_races(PendingKernel &p) override {
    RankWriter &w = folder_for(p.k.step, p.k.rank);
    if (w.broken) return;
    try {
      races_.check(p.k, w.dir);
    } catch (const std::exception &ex) {
      count_error();
      report("cannot write races.json", ex.what());
    }
  }

  void encode(PendingKernel &p) override {
    std::shared_lock<std::shared_mutex> folders_stay(adopting_);  // no folder is renamed under a tensor file's write
    KernelCapture &k = p.k;
    auto e = std::make_unique<Encoded>();
    e->folder = &folder_for(k.step, k.rank);
    if (!p.have_data) {
      std::lock_guard<std::mutex> lk(mu_);
      ++counters_.without_data;
    }
    KernelEntry entry;
    static_cast<KernelHeader &>(entry) = k;
    entry.input_args = convert_all(k.inputs, k.name, IoKind::Input, *e->folder, p.have_data);
    entry.output = convert_all(k.outputs, k.name, IoKind::Output, *e->folder, p.have_data);
    entry.notes = std::move(k.notes);
    entry.launch_extra = std::move(k.launch_extra);
    // Release the staged bytes now, not when the capture object dies later.
    k.inputs.reset();
    k.outputs.reset();
    e->member = kernel_entry_json(entry, options_.framework);
    p.encoded = std::move(e);
  }

  // dump.json first: it is the truth `msprobe-inspect repair` rebuilds construct.json (and trims stack.json) from, so
  // a kill between the two appends loses nothing (tools/reader/repair.h).
  void append(PendingKernel &p) override {
    auto *e = dynamic_cast<Encoded *>(p.encoded.get());
    if (e == nullptr || e->folder->broken) return;
    // The first kernel of a later step: the steps before it are done, their stack.json is brought up to date now (their
    // journals are valid at every moment), so a live run's finished steps can be read whole.
    if (p.k.step > newest_step_) {
      newest_step_ = p.k.step;
      write_stacks_of([&](uint64_t step) { return step < newest_step_; });
    }
    RankWriter &w = *e->folder;
    try {
      w.dump.journal().append(e->member);
      if (options_.journal_gap_us > 0) std::this_thread::sleep_for(std::chrono::microseconds(options_.journal_gap_us));
      w.construct.append(p.k.name);
      {
        std::lock_guard<std::mutex> lk(mu_);
        ++counters_.written;
      }
      const uint64_t group = options_.stacks ? options_.stacks->group(p.k.stack_id) : 0;
      if (group != 0) {
        auto [it, fresh] = w.stack_kernels.try_emplace(group);
        if (fresh) w.stack_order.push_back(group);
        it->second.push_back(p.k.name);
        w.stacks_dirty = true;
      }
    } catch (const std::exception &ex) {
      {
        std::lock_guard<std::mutex> lk(mu_);
        ++counters_.write_errors;
      }
      w.broken = true;
      report("cannot append to dump.json", ex.what());
    }
  }

  // stack.json of every folder whose stacks changed, rewritten whole (write to a temporary, rename). The folders are
  // taken under mu_: a writer thread may be creating one right now, and a folder is listed once folder_for made it.
  void write_stacks() override {
    write_stacks_of([](uint64_t) { return true; });
  }

  // stack.json of the folders whose step `wanted(step)` says.
  template <typename Wanted>
  void write_stacks_of(Wanted &&wanted) {
    std::vector<RankWriter *> folders;
    {
      std::lock_guard<std::mutex> lk(mu_);
      for (auto &[key, w] : folders_)
        if (wanted(key.first)) folders.push_back(&w);
    }
    for (RankWriter *w : folders) {
      if (!w->stacks_dirty || w->broken) continue;
      std::vector<StackGroup> groups;
      for (uint64_t g : w->stack_order) {
        StackGroup sg;
        sg.kernels = w->stack_kernels[g];
        try {
          sg.frames = options_.stacks->frames(g);
        } catch (const std::exception &) {
          sg.frames = {"The call stack retrieval failed."};  // msprobe's own text for this case
        }
        groups.push_back(std::move(sg));
      }
      try {
        write_file_atomic(w->dir / kStackJson, stack_json(groups));
        w->stacks_dirty = false;
      } catch (const std::exception &e) {
        count_error();
        report("cannot write stack.json", e.what());
      }
    }
  }

  void close() override {
    try {
      races_.close();
    } catch (const std::exception &e) {
      report("cannot finish races.json", e.what());
    }
    std::lock_guard<std::mutex> lk(mu_);
    for (auto &[key, w] : folders_) {
      try {
        w.dump.finish();
        w.construct.finish();
      } catch (const std::exception &e) {
        report("cannot finish dump.json", e.what());
      }
    }
    folders_.clear();
  }

  void count(CollectorCounters &c) const override {
    std::lock_guard<std::mutex> lk(mu_);
    c.written += counters_.written;
    c.without_data += counters_.without_data;
    c.tensor_files += counters_.tensor_files;
    c.tensor_bytes += counters_.tensor_bytes;
    c.file_bytes += counters_.file_bytes;
    c.write_errors += counters_.write_errors;
  }

 private:
  void count_error() {
    std::lock_guard<std::mutex> lk(mu_);
    ++counters_.write_errors;
  }

  // The folder of (step, rank), made with its journals on first use. Nodes of the map are stable: threads keep
  // pointers.
  RankWriter &folder_for(uint64_t step, std::optional<uint32_t> rank) {
    std::lock_guard<std::mutex> lk(mu_);
    if (!rank) rank = adopted_;
    auto key = std::make_pair(step, rank ? (int64_t)*rank : -1);
    if (auto it = folders_.find(key); it != folders_.end()) return it->second;
    return new_folder(key, step, rank);
  }
  // The folder's files begun (under mu_), the first time a kernel of that step and rank comes.
  RankWriter &new_folder(std::pair<uint64_t, int64_t> key, uint64_t step, std::optional<uint32_t> rank) {
    RankWriter &w = folders_[key];
    w.dir = options_.dump_path / step_dir_name(step) / rank_dir_name(rank);
    w.tensor_dir = w.dir / kTensorDir;
    try {
      make_dir(options_.dump_path, w.dir);
      DumpHeader h;
      h.task = options_.dump_task;
      h.framework = options_.framework;
      h.host_framework = options_.host_framework;
      h.run_id = options_.run_id;
      h.run_pid = options_.run_pid;
      if (options_.save_tensors) h.dump_data_dir = fs::absolute(w.tensor_dir).string();
      if (!rank && h.dump_data_dir) h.dump_data_dir_pad = kRankDigitsRoom;
      w.header = h;
      w.dump.begin(w.dir / kDumpJson, h);
      w.construct.begin(w.dir / kConstructJson);
    } catch (const std::exception &e) {
      w.broken = true;
      ++counters_.write_errors;
      report("cannot write the dump folder", e.what());
    }
    return w;
  }

  // The folders written without a rank become `rank`'s (step{N}/rank -> step{N}/rank{R}), their headers rewritten in
  // place; a later kernel without a rank goes there too.
  void adopt_rank(uint32_t rank) override {
    std::unique_lock<std::shared_mutex> no_encodes(adopting_);
    std::lock_guard<std::mutex> lk(mu_);
    adopted_ = rank;
    for (auto it = folders_.begin(); it != folders_.end();) {
      if (it->first.second != -1) {
        ++it;
        continue;
      }
      auto node = folders_.extract(it++);  // the writer stays where it is: encoded kernels point at it
      node.key().second = rank;
      move_folder(node.mapped(), rank);
      folders_.insert(std::move(node));
    }
  }

  void move_folder(RankWriter &w, uint32_t rank) {
    const fs::path to = w.dir.parent_path() / rank_dir_name(rank);
    std::error_code ec;
    fs::rename(w.dir, to, ec);
    if (ec) {
      w.broken = true;
      ++counters_.write_errors;
      report("cannot move the folder written without a rank", w.dir.string() + ": " + ec.message());
      return;
    }
    w.dir = to;
    w.tensor_dir = to / kTensorDir;
    if (w.header.dump_data_dir) {
      const size_t grew = fs::absolute(w.tensor_dir).string().size() - w.header.dump_data_dir->size();
      w.header.dump_data_dir = fs::absolute(w.tensor_dir).string();
      w.header.dump_data_dir_pad -= std::min(grew, w.header.dump_data_dir_pad);
    }
    try {
      w.dump.rewrite_header(w.header);
    } catch (const std::exception &e) {
      report("cannot rewrite dump.json's header", e.what());  // only dump_data_dir is stale: msprobe does not read it
    }
  }

  void make_tensor_dir(RankWriter &w) {
    std::lock_guard<std::mutex> lk(mu_);
    if (w.tensor_dir_made) return;
    make_dir(options_.dump_path, w.tensor_dir);
    w.tensor_dir_made = true;
  }

  // One tensor file: header and data leave in one writev() (or one compressed piece per 4 MiB), large sequential
  // writes. Returns its name on disk (data_name).
  std::string write_tensor_file(const TensorCapture &t, const std::string &base, RankWriter &w,
                                const unsigned char *data, uint64_t bytes) {
    make_tensor_dir(w);
    const bool npy = tensor_file_suffix(options_.file_format, t.dtype) == file_suffix(FileFormat::Npy);
    CreatedFile f = create_dump_file(w.tensor_dir, base, thread_rng());
    GatheringFdSink file(f.fd);
    uint64_t content = bytes;
    try {
      auto payload = [&](ByteSink &sink) {
        if (npy)
          content = write_npy(sink, t.dtype, t.shape, data);
        else
          sink.write(data, bytes);
      };
      if (options_.compress == Compression::Lz4) {
        const uint64_t size = npy ? npy_header(t.dtype, t.shape).size() + npy_data_bytes(t.dtype, t.shape) : bytes;
        Lz4FrameSink z(file, size);
        payload(z);
        z.finish();
      } else {
        payload(file);
      }
      file.flush();
    } catch (...) {
      ::close(f.fd);
      throw;
    }
    ::close(f.fd);
    if (f.renamed()) append_mapping_row(w.tensor_dir, f.mapping_row);
    std::lock_guard<std::mutex> lk(mu_);
    ++counters_.tensor_files;
    counters_.tensor_bytes += content;
    counters_.file_bytes += file.bytes_written();
    return f.file_name;
  }

  TensorSummary summarize(const TensorCapture &t, const std::string &kernel, IoKind io, const std::string &path,
                          RankWriter &w, bool have_data) {
    TensorSummary s;
    static_cast<TensorDescription &>(s) = t;
    // Statistics the shim computed on the device stand in for ours; the bytes, if any, still make files/md5.
    std::optional<TensorStats> pre;
    if (have_data && t.device_stats) pre = t.device_stats->stats();
    if (pre) s.stats = *pre;
    if (!have_data || !t.block) return s;
    std::vector<unsigned char> scratch;
    uint64_t bytes = 0;
    const unsigned char *data = materialize(t, scratch, &bytes);
    if (data == nullptr) {
      report("tensor view outside its staged bytes", kernel);
      return s;
    }
    uint64_t count = 1;
    for (int64_t d : t.shape) count *= (uint64_t)(d > 0 ? d : 0);
    if (t.dtype != DType::Raw && !pre) s.stats = compute_stats(t.dtype, data, t.shape, options_.precision);
    if (options_.md5) {
      // msprobe hashes what it saved: bf16 as float32 under MindSpore, the narrow floats as float32 always.
      const bool as_f32 =
          is_narrow_float(t.dtype) || (t.dtype == DType::BF16 && options_.framework == Framework::MindSpore);
      const uint32_t crc = as_f32 ? crc32_update_as_f32(0, t.dtype, data, count) : crc32_update(0, data, bytes);
      s.md5 = crc32_hex(crc);
    }
    if (options_.save_tensors && !w.broken) {
      std::string base = kernel + "." + std::string(io_name(io)) + "." + path + "." +
                         std::string(tensor_file_suffix(options_.file_format, t.dtype));
      if (options_.compress == Compression::Lz4) base += "." + std::string(kLz4Suffix);
      try {
        s.data_name = write_tensor_file(t, base, w, data, bytes);
      } catch (const std::exception &e) {
        count_error();
        report("cannot write a tensor file", e.what());
      }
    }
    return s;
  }

  Arg convert(const CapturedArg &a, const std::string &kernel, IoKind io, const std::string &path, RankWriter &w,
              bool have_data) {
    Arg out;
    if (auto *t = std::get_if<TensorCapture>(&a.v)) {
      out.v = summarize(*t, kernel, io, path, w, have_data);
    } else if (auto *v = std::get_if<ValueArg>(&a.v)) {
      out.v = *v;
    } else if (auto *l = std::get_if<CapturedList>(&a.v)) {
      ArgList list;
      for (size_t i = 0; i < l->size(); ++i)
        list.push_back(convert((*l)[i], kernel, io, path + "." + std::to_string(i), w, have_data));
      out.v = std::move(list);
    }
    return out;
  }

  std::optional<ArgList> convert_all(const std::optional<CapturedList> &args, const std::string &kernel, IoKind io,
                                     RankWriter &w, bool have_data) {
    if (!args) return std::nullopt;
    ArgList out;
    for (size_t i = 0; i < args->size(); ++i)
      out.push_back(convert((*args)[i], kernel, io, std::to_string(i), w, have_data));
    return out;
  }

  const MsprobeWriterOptions options_;
  RaceLog races_;  // check_races and close: in commit order, one at a time
  mutable std::mutex mu_;
  std::map<std::pair<uint64_t, int64_t>, RankWriter> folders_;
  std::optional<uint32_t> adopted_;  // under mu_: the rank of kernels without one (adopt_rank)
  std::shared_mutex adopting_;       // encodes share it; adopt_rank takes it alone
  // Room in a rank-less folder's header for the digits of a rank it may be given (a rank < 10^10).
  static constexpr size_t kRankDigitsRoom = 10;
  uint64_t newest_step_ = 0;    // of the kernels appended (append runs in commit order, one at a time)
  CollectorCounters counters_;  // this writer's part
};

}  // namespace

std::unique_ptr<DumpWriter> msprobe_writer(MsprobeWriterOptions options) {
  return std::make_unique<MsprobeWriter>(std::move(options));
}

}  // namespace msprobe::collector
