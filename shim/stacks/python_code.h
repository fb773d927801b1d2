// What a code object says, read from its memory with the interpreter's layout (python_layout.h): its strings (file
// and name) and the line of an instruction, from the version's own line table. Used when a frame is first resolved
// and when the walk is checked against the C API, never on the walk itself. Internal to shim/stacks/.
#pragma once
#include <cstdint>
#include <string>

#include "shim/stacks/python_layout.h"

namespace msprobe::shim::python_internal {

// Longest string read from a code object; longest line table decoded.
constexpr int64_t kMaxString = 4096, kMaxTable = int64_t{64} << 20;

// A str object's text as UTF-8 (compact strings only: code objects' names and filenames are). False when `s` is not
// a str (its type is not `unicode_type`, &PyUnicode_Type) or not a compact one.
bool read_str(const PyLayout &L, uintptr_t unicode_type, uintptr_t s, std::string *out);

// The line of the instruction at byte offset `q`, from the code object's own table (reference §7), as
// PyCode_Addr2Line computes it; -1 for an instruction without a line. `bytes_type`: &PyBytes_Type.
int decode_line(const PyLayout &L, uintptr_t bytes_type, uintptr_t code, intptr_t q);

}  // namespace msprobe::shim::python_internal
