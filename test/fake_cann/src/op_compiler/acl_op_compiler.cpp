// libacl_op_compiler.so: aclopCompileAndExecute(V2) — see acl_op_compiler.cpp (in progress).
