// tiny_npu's MindSpore-PyNative-shaped mode (TINY_NPU_PYNATIVE=1): an aclnn op goes through the three queues of
// MindSpore's PyNative pipeline (pyboost, MindSpore 2.5-2.7; shared/reference/mindspore_runtime.md §5), not through
// tiny_npu's torch_npu-shaped dispatch:
//
//   Python thread   pyn_op(): the op's arguments are copied and the op is pushed (DispatchOp, GIL released)
//   frontend_queue  the op's C++ (InferOutput: here the argument check and the executor-cache key), then DispatchRun
//   backend_queue   LAUNCH_ACLNN: the executor cache (capacity 1024, as GET_EXECUTOR_FOR_PYBOOST's): on a miss the
//                   arguments are converted (aclCreateTensor, ...), aclnnXxxGetWorkspaceSize runs and the executor is
//                   made repeatable; on a hit there is no phase 1, an update (aclSetTensorAddr /
//                   aclSetDynamicTensorAddr of every tensor) is queued instead; the workspace comes from the pool;
//                   then DispatchLaunchTask
//   launch_queue    the update, then aclnnXxx on the stream (RUN_OP_API_ASYNC)
//
// The threads are named as MindSpore names them with pthread_setname_np (runtime/pipeline/pipeline.cc:28-33). With
// MS_DEV_LAUNCH_BLOCKING=1 (MindSpore 2.7+, NeedSync()) all three stages run inline on the calling (Python) thread and
// every op ends with a stream synchronize (aclnn_utils.h:161-165). The CANN functions are found with dlopen + dlsym,
// as MindSpore finds them; the op's phase-1 and phase-2 functions come from the caller (found there by dlsym on
// libopapi), and phase 1, whose prototype differs per op, is called through libffi from the op's signature.
#include <dlfcn.h>
#include <ffi.h>
#include <pthread.h>

#include <condition_variable>
#include <cstdint>
#include <cstring>
#include <deque>
#include <functional>
#include <list>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <unordered_map>
#include <vector>

extern "C" {

// One phase-1 argument as the Python side describes it (tiny_npu/pynative.py, PynArg).
//   kind 'T' tensor (data: storage base, shape/strides/offset: the view, storage: its elements), 'N' an absent one
//   'L' a tensor list of `n` members: the next n arguments, each 'T'
//   'S' scalar (dtype ACL_DOUBLE / ACL_INT64 / ACL_BOOL, value in f or i), 'Z' an absent scalar
//   'I' int array, 'A' bool array: n values at host address `data` (copied at pyn_op)
//   'd' double, 'f' float (f); 'l' int64, 'c' int8, 'b' bool, 'e' aclDataType, 'u' uint64 (i)
struct PynArg {
  int32_t kind;
  int32_t dtype;
  int32_t ndim;
  int32_t n;
  int64_t shape[8];
  int64_t strides[8];
  int64_t offset;
  int64_t storage;
  uint64_t data;
  double f;
  int64_t i;
};

}  // extern "C"

namespace {

constexpr int32_t kAclDouble = 11, kAclBool = 12;
constexpr size_t kCacheCapacity = 1024;

using CreateTensor = void *(*)(const int64_t *, uint64_t, int32_t, const int64_t *, int64_t, int32_t, const int64_t *,
                               uint64_t, void *);
using CreateScalar = void *(*)(void *, int32_t);
using CreateIntArray = void *(*)(const int64_t *, uint64_t);
using CreateBoolArray = void *(*)(const bool *, uint64_t);
using CreateList = void *(*)(const void *const *, uint64_t);
using Destroy = int (*)(const void *);
using SetAddr = int (*)(void *, size_t, void *, void *);
using SetDynAddr = int (*)(void *, size_t, size_t, void *, void *);
using Phase2 = int (*)(void *, uint64_t, void *, void *);

struct Cann {
  int (*aclrtSetDevice)(int32_t) = nullptr;
  int (*aclrtMalloc)(void **, size_t, int) = nullptr;
  int (*aclrtFree)(void *) = nullptr;
  int (*aclrtSynchronizeStream)(void *) = nullptr;
  CreateTensor aclCreateTensor = nullptr;
  CreateScalar aclCreateScalar = nullptr;
  CreateIntArray aclCreateIntArray = nullptr;
  CreateBoolArray aclCreateBoolArray = nullptr;
  CreateList aclCreateTensorList = nullptr;
  Destroy aclDestroyTensor = nullptr, aclDestroyScalar = nullptr, aclDestroyIntArray = nullptr,
          aclDestroyBoolArray = nullptr, aclDestroyTensorList = nullptr, aclDestroyAclOpExecutor = nullptr;
  int (*aclSetAclOpExecutorRepeatable)(void *) = nullptr;
  SetAddr aclSetTensorAddr = nullptr;
  SetDynAddr aclSetDynamicTensorAddr = nullptr;

  bool load(const std::string &home, std::string *why) {
    void *acl = dlopen((home + "/lib64/libascendcl.so").c_str(), RTLD_LAZY | RTLD_LOCAL);
    void *nn = dlopen((home + "/lib64/libnnopbase.so").c_str(), RTLD_LAZY | RTLD_LOCAL);
    if (acl == nullptr || nn == nullptr) {
      *why = std::string("dlopen: ") + dlerror();
      return false;
    }
    bool ok = true;
    auto sym = [&](void *h, const char *name, auto &slot) {
      slot = reinterpret_cast<std::remove_reference_t<decltype(slot)>>(dlsym(h, name));
      if (slot == nullptr) {
        *why = std::string("dlsym ") + name;
        ok = false;
      }
    };
    sym(acl, "aclrtSetDevice", aclrtSetDevice);
    sym(acl, "aclrtMalloc", aclrtMalloc);
    sym(acl, "aclrtFree", aclrtFree);
    sym(acl, "aclrtSynchronizeStream", aclrtSynchronizeStream);
    sym(nn, "aclCreateTensor", aclCreateTensor);
    sym(nn, "aclCreateScalar", aclCreateScalar);
    sym(nn, "aclCreateIntArray", aclCreateIntArray);
    sym(nn, "aclCreateBoolArray", aclCreateBoolArray);
    sym(nn, "aclCreateTensorList", aclCreateTensorList);
    sym(nn, "aclDestroyTensor", aclDestroyTensor);
    sym(nn, "aclDestroyScalar", aclDestroyScalar);
    sym(nn, "aclDestroyIntArray", aclDestroyIntArray);
    sym(nn, "aclDestroyBoolArray", aclDestroyBoolArray);
    sym(nn, "aclDestroyTensorList", aclDestroyTensorList);
    sym(nn, "aclDestroyAclOpExecutor", aclDestroyAclOpExecutor);
    sym(nn, "aclSetAclOpExecutorRepeatable", aclSetAclOpExecutorRepeatable);
    sym(nn, "aclSetTensorAddr", aclSetTensorAddr);
    sym(nn, "aclSetDynamicTensorAddr", aclSetDynamicTensorAddr);
    return ok;
  }
};

// One op as it travels the pipeline.
struct Op {
  std::string name, kinds;
  void *phase1 = nullptr;
  Phase2 phase2 = nullptr;
  std::vector<PynArg> args;
  std::vector<std::vector<int64_t>> arrays;  // 'I' and 'A' values, copied
  std::string key;                           // the executor-cache key (frontend)
  // backend -> launch
  void *executor = nullptr;
  uint64_t ws_size = 0;
  void *ws = nullptr;
  std::vector<std::function<int()>> update;  // aclSetTensorAddr calls of a cache hit
};

// A cached repeatable executor and the handles it was made with (destroyed with it).
struct Entry {
  void *executor = nullptr;
  uint64_t ws_size = 0;
  std::vector<std::pair<Destroy, void *>> handles;
  std::vector<std::pair<void *, std::vector<void *>>> tensor_slots;  // per tensor parameter: handle, members
};

class Queue {
 public:
  Queue(const char *name, int32_t device, const Cann &cann) {
    worker_ = std::thread([this, name, device, &cann] {
      pthread_setname_np(pthread_self(), name);
      cann.aclrtSetDevice(device);
      std::unique_lock<std::mutex> lk(mu_);
      for (;;) {
        cv_.wait(lk, [&] { return stop_ || !tasks_.empty(); });
        if (tasks_.empty()) return;
        auto t = std::move(tasks_.front());
        tasks_.pop_front();
        lk.unlock();
        t();
        lk.lock();
        ++done_;
        idle_.notify_all();
      }
    });
  }
  ~Queue() {
    {
      std::lock_guard<std::mutex> lk(mu_);
      stop_ = true;
    }
    cv_.notify_all();
    worker_.join();
  }
  void push(std::function<void()> t) {
    {
      std::lock_guard<std::mutex> lk(mu_);
      tasks_.push_back(std::move(t));
      ++pushed_;
    }
    cv_.notify_one();
  }
  void wait_idle() {
    std::unique_lock<std::mutex> lk(mu_);
    idle_.wait(lk, [&] { return done_ == pushed_; });
  }

 private:
  std::mutex mu_;
  std::condition_variable cv_, idle_;
  std::deque<std::function<void()>> tasks_;
  uint64_t pushed_ = 0, done_ = 0;
  bool stop_ = false;
  std::thread worker_;
};

class Pipeline {
 public:
  Pipeline(Cann cann, int32_t device, void *stream, bool blocking)
      : cann_(cann), device_(device), stream_(stream), blocking_(blocking) {
    if (!blocking_) {
      frontend_ = std::make_unique<Queue>("frontend_queue", device, cann_);
      backend_ = std::make_unique<Queue>("backend_queue", device, cann_);
      launch_ = std::make_unique<Queue>("launch_queue", device, cann_);
    }
  }

  ~Pipeline() {
    drain(nullptr);
    frontend_.reset();
    backend_.reset();
    launch_.reset();
    for (auto &[key, e] : cache_) destroy(e);
    for (auto &[size, blocks] : pool_)
      for (void *b : blocks) cann_.aclrtFree(b);
  }

  void submit(std::shared_ptr<Op> op) {
    if (blocking_) {  // DispatchOp, DispatchRun, DispatchLaunchTask: inline
      frontend(op);
      return;
    }
    frontend_->push([this, op] { frontend(op); });
  }

  // Waits until every op submitted so far is launched; returns the first error since the last drain.
  int drain(std::string *message) {
    if (!blocking_) {
      frontend_->wait_idle();
      backend_->wait_idle();
      launch_->wait_idle();
    }
    std::lock_guard<std::mutex> lk(err_mu_);
    int rc = error_;
    if (message) *message = error_text_;
    error_ = 0;
    error_text_.clear();
    return rc;
  }

 private:
  void record(int rc, const std::string &what) {
    std::lock_guard<std::mutex> lk(err_mu_);
    if (error_ == 0) {
      error_ = rc;
      error_text_ = what + " returned " + std::to_string(rc);
    }
  }

  // The op's C++: checks, and the executor cache's key (everything but the tensors' addresses).
  void frontend(const std::shared_ptr<Op> &op) {
    std::string &k = op->key;
    k = op->name;
    for (size_t i = 0; i < op->args.size(); ++i) {
      const PynArg &a = op->args[i];
      k += '|';
      k += (char)a.kind;
      switch (a.kind) {
        case 'T':
          k += std::to_string(a.dtype) + ":" + std::to_string(a.offset) + ":" + std::to_string(a.storage);
          for (int d = 0; d < a.ndim; ++d) k += "," + std::to_string(a.shape[d]) + "/" + std::to_string(a.strides[d]);
          break;
        case 'L': k += std::to_string(a.n); break;
        case 'S': k += std::to_string(a.dtype) + ":" + std::to_string(a.f) + ":" + std::to_string(a.i); break;
        case 'I':
        case 'A':
          for (int64_t v : op->arrays[(size_t)a.i]) k += "," + std::to_string(v);
          break;
        case 'd':
        case 'f': k += std::to_string(a.f); break;
        default: k += std::to_string(a.i);
      }
    }
    if (blocking_)
      backend(op);
    else
      backend_->push([this, op] { backend(op); });
  }

  void backend(const std::shared_ptr<Op> &op) {
    auto it = cache_.find(op->key);
    if (it == cache_.end()) {
      Entry e;
      if (!phase1(*op, &e)) return;
      it = cache_.emplace(op->key, std::move(e)).first;
      lru_.push_front(op->key);
      if (cache_.size() > kCacheCapacity) {  // the least recently used executor goes
        auto old = cache_.find(lru_.back());
        lru_.pop_back();
        if (old != cache_.end()) {
          Entry gone = std::move(old->second);
          cache_.erase(old);
          if (blocking_)
            destroy(gone);
          else
            launch_->push([this, gone]() mutable { destroy(gone); });
        }
      }
    } else {  // a hit: no phase 1, the addresses of this call are set before the launch
      const Entry &e = it->second;
      size_t slot = 0, i = 0;
      for (; i < op->args.size(); ++i) {
        const PynArg &a = op->args[i];
        if (a.kind != 'T' && a.kind != 'N' && a.kind != 'L') continue;
        void *handle = e.tensor_slots[slot].first;
        if (a.kind == 'T') {
          void *addr = reinterpret_cast<void *>(a.data);
          op->update.push_back(
              [this, ex = e.executor, slot, handle, addr] { return cann_.aclSetTensorAddr(ex, slot, handle, addr); });
        } else if (a.kind == 'L') {
          for (int m = 0; m < a.n; ++m) {
            void *addr = reinterpret_cast<void *>(op->args[i + 1 + m].data);
            op->update.push_back([this, ex = e.executor, slot, m, handle, addr] {
              return cann_.aclSetDynamicTensorAddr(ex, slot, (size_t)m, handle, addr);
            });
          }
          i += (size_t)a.n;
        }
        ++slot;
      }
    }
    op->executor = it->second.executor;
    op->ws_size = it->second.ws_size;
    op->ws = workspace(op->ws_size);
    if (op->ws_size != 0 && op->ws == nullptr) return record(-1, "workspace for aclnn" + op->name);
    if (blocking_)
      launch(op);
    else
      launch_->push([this, op] { launch(op); });
  }

  void launch(const std::shared_ptr<Op> &op) {
    for (auto &u : op->update)
      if (int rc = u()) record(rc, "address update of aclnn" + op->name);
    if (int rc = op->phase2(op->ws, op->ws_size, op->executor, stream_)) record(rc, "aclnn" + op->name);
    give_back(op->ws, op->ws_size);  // later launches on the stream only: stream order keeps it safe
    if (blocking_)
      if (int rc = cann_.aclrtSynchronizeStream(stream_)) record(rc, "aclrtSynchronizeStream after aclnn" + op->name);
  }

  // Converts the arguments, calls aclnn<op>GetWorkspaceSize through libffi and makes the executor repeatable.
  bool phase1(Op &op, Entry *e) {
    std::vector<ffi_type *> types;
    std::vector<void *> values;
    std::vector<void *> pointers(op.args.size() + 2);
    std::vector<double> doubles(op.args.size());
    std::vector<float> floats(op.args.size());
    std::vector<int64_t> ints(op.args.size());
    std::vector<int8_t> bytes(op.args.size());
    std::vector<int32_t> enums(op.args.size());
    std::vector<uint8_t> bools(op.args.size());
    for (size_t i = 0; i < op.args.size(); ++i) {
      const PynArg &a = op.args[i];
      void *h = nullptr;
      switch (a.kind) {
        case 'T': h = tensor(a, e); break;
        case 'N': e->tensor_slots.emplace_back(nullptr, std::vector<void *>{}); break;
        case 'L': {
          std::vector<void *> members;
          for (int m = 0; m < a.n; ++m) members.push_back(make_tensor(op.args[i + 1 + m]));
          h = cann_.aclCreateTensorList(members.data(), members.size());
          e->handles.emplace_back(cann_.aclDestroyTensorList, h);  // destroys its members
          e->tensor_slots.emplace_back(h, members);
          i += (size_t)a.n;
          break;
        }
        case 'S': {
          double d = a.f;
          int64_t l = a.i;
          bool b = a.i != 0;
          void *v = a.dtype == kAclDouble ? (void *)&d : a.dtype == kAclBool ? (void *)&b : (void *)&l;
          h = cann_.aclCreateScalar(v, a.dtype);
          e->handles.emplace_back(cann_.aclDestroyScalar, h);
          break;
        }
        case 'I': {
          const auto &vals = op.arrays[(size_t)a.i];
          h = cann_.aclCreateIntArray(vals.data(), vals.size());
          e->handles.emplace_back(cann_.aclDestroyIntArray, h);
          break;
        }
        case 'A': {
          const auto &vals = op.arrays[(size_t)a.i];
          std::unique_ptr<bool[]> raw(new bool[vals.size() + 1]);
          for (size_t j = 0; j < vals.size(); ++j) raw[j] = vals[j] != 0;
          h = cann_.aclCreateBoolArray(raw.get(), vals.size());
          e->handles.emplace_back(cann_.aclDestroyBoolArray, h);
          break;
        }
        default: break;
      }
      switch (a.kind) {
        case 'd':
          doubles[i] = a.f;
          types.push_back(&ffi_type_double);
          values.push_back(&doubles[i]);
          break;
        case 'f':
          floats[i] = (float)a.f;
          types.push_back(&ffi_type_float);
          values.push_back(&floats[i]);
          break;
        case 'l':
        case 'u':
          ints[i] = a.i;
          types.push_back(a.kind == 'l' ? &ffi_type_sint64 : &ffi_type_uint64);
          values.push_back(&ints[i]);
          break;
        case 'c':
          bytes[i] = (int8_t)a.i;
          types.push_back(&ffi_type_sint8);
          values.push_back(&bytes[i]);
          break;
        case 'b':
          bools[i] = a.i != 0;
          types.push_back(&ffi_type_uint8);
          values.push_back(&bools[i]);
          break;
        case 'e':
          enums[i] = (int32_t)a.i;
          types.push_back(&ffi_type_sint32);
          values.push_back(&enums[i]);
          break;
        default:  // a handle (or NULL for an absent tensor / scalar)
          pointers[i] = h;
          types.push_back(&ffi_type_pointer);
          values.push_back(&pointers[i]);
      }
    }
    uint64_t ws = 0;
    void *ex = nullptr;
    void *ws_ptr = &ws, *ex_ptr = &ex;
    types.push_back(&ffi_type_pointer);
    values.push_back(&ws_ptr);
    types.push_back(&ffi_type_pointer);
    values.push_back(&ex_ptr);
    ffi_cif cif;
    ffi_arg rc = 0;
    if (ffi_prep_cif(&cif, FFI_DEFAULT_ABI, (unsigned)types.size(), &ffi_type_sint32, types.data()) != FFI_OK) {
      destroy(*e);
      record(-1, "ffi_prep_cif for aclnn" + op.name + "GetWorkspaceSize");
      return false;
    }
    ffi_call(&cif, reinterpret_cast<void (*)()>(op.phase1), &rc, values.data());
    if ((int32_t)rc != 0 || ex == nullptr) {
      destroy(*e);
      record((int32_t)rc ? (int32_t)rc : -1, "aclnn" + op.name + "GetWorkspaceSize");
      return false;
    }
    if (int r = cann_.aclSetAclOpExecutorRepeatable(ex)) record(r, "aclSetAclOpExecutorRepeatable");
    e->executor = ex;
    e->ws_size = ws;
    return true;
  }

  void *make_tensor(const PynArg &a) {
    // tiny_npu's convention, as torch_npu's: the view over the storage base, storage dims {elements}.
    int32_t fmt = a.ndim == 3 ? 47 : a.ndim == 4 ? 0 : a.ndim == 5 ? 30 : 2;  // NCL / NCHW / NCDHW / ND
    int64_t storage[1] = {a.storage};
    return cann_.aclCreateTensor(a.shape, (uint64_t)a.ndim, a.dtype, a.strides, a.offset, fmt, storage, 1,
                                 reinterpret_cast<void *>(a.data));
  }

  void *tensor(const PynArg &a, Entry *e) {
    void *h = make_tensor(a);
    e->handles.emplace_back(cann_.aclDestroyTensor, h);
    e->tensor_slots.emplace_back(h, std::vector<void *>{});
    return h;
  }

  void destroy(Entry &e) {
    if (e.executor) cann_.aclDestroyAclOpExecutor(e.executor);
    for (auto &[fn, h] : e.handles)
      if (h) fn(h);
    e.executor = nullptr;
    e.handles.clear();
  }

  void *workspace(uint64_t size) {
    if (size == 0) return nullptr;
    {
      std::lock_guard<std::mutex> lk(pool_mu_);
      auto &free = pool_[size];
      if (!free.empty()) {
        void *p = free.back();
        free.pop_back();
        return p;
      }
    }
    void *p = nullptr;
    return cann_.aclrtMalloc(&p, size, 0) == 0 ? p : nullptr;
  }
  void give_back(void *p, uint64_t size) {
    if (p == nullptr) return;
    std::lock_guard<std::mutex> lk(pool_mu_);
    pool_[size].push_back(p);
  }

  Cann cann_;
  int32_t device_;
  void *stream_;
  bool blocking_;
  std::unique_ptr<Queue> frontend_, backend_, launch_;
  std::unordered_map<std::string, Entry> cache_;  // backend_queue only
  std::list<std::string> lru_;
  std::mutex pool_mu_;
  std::map<uint64_t, std::vector<void *>> pool_;
  std::mutex err_mu_;
  int error_ = 0;
  std::string error_text_;
};

thread_local std::string t_last_error;

}  // namespace

extern "C" {

// The pipeline over the CANN libraries of `ascend_home` (dlopen + dlsym), launching on `stream`. blocking != 0:
// MS_DEV_LAUNCH_BLOCKING=1 (no threads: every stage inline, a stream synchronize after each op). NULL on error
// (pyn_last_error()).
__attribute__((visibility("default"))) void *pyn_create(const char *ascend_home, int32_t device, void *stream,
                                                        int32_t blocking) {
  Cann cann;
  if (!cann.load(ascend_home ? ascend_home : ".", &t_last_error)) return nullptr;
  return new Pipeline(cann, device, stream, blocking != 0);
}

__attribute__((visibility("default"))) void pyn_destroy(void *p) { delete static_cast<Pipeline *>(p); }

// One aclnn op: `name` ("Add"), its phase-1 signature (tiny_npu's letters, ops.SIGNATURES), its phase-1 and phase-2
// functions and its n arguments. Everything is copied: the caller may free its buffers when this returns.
__attribute__((visibility("default"))) int pyn_op(void *p, const char *name, const char *kinds, void *phase1,
                                                  void *phase2, const PynArg *args, size_t n) {
  if (p == nullptr || name == nullptr || phase1 == nullptr || phase2 == nullptr || (n && args == nullptr)) return -1;
  auto op = std::make_shared<Op>();
  op->name = name;
  op->kinds = kinds ? kinds : "";
  op->phase1 = phase1;
  op->phase2 = reinterpret_cast<Phase2>(phase2);
  op->args.assign(args, args + n);
  for (PynArg &a : op->args)
    if (a.kind == 'I' || a.kind == 'A') {
      std::vector<int64_t> vals((size_t)a.n);
      for (int j = 0; j < a.n; ++j)
        vals[(size_t)j] = a.kind == 'I' ? reinterpret_cast<const int64_t *>(a.data)[j]
                                        : (int64_t) reinterpret_cast<const uint8_t *>(a.data)[j];
      a.i = (int64_t)op->arrays.size();
      op->arrays.push_back(std::move(vals));
    }
  static_cast<Pipeline *>(p)->submit(std::move(op));
  return 0;
}

// Waits until every op submitted so far is launched. 0, or the first error since the last drain (pyn_last_error()).
__attribute__((visibility("default"))) int pyn_drain(void *p) {
  if (p == nullptr) return -1;
  return static_cast<Pipeline *>(p)->drain(&t_last_error);
}

__attribute__((visibility("default"))) const char *pyn_last_error(void) { return t_last_error.c_str(); }

}  // extern "C"
