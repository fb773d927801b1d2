// Graph-sunk kernels: MindSpore's static graph (jit_level O2) and .om inference through aclmdlExecute run whole models
// on the device, so no kernel of theirs crosses the host API one by one. The one window onto them is CANN's data dump
// (reference/cann_dump.md): the shim turns it on before a model is loaded (aclmdlInitDump + aclmdlSetDump with a config
// made from the MSPROBE_* settings), receives the per-kernel dump files as chunks through acldumpRegCallback on CANN's
// record thread, reassembles and decodes them (shim/graph/) and hands each kernel to the session like any other:
// `{OpType}.{OpName}.{n}.forward` from the dump's op type and op name, in the step folders of the same dump tree.
//
// Steps: from MindSpore's step hook when the host calls it (the shim is the hook tool: MS_DbgOnStepBegin/End; the dump
// is turned on for each selected step and drained at its end, as msprobe does), else the model's execution index
// (the dump's {dump_number}). Stacks: the frames of the aclmdlExecute call, or of the step hook.
//
// The host's own use of the dump is never broken: a host that registers its own callback gets every chunk too; a host
// that turns the dump on itself (aclmdlInitDump, or aclInit with a config whose "dump" section enables one) keeps it,
// with its settings and its files where its config puts them, and the shim steps back: it configures nothing and
// captures graph kernels only from the chunks the host's own callback receives, saying which at the first model load.
// Single-op dump files (a host's dump_op_switch) are left out: the shim's hooks capture those kernels themselves.
#pragma once
#include <cstdint>

#include "shim/capture/session.h"

namespace msprobe::shim {

class GraphCapture {
 public:
  explicit GraphCapture(Session &session);
  ~GraphCapture();
  GraphCapture(const GraphCapture &) = delete;
  GraphCapture &operator=(const GraphCapture &) = delete;

  using ChunkCallback = int32_t (*)(const void *chunk, int32_t len);

  // aclmdlLoadFrom*: the dump is on, with the shim's callback, before the model is loaded.
  void before_model_load();
  // aclmdlExecute / aclmdlExecuteAsync of `model_id`: the calling frames are its kernels' stack.
  void model_executing(uint32_t model_id);
  // MindSpore's step hook. kbyk: the kernels are launched one by one (the shim's own hooks see them): nothing to do.
  void step_begin(bool kbyk);
  void step_end();

  // The host's own calls into the dump API: what to pass through. host_init_dump returns before the real call.
  void host_init_dump();
  // A successful aclInit(config_path) that turned the dump on (acl_init_turned_dump_on): the dump is the program's.
  void host_acl_init(const char *config_path);
  // acldumpRegCallback / acldumpUnregCallback from the host: `real` is the runtime's function.
  int32_t host_register_callback(ChunkCallback callback, int32_t flag, int32_t (*real)(ChunkCallback, int32_t));
  void host_unregister_callback(void (*real)());

  // aclFinalize, aclrtResetDevice, exit: every queued chunk delivered (drain: aclmdlFinalizeDump, which waits for
  // CANN's record thread; not on a dying process), and files begun but never finished reported.
  void finish(bool drain);

  struct Impl;

 private:
  friend void activate_graph_capture(GraphCapture *capture) noexcept;
  Impl *impl_;
};

// Whether a successful aclInit(config_path) turned CANN's data dump on: the file has a "dump" section and CANN has a
// data dump path now (acldumpGetPath, where the runtime has it). Needs no session: asked before capture starts.
bool acl_init_turned_dump_on(const char *config_path);

// The process's graph capture (made with the session by the composition root), or null.
GraphCapture *active_graph_capture() noexcept;
void activate_graph_capture(GraphCapture *capture) noexcept;

}  // namespace msprobe::shim
