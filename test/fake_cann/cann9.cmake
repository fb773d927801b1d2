# The CANN 9.x layout, build/fake_cann9/lib64 (README.md "Two layouts"), linked as CANN 9's sources link it:
#   libacl_rt        aclInit, aclrt*, aclmdlRI*, the model dump switches, data buffers; -Bsymbolic, runtime +
#                    ascend_dump (runtime src/acl/aclrt/CMakeLists.txt)
#   libascend_dump   acldump*, aclopStartDumpArgs, the dump server and single-op dump (adump)
#   libacl_op_executor, libacl_mdl, libacl_op_compiler   aclop*, aclmdl* and tensor descriptors, compilation; -Bsymbolic
#                    (ge api/acl/*/CMakeLists.txt)
#   libnnopbase, libopapi   nnopbase links acl_rt, ascend_dump and runtime (opbase src/nnopbase/CMakeLists.txt)
#   libhcomm, libhccl       communicators; the collectives, over hcomm and acl_rt (hccl src/hccl.cmake)
#   libascendcl      the deprecated compatibility library: every function of 8.x's libascendcl, each forwarded
# CANN 9 keeps the aclrt implementation inside libruntime (aclrt*Impl, runtime src/runtime/cmake: -Bsymbolic), so the
# runtime calls it makes pass through no PLT entry a tool could hook; the stand-in's libacl_rt reaches libruntime through
# aliases no tool hooks (gen_cann9_links.py). The same aliasing gives every ACL function its <name>Impl, which the
# compatibility libascendcl forwards to, as libacl_rt forwards to libruntime's in CANN 9.
enable_language(ASM)
set(FAKE_CANN9_GEN ${CMAKE_CURRENT_BINARY_DIR}/cann9)
set(FAKE_CANN9_ACL_PARTS acl_rt ascend_dump acl_mdl acl_op_executor)  # what 8.x's libascendcl is made of
set(gen_args)
set(gen_outputs ${FAKE_CANN9_GEN}/ascendcl_compat.inc ${FAKE_CANN9_GEN}/runtime.inner.rsp
                ${FAKE_CANN9_GEN}/acl_rt.inner.rsp)
set(gen_depends ${CMAKE_CURRENT_SOURCE_DIR}/gen_cann9_links.py ${FAKE_CANN_PUBLIC_HEADERS} ${FAKE_CANN_runtime_SOURCES})
foreach(part ${FAKE_CANN9_ACL_PARTS})
  list(APPEND gen_args ${part}=${CMAKE_CURRENT_SOURCE_DIR}/src/${part})
  list(APPEND gen_outputs ${FAKE_CANN9_GEN}/${part}.impl.rsp)
  list(APPEND gen_depends ${FAKE_CANN_${part}_SOURCES})
endforeach()
add_custom_command(OUTPUT ${FAKE_CANN9_GEN}/links.stamp
  COMMAND ${Python3_EXECUTABLE} ${CMAKE_CURRENT_SOURCE_DIR}/gen_cann9_links.py ${FAKE_CANN9_GEN}
          ${CMAKE_CURRENT_SOURCE_DIR}/include/acl ${CMAKE_CURRENT_SOURCE_DIR}/src/runtime
          ${CMAKE_CURRENT_SOURCE_DIR}/src/acl_rt ${gen_args}
  COMMAND ${CMAKE_COMMAND} -E touch ${FAKE_CANN9_GEN}/links.stamp
  BYPRODUCTS ${gen_outputs}
  DEPENDS ${gen_depends}
  COMMENT "Reading the CANN 9.x libraries' links from the stand-in's sources")
add_custom_target(fake_cann9_links DEPENDS ${FAKE_CANN9_GEN}/links.stamp)

# A library's linker options from a generated response file (ld reads @file).
function(fake_cann9_link_file target file)
  add_dependencies(${target} fake_cann9_links)
  target_link_options(${target} PRIVATE -Wl,@${FAKE_CANN9_GEN}/${file})
  set_property(TARGET ${target} APPEND PROPERTY LINK_DEPENDS ${FAKE_CANN9_GEN}/${file})
endfunction()

fake_cann_library(cann9_runtime OUTPUT runtime LIB64 ${FAKE_CANN9_LIB64} PARTS runtime LINK elf SYMBOLIC NEEDED)
fake_cann9_link_file(cann9_runtime runtime.inner.rsp)
fake_cann_library(cann9_ascend_dump OUTPUT ascend_dump LIB64 ${FAKE_CANN9_LIB64} PARTS ascend_dump LINK cann9_runtime
                  NEEDED)
fake_cann_library(cann9_acl_rt OUTPUT acl_rt LIB64 ${FAKE_CANN9_LIB64} PARTS acl_rt
                  LINK cann9_runtime cann9_ascend_dump SYMBOLIC NEEDED)
fake_cann9_link_file(cann9_acl_rt acl_rt.inner.rsp)
fake_cann_library(cann9_acl_op_executor OUTPUT acl_op_executor LIB64 ${FAKE_CANN9_LIB64} PARTS acl_op_executor
                  LINK cann9_acl_rt cann9_ascend_dump cann9_runtime SYMBOLIC NEEDED)
# The stand-in's models run its aclop kernels (CANN's run GE's): libacl_mdl needs libacl_op_executor's registry.
fake_cann_library(cann9_acl_mdl OUTPUT acl_mdl LIB64 ${FAKE_CANN9_LIB64} PARTS acl_mdl
                  LINK cann9_acl_op_executor cann9_acl_rt cann9_ascend_dump cann9_runtime SYMBOLIC NEEDED)
foreach(part ${FAKE_CANN9_ACL_PARTS})
  fake_cann9_link_file(cann9_${part} ${part}.impl.rsp)
endforeach()
fake_cann_library(cann9_acl_op_compiler OUTPUT acl_op_compiler LIB64 ${FAKE_CANN9_LIB64} PARTS op_compiler
                  LINK cann9_acl_op_executor cann9_acl_rt cann9_runtime SYMBOLIC NEEDED)
fake_cann_library(cann9_nnopbase OUTPUT nnopbase LIB64 ${FAKE_CANN9_LIB64} PARTS nnopbase
                  LINK cann9_acl_rt cann9_ascend_dump cann9_runtime NEEDED)
fake_cann_library(cann9_opapi OUTPUT opapi LIB64 ${FAKE_CANN9_LIB64} PARTS opapi LINK cann9_nnopbase cann9_runtime
                  SYMBOLIC NEEDED)
fake_cann_library(cann9_hcomm OUTPUT hcomm LIB64 ${FAKE_CANN9_LIB64} PARTS hcomm LINK cann9_runtime rt NEEDED)
fake_cann_library(cann9_hccl OUTPUT hccl LIB64 ${FAKE_CANN9_LIB64} PARTS hccl
                  LINK cann9_hcomm cann9_acl_rt cann9_runtime rt SYMBOLIC NEEDED)

# libascendcl.so: a program linked against 8.x (or that dlopens libascendcl.so, as torch_npu and MindSpore still do)
# finds every function it had there, each a jump to its <name>Impl in the library that holds it now.
fake_cann_library(cann9_ascendcl OUTPUT ascendcl LIB64 ${FAKE_CANN9_LIB64}
                  SOURCES ${CMAKE_CURRENT_SOURCE_DIR}/src/ascendcl_compat/forward.S
                  LINK cann9_acl_rt cann9_ascend_dump cann9_acl_mdl cann9_acl_op_executor NEEDED)
add_dependencies(cann9_ascendcl fake_cann9_links)
target_include_directories(cann9_ascendcl PRIVATE ${FAKE_CANN9_GEN})
set_target_properties(cann9_ascendcl PROPERTIES LINKER_LANGUAGE C)  # CMake has no link rule of its own for ASM
set_source_files_properties(${CMAKE_CURRENT_SOURCE_DIR}/src/ascendcl_compat/forward.S PROPERTIES
  OBJECT_DEPENDS ${FAKE_CANN9_GEN}/links.stamp)

# Everything of the 9.x install: `ninja fake_cann9_install`.
add_custom_target(fake_cann9_install)
add_dependencies(fake_cann9_install cann9_runtime cann9_ascend_dump cann9_acl_rt cann9_acl_op_executor cann9_acl_mdl
                 cann9_acl_op_compiler cann9_nnopbase cann9_opapi cann9_hcomm cann9_hccl cann9_ascendcl)
