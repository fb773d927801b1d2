// tiny_npu's launch queue: the native consumer thread of torch_npu's task queue in miniature.
//
// TASK_QUEUE_ENABLE=1 (torch_npu's EXEC_NPU_CMD_V1): the Python thread does phase 1 of an aclnn op (argument
// conversion, aclnnXGetWorkspaceSize, workspace allocation) and submits the rest here. This thread, which has no
// Python frames, then runs phase 2 on the stream and destroys the converted arguments.
//
// TASK_QUEUE_ENABLE=2 (EXEC_NPU_CMD_V2, tnq_launch_v2): the Python thread only copies the arguments' descriptions
// (shapes, strides, addresses, scalar values) into the item; this thread converts them (aclCreateTensor & co.),
// runs phase 1 (called through libffi: its signature is known at run time), takes the workspace from its own
// stream-ordered pool, runs phase 2 and destroys the converted arguments. No ACL call is made on the Python thread.
//
// Every CANN function arrives as a pointer the Python side found by dlsym, so this library has no link dependency
// on the CANN libraries.
#include <ffi.h>
#include <pthread.h>

#include <condition_variable>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <ctime>
#include <deque>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

extern "C" {

// One native call of a queue item. `kind` says how `fn` is called:
//   TNQ_RELEASE  int fn(void *a0)                                    aclDestroyTensor & co.
//   TNQ_SET_ADDR int fn(void *a0, size_t a1, void *a2, void *a3)     aclSetTensorAddr(executor, index, tensor, addr)
//   TNQ_PHASE2   int fn(void *a0, uint64_t a1, void *a2, void *a3)   aclnnX(workspace, size, executor, stream)
//   TNQ_CALL     int fn(void *a0, void *a1, void *a2, void *a3)      any other four-pointer call
//   TNQ_SET_DYN_ADDR int fn(void *a0, size_t a1, size_t a2, void *a3, void *a4)
//                                        aclSetDynamicTensorAddr(executor, irIndex, relIndex, list, addr)
enum { TNQ_RELEASE = 0, TNQ_SET_ADDR = 1, TNQ_PHASE2 = 2, TNQ_CALL = 3, TNQ_SET_DYN_ADDR = 4 };

struct tnq_call {
  int32_t kind;
  void *fn;
  uintptr_t a[5];
};

// The ACL functions a level-2 item calls on the queue thread, in this order (tnq_set_api).
enum {
  TNQ_API_CREATE_TENSOR,
  TNQ_API_CREATE_SCALAR,
  TNQ_API_CREATE_INT_ARRAY,
  TNQ_API_CREATE_BOOL_ARRAY,
  TNQ_API_CREATE_TENSOR_LIST,
  TNQ_API_DESTROY_TENSOR,
  TNQ_API_DESTROY_SCALAR,
  TNQ_API_DESTROY_INT_ARRAY,
  TNQ_API_DESTROY_BOOL_ARRAY,
  TNQ_API_DESTROY_TENSOR_LIST,
  TNQ_API_MALLOC,
  TNQ_API_FREE,
  TNQ_API_COUNT
};

}  // extern "C"

namespace {

using Release = int (*)(void *);
using SetAddr = int (*)(void *, size_t, void *, void *);
using Phase2 = int (*)(void *, uint64_t, void *, void *);
using Call4 = int (*)(void *, void *, void *, void *);
using SetDynAddr = int (*)(void *, size_t, size_t, void *, void *);
using SetDevice = int (*)(int32_t);

// A level-2 op (TASK_QUEUE_ENABLE=2): phase 1 and phase 2 and the arguments' descriptions, converted here.
// `sig` has one letter per phase-1 parameter (ops.SIGNATURES: T tensor, L tensor list, S scalar, I int array,
// A bool array, d double, f float, l int64, c int8, b bool, e aclDataType, u uint64); `desc` describes them in that
// order, one int64 word each (a double's or float's bits for d / f):
//   T: present, then ndim, shape[ndim], strides[ndim], offset, dtype, format, storage elements, address
//   L: count, then each member as a present T without its present word
//   S: present, then dtype and the value's bytes (8 bytes: an int64, a double or a bool)
//   I, A: count, then the values (count -1: NULL)
//   s: the string's length in bytes, then its bytes, 8 to a word (little endian, the last word padded with zeros)
//   d f l c b e u: the value
struct OpV2 {
  void *phase1 = nullptr, *phase2 = nullptr, *stream = nullptr;
  std::string sig;
  std::vector<int64_t> desc;
};

struct Item {
  std::string what;  // for error messages: "aclnnAdd"
  std::vector<tnq_call> calls;
  std::unique_ptr<OpV2> op;  // a level-2 op instead of calls
};

using CreateTensor = void *(*)(const int64_t *, uint64_t, int32_t, const int64_t *, int64_t, int32_t, const int64_t *,
                               uint64_t, void *);
using CreateScalar = void *(*)(void *, int32_t);
using CreateIntArray = void *(*)(const int64_t *, uint64_t);
using CreateBoolArray = void *(*)(const bool *, uint64_t);
using CreateTensorList = void *(*)(void *const *, uint64_t);
using Malloc = int (*)(void **, size_t, int32_t);
using Free = int (*)(void *);

// Workspaces of level-2 ops: blocks of 512-byte multiples kept per size and used again by later ops. Everything runs
// in order on the one queue thread and stream, so a block freed after its op was enqueued serves the next op (as
// tiny_npu's caching allocator does on the Python side). Freed at the queue's end (after the host synchronized).
class WorkspacePool {
 public:
  void *take(uint64_t bytes, Malloc malloc_fn, int *rc) {
    const uint64_t size = (bytes + 511) / 512 * 512;
    auto &free = free_[size];
    if (!free.empty()) {
      void *p = free.back();
      free.pop_back();
      return p;
    }
    void *p = nullptr;
    *rc = malloc_fn ? malloc_fn(&p, size, 0) : -1;
    if (*rc != 0) return nullptr;
    all_.push_back(p);
    sizes_[p] = size;
    return p;
  }
  void give(void *p) {
    if (p) free_[sizes_[p]].push_back(p);
  }
  void release(Free free_fn) {
    if (free_fn)
      for (void *p : all_) free_fn(p);
    all_.clear();
    free_.clear();
    sizes_.clear();
  }

 private:
  std::map<uint64_t, std::vector<void *>> free_;
  std::map<void *, uint64_t> sizes_;
  std::vector<void *> all_;
};

class TaskQueue {
 public:
  // threaded == false: TASK_QUEUE_ENABLE=0, every item runs at once on the submitting thread.
  TaskQueue(int32_t device, SetDevice set_device, bool threaded)
      : device_(device), set_device_(set_device), threaded_(threaded) {
    if (threaded_) worker_ = std::thread([this] { run(); });
  }

  ~TaskQueue() {
    {
      std::lock_guard<std::mutex> lk(mu_);
      stop_ = true;
    }
    wake_.notify_all();
    if (worker_.joinable()) worker_.join();
    workspaces_.release(reinterpret_cast<Free>(api_[TNQ_API_FREE]));
  }

  void set_api(void *const *fns, size_t n) {
    for (size_t i = 0; i < n && i < TNQ_API_COUNT; ++i) api_[i] = fns[i];
  }

  void submit(Item item) {
    if (!threaded_) {
      execute(item);
      std::lock_guard<std::mutex> lk(mu_);
      ++submitted_;
      ++completed_;
      return;
    }
    {
      std::lock_guard<std::mutex> lk(mu_);
      items_.push_back(std::move(item));
      ++submitted_;
    }
    wake_.notify_one();
  }

  // CPU time the consumer thread has used, in ns (0 without one): lets a benchmark charge the cost of a launch
  // to the threads that launch, not to the device's threads that share the machine's cores.
  uint64_t worker_cpu_ns() {
    clockid_t clock;
    timespec ts;
    if (!threaded_ || pthread_getcpuclockid(worker_.native_handle(), &clock) != 0 || clock_gettime(clock, &ts) != 0)
      return 0;
    return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
  }

  // Waits until everything submitted so far has run; returns (and clears) the first error.
  int drain(std::string *message) {
    std::unique_lock<std::mutex> lk(mu_);
    uint64_t target = submitted_;
    done_cv_.wait(lk, [&] { return completed_ >= target; });
    int rc = error_;
    *message = error_text_;
    error_ = 0;
    error_text_.clear();
    return rc;
  }

 private:
  void run() {
    // The consumer thread needs its own current device, as torch_npu's does (SetDevice on start).
    int rc = set_device_ ? set_device_(device_) : 0;
    if (rc != 0) record(rc, "aclrtSetDevice(" + std::to_string(device_) + ") on the task-queue thread");
    std::unique_lock<std::mutex> lk(mu_);
    for (;;) {
      wake_.wait(lk, [&] { return stop_ || !items_.empty(); });
      if (items_.empty()) return;  // stop_ and nothing left
      Item item = std::move(items_.front());
      items_.pop_front();
      lk.unlock();
      execute(item);
      lk.lock();
      ++completed_;
      done_cv_.notify_all();
    }
  }

  void execute(const Item &item) {
    if (item.op) return execute_v2(item.what, *item.op);
    for (const tnq_call &c : item.calls) {
      int rc = 0;
      auto p = [&](int i) { return reinterpret_cast<void *>(c.a[i]); };
      switch (c.kind) {
        case TNQ_RELEASE: rc = reinterpret_cast<Release>(c.fn)(p(0)); break;
        case TNQ_SET_ADDR: rc = reinterpret_cast<SetAddr>(c.fn)(p(0), (size_t)c.a[1], p(2), p(3)); break;
        case TNQ_PHASE2: rc = reinterpret_cast<Phase2>(c.fn)(p(0), (uint64_t)c.a[1], p(2), p(3)); break;
        case TNQ_CALL: rc = reinterpret_cast<Call4>(c.fn)(p(0), p(1), p(2), p(3)); break;
        case TNQ_SET_DYN_ADDR:
          rc = reinterpret_cast<SetDynAddr>(c.fn)(p(0), (size_t)c.a[1], (size_t)c.a[2], p(3), p(4));
          break;
        default: rc = -1;
      }
      // Keep going after a failure so that every handle of the item is still released.
      if (rc != 0) record(rc, item.what + " (call kind " + std::to_string(c.kind) + ")");
    }
  }

  // A level-2 op: conversion, phase 1, workspace, phase 2 and destruction, all here.
  void execute_v2(const std::string &what, const OpV2 &op) {
    std::vector<std::pair<int, void *>> made;  // (TNQ_API_DESTROY_*, handle), destroyed in reverse at the end
    std::vector<ffi_type *> types;
    std::vector<uint64_t> values;  // each argument's bits, at its own slot (ffi reads through pointers into it)
    // The char * arguments, alive until phase 1 returned (a deque never moves them).
    std::deque<std::string> strings;
    const int64_t *d = op.desc.data(), *end = d + op.desc.size();
    bool ok = true;
    auto word = [&]() -> int64_t {
      if (d >= end) {
        ok = false;
        return 0;
      }
      return *d++;
    };
    auto tensor = [&]() -> void * {
      const int64_t nd = word();
      if (!ok || nd < 0 || nd > 8) return ok = false, nullptr;
      int64_t shape[8], strides[8];
      for (int64_t i = 0; i < nd; ++i) shape[i] = word();
      for (int64_t i = 0; i < nd; ++i) strides[i] = word();
      const int64_t offset = word(), dtype = word(), format = word(), storage = word();
      void *addr = reinterpret_cast<void *>(word());
      if (!ok) return nullptr;
      void *h = reinterpret_cast<CreateTensor>(api_[TNQ_API_CREATE_TENSOR])(
          shape, (uint64_t)nd, (int32_t)dtype, strides, offset, (int32_t)format, &storage, 1, addr);
      if (h == nullptr) ok = false;
      return h;
    };
    for (char k : op.sig) {
      if (!ok) break;
      void *h = nullptr;
      switch (k) {
        case 'T':
          if (word() != 0 && (h = tensor()) != nullptr) made.emplace_back(TNQ_API_DESTROY_TENSOR, h);
          break;
        case 'L': {
          const int64_t n = word();
          if (n == 0) break;  // an empty list is passed as NULL, as on the Python thread
          std::vector<void *> members;
          for (int64_t i = 0; ok && i < n; ++i) members.push_back(tensor());
          if (ok)
            h = reinterpret_cast<CreateTensorList>(api_[TNQ_API_CREATE_TENSOR_LIST])(members.data(), members.size());
          if (h != nullptr) {
            made.emplace_back(TNQ_API_DESTROY_TENSOR_LIST, h);  // destroys its members
          } else {
            for (void *m : members)
              if (m) reinterpret_cast<Release>(api_[TNQ_API_DESTROY_TENSOR])(m);
            ok = false;
          }
          break;
        }
        case 'S':
          if (word() != 0) {
            const int64_t dtype = word(), bits = word();
            unsigned char raw[8];
            std::memcpy(raw, &bits, 8);
            h = ok ? reinterpret_cast<CreateScalar>(api_[TNQ_API_CREATE_SCALAR])(raw, (int32_t)dtype) : nullptr;
            if (h == nullptr)
              ok = false;
            else
              made.emplace_back(TNQ_API_DESTROY_SCALAR, h);
          }
          break;
        case 's': {
          const int64_t len = word();
          if (!ok || len < 0 || (len + 7) / 8 > end - d) {
            ok = false;
            break;
          }
          std::string &text = strings.emplace_back((size_t)len, '\0');
          std::memcpy(text.data(), d, (size_t)len);
          d += (len + 7) / 8;
          types.push_back(&ffi_type_pointer);
          values.push_back(reinterpret_cast<uint64_t>(text.c_str()));
          continue;
        }
        case 'I':
        case 'A': {
          const int64_t n = word();
          if (n < 0) break;  // an absent array (count -1) is passed as NULL
          std::vector<int64_t> ints;
          std::vector<uint8_t> bools;
          for (int64_t i = 0; ok && i < n; ++i) {
            int64_t v = word();
            ints.push_back(v);
            bools.push_back(v != 0);
          }
          if (!ok) break;
          if (k == 'I')
            h = reinterpret_cast<CreateIntArray>(api_[TNQ_API_CREATE_INT_ARRAY])(ints.data(), (uint64_t)n);
          else
            h = reinterpret_cast<CreateBoolArray>(api_[TNQ_API_CREATE_BOOL_ARRAY])(
                reinterpret_cast<const bool *>(bools.data()), (uint64_t)n);
          if (h == nullptr)
            ok = false;
          else
            made.emplace_back(k == 'I' ? TNQ_API_DESTROY_INT_ARRAY : TNQ_API_DESTROY_BOOL_ARRAY, h);
          break;
        }
        default: {
          const int64_t v = word();
          ffi_type *t = k == 'd'   ? &ffi_type_double
                        : k == 'f' ? &ffi_type_float
                        : k == 'l' ? &ffi_type_sint64
                        : k == 'c' ? &ffi_type_sint8
                        : k == 'b' ? &ffi_type_uint8
                        : k == 'e' ? &ffi_type_sint32
                        : k == 'u' ? &ffi_type_uint64
                                   : nullptr;
          if (t == nullptr) {
            ok = false;
            break;
          }
          uint64_t bits = 0;
          if (k == 'f') {  // the float's own bits, in the low word
            double dv;
            std::memcpy(&dv, &v, 8);
            float fv = (float)dv;
            std::memcpy(&bits, &fv, 4);
          } else if (k == 'c' || k == 'b' || k == 'e') {
            const int32_t narrow = (int32_t)v;  // little endian: the low bytes are the value
            std::memcpy(&bits, &narrow, 4);
          } else {
            std::memcpy(&bits, &v, 8);
          }
          types.push_back(t);
          values.push_back(bits);
          continue;
        }
      }
      types.push_back(&ffi_type_pointer);
      values.push_back(reinterpret_cast<uint64_t>(h));
    }
    uint64_t ws = 0;
    void *executor = nullptr;
    int rc = ok ? 0 : -1;
    if (ok) {
      void *ws_ptr = &ws, *ex_ptr = &executor;
      types.push_back(&ffi_type_pointer);
      types.push_back(&ffi_type_pointer);
      values.push_back(reinterpret_cast<uint64_t>(ws_ptr));
      values.push_back(reinterpret_cast<uint64_t>(ex_ptr));
      std::vector<void *> ptrs;
      for (uint64_t &v : values) ptrs.push_back(&v);
      ffi_cif cif;
      ffi_sarg result = 0;
      if (ffi_prep_cif(&cif, FFI_DEFAULT_ABI, (unsigned)types.size(), &ffi_type_sint32, types.data()) != FFI_OK) {
        rc = -1;
      } else {
        ffi_call(&cif, FFI_FN(op.phase1), &result, ptrs.data());
        rc = (int)(int32_t)result;
      }
      if (rc != 0) record(rc, what + "GetWorkspaceSize (on the queue thread)");
    } else {
      record(-1, what + ": its arguments could not be converted on the queue thread");
    }
    if (rc == 0) {
      void *workspace = nullptr;
      if (ws > 0) workspace = workspaces_.take(ws, reinterpret_cast<Malloc>(api_[TNQ_API_MALLOC]), &rc);
      if (rc != 0) {
        record(rc, what + ": workspace of " + std::to_string(ws) + " bytes");
      } else {
        rc = reinterpret_cast<Phase2>(op.phase2)(workspace, ws, executor, op.stream);
        if (rc != 0) record(rc, what);
        workspaces_.give(workspace);  // stream-ordered: later ops only
      }
    }
    for (auto it = made.rbegin(); it != made.rend(); ++it) reinterpret_cast<Release>(api_[it->first])(it->second);
  }

  void record(int rc, const std::string &what) {
    std::lock_guard<std::mutex> lk(mu_);
    if (error_ == 0) {
      error_ = rc;
      error_text_ = what + " returned " + std::to_string(rc);
    }
  }

  int32_t device_;
  SetDevice set_device_;
  bool threaded_;
  std::mutex mu_;
  std::condition_variable wake_, done_cv_;
  std::deque<Item> items_;
  uint64_t submitted_ = 0, completed_ = 0;
  bool stop_ = false;
  int error_ = 0;
  std::string error_text_;
  void *api_[TNQ_API_COUNT] = {};
  WorkspacePool workspaces_;  // the queue thread's alone
  std::thread worker_;
};

thread_local std::string t_last_error;

}  // namespace

extern "C" {

// threaded != 0: a consumer thread that first calls set_device_fn(device); 0: run items inline.
__attribute__((visibility("default"))) void *tnq_create(int32_t device, void *set_device_fn, int32_t threaded) {
  return new TaskQueue(device, reinterpret_cast<SetDevice>(set_device_fn), threaded != 0);
}

// Runs the remaining items, then stops and joins the thread.
__attribute__((visibility("default"))) void tnq_destroy(void *q) { delete static_cast<TaskQueue *>(q); }

// Enqueues one item: `n` calls run in order on the queue thread. The array is copied.
__attribute__((visibility("default"))) int tnq_submit(void *q, const char *what, const tnq_call *calls, size_t n) {
  if (q == nullptr || (n > 0 && calls == nullptr)) return -1;
  Item item{what ? what : "?", std::vector<tnq_call>(calls, calls + n), nullptr};
  static_cast<TaskQueue *>(q)->submit(std::move(item));
  return 0;
}

// The torch_npu-shaped launch: phase 2 of an aclnn op, then the destruction of its converted
// arguments (destroy_fns[i](handles[i])).
__attribute__((visibility("default"))) int tnq_launch(void *q, const char *what, void *phase2, void *workspace,
                                                      uint64_t workspace_size, void *executor, void *stream,
                                                      void *const *destroy_fns, void *const *handles, size_t n) {
  if (q == nullptr || phase2 == nullptr || (n > 0 && (destroy_fns == nullptr || handles == nullptr))) return -1;
  Item item{what ? what : "?", {}, nullptr};
  item.calls.reserve(n + 1);
  item.calls.push_back({TNQ_PHASE2, phase2, {(uintptr_t)workspace, (uintptr_t)workspace_size,
                                             (uintptr_t)executor, (uintptr_t)stream, 0}});
  for (size_t i = 0; i < n; ++i) item.calls.push_back({TNQ_RELEASE, destroy_fns[i], {(uintptr_t)handles[i], 0, 0, 0, 0}});
  static_cast<TaskQueue *>(q)->submit(std::move(item));
  return 0;
}

// The ACL functions of level-2 ops (TNQ_API_* order), set once before the first tnq_launch_v2.
__attribute__((visibility("default"))) void tnq_set_api(void *q, void *const *fns, size_t n) {
  if (q != nullptr && fns != nullptr) static_cast<TaskQueue *>(q)->set_api(fns, n);
}

// TASK_QUEUE_ENABLE=2: an aclnn op whose conversion, phase 1, workspace, phase 2 and destruction all run on the queue
// thread (see OpV2 for `sig` and `desc`, which are copied).
__attribute__((visibility("default"))) int tnq_launch_v2(void *q, const char *what, void *phase1, void *phase2,
                                                         void *stream, const char *sig, const int64_t *desc, size_t n) {
  if (q == nullptr || phase1 == nullptr || phase2 == nullptr || sig == nullptr || (n > 0 && desc == nullptr)) return -1;
  Item item{what ? what : "?", {}, std::make_unique<OpV2>()};
  item.op->phase1 = phase1;
  item.op->phase2 = phase2;
  item.op->stream = stream;
  item.op->sig = sig;
  item.op->desc.assign(desc, desc + n);
  static_cast<TaskQueue *>(q)->submit(std::move(item));
  return 0;
}

// Blocks until every submitted item ran. Returns 0 or the first nonzero return code of a queued
// call since the last drain (its description is then in tnq_last_error()).
__attribute__((visibility("default"))) int tnq_drain(void *q) {
  if (q == nullptr) return -1;
  int rc = static_cast<TaskQueue *>(q)->drain(&t_last_error);
  return rc;
}

// CPU time of the consumer thread in ns; 0 for an inline (TASK_QUEUE_ENABLE=0) queue.
__attribute__((visibility("default"))) uint64_t tnq_worker_cpu_ns(void *q) {
  return q == nullptr ? 0 : static_cast<TaskQueue *>(q)->worker_cpu_ns();
}

__attribute__((visibility("default"))) const char *tnq_last_error(void) { return t_last_error.c_str(); }

}  // extern "C"
