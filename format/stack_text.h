// How every command and the report print the frames of stack.json (docs/inspect.md, "Stacks"): one line per frame,
// and, where one frame must stand for the stack (a table cell, a one-line message), the innermost frame of the user's
// own code.
//
// A Python frame is msprobe's "File {file}, line {n}, in {function}, \n {source line}" (docs/stacks.md): the newline
// is part of the format, and printed as it is the source line drops to column 0. Native frames are one line already.
#pragma once
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

namespace msprobe::format {

// The frame on one line: every run of white space that holds a line break becomes one space, trailing white space
// and a trailing comma (a frame without a source line) go. "File a.py, line 3, in f, x = g()".
std::string frame_line(std::string_view frame);

// The parts of a Python frame; nullopt for a native one ("ffi_call (libffi.so.8+0x6b0c)").
struct PythonFrame {
  std::string_view file, function;
  unsigned long line = 0;
};
std::optional<PythonFrame> python_frame(std::string_view frame);

// The innermost frame of the user's own code (frames are innermost first, as stack.json holds them):
//   1. the innermost Python frame in the folder of the program's main script, the file of the outermost Python frame
//      that is not library code (train.py's own lines, not those of the framework it imports from a sub-folder);
//   2. else, when every Python frame is library code, the innermost Python frame;
//   3. else the first frame (a native stack: the host's call site).
// Library code: the standard library (a file under lib/pythonX.Y/ or lib64/pythonX.Y/, or in a pythonXY.zip),
// site-packages and dist-packages, frozen and synthetic files ("<frozen runpy>", "<string>"), the shim's own Python
// code (a folder named msprobe_shim). nullopt for an empty stack.
std::optional<size_t> user_frame(std::span<const std::string> frames);

// One line per frame, the same lines in every command: `indent` before each, '\n' after each.
std::string stack_text(std::span<const std::string> frames, std::string_view indent);

}  // namespace msprobe::format
