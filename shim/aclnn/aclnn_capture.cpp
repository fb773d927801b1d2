#include "shim/aclnn/aclnn_capture.h"

#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "shim/aclnn/phases.h"
#include "shim/base/log.h"
#include "shim/base/symbols.h"
#include "shim/call/trampoline.h"
#include "shim/capture/capture_call.h"
#include "shim/capture/session.h"

namespace msprobe::shim {
namespace {

constexpr std::string_view kPhase1Suffix = "GetWorkspaceSize";

ArgClass arg_class(ParamKind k) {
  return k == ParamKind::Double ? ArgClass::Float64 : k == ParamKind::Float ? ArgClass::Float32 : ArgClass::Integer;
}

// A phase-1 binding from the op's prototype: where each argument travels, whether it can be forwarded exactly and
// where it must be decoded. False when it cannot be forwarded exactly (more stack arguments than a forwarder carries).
bool bind_prototype(Binding &b) {
  std::vector<ArgClass> classes;
  for (const Param &p : b.proto->params) classes.push_back(arg_class(p.kind));
  b.locations = locate_args(classes);
  b.stack_slots = stack_slots_needed(classes);
  if (b.stack_slots > kMaxStackSlots) return false;
  bool c_string = false;
  for (size_t i = 0; i < b.proto->params.size(); ++i) {
    c_string = c_string || b.proto->params[i].kind == ParamKind::CString;
    if (b.proto->params[i].kind == ParamKind::ExecutorOut) b.executor_param = (int)i;
  }
  b.decode_at_phase1 = c_string || b.stack_slots > RawCall::kStackSlots;
  return true;
}

// The binding of aclnn symbol `n` whose definition is `real`; null for a symbol that is not a phase of an op (aclnnInit
// and friends) or cannot be forwarded exactly.
Binding *bind(std::string_view n, void *real) {
  auto b = std::make_unique<Binding>();
  b->real = real;
  if (n.size() > 5 + kPhase1Suffix.size() && n.substr(n.size() - kPhase1Suffix.size()) == kPhase1Suffix) {
    b->op = std::string(n.substr(5, n.size() - 5 - kPhase1Suffix.size()));
    b->proto = aclnn_state().prototypes().find(b->op);
    if (b->proto && !bind_prototype(*b)) return nullptr;
    if (!b->proto)
      log_info("no header declares aclnn%sGetWorkspaceSize; its arguments are found by the header-less rule",
               b->op.c_str());
  } else {
    // Phase 2 exists only next to its phase 1 in the same library (this leaves aclnnInit and friends alone).
    std::string phase1 = std::string(n) + std::string(kPhase1Suffix);
    if (lookup_in_object_of(real, phase1.c_str()) == nullptr) return nullptr;
    b->op = std::string(n.substr(5));
    b->phase1 = false;
  }
  if (const Session *session = active_session()) b->facts = session->facts_of(b->op);
  return b.release();
}

// The wrapper of a binding: phase 2 through a prepend trampoline (its prototype is known), anything else through a
// libffi forwarder; null when neither can be made.
void *make_wrapper(Binding *b) {
  if (!b->phase1)  // (void *workspace, uint64_t size, aclOpExecutor *executor, aclrtStream stream)
    if (void *t = make_prepend_trampoline(reinterpret_cast<void *>(&phase2_entry), b)) return t;
  Forwarder *fw =
      b->phase1 ? Forwarder::create(b->real, ReturnKind::Int32, nullptr, &phase1_post, b, b->stack_slots, &phase1_gate)
                : Forwarder::create(b->real, ReturnKind::Int32, &phase2_pre, &phase2_post, b, 0);
  return fw ? fw->entry() : nullptr;
}

}  // namespace

void *AclnnCapture::wrap_symbol(const char *name, void *real) {
  std::string_view n(name);
  if (real == nullptr || n.rfind("aclnn", 0) != 0 || n.size() <= 5) return real;
  AclnnState &m = aclnn_state();
  std::lock_guard<std::mutex> lk(m.mu);
  if (auto it = m.wrappers.find(real); it != m.wrappers.end()) return it->second;
  Binding *b = bind(n, real);  // lives as long as its wrapper: forever
  void *wrapper = b ? make_wrapper(b) : nullptr;
  if (wrapper == nullptr) {
    delete b;
    return real;
  }
  m.wrappers.emplace(real, wrapper);
  return wrapper;
}

void AclnnCapture::on_repeatable(const void *executor) {
  aclnn_state().calls.update(executor, [](OpCall &c) { c.repeatable = true; });
}

void AclnnCapture::on_destroyed(const void *executor) { aclnn_state().calls.erase(executor); }

void AclnnCapture::set_cache_key(ExecCacheKey::Kind kind, const ExecCacheKey &key) {
  if (kind == ExecCacheKey::Hash || kind == ExecCacheKey::Bytes) thread_cache_keys()[kind - 1] = key;
}

void AclnnCapture::clear_cache_keys() { thread_cache_keys()[0] = thread_cache_keys()[1] = {}; }

void AclnnCapture::on_cache_hit(const void *executor, const ExecCacheKey &key, void *const *addrs, size_t n) {
  // Bound to the kept call where phase 2 runs (decode()); here only what names it.
  OpCall call;
  call.hit = key;
  call.hit_addrs.assign(addrs, addrs + n);
  // The hit's own call site (it skips phase 1, where stacks are taken): one key serves several lines of a model.
  if (const Session *session = active_session()) call.stack = launch_stack(*session);
  aclnn_state().calls.put(executor, std::move(call));
}

void AclnnCapture::on_cached_address(const void *executor, size_t index, void *addr) {
  aclnn_state().calls.update(executor, [&](OpCall &c) {
    if (c.hit) {
      if (c.hit_addrs.size() <= index) c.hit_addrs.resize(index + 1, nullptr);
      c.hit_addrs[index] = addr;
    } else {
      bind_cached_tensor(c, index, addr);
    }
  });
}

AclnnCapture &aclnn_capture() {
  static AclnnCapture c;
  return c;
}

}  // namespace msprobe::shim
