// An embedding host that opens libpython with dlopen(RTLD_LOCAL), so that no Python symbol is in the global
// scope, defines a builtin `capture()` and runs Python code that calls it. The Python frames must still be found
// (through the link map) and rendered. Prints `FRAME <frame>` per Python frame and `OPNAME <name>`; exits 2 when
// libpython cannot be loaded (the test then skips).
//     stack_embed_local <path of libpython3.x.so>
#include <dlfcn.h>

#include <cstdio>
#include <string>

#include "shim/stacks/stacks.h"

using namespace msprobe::shim;

namespace {

struct MethodDef {  // PyMethodDef
  const char *name;
  void *(*meth)(void *, void *);
  int flags;
  const char *doc;
};
constexpr int kMethNoArgs = 0x0004;

void *g_none = nullptr;
void (*g_incref)(void *) = nullptr;
StackId g_id = kEmptyStack;

void *capture_builtin(void *, void *) {
  g_id = StackTable::global().capture();
  g_incref(g_none);
  return g_none;
}

}  // namespace

int main(int argc, char **argv) {
  if (argc < 2) return 2;
  void *py = dlopen(argv[1], RTLD_NOW | RTLD_LOCAL);
  if (py == nullptr) {
    std::printf("SKIP %s\n", dlerror());
    return 2;
  }
  if (dlsym(RTLD_DEFAULT, "Py_IsInitialized") != nullptr) return 3;  // must not be visible globally
  auto init = reinterpret_cast<void (*)(int)>(dlsym(py, "Py_InitializeEx"));
  auto new_fn = reinterpret_cast<void *(*)(MethodDef *, void *, void *)>(dlsym(py, "PyCFunction_NewEx"));
  auto add_module = reinterpret_cast<void *(*)(const char *)>(dlsym(py, "PyImport_AddModule"));
  auto module_dict = reinterpret_cast<void *(*)(void *)>(dlsym(py, "PyModule_GetDict"));
  auto set_item = reinterpret_cast<int (*)(void *, const char *, void *)>(dlsym(py, "PyDict_SetItemString"));
  auto run = reinterpret_cast<int (*)(const char *)>(dlsym(py, "PyRun_SimpleString"));
  auto finalize = reinterpret_cast<int (*)()>(dlsym(py, "Py_FinalizeEx"));
  g_incref = reinterpret_cast<void (*)(void *)>(dlsym(py, "Py_IncRef"));
  g_none = dlsym(py, "_Py_NoneStruct");
  if (!init || !new_fn || !add_module || !module_dict || !set_item || !run || !finalize || !g_incref || !g_none)
    return 4;
  init(0);
  static MethodDef def{"capture", &capture_builtin, kMethNoArgs, nullptr};
  set_item(module_dict(add_module("__main__")), "capture", new_fn(&def, nullptr, nullptr));
  if (run("class Model:\n"
          "    def forward(self):\n"
          "        capture()\n"
          "def main():\n"
          "    Model().forward()\n"
          "main()\n") != 0)
    return 5;
  for (std::string f : StackTable::global().frames(g_id, StackMode::Python)) {
    for (size_t i = 0; (i = f.find('\n', i)) != std::string::npos;) f.replace(i, 1, "\\n");  // one line per frame
    std::printf("FRAME %s\n", f.c_str());
  }
  std::printf("OPNAME %s\n", std::string(StackTable::global().op_name(g_id)).c_str());
  finalize();
  return 0;
}
