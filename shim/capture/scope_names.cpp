#include "shim/capture/scope_names.h"

#include <atomic>
#include <mutex>
#include <string>
#include <vector>

#include "shim/base/reentry.h"

namespace msprobe::shim::scope_names {
namespace {

constinit std::atomic<bool> g_armed{false};
constinit std::atomic<uint64_t> g_named{0}, g_fallback{0};

// One thread's waiting launches. The thread appends and resolves; resolve_all() may take them from any thread.
struct ThreadQueue {
  std::mutex mu;
  std::vector<Pending> pending;
  bool names_kernels = false;  // a kernel record arrived on this thread once: wait for records here
};

std::mutex g_registry_mu;
std::vector<std::shared_ptr<ThreadQueue>> *g_queues = new std::vector<std::shared_ptr<ThreadQueue>>;  // immortal

void resolve(std::vector<Pending> &batch, std::string_view full_name);

struct ThreadSlot {
  std::shared_ptr<ThreadQueue> queue;
  ~ThreadSlot() {
    if (!queue) return;
    std::vector<Pending> left;
    {
      std::lock_guard<std::mutex> lk(queue->mu);
      left.swap(queue->pending);
    }
    resolve(left, {});
    std::lock_guard<std::mutex> lk(g_registry_mu);
    std::erase(*g_queues, queue);
  }
};
thread_local ThreadSlot t_slot;

ThreadQueue &this_thread_queue() {
  if (!t_slot.queue) {
    t_slot.queue = std::make_shared<ThreadQueue>();
    std::lock_guard<std::mutex> lk(g_registry_mu);
    g_queues->push_back(t_slot.queue);
  }
  return *t_slot.queue;
}

// Names each launch (the record's name, or empty: today's), in launch order, and hands the selected ones over.
void resolve(std::vector<Pending> &batch, std::string_view full_name) {
  ReentryGuard guard;  // waits and copies of the shim's own
  for (Pending &p : batch) {
    const std::string_view op_name = full_name.empty() ? std::string_view(p.fallback_op_name) : full_name;
    (full_name.empty() ? g_fallback : g_named).fetch_add(1, std::memory_order_relaxed);
    if (p.named) *p.named = op_name;
    if (!p.counted) continue;
    p.session->name_launch(p.ticket, p.op_type, op_name);
    if (!p.kernel) continue;
    if (p.ticket.capture) {
      static_cast<format::KernelHeader &>(*p.kernel) = p.ticket;
      p.session->submit(std::move(*p.kernel));
    } else if (p.kernel->ready) {
      p.kernel->ready->wait();  // the copies land before their memory goes back
    }
    p.kernel.reset();
    if (p.staging) p.staging->handed_over();
  }
  batch.clear();
}

}  // namespace

void arm() noexcept { g_armed.store(true, std::memory_order_release); }
bool armed() noexcept { return g_armed.load(std::memory_order_acquire); }

void park(Pending pending) {
  ThreadQueue &q = this_thread_queue();
  std::vector<Pending> overflow;
  {
    std::lock_guard<std::mutex> lk(q.mu);
    q.pending.push_back(std::move(pending));
    if (q.pending.size() > kMaxPending) overflow.swap(q.pending);
  }
  resolve(overflow, {});
}

void kernel_recorded(std::string_view full_name) {
  ThreadQueue &q = this_thread_queue();
  std::vector<Pending> batch;
  {
    std::lock_guard<std::mutex> lk(q.mu);
    q.names_kernels = true;
    batch.swap(q.pending);
  }
  resolve(batch, full_name);
}

void other_record() {
  if (!t_slot.queue) return;
  ThreadQueue &q = *t_slot.queue;
  std::vector<Pending> batch;
  {
    std::lock_guard<std::mutex> lk(q.mu);
    if (q.names_kernels) return;  // its kernels' own records will come
    batch.swap(q.pending);
  }
  resolve(batch, {});
}

void resolve_all() noexcept {
  std::vector<std::shared_ptr<ThreadQueue>> queues;
  {
    std::unique_lock<std::mutex> lk(g_registry_mu, std::try_to_lock);  // never wait in a dying process
    if (!lk.owns_lock()) return;
    queues = *g_queues;
  }
  for (auto &q : queues) {
    std::vector<Pending> batch;
    {
      std::unique_lock<std::mutex> lk(q->mu, std::try_to_lock);
      if (!lk.owns_lock()) continue;
      batch.swap(q->pending);
    }
    try {
      resolve(batch, {});
    } catch (...) {
    }
  }
}

Counts counts() noexcept {
  return Counts{g_named.load(std::memory_order_relaxed), g_fallback.load(std::memory_order_relaxed)};
}

}  // namespace msprobe::shim::scope_names
