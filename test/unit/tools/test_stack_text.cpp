// How the tools print stack.json's frames (format/stack_text.h): one line per frame, and the innermost frame of
// the user's own code for a table cell or a one-line message.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "format/stack_text.h"

namespace msprobe::tools {
namespace {

TEST(FrameLine, PythonFrameOnOneLine) {
  // msprobe's frame: the source line follows a line break (docs/stacks.md).
  EXPECT_EQ(format::frame_line("File /w/train.py, line 80, in TinyModel.forward, \n x = self.act(h)"),
            "File /w/train.py, line 80, in TinyModel.forward, x = self.act(h)");
  // Spaces inside the source line are the source's own: kept. A CRLF break counts as one.
  EXPECT_EQ(format::frame_line("File a.py, line 1, in f, \r\n y = g()  # why"), "File a.py, line 1, in f, y = g()  # why");
  // A source line that ends with a comma keeps it; a frame without a source line loses the separator's.
  EXPECT_EQ(format::frame_line("File a.py, line 2, in f, \n loss = model(a,"), "File a.py, line 2, in f, loss = model(a,");
  EXPECT_EQ(format::frame_line("File <frozen runpy>, line 88, in _run_code, \n "),
            "File <frozen runpy>, line 88, in _run_code");
  // Native frames are one line already.
  EXPECT_EQ(format::frame_line("ffi_call (libffi.so.8+0x6b0c)"), "ffi_call (libffi.so.8+0x6b0c)");
  EXPECT_EQ(format::frame_line(""), "");
}

TEST(FrameLine, StackTextIsOneLinePerFrame) {
  const std::vector<std::string> frames = {"libffi.so.8+0x6f79", "File a.py, line 3, in f, \n g()"};
  EXPECT_EQ(format::stack_text(frames, "  "), "  libffi.so.8+0x6f79\n  File a.py, line 3, in f, g()\n");
}

TEST(PythonFrame, Parts) {
  const auto p = format::python_frame("File /w/tiny_npu/ops.py, line 553, in gelu, \n return _unary(\"Gelu\", x, out)");
  ASSERT_TRUE(p);
  EXPECT_EQ(p->file, "/w/tiny_npu/ops.py");
  EXPECT_EQ(p->line, 553u);
  EXPECT_EQ(p->function, "gelu");
  EXPECT_FALSE(format::python_frame("_PyEval_EvalFrameDefault (python3.11+0x52f9c0)"));
  EXPECT_FALSE(format::python_frame("File x.py, line seven, in f, \n g()"));
}

// train.py's stacks: native frames, the framework imported from a sub-folder (tiny_npu), the script, the interpreter.
const std::vector<std::string> kTrainStack = {
    "libffi.so.8+0x6f79",
    "File /w/examples/tiny_npu/ops.py, line 199, in _phase1, \n rc = op.op.phase1()",
    "File /w/examples/tiny_npu/ops.py, line 553, in gelu, \n return _unary(\"Gelu\", x, out)",
    "File /w/examples/tiny_npu/nn.py, line 84, in Gelu.forward, \n return ops.gelu(x)",
    "File /w/examples/train.py, line 80, in TinyModel.forward, \n x = self.act(h)",
    "File /w/examples/train.py, line 305, in main, \n train(args, rank, world_size)",
    "File /w/examples/train.py, line 310, in <module>, \n sys.exit(main())",
    "Py_RunMain (python3.11+0x65007e)",
    "_start (python3.11+0x627bd0)",
};

TEST(UserFrame, TheScriptsOwnLineNotTheFrameworksNorTheInterpreters) {
  EXPECT_EQ(format::user_frame(kTrainStack), 4u);  // train.py line 80, not _start (the last) nor tiny_npu (the first Python)
}

TEST(UserFrame, InstalledPackagesAndTheStandardLibraryAreNotTheUsers) {
  const std::vector<std::string> torch = {
      "File /usr/lib/python3/dist-packages/torch/nn/functional.py, line 1, in gelu, \n x",
      "File /venv/lib/python3.11/site-packages/torch/nn/modules/module.py, line 2, in Module._call_impl, \n x",
      "File /proj/model.py, line 40, in Block.forward, \n h = self.act(h)",
      "File /proj/train.py, line 9, in main, \n loss = model(x)",
      "File /usr/lib/python3.11/threading.py, line 975, in Thread.run, \n self._target()",
      "File <frozen runpy>, line 88, in _run_code, \n ",
  };
  EXPECT_EQ(format::user_frame(torch), 2u);  // model.py beside train.py, the outermost frame that is not library code
  const std::vector<std::string> library_only = {"libopapi.so+0x10",
                                                 "File /usr/lib/python3.11/threading.py, line 1, in run, \n x",
                                                 "File <string>, line 1, in <module>, \n "};
  EXPECT_EQ(format::user_frame(library_only), 1u);  // every Python frame is library code: the innermost Python frame
  const std::vector<std::string> native = {"acl_app+0x1234", "main (acl_app+0x99)", "_start (acl_app+0x10)"};
  EXPECT_EQ(format::user_frame(native), 0u);  // no Python: the host's call site
  EXPECT_FALSE(format::user_frame(std::vector<std::string>{}));
}

}  // namespace
}  // namespace msprobe::tools
