#include "collector/collector.h"

#include <fcntl.h>
#include <signal.h>
#include <sys/stat.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <chrono>
#include <condition_variable>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <deque>
#include <functional>
#include <map>
#include <mutex>
#include <random>
#include <thread>

#include "collector/dump_files.h"
#include "collector/journal.h"
#include "format/dump_json.h"
#include "format/io.h"
#include "format/lz4.h"
#include "format/naming.h"
#include "format/npy.h"

namespace msprobe::collector {
namespace {

namespace fs = std::filesystem;

// One line per problem on stderr; a problem that repeats (a full disk fails every later write) is shown
// three times, then once more to say the rest are not shown. The counters keep the full count.
void report(const char *what, const std::string &detail) {
  static std::mutex mu;
  static auto *seen = new std::map<std::string, int>;
  int n;
  {
    std::lock_guard<std::mutex> lk(mu);
    n = ++(*seen)[what];
  }
  if (n <= 3)
    std::fprintf(stderr, "msprobe-shim: %s: %s\n", what, detail.c_str());
  else if (n == 4)
    std::fprintf(stderr, "msprobe-shim: %s: further occurrences are not shown\n", what);
}

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

// The logical view of a tensor as contiguous bytes: a pointer into the block when the view is already
// contiguous, else a gathered copy in `scratch`. nullptr when the view does not fit in its block.
const unsigned char *materialize(const TensorCapture &t, std::vector<unsigned char> &scratch, uint64_t *bytes) {
  const size_t es = element_size(t.dtype);
  uint64_t n = 1;
  for (int64_t d : t.shape) n *= (uint64_t)(d > 0 ? d : 0);
  *bytes = n * es;
  if (!t.block) return nullptr;
  const auto *base = static_cast<const unsigned char *>(t.block->data());
  if (base == nullptr) return nullptr;  // the producer could not give the bytes back
  if (n == 0) return base;
  int64_t lo = t.block_offset, hi = t.block_offset;
  bool contiguous = true;
  int64_t expect = 1;
  for (size_t i = t.shape.size(); i-- > 0;) {
    int64_t span = (t.shape[i] - 1) * t.block_strides[i];
    (span > 0 ? hi : lo) += span;
    if (t.shape[i] != 1 && t.block_strides[i] != expect) contiguous = false;
    expect *= t.shape[i];
  }
  if (lo < 0 || (uint64_t)(hi + 1) * es > t.block->size()) return nullptr;
  if (contiguous) return base + t.block_offset * es;
  scratch.resize(*bytes);
  const size_t nd = t.shape.size();
  std::vector<int64_t> idx(nd, 0);
  int64_t off = t.block_offset;
  for (uint64_t i = 0; i < n; ++i) {
    std::memcpy(scratch.data() + i * es, base + off * es, es);
    for (size_t d = nd; d-- > 0;) {
      if (++idx[d] < t.shape[d]) {
        off += t.block_strides[d];
        break;
      }
      off -= t.block_strides[d] * (t.shape[d] - 1);
      idx[d] = 0;
    }
  }
  return scratch.data();
}

// step{N}/rank{R}/: its journals and tensor folder.
struct RankWriter {
  fs::path dir, tensor_dir;
  DumpJsonWriter dump;
  ConstructJsonWriter construct;
  // stack.json: groups in order of first use, each with its kernels in write order.
  std::vector<uint64_t> stack_order;
  std::map<uint64_t, std::vector<std::string>> stack_kernels;
  bool stacks_dirty = true;
  bool tensor_dir_made = false;     // under Impl::mu
  std::atomic<bool> broken{false};  // read by every writer thread
};

// One kernel between a writer thread and its turn to be appended: what the thread prepared (statistics
// computed, files written, entry serialized) waits here until every kernel submitted before it is appended.
struct Prepared {
  KernelCapture k;  // the capture; its staged bytes are already released unless `deferred`
  RankWriter *w = nullptr;
  std::string member;  // the dump.json member, serialized by the writer thread
  bool have_data = true;
  bool skip = false;      // nothing to append (the kernel could not be prepared)
  bool deferred = false;  // overflow_check, flight: whether it is written depends on the kernels before it
  std::string overflow;   // overflow_check, flight: the NaN/Inf found in its outputs
};

// Every tensor of an argument list, lists included.
template <typename F>
void for_each_tensor(std::optional<CapturedList> &args, F &&f) {
  if (!args) return;
  std::function<void(CapturedArg &)> visit = [&](CapturedArg &a) {
    if (auto *t = std::get_if<TensorCapture>(&a.v)) f(*t);
    if (auto *l = std::get_if<CapturedList>(&a.v))
      for (CapturedArg &x : *l) visit(x);
  };
  for (CapturedArg &a : *args) visit(a);
}

}  // namespace

struct Collector::Impl {
  std::atomic<bool> overflow_limit_reached{false};  // read on launching threads, without the lock
  CollectorOptions options;
  mutable std::mutex mu;
  std::condition_variable work_cv, done_cv;
  std::deque<std::pair<uint64_t, KernelCapture>> queue;  // (submission number, kernel)
  uint64_t submitted = 0, finished = 0;
  bool stopping = false, closed = false;
  std::vector<std::thread> workers;
  CollectorCounters counters;
  std::map<std::pair<uint64_t, int64_t>, RankWriter> writers;  // nodes are stable: threads keep pointers
  // Appends happen one at a time and in submission order (journals are not thread-safe, and a journal on disk
  // must be a prefix of the truth): a kernel prepared early waits in `ready` for the ones before it.
  std::mutex write_mu;
  uint64_t next_commit = 0;  // under write_mu
  // flight: the clean kernels kept, oldest first. Its own lock: the producer lets the oldest go (drop_oldest_kept)
  // while a flight record is being written under write_mu.
  std::mutex kept_mu;
  std::deque<Prepared> kept;
  std::map<uint64_t, Prepared> ready;  // under write_mu
  // Test seam (test/integration/crash/kill_stress.py): SHIM_TEST_JOURNAL_GAP_US widens the moment between a kernel's
  // dump.json and construct.json appends, so that random SIGKILLs land in it. Read once, at construction.
  long journal_gap_us = 0;

  // Caller holds mu.
  RankWriter &writer_for(uint64_t step, std::optional<uint32_t> rank) {
    auto key = std::make_pair(step, rank ? (int64_t)*rank : -1);
    auto it = writers.find(key);
    if (it != writers.end()) return it->second;
    RankWriter &w = writers[key];
    w.dir = options.dump_path / step_dir_name(step) / rank_dir_name(rank);
    w.tensor_dir = w.dir / kTensorDir;
    try {
      make_dir(options.dump_path, w.dir);
      DumpHeader h;
      h.task = dump_task(options.task);
      h.framework = options.framework;
      h.host_framework = options.host_framework;
      if (options.save_tensors) h.dump_data_dir = fs::absolute(w.tensor_dir).string();
      w.dump.begin(w.dir / kDumpJson, h);
      w.construct.begin(w.dir / kConstructJson);
    } catch (const std::exception &e) {
      w.broken = true;
      ++counters.write_errors;
      report("cannot write the dump folder", e.what());
    }
    return w;
  }

  RankWriter &locked_writer_for(uint64_t step, std::optional<uint32_t> rank) {
    std::lock_guard<std::mutex> lk(mu);
    return writer_for(step, rank);
  }

  void make_tensor_dir(RankWriter &w) {
    std::lock_guard<std::mutex> lk(mu);
    if (w.tensor_dir_made) return;
    make_dir(options.dump_path, w.tensor_dir);
    w.tensor_dir_made = true;
  }

  // Caller holds mu.
  void start_workers() {
    if (!workers.empty()) return;
    unsigned n = options.writer_threads;
    if (n == 0) n = std::min(4u, std::max(1u, std::thread::hardware_concurrency()));
    // Writer threads must never take the host's signals.
    sigset_t all, old;
    sigfillset(&all);
    pthread_sigmask(SIG_SETMASK, &all, &old);
    for (unsigned i = 0; i < n; ++i) {
      try {
        workers.emplace_back([this] { run(); });
      } catch (const std::system_error &e) {
        if (workers.empty()) report("cannot start a writer thread", e.what());
        break;  // fewer threads, still correct
      }
    }
    pthread_sigmask(SIG_SETMASK, &old, nullptr);
  }

  void run() {
    std::mt19937_64 rng{std::random_device{}()};  // per thread: long names get random file names
    for (;;) {
      uint64_t seq;
      KernelCapture k;
      {
        std::unique_lock<std::mutex> lk(mu);
        work_cv.wait(lk, [this] { return stopping || !queue.empty(); });
        if (queue.empty()) return;
        seq = queue.front().first;
        k = std::move(queue.front().second);
        queue.pop_front();
      }
      Prepared p;
      try {
        p = prepare(std::move(k), rng);
      } catch (const std::exception &e) {
        p.skip = true;
        report("cannot record a kernel", e.what());
      } catch (...) {
        p.skip = true;
      }
      commit(seq, std::move(p), rng);
    }
  }

  TensorSummary summarize(const TensorCapture &t, const std::string &kernel, IoKind io, const std::string &path,
                          RankWriter &w, bool have_data, std::mt19937_64 &rng) {
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
    uint64_t count = bytes / element_size(t.dtype);
    if (t.dtype != DType::Raw && !pre) s.stats = compute_stats(t.dtype, data, t.shape, options.precision);
    if (options.md5) {
      uint32_t crc = (t.dtype == DType::BF16 && options.framework == Framework::MindSpore)
                         ? crc32_update_bf16_as_f32(0, reinterpret_cast<const uint16_t *>(data), count)
                         : crc32_update(0, data, bytes);
      s.md5 = crc32_hex(crc);
    }
    if (options.save_tensors && !w.broken) {
      try {
        make_tensor_dir(w);
        const std::string suffix(tensor_file_suffix(options.file_format, t.dtype));
        const bool npy = suffix == file_suffix(FileFormat::Npy);
        std::string base = kernel + "." + std::string(io_name(io)) + "." + path + "." + suffix;
        if (options.compress == Compression::Lz4) base += "." + std::string(kLz4Suffix);
        CreatedFile f = create_dump_file(w.tensor_dir, base, rng);
        // Header and data leave in one writev() (or one compressed piece per 4 MiB): large sequential writes.
        GatheringFdSink file(f.fd);
        uint64_t content = bytes;
        try {
          auto payload = [&](ByteSink &sink) {
            if (npy)
              content = write_npy(sink, t.dtype, t.shape, data);
            else
              sink.write(data, bytes);
          };
          if (options.compress == Compression::Lz4) {
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
        s.data_name = f.file_name;
        std::lock_guard<std::mutex> lk(mu);
        ++counters.tensor_files;
        counters.tensor_bytes += content;
        counters.file_bytes += file.bytes_written();
      } catch (const std::exception &e) {
        {
          std::lock_guard<std::mutex> lk(mu);
          ++counters.write_errors;
        }
        report("cannot write a tensor file", e.what());
      }
    }
    return s;
  }

  Arg convert(const CapturedArg &a, const std::string &kernel, IoKind io, const std::string &path, RankWriter &w,
              bool have_data, std::mt19937_64 &rng) {
    Arg out;
    if (auto *t = std::get_if<TensorCapture>(&a.v)) {
      out.v = summarize(*t, kernel, io, path, w, have_data, rng);
    } else if (auto *v = std::get_if<ValueArg>(&a.v)) {
      out.v = *v;
    } else if (auto *l = std::get_if<CapturedList>(&a.v)) {
      ArgList list;
      for (size_t i = 0; i < l->size(); ++i)
        list.push_back(convert((*l)[i], kernel, io, path + "." + std::to_string(i), w, have_data, rng));
      out.v = std::move(list);
    }
    return out;
  }

  std::optional<ArgList> convert_all(const std::optional<CapturedList> &args, const std::string &kernel, IoKind io,
                                     RankWriter &w, bool have_data, std::mt19937_64 &rng) {
    if (!args) return std::nullopt;
    ArgList out;
    for (size_t i = 0; i < args->size(); ++i)
      out.push_back(convert((*args)[i], kernel, io, std::to_string(i), w, have_data, rng));
    return out;
  }

  // stack.json of every folder whose stacks changed, rewritten whole (write to a temporary, rename).
  // Caller holds write_mu (stack_kernels and stacks_dirty change only under it). The folders are taken under mu:
  // a worker may be creating one right now, and a folder is only listed once writer_for has made it.
  void write_stacks() {
    std::vector<RankWriter *> folders;
    {
      std::lock_guard<std::mutex> lk(mu);
      for (auto &[key, w] : writers) folders.push_back(&w);
    }
    for (RankWriter *folder : folders) {
      RankWriter &w = *folder;
      if (!w.stacks_dirty || w.broken) continue;
      std::vector<StackGroup> groups;
      for (uint64_t g : w.stack_order) {
        StackGroup sg;
        sg.kernels = w.stack_kernels[g];
        try {
          sg.frames = options.stacks->frames(g);
        } catch (const std::exception &e) {
          sg.frames = {"The call stack retrieval failed."};  // msprobe's own text for this case
        }
        groups.push_back(std::move(sg));
      }
      try {
        write_file_atomic(w.dir / kStackJson, stack_json(groups));
        w.stacks_dirty = false;
      } catch (const std::exception &e) {
        {
          std::lock_guard<std::mutex> lk(mu);
          ++counters.write_errors;
        }
        report("cannot write stack.json", e.what());
      }
    }
  }

  // The NaN/Inf in a kernel's outputs ("output.0: 3 NaN, 1 +Inf"), empty when there is none.
  std::string overflow_in(const KernelCapture &k) {
    std::string found;
    std::function<void(const CapturedArg &, const std::string &)> visit = [&](const CapturedArg &a,
                                                                              const std::string &path) {
      if (auto *l = std::get_if<CapturedList>(&a.v)) {
        for (size_t i = 0; i < l->size(); ++i) visit((*l)[i], path + "." + std::to_string(i));
        return;
      }
      const auto *t = std::get_if<TensorCapture>(&a.v);
      if (!t || !is_floating(t->dtype)) return;
      std::optional<TensorStats> pre = t->device_stats ? t->device_stats->stats() : std::nullopt;
      if (!pre && !t->block) return;
      std::vector<unsigned char> scratch;
      uint64_t bytes = 0;
      const unsigned char *data = pre ? nullptr : materialize(*t, scratch, &bytes);
      if (!pre && !data) return;
      TensorStats st = pre ? *pre : compute_stats(t->dtype, data, t->shape, options.precision);
      if (!st.has_nan_or_inf()) return;
      if (!found.empty()) found += "; ";
      found += "output" + path + ": ";
      if (st.counts_exact) {
        found += std::to_string(st.nan_count) + " NaN, " + std::to_string(st.pos_inf_count) + " +Inf, " +
                 std::to_string(st.neg_inf_count) + " -Inf";
        return;
      }
      // Only the device's extremes were taken (a flight tensor kept as statistics only): which kinds, not how many.
      std::string kinds;
      for (auto [n, kind] : {std::pair{st.nan_count, "NaN"}, {st.pos_inf_count, "+Inf"}, {st.neg_inf_count, "-Inf"}})
        if (n) kinds += (kinds.empty() ? "" : ", ") + std::string(kind);
      found += kinds + " (not counted)";
    };
    if (k.outputs)
      for (size_t i = 0; i < k.outputs->size(); ++i) visit((*k.outputs)[i], "." + std::to_string(i));
    return found;
  }

  // Statistics, tensor files and the serialized entry of one kernel; its staged bytes are released.
  std::string build_member(KernelCapture &k, RankWriter &w, bool have_data, const std::string &overflow,
                           std::mt19937_64 &rng) {
    if (!have_data) {
      std::lock_guard<std::mutex> lk(mu);
      ++counters.without_data;
    }
    KernelEntry e;
    static_cast<KernelHeader &>(e) = k;
    e.input_args = convert_all(k.inputs, k.name, IoKind::Input, w, have_data, rng);
    e.output = convert_all(k.outputs, k.name, IoKind::Output, w, have_data, rng);
    e.notes = std::move(k.notes);
    e.launch_extra = std::move(k.launch_extra);
    if (!overflow.empty()) e.notes.emplace_back(json_key::kOverflow, overflow);
    // Release the staged bytes now, not when the capture object dies later.
    k.inputs.reset();
    k.outputs.reset();
    return kernel_entry_json(e, options.framework);
  }

  // On a writer thread, in parallel with the others.
  Prepared prepare(KernelCapture &&k, std::mt19937_64 &rng) {
    Prepared p;
    try {
      if (k.ready) p.have_data = k.ready->wait();
    } catch (...) {
      p.have_data = false;
    }
    k.ready.reset();
    if (options.overflow_only || options.flight) {
      // Which overflowing kernels are written (the first N) depends on the order: decided at commit time.
      if (p.have_data) p.overflow = overflow_in(k);
      p.deferred = true;
      // A kept tensor's statistics are computed from its bytes if it is ever written: the device's results (and the
      // pinned memory they came back in) need not stay for as long as the ring keeps the kernel.
      if (options.flight)
        for (auto *args : {&k.inputs, &k.outputs})
          for_each_tensor(*args, [](TensorCapture &t) {
            if (t.block) t.device_stats.reset();
          });
    } else {
      p.w = &locked_writer_for(k.step, k.rank);
      p.member = build_member(k, *p.w, p.have_data, "", rng);
    }
    p.k = std::move(k);
    return p;
  }

  // Appends prepared kernels in submission order; the thread that completes the next one appends every
  // consecutive one that is ready.
  void commit(uint64_t seq, Prepared &&p, std::mt19937_64 &rng) {
    uint64_t appended = 0;
    {
      std::lock_guard<std::mutex> wl(write_mu);
      ready.emplace(seq, std::move(p));
      {
        std::lock_guard<std::mutex> lk(mu);
        counters.reorder_high_water = std::max<uint64_t>(counters.reorder_high_water, ready.size() - 1);
      }
      while (!ready.empty() && ready.begin()->first == next_commit) {
        Prepared q = std::move(ready.begin()->second);
        ready.erase(ready.begin());
        try {
          append(q, rng);
        } catch (const std::exception &e) {
          report("cannot record a kernel", e.what());
        } catch (...) {
        }
        ++next_commit;
        ++appended;
      }
    }
    if (appended == 0) return;
    std::lock_guard<std::mutex> lk(mu);
    finished += appended;
    done_cv.notify_all();
  }

  // Caller holds write_mu.
  void append(Prepared &q, std::mt19937_64 &rng) {
    if (q.skip) return;
    if (q.deferred && options.flight) return append_flight(q, rng);
    if (q.deferred) {
      if (!q.have_data || q.overflow.empty()) return;  // a clean kernel: nothing to write
      if (!count_overflow()) return;
      // Every one on stderr: they are the findings.
      std::fprintf(stderr, "msprobe-shim: overflow: %s\n", where(q.k, q.overflow).c_str());
      q.w = &locked_writer_for(q.k.step, q.k.rank);
      q.member = build_member(q.k, *q.w, q.have_data, q.overflow, rng);
    }
    append_journal(q);
  }

  // One more overflow found: false when the limit had been reached before it. Caller holds write_mu.
  bool count_overflow() {
    std::lock_guard<std::mutex> lk(mu);
    if (options.overflow_limit >= 0 && counters.overflows >= (uint64_t)options.overflow_limit) return false;
    ++counters.overflows;
    if (options.overflow_limit >= 0 && counters.overflows >= (uint64_t)options.overflow_limit)
      overflow_limit_reached.store(true, std::memory_order_relaxed);
    return true;
  }

  // "Muls.x.0 (step 1, rank0, launch 12): output.0: ...; launched at f <- g <- h".
  std::string where(const KernelCapture &k, const std::string &overflow) {
    std::string w = k.name + " (step " + std::to_string(k.step) + ", " + rank_dir_name(k.rank) + ", launch " +
                    std::to_string(k.launch_index) + "): " + overflow;
    // The innermost frames say where it came from (the whole stack is in stack.json).
    if (uint64_t g = options.stacks ? options.stacks->group(k.stack_id) : 0; g != 0) {
      std::vector<std::string> frames = options.stacks->frames(g);
      w += "; launched at ";
      for (size_t i = 0; i < frames.size() && i < 3; ++i) w += (i ? " <- " : "") + frames[i];
    }
    return w;
  }

  // flight, in submission order: a clean kernel is kept, one with NaN/Inf is written with the kept ones before it.
  void append_flight(Prepared &q, std::mt19937_64 &rng) {
    if (overflow_limit_reached.load(std::memory_order_relaxed)) return;  // the records asked for are written
    if (q.overflow.empty()) return keep(std::move(q));
    if (!count_overflow()) return;
    // The check may have read the device's extremes only; the record says how many, from the bytes.
    if (std::string exact = overflow_in(q.k); !exact.empty()) q.overflow = std::move(exact);
    std::deque<Prepared> record = take_kept();
    std::fprintf(stderr, "msprobe-shim: flight record: overflow: %s; written with the %zu kernels before it\n",
                 where(q.k, q.overflow).c_str(), record.size());
    const std::string trigger_kernel = q.k.name;
    record.push_back(std::move(q));
    write_record(record, "overflow", trigger_kernel, rng);
    if (overflow_limit_reached.load(std::memory_order_relaxed)) take_kept();  // nothing more will be written
  }

  void keep(Prepared &&q) {
    std::deque<Prepared> dropped;  // let go outside the lock: their bytes go back to the producer
    std::lock_guard<std::mutex> lk(kept_mu);
    kept.push_back(std::move(q));
    while (kept.size() > options.flight_kernels) {
      dropped.push_back(std::move(kept.front()));
      kept.pop_front();
    }
    std::lock_guard<std::mutex> lk2(mu);
    counters.kept_high_water = std::max<uint64_t>(counters.kept_high_water, kept.size());
  }

  std::deque<Prepared> take_kept() {
    std::lock_guard<std::mutex> lk(kept_mu);
    return std::exchange(kept, {});
  }

  // A flight record, oldest first: each kernel is written as the tensor task writes it, marked with the trigger.
  // Caller holds write_mu.
  void write_record(std::deque<Prepared> &record, const std::string &trigger, const std::string &trigger_kernel,
                    std::mt19937_64 &rng) {
    while (!record.empty()) {
      Prepared r = std::move(record.front());
      record.pop_front();
      r.k.notes.emplace_back(json_key::kFlightTrigger, trigger);
      if (!trigger_kernel.empty()) r.k.notes.emplace_back(json_key::kFlightTriggerKernel, trigger_kernel);
      r.w = &locked_writer_for(r.k.step, r.k.rank);
      r.member = build_member(r.k, *r.w, r.have_data, r.overflow, rng);
      append_journal(r);
    }
  }

  // Appends a prepared kernel's member to its folder's journals. Caller holds write_mu.
  void append_journal(Prepared &q) {
    KernelCapture &k = q.k;
    RankWriter *w = q.w;
    if (w->broken) return;
    try {
      // dump.json first: it is the truth `msprobe-inspect repair` rebuilds construct.json (and trims stack.json)
      // from, so a kill between the two appends loses nothing (tools/reader/repair.h).
      w->dump.journal().append(q.member);
      if (journal_gap_us > 0) std::this_thread::sleep_for(std::chrono::microseconds(journal_gap_us));
      w->construct.append(k.name);
      {
        std::lock_guard<std::mutex> lk(mu);
        ++counters.written;
      }
      uint64_t group = options.stacks ? options.stacks->group(k.stack_id) : 0;
      if (group != 0) {
        auto [it, fresh] = w->stack_kernels.try_emplace(group);
        if (fresh) w->stack_order.push_back(group);
        it->second.push_back(k.name);
        w->stacks_dirty = true;
      }
    } catch (const std::exception &ex) {
      {
        std::lock_guard<std::mutex> lk(mu);
        ++counters.write_errors;
      }
      w->broken = true;
      report("cannot append to dump.json", ex.what());
    }
  }
};

Collector::Collector(CollectorOptions options) : impl_(std::make_unique<Impl>()) {
  impl_->options = std::move(options);
  impl_->overflow_limit_reached.store(impl_->options.overflow_limit == 0);
  if (const char *gap = std::getenv("SHIM_TEST_JOURNAL_GAP_US")) impl_->journal_gap_us = std::strtol(gap, nullptr, 10);
}

Collector::~Collector() { close(); }

void Collector::submit(KernelCapture kernel) {
  Impl &m = *impl_;
  {
    std::lock_guard<std::mutex> lk(m.mu);
    ++m.counters.submitted;
    if (!m.closed) {
      m.start_workers();
      m.queue.emplace_back(m.submitted, std::move(kernel));
      ++m.submitted;
      m.work_cv.notify_one();
      return;
    }
  }
  // After close (kernels launched while the process tears down, after our exit handler): the files are
  // complete and closed, so the kernel is counted and reported, never written over them.
  std::lock_guard<std::mutex> lk(m.mu);
  if (m.counters.after_close++ == 0) report("kernel launched after the dump was closed, not recorded", kernel.name);
}

void Collector::flush() {
  Impl &m = *impl_;
  {
    std::unique_lock<std::mutex> lk(m.mu);
    uint64_t target = m.submitted;
    m.done_cv.wait(lk, [&] { return m.finished >= target; });
  }
  std::lock_guard<std::mutex> wl(m.write_mu);
  m.write_stacks();
}

void Collector::close(bool join_writers) {
  Impl &m = *impl_;
  flush();
  {
    std::lock_guard<std::mutex> lk(m.mu);
    if (m.closed) return;
    m.closed = true;
    m.stopping = true;
  }
  m.work_cv.notify_all();
  for (std::thread &t : m.workers)
    if (t.joinable()) join_writers ? t.join() : t.detach();
  m.workers.clear();
  m.take_kept();  // flight: what was kept and not asked for is let go
  std::lock_guard<std::mutex> wl(m.write_mu);
  m.write_stacks();
  std::lock_guard<std::mutex> lk(m.mu);
  for (auto &[key, w] : m.writers) {
    try {
      w.dump.finish();
      w.construct.finish();
    } catch (const std::exception &e) {
      report("cannot finish dump.json", e.what());
    }
  }
  m.writers.clear();
}

CollectorCounters Collector::counters() const {
  std::lock_guard<std::mutex> lk(impl_->mu);
  return impl_->counters;
}

const CollectorOptions &Collector::options() const { return impl_->options; }

bool Collector::overflow_limit_reached() const noexcept {
  return impl_->overflow_limit_reached.load(std::memory_order_relaxed);
}

bool Collector::drop_oldest_kept() {
  Impl &m = *impl_;
  Prepared dropped;  // let go outside the lock
  std::lock_guard<std::mutex> lk(m.kept_mu);
  if (m.kept.empty()) return false;
  if (m.options.flight_exact && m.kept.size() <= m.options.flight_kernels) {
    std::lock_guard<std::mutex> lk2(m.mu);
    if (m.finished < m.submitted) return false;  // among the last N before a kernel being checked
  }
  dropped = std::move(m.kept.front());
  m.kept.pop_front();
  return true;
}

void Collector::write_kept(const std::string &trigger) {
  Impl &m = *impl_;
  if (!m.options.flight) return;
  flush();  // every kernel submitted so far is checked: kept, or written by its own trigger
  std::lock_guard<std::mutex> wl(m.write_mu);
  if (m.overflow_limit_reached.load(std::memory_order_relaxed)) return;
  std::deque<Prepared> record = m.take_kept();
  if (record.empty()) return;
  std::fprintf(stderr, "msprobe-shim: flight record: %s: writing the last %zu kernels (step %llu to step %llu)\n",
               trigger.c_str(), record.size(), (unsigned long long)record.front().k.step,
               (unsigned long long)record.back().k.step);
  std::mt19937_64 rng{std::random_device{}()};
  m.write_record(record, trigger, "", rng);
  m.write_stacks();
}

}  // namespace msprobe::collector
