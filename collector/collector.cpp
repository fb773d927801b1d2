#include "collector/collector.h"

#include <signal.h>

#include <algorithm>
#include <chrono>
#include <condition_variable>
#include <deque>
#include <map>
#include <mutex>
#include <optional>
#include <thread>
#include <utility>
#include <vector>

#include "collector/bounded_mutex.h"
#include "collector/report.h"

namespace msprobe::collector {

struct Collector::Impl {
  std::unique_ptr<DumpWriter> writer;
  std::unique_ptr<Retention> retention;
  unsigned writer_threads = 0;
  std::chrono::milliseconds write_wait{30000};
  bool stuck = false;  // under mu: a wait ran out; later waits do not wait again for the same writers

  mutable std::mutex mu;
  std::condition_variable work_cv, done_cv;
  std::deque<std::pair<uint64_t, record::KernelCapture>> queue;  // (submission number, kernel)
  uint64_t submitted = 0, finished = 0;
  bool stopping = false, closed = false;
  std::vector<std::thread> workers;
  // flush()'s stack files, written by a writer thread (not the flushing thread: the host's, at aclFinalize): asked
  // for, taken by a writer, and written, as counts (under mu).
  uint64_t stacks_asked = 0, stacks_taken = 0, stacks_written = 0;
  CollectorCounters counters;  // the pipeline's part: submitted, after_close, reorder_high_water
  // Commits happen one at a time and in submission order: a kernel prepared early waits in `ready` for the ones
  // before it.
  BoundedMutex commit_mu;    // bounded: a writer stuck in a commit must not hold the host's exit
  uint64_t next_commit = 0;  // under commit_mu
  // Under commit_mu; nullopt: the kernel could not be prepared, nothing to commit.
  std::map<uint64_t, std::optional<PendingKernel>> ready;

  // Caller holds mu.
  void start_workers() {
    if (!workers.empty()) return;
    unsigned n = writer_threads;
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
    for (;;) {
      uint64_t seq;
      PendingKernel p;
      {
        std::unique_lock<std::mutex> lk(mu);
        work_cv.wait(lk, [this] { return stopping || !queue.empty() || stacks_taken < stacks_asked; });
        if (stacks_taken < stacks_asked) {
          const uint64_t asked = stacks_taken = stacks_asked;
          lk.unlock();
          write_stacks();
          lk.lock();
          stacks_written = std::max(stacks_written, asked);
          done_cv.notify_all();
          continue;
        }
        if (queue.empty()) return;
        seq = queue.front().first;
        p.k = std::move(queue.front().second);
        queue.pop_front();
      }
      bool ok = true;
      try {
        prepare(p);
      } catch (const std::exception &e) {
        ok = false;
        report("cannot record a kernel", e.what());
      } catch (...) {
        ok = false;
      }
      commit(seq, ok ? std::optional<PendingKernel>(std::move(p)) : std::nullopt);
    }
  }

  // On a writer thread, in parallel with the others: the bytes are waited for, the retention looks at the kernel, and
  // one it will write whatever comes before is encoded now.
  void prepare(PendingKernel &p) {
    try {
      if (p.k.ready) p.have_data = p.k.ready->wait();
    } catch (...) {
      p.have_data = false;
    }
    p.k.ready.reset();
    if (retention->examine(p)) writer->encode(p);
  }

  // Commits prepared kernels in submission order; the thread that completes the next one commits every consecutive
  // one that is ready.
  void commit(uint64_t seq, std::optional<PendingKernel> p) {
    uint64_t committed = 0;
    {
      std::lock_guard<BoundedMutex> cl(commit_mu);
      ready.emplace(seq, std::move(p));
      {
        std::lock_guard<std::mutex> lk(mu);
        counters.reorder_high_water = std::max<uint64_t>(counters.reorder_high_water, ready.size() - 1);
      }
      while (!ready.empty() && ready.begin()->first == next_commit) {
        std::optional<PendingKernel> q = std::move(ready.begin()->second);
        ready.erase(ready.begin());
        if (q) {
          try {
            if (q->k.race) writer->check_races(*q);
            retention->commit(std::move(*q), *writer);
          } catch (const std::exception &e) {
            report("cannot record a kernel", e.what());
          } catch (...) {
          }
        }
        ++next_commit;
        ++committed;
      }
    }
    if (committed == 0) return;
    std::lock_guard<std::mutex> lk(mu);
    finished += committed;
    done_cv.notify_all();
  }

  // Brings the stack files up to date, in submission order's lock (taken within the write wait, else not written).
  void write_stacks() {
    std::unique_lock<BoundedMutex> cl(commit_mu, std::defer_lock);
    if (!lock_commits(cl)) return;
    try {
      writer->write_stacks();
    } catch (const std::exception &e) {
      report("cannot write the stack files", e.what());
    } catch (...) {
    }
  }

  // Has a writer thread bring the stack files up to date, and waits for it (a bounded while: past it, or with no
  // writer thread running, the calling thread writes them itself).
  void write_stacks_on_writer() {
    {
      std::unique_lock<std::mutex> lk(mu);
      if (!workers.empty() && !stopping) {
        const uint64_t ticket = ++stacks_asked;
        work_cv.notify_one();
        if (done_cv.wait_for(lk, kStacksWait, [&] { return stacks_written >= ticket; })) return;
      }
    }
    write_stacks();
  }
  static constexpr std::chrono::seconds kStacksWait{5};

  // Waits until everything submitted so far is committed, at most the write wait (once stuck, not at all); false and
  // said when it ran out.
  bool wait_committed() {
    std::unique_lock<std::mutex> lk(mu);
    const uint64_t target = submitted;
    const auto wait = stuck ? std::chrono::milliseconds(0) : write_wait;
    if (done_cv.wait_for(lk, wait, [&] { return finished >= target; })) return true;
    if (std::exchange(stuck, true)) return false;  // said when it first ran out
    const uint64_t left = target - finished;
    lk.unlock();
    report("the dump is not complete: a writer thread is stuck (a full disk, a dead file system?)",
           std::to_string(left) + " kernels not written after waiting " + std::to_string(write_wait.count() / 1000) +
               " s (MSPROBE_WRITE_WAIT_S); the program goes on, and the dump is left as after a crash: "
               "msprobe-inspect repair completes it");
    return false;
  }

  // The commit lock, within the write wait (at once when stuck).
  bool lock_commits(std::unique_lock<BoundedMutex> &cl) {
    bool was_stuck;
    {
      std::lock_guard<std::mutex> lk(mu);
      was_stuck = stuck;
    }
    if (cl.try_lock_for(was_stuck ? std::chrono::milliseconds(0) : write_wait)) return true;
    std::lock_guard<std::mutex> lk(mu);
    stuck = true;
    return false;
  }
};

Collector::Collector(CollectorParts parts) : impl_(std::make_unique<Impl>()) {
  impl_->writer = std::move(parts.writer);
  impl_->retention = parts.retention ? std::move(parts.retention) : write_all();
  impl_->writer_threads = parts.writer_threads;
  impl_->write_wait = parts.write_wait;
}

Collector::~Collector() { close(); }

void Collector::submit(record::KernelCapture kernel) {
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

bool Collector::flush() {
  Impl &m = *impl_;
  if (!m.wait_committed()) return false;
  m.write_stacks_on_writer();
  return true;
}

void Collector::close(bool join_writers) {
  Impl &m = *impl_;
  const bool written = flush();
  {
    std::lock_guard<std::mutex> lk(m.mu);
    if (m.closed) return;
    m.closed = true;
    m.stopping = true;
  }
  m.work_cv.notify_all();
  // A stuck writer never returns: left to the end of the process, as the idle ones when it is dying.
  for (std::thread &t : m.workers)
    if (t.joinable()) written &&join_writers ? t.join() : t.detach();
  m.workers.clear();
  m.retention->release_kept();  // flight: what was kept and not asked for is let go
  std::unique_lock<BoundedMutex> cl(m.commit_mu, std::defer_lock);
  if (!written || !m.lock_commits(cl)) return;  // the journals stay open, as after a crash: repair closes them
  m.writer->write_stacks();
  m.writer->close();
}

CollectorCounters Collector::counters() const {
  CollectorCounters c;
  {
    std::lock_guard<std::mutex> lk(impl_->mu);
    c = impl_->counters;
  }
  impl_->writer->count(c);
  impl_->retention->count(c);
  return c;
}

void Collector::adopt_rank(uint32_t rank) {
  Impl &m = *impl_;
  m.wait_committed();  // a kernel still queued is mapped by the writer all the same
  std::unique_lock<BoundedMutex> cl(m.commit_mu, std::defer_lock);
  if (!m.lock_commits(cl)) return;
  try {
    m.writer->adopt_rank(rank);
  } catch (const std::exception &e) {
    report("cannot move the folders written without a rank", e.what());
  }
}

bool Collector::complete() const {
  std::lock_guard<std::mutex> lk(impl_->mu);
  return !impl_->stuck;
}

bool Collector::write_limit_reached() const noexcept { return impl_->retention->limit_reached(); }

bool Collector::drop_oldest_kept() {
  Impl &m = *impl_;
  bool checks_pending;
  {
    std::lock_guard<std::mutex> lk(m.mu);
    checks_pending = m.finished < m.submitted;
  }
  return m.retention->drop_oldest_kept(checks_pending);
}

void Collector::write_kept(const std::string &trigger) {
  Impl &m = *impl_;
  if (!m.wait_committed()) return;  // every kernel submitted so far is checked: kept, or written by its own trigger
  std::unique_lock<BoundedMutex> cl(m.commit_mu, std::defer_lock);
  if (!m.lock_commits(cl)) return;
  m.retention->write_kept(trigger, *m.writer);
  m.writer->write_stacks();
}

}  // namespace msprobe::collector
