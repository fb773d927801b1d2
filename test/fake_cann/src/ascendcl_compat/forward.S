// libascendcl.so of the CANN 9.x layout: the deprecated compatibility library (runtime cmake/third_party/acl_compat.cmake
// ships a prebuilt one). CANN's is not in its sources; the stand-in's defines every function CANN 8.x's libascendcl had,
// so that a program linked against 8.x and a host that dlopens libascendcl.so (torch_npu, MindSpore) still find each
// one, and forwards it, arguments untouched, to its <name>Impl in the library that holds it now (libacl_rt,
// libascend_dump, libacl_mdl, libacl_op_executor), as CANN 9's libacl_rt forwards to libruntime's. A tail jump: the
// compatibility library adds no frame, and its forwarding call goes through no PLT entry under a hooked name.
// The list, one FORWARD(name) a line, is gen_cann9_links.py's ascendcl_compat.inc.
#if defined(__x86_64__)
#define FORWARD(name)           \
  .globl name;                  \
  .type name, @function;        \
  .p2align 4;                   \
  name:                         \
  jmp name##Impl@PLT;           \
  .size name, .-name;
#elif defined(__aarch64__)
#define FORWARD(name)           \
  .globl name;                  \
  .type name, %function;        \
  .p2align 2;                   \
  name:                         \
  b name##Impl;                 \
  .size name, .-name;
#else
#error "the compatibility libascendcl forwards on x86-64 and aarch64 only"
#endif

        .text
#include "ascendcl_compat.inc"

        .section .note.GNU-stack, "", %progbits
