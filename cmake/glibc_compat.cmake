# Link-time glibc stubs: a library linked against them requires no glibc symbol version above
# MSPROBE_GLIBC_MAX (docs/portability.md). At configure time, for the compiler's own libc.so.6 / libm.so.6 /
# ld.so (native or cross), cmake/gen_glibc_stubs.py writes a stub that defines every symbol at its newest
# version <= MSPROBE_GLIBC_MAX; the stubs live in ${MSPROBE_GLIBC_STUB_DIR} under the names the linker looks
# for (libc.so, libm.so, libpthread.so, libdl.so), so that a target given that directory first
# (msprobe_glibc_compat) binds to the old versions. Nothing of the stubs is loaded at run time: the DT_NEEDED
# entries name the real sonames (libc.so.6, ...).
set(MSPROBE_GLIBC_MAX GLIBC_2.28 CACHE STRING "newest glibc symbol version the preloaded shim may require")
find_package(Python3 REQUIRED COMPONENTS Interpreter)
if(NOT CMAKE_READELF)
  find_program(CMAKE_READELF readelf REQUIRED)
endif()
set(MSPROBE_GLIBC_STUB_DIR ${CMAKE_BINARY_DIR}/glibc-stubs CACHE INTERNAL "glibc stub libraries")
file(MAKE_DIRECTORY ${MSPROBE_GLIBC_STUB_DIR})

function(_msprobe_file_name out name)
  execute_process(COMMAND ${CMAKE_C_COMPILER} -print-file-name=${name} OUTPUT_VARIABLE p OUTPUT_STRIP_TRAILING_WHITESPACE)
  set(${out} ${p} PARENT_SCOPE)
endfunction()

function(_msprobe_stub real soname out)
  set(s ${MSPROBE_GLIBC_STUB_DIR}/${out}.S)
  set(m ${MSPROBE_GLIBC_STUB_DIR}/${out}.map)
  if(real)
    execute_process(COMMAND ${Python3_EXECUTABLE} ${CMAKE_SOURCE_DIR}/cmake/gen_glibc_stubs.py ${CMAKE_READELF} ${real}
                            ${MSPROBE_GLIBC_MAX} ${s} ${m} COMMAND_ERROR_IS_FATAL ANY)
  else()  # an empty library: only its soname goes into DT_NEEDED
    file(WRITE ${s} "/* empty stub of ${soname} */\n")
    file(WRITE ${m} "EMPTY { };\n")
  endif()
  execute_process(COMMAND ${CMAKE_C_COMPILER} -shared -nostdlib -Wl,-soname,${soname} -Wl,--version-script=${m}
                          ${s} -o ${MSPROBE_GLIBC_STUB_DIR}/${out} COMMAND_ERROR_IS_FATAL ANY)
endfunction()

# The real libc.so linker script names libc.so.6, libc_nonshared.a and the dynamic loader.
_msprobe_file_name(_libc_script libc.so)
file(READ ${_libc_script} _script)
string(REGEX MATCH "[^ ()]*/libc\\.so\\.6" _libc6 "${_script}")
string(REGEX MATCH "[^ ()]*/libc_nonshared\\.a" _nonshared "${_script}")
string(REGEX MATCH "[^ ()]*/(ld-linux[^ ()]*)" _ld "${_script}")
set(_ld_soname ${CMAKE_MATCH_1})
if(NOT _libc6 OR NOT _nonshared OR NOT _ld)
  message(FATAL_ERROR "glibc_compat: cannot read ${_libc_script}")
endif()
# A cross toolchain's script names target paths (/lib/aarch64-linux-gnu/...) relative to its sysroot.
foreach(v _libc6 _nonshared _ld)
  if(NOT EXISTS ${${v}})
    get_filename_component(_name ${${v}} NAME)
    _msprobe_file_name(${v} ${_name})
  endif()
endforeach()
_msprobe_file_name(_libm6 libm.so.6)
_msprobe_stub(${_libc6} libc.so.6 libc.so.6)
_msprobe_stub(${_libm6} libm.so.6 libm.so)
_msprobe_stub(${_ld} ${_ld_soname} ld.so)
_msprobe_stub("" libpthread.so.0 libpthread.so)
_msprobe_stub("" libdl.so.2 libdl.so)
file(WRITE ${MSPROBE_GLIBC_STUB_DIR}/libc.so
     "GROUP ( ${MSPROBE_GLIBC_STUB_DIR}/libc.so.6 ${_nonshared} AS_NEEDED ( ${MSPROBE_GLIBC_STUB_DIR}/ld.so ) )\n")

# The shim's own definitions of what the old glibc lacks (arc4random, __libc_single_threaded, ...).
add_library(msprobe_glibc_compat OBJECT ${CMAKE_SOURCE_DIR}/cmake/glibc_compat.c)
set_target_properties(msprobe_glibc_compat PROPERTIES POSITION_INDEPENDENT_CODE ON C_VISIBILITY_PRESET hidden)
add_library(msprobe_glibc_compat_exe OBJECT ${CMAKE_SOURCE_DIR}/cmake/glibc_compat_exe.c)
set_target_properties(msprobe_glibc_compat_exe PROPERTIES POSITION_INDEPENDENT_CODE ON C_VISIBILITY_PRESET hidden)

# Links `target` against the stubs: libstdc++/libgcc static, libpthread.so.0 and libdl.so.2 in DT_NEEDED
# (on glibc < 2.34 the pthread_*/dl* symbols live there).
function(msprobe_glibc_compat target)
  target_link_options(${target} PRIVATE -L${MSPROBE_GLIBC_STUB_DIR})  # not a link directory: no RUNPATH
  target_sources(${target} PRIVATE $<TARGET_OBJECTS:msprobe_glibc_compat>)
  get_target_property(type ${target} TYPE)
  if(type STREQUAL "EXECUTABLE")  # constructors on glibc < 2.34 (cmake/glibc_compat_exe.c)
    target_sources(${target} PRIVATE $<TARGET_OBJECTS:msprobe_glibc_compat_exe>)
  endif()
  target_link_options(${target} PRIVATE -static-libstdc++ -static-libgcc)
  target_link_libraries(${target} PRIVATE -Wl,--push-state,--no-as-needed pthread dl -Wl,--pop-state)
endfunction()
