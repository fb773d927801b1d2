#include "collector/collector.h"

#include <fcntl.h>
#include <signal.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <condition_variable>
#include <cstdio>
#include <cstring>
#include <deque>
#include <functional>
#include <map>
#include <mutex>
#include <random>
#include <thread>

#include "collector/naming.h"
#include "collector/npy.h"

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

// Creates every missing folder of `p` with msprobe's mode (0750; the umask may only take more away).
void make_dir(const fs::path &p) {
  fs::path partial;
  for (const fs::path &part : p) {
    partial /= part;
    if (::mkdir(partial.c_str(), kDirMode) != 0 && errno != EEXIST)
      throw std::system_error(errno, std::generic_category(), "cannot create " + partial.string());
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
  if (n == 0) return base;
  int64_t lo = t.offset, hi = t.offset;
  bool contiguous = true;
  int64_t expect = 1;
  for (size_t i = t.shape.size(); i-- > 0;) {
    int64_t span = (t.shape[i] - 1) * t.strides[i];
    (span > 0 ? hi : lo) += span;
    if (t.shape[i] != 1 && t.strides[i] != expect) contiguous = false;
    expect *= t.shape[i];
  }
  if (lo < 0 || (uint64_t)(hi + 1) * es > t.block->size()) return nullptr;
  if (contiguous) return base + t.offset * es;
  scratch.resize(*bytes);
  const size_t nd = t.shape.size();
  std::vector<int64_t> idx(nd, 0);
  int64_t off = t.offset;
  for (uint64_t i = 0; i < n; ++i) {
    std::memcpy(scratch.data() + i * es, base + off * es, es);
    for (size_t d = nd; d-- > 0;) {
      if (++idx[d] < t.shape[d]) {
        off += t.strides[d];
        break;
      }
      off -= t.strides[d] * (t.shape[d] - 1);
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
  bool tensor_dir_made = false;
  bool broken = false;
};

}  // namespace

struct Collector::Impl {
  CollectorOptions options;
  mutable std::mutex mu;
  std::condition_variable work_cv, done_cv;
  std::deque<KernelCapture> queue;
  uint64_t submitted = 0, finished = 0;
  bool stopping = false, closed = false;
  std::thread worker;
  CollectorCounters counters;
  std::map<std::pair<uint64_t, int64_t>, RankWriter> writers;
  std::mt19937_64 rng{std::random_device{}()};
  std::mutex write_mu;  // one kernel is written at a time (journals are not thread-safe)

  RankWriter &writer_for(uint64_t step, std::optional<uint32_t> rank) {
    auto key = std::make_pair(step, rank ? (int64_t)*rank : -1);
    auto it = writers.find(key);
    if (it != writers.end()) return it->second;
    RankWriter &w = writers[key];
    w.dir = options.dump_path / step_dir_name(step) / rank_dir_name(rank);
    w.tensor_dir = w.dir / kTensorDir;
    try {
      make_dir(w.dir);
      DumpHeader h;
      h.task = options.task;
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

  void start_worker() {
    if (worker.joinable()) return;
    // The writer must never take the host's signals.
    sigset_t all, old;
    sigfillset(&all);
    pthread_sigmask(SIG_SETMASK, &all, &old);
    worker = std::thread([this] { run(); });
    pthread_sigmask(SIG_SETMASK, &old, nullptr);
  }

  void run() {
    for (;;) {
      KernelCapture k;
      {
        std::unique_lock<std::mutex> lk(mu);
        work_cv.wait(lk, [this] { return stopping || !queue.empty(); });
        if (queue.empty()) return;
        k = std::move(queue.front());
        queue.pop_front();
      }
      write_kernel(k);
      std::lock_guard<std::mutex> lk(mu);
      ++finished;
      done_cv.notify_all();
    }
  }

  TensorSummary summarize(const TensorCapture &t, const std::string &kernel, IoKind io, const std::string &path,
                          RankWriter &w, bool have_data) {
    TensorSummary s;
    s.dtype = t.dtype;
    s.dtype_name = t.dtype_name;
    s.shape = t.shape;
    s.format = t.format;
    s.stride = t.device_stride;
    s.offset = t.device_offset;
    if (!have_data || !t.block) return s;
    std::vector<unsigned char> scratch;
    uint64_t bytes = 0;
    const unsigned char *data = materialize(t, scratch, &bytes);
    if (data == nullptr) {
      report("tensor view outside its staged bytes", kernel);
      return s;
    }
    uint64_t count = bytes / element_size(t.dtype);
    if (t.dtype != DType::Raw) s.stats = compute_stats(t.dtype, data, t.shape, options.precision);
    if (options.md5) {
      uint32_t crc = (t.dtype == DType::BF16 && options.framework == Framework::MindSpore)
                         ? crc32_update_bf16_as_f32(0, reinterpret_cast<const uint16_t *>(data), count)
                         : crc32_update(0, data, bytes);
      s.md5 = crc32_hex(crc);
    }
    if (options.save_tensors && !w.broken) {
      try {
        if (!w.tensor_dir_made) {
          make_dir(w.tensor_dir);
          w.tensor_dir_made = true;
        }
        std::string suffix(tensor_file_suffix(options.file_format, t.dtype));
        std::string base = kernel + "." + std::string(io_name(io)) + "." + path + "." + suffix;
        CreatedFile f = create_dump_file(w.tensor_dir, base, rng);
        FdSink sink(f.fd);
        try {
          if (suffix == "npy")
            write_npy(sink, t.dtype, t.shape, data);
          else
            sink.write(data, bytes);
        } catch (...) {
          ::close(f.fd);
          throw;
        }
        ::close(f.fd);
        if (f.renamed()) append_mapping_row(w.tensor_dir, f.mapping_row);
        s.data_name = f.file_name;
        ++counters.tensor_files;
        counters.tensor_bytes += sink.bytes_written();
      } catch (const std::exception &e) {
        ++counters.write_errors;
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
    for (size_t i = 0; i < args->size(); ++i) out.push_back(convert((*args)[i], kernel, io, std::to_string(i), w, have_data));
    return out;
  }

  // stack.json of every folder whose stacks changed, rewritten whole (write to a temporary, rename).
  void write_stacks() {
    for (auto &[key, w] : writers) {
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
        ++counters.write_errors;
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
      if (!t || !t->block || !is_floating(t->dtype)) return;
      std::vector<unsigned char> scratch;
      uint64_t bytes = 0;
      const unsigned char *data = materialize(*t, scratch, &bytes);
      if (!data) return;
      TensorStats st = compute_stats(t->dtype, data, t->shape, options.precision);
      if (!st.has_nan_or_inf()) return;
      if (!found.empty()) found += "; ";
      found += "output" + path + ": " + std::to_string(st.nan_count) + " NaN, " + std::to_string(st.pos_inf_count) +
               " +Inf, " + std::to_string(st.neg_inf_count) + " -Inf";
    };
    if (k.outputs)
      for (size_t i = 0; i < k.outputs->size(); ++i) visit((*k.outputs)[i], "." + std::to_string(i));
    return found;
  }

  void write_kernel(KernelCapture &k) {
    bool have_data = true;
    try {
      if (k.ready) have_data = k.ready->wait();
    } catch (...) {
      have_data = false;
    }
    std::lock_guard<std::mutex> wl(write_mu);
    std::string overflow;
    if (options.overflow_only) {
      if (!have_data) return;
      overflow = overflow_in(k);
      if (overflow.empty()) return;  // a clean kernel: nothing to write
      std::lock_guard<std::mutex> lk(mu);
      if (options.overflow_limit >= 0 && counters.overflows >= (uint64_t)options.overflow_limit) return;
      ++counters.overflows;
      std::string where = k.name + " (step " + std::to_string(k.step) + ", " + rank_dir_name(k.rank) + ", launch " +
                          std::to_string(k.launch_index) + "): " + overflow;
      // The innermost frames say where it came from (the whole stack is in stack.json).
      if (uint64_t g = options.stacks ? options.stacks->group(k.stack_id) : 0; g != 0) {
        std::vector<std::string> frames = options.stacks->frames(g);
        where += "; launched at ";
        for (size_t i = 0; i < frames.size() && i < 3; ++i) where += (i ? " <- " : "") + frames[i];
      }
      std::fprintf(stderr, "msprobe-shim: overflow: %s\n", where.c_str());  // every one: they are the findings
    }
    RankWriter *w;
    {
      std::lock_guard<std::mutex> lk(mu);
      w = &writer_for(k.step, k.rank);
    }
    if (!have_data) ++counters.without_data;
    KernelEntry e;
    e.name = k.name;
    e.input_args = convert_all(k.inputs, k.name, IoKind::Input, *w, have_data);
    e.output = convert_all(k.outputs, k.name, IoKind::Output, *w, have_data);
    e.launch_index = k.launch_index;
    e.task_id = k.task_id;
    e.stream_id = k.stream_id;
    e.timestamp_us = k.timestamp_us;
    e.extra = std::move(k.extra);
    if (!overflow.empty()) e.extra.emplace_back("overflow", overflow);
    if (w->broken) return;
    try {
      w->dump.append(e);
      w->construct.append(e.name);
      ++counters.written;
      uint64_t group = options.stacks ? options.stacks->group(k.stack_id) : 0;
      if (group != 0) {
        auto [it, fresh] = w->stack_kernels.try_emplace(group);
        if (fresh) w->stack_order.push_back(group);
        it->second.push_back(e.name);
        w->stacks_dirty = true;
      }
    } catch (const std::exception &ex) {
      ++counters.write_errors;
      w->broken = true;
      report("cannot append to dump.json", ex.what());
    }
    // Release the staged bytes now, not when the capture object dies later.
    k.inputs.reset();
    k.outputs.reset();
  }
};

Collector::Collector(CollectorOptions options) : impl_(std::make_unique<Impl>()) { impl_->options = std::move(options); }

Collector::~Collector() { close(); }

void Collector::submit(KernelCapture kernel) {
  Impl &m = *impl_;
  {
    std::lock_guard<std::mutex> lk(m.mu);
    ++m.counters.submitted;
    if (!m.closed) {
      m.start_worker();
      m.queue.push_back(std::move(kernel));
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

void Collector::close() {
  Impl &m = *impl_;
  flush();
  {
    std::lock_guard<std::mutex> lk(m.mu);
    if (m.closed) return;
    m.closed = true;
    m.stopping = true;
  }
  m.work_cv.notify_all();
  if (m.worker.joinable()) m.worker.join();
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

struct KernelNamer::Impl {
  std::mutex mu;
  KernelOrdinals ordinals;
};

std::shared_ptr<KernelNamer::Impl> KernelNamer::make_impl() { return std::make_shared<Impl>(); }

std::string KernelNamer::name(uint64_t step, std::optional<uint32_t> rank, std::string_view op_type,
                              std::string_view op_name) {
  std::string base = kernel_base_name(op_type, op_name);
  uint64_t n;
  {
    std::lock_guard<std::mutex> lk(impl_->mu);
    n = impl_->ordinals.next(step, rank, base);
  }
  return kernel_name(base, n);
}

}  // namespace msprobe::collector
