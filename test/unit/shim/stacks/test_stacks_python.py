"""Python frames of shim/stacks/stacks.h, in a real CPython (Debian's /usr/bin/python3: the C API is exported by the
executable, no libpython).

libstacks_pytest.so links the capture code and is called through ctypes. ctypes.PyDLL keeps the GIL held during the
call; ctypes.CDLL releases it (as torch's bindings do): the capture must read the same Python frames either way.
Every expectation is computed independently, from the interpreter's own frame objects (sys._getframe, f_lineno,
co_qualname), linecache and sysconfig.
"""
import ctypes
import gc
import linecache
import os
import sys
import sysconfig
import threading

import pytest

BUILD = os.environ.get("MSPROBE_BUILD_DIR", os.path.join(os.path.dirname(__file__), "..", "..", "..", "..", "build"))
LIB = os.path.join(BUILD, "tests", "lib", "libstacks_pytest.so")
OFF, NATIVE, PYTHON, MIXED = 0, 1, 2, 3


def _bind(kind):
    lib = kind(LIB)
    for name in ("stacks_capture", "stacks_capture_via_closure"):
        getattr(lib, name).argtypes = [ctypes.c_int, ctypes.c_int]
        getattr(lib, name).restype = ctypes.c_uint32
    for name in ("stacks_render",):
        getattr(lib, name).argtypes = [ctypes.c_uint32, ctypes.c_int, ctypes.c_char_p, ctypes.c_size_t]
        getattr(lib, name).restype = ctypes.c_int64
    lib.stacks_op_name.argtypes = [ctypes.c_uint32, ctypes.c_char_p, ctypes.c_size_t]
    lib.stacks_op_name.restype = ctypes.c_int64
    lib.stacks_group.argtypes = [ctypes.c_uint32, ctypes.c_int]
    lib.stacks_group.restype = ctypes.c_uint32
    lib.stacks_python_frames.argtypes = [ctypes.c_uint32]
    lib.stacks_native_frames.argtypes = [ctypes.c_uint32]
    lib.stacks_count.restype = ctypes.c_uint64
    lib.stacks_unwinder.restype = ctypes.c_char_p
    return lib


with_gil = _bind(ctypes.PyDLL)  # the GIL stays held during calls
without_gil = _bind(ctypes.CDLL)  # the GIL is released during calls


def _text(fn, *args):
    n = fn(*args, None, 0)
    buf = ctypes.create_string_buffer(n + 1)
    fn(*args, buf, n + 1)
    return buf.value.decode("utf-8")


def render(sid, mode):
    s = _text(with_gil.stacks_render, sid, mode)
    return s.split("\x1e") if s else []


def op_name(sid):
    return _text(with_gil.stacks_op_name, sid)


def expected_frames():
    """The caller's Python stack as msprobe's frame strings, innermost first, read from the interpreter itself."""
    out = []
    f = sys._getframe(1)
    while f is not None:
        code = f.f_code
        src = linecache.getline(code.co_filename, f.f_lineno).strip()
        out.append(f"File {code.co_filename}, line {f.f_lineno}, in {code.co_qualname}, \n {src}")
        f = f.f_back
    return out


STDLIB = os.path.realpath(sysconfig.get_paths()["stdlib"]) + os.sep


def is_stdlib(filename):
    if filename.startswith("<frozen "):
        return True
    real = os.path.realpath(filename)
    return real.startswith(STDLIB) and "site-packages" not in real and "dist-packages" not in real


def is_dispatch(qualname):
    """Private (`_x`), special (`__call__`, not `__init__`) and synthetic (`<module>`, `<listcomp>`) functions."""
    last = qualname.split(".")[-1]
    return last.startswith("<") or (last.startswith("_") and last != "__init__")


def expected_op_name():
    """The caller's qualnames, outermost first, without the standard library's frames and without private,
    special and synthetic functions (independent rule)."""
    names = []
    f = sys._getframe(1)
    while f is not None:
        if not is_stdlib(f.f_code.co_filename) and not is_dispatch(f.f_code.co_qualname):
            names.append(f.f_code.co_qualname)
        f = f.f_back
    return "/".join(reversed(names))


def test_library_and_unwinder():
    assert os.path.exists(LIB), LIB
    assert with_gil.stacks_unwinder() == b"libunwind"


def test_python_frames_are_the_interpreters():
    def launch_scope():
        # Both on one line: the capture and the reference see the same frames at the same instruction line.
        sid, want = with_gil.stacks_capture(1, 1), expected_frames()
        return sid, want

    sid, want = launch_scope()
    assert with_gil.stacks_python_frames(sid) == len(want)
    assert render(sid, PYTHON) == want
    first = want[0]
    assert ", in test_python_frames_are_the_interpreters.<locals>.launch_scope, \n" in first
    assert first.endswith("sid, want = with_gil.stacks_capture(1, 1), expected_frames()")

    mixed = render(sid, MIXED)
    native = render(sid, NATIVE)
    assert len(mixed) == len(want) + len(native)
    start = mixed.index(want[0])
    assert mixed[start:start + len(want)] == want  # the Python frames in one block
    assert mixed[:start] + mixed[start + len(want):] == native  # the native ones around it, in order
    # Before the block: the native code that ran between Python and the capture (libffi / ctypes), not the
    # library's own frames, which capture() skips as the shim's.
    assert start > 0
    assert not any("libstacks_pytest.so" in f for f in native), native
    assert any("libffi" in f or "_ctypes" in f for f in mixed[:start]), mixed[:start]
    # After it: the interpreter (its exported functions are named) down to the C runtime.
    assert any("_PyEval_EvalFrameDefault" in f or "PyObject_" in f for f in mixed[start + len(want):])


def test_op_name_outer_to_inner_without_stdlib():
    def model_forward():
        def layer():
            sid, want = with_gil.stacks_capture(1, 1), expected_op_name()
            return sid, want
        return layer()

    sid, want = model_forward()
    assert op_name(sid) == want
    assert want.endswith("test_op_name_outer_to_inner_without_stdlib"
                         "/test_op_name_outer_to_inner_without_stdlib.<locals>.model_forward"
                         "/test_op_name_outer_to_inner_without_stdlib.<locals>.model_forward.<locals>.layer")


class _Layer:
    """A module-like object: its __call__ and private helper are dispatch, forward and __init__ are scope."""

    def __init__(self, at_init=False):
        self.got = self._launch() if at_init else None

    def __call__(self):
        return self.forward()

    def forward(self):
        return [self._launch() for _ in range(1)][0]

    def _launch(self):
        return (lambda: (with_gil.stacks_capture(1, 1), expected_op_name()))()


def test_op_name_leaves_out_private_special_and_synthetic_functions():
    sid, want = _Layer()()
    assert op_name(sid) == want
    # __call__, _launch, the list comprehension and the lambda are left out; forward stays.
    assert want.endswith("/test_op_name_leaves_out_private_special_and_synthetic_functions/_Layer.forward"), want
    sid, want = _Layer(at_init=True).got
    assert op_name(sid) == want
    assert want.endswith("/test_op_name_leaves_out_private_special_and_synthetic_functions/_Layer.__init__"), want
    assert "<module>" not in want and "<" not in op_name(sid)


def test_two_calls_on_one_line_are_two_stacks_in_one_group():
    def two():
        return with_gil.stacks_capture(1, 1), with_gil.stacks_capture(1, 1)  # one line, two instructions

    for _ in range(3):  # warm up: the first calls of a line may take another native path (3.12+)
        a, b = two()
    assert a != b  # different instruction offsets: different stacks
    assert render(a, PYTHON) == render(b, PYTHON) and render(a, MIXED) == render(b, MIXED)
    for mode in (PYTHON, MIXED, NATIVE):
        assert with_gil.stacks_group(a, mode) == with_gil.stacks_group(b, mode) != 0  # shown once in stack.json
    assert with_gil.stacks_group(b, MIXED) == a  # the first id asked about represents the group


def capture_at_line(n):
    if n == 0:
        return with_gil.stacks_capture(1, 1)
    return with_gil.stacks_capture(1, 1)


def test_same_line_same_id_other_line_other_id():
    # One call site here, so only the innermost frame differs. Each line's call is warmed up first: from 3.12 on,
    # the interpreter's first calls of a line take another C path (before the CALL is specialized), which is a
    # genuinely different native stack.
    got = [capture_at_line(n) for n in [0] * 20 + [1] * 20]
    ids, other = got[10:20], got[39]
    assert len(set(ids)) == 1
    assert other != ids[0]
    # Both share every native frame (same C path through the interpreter) but differ in one Python frame.
    assert with_gil.stacks_group(ids[0], NATIVE) == with_gil.stacks_group(other, NATIVE)
    assert with_gil.stacks_group(ids[0], PYTHON) != with_gil.stacks_group(other, PYTHON)
    assert with_gil.stacks_group(other, MIXED) == other
    assert with_gil.stacks_group(other, OFF) == 0
    a, b = render(ids[0], PYTHON), render(other, PYTHON)
    assert a[1:] == b[1:] and a[0] != b[0]
    before = with_gil.stacks_count()
    loop = {capture_at_line(0) for _ in range(100)}
    assert len(loop) == 1
    assert with_gil.stacks_count() == before + 1  # one new call site, one new stack, then 99 known ones


def test_thread_holding_the_gil_and_stdlib_frames():
    got = {}

    def worker():
        got["sid"], got["want"], got["op"] = with_gil.stacks_capture(1, 1), expected_frames(), expected_op_name()

    t = threading.Thread(target=worker)
    t.start()
    t.join()
    sid = got["sid"]
    assert render(sid, PYTHON) == got["want"]
    # The thread's stdlib frames (threading.py: _bootstrap, _bootstrap_inner, run) are in the stack...
    assert any("threading.py" in f for f in got["want"])
    # ...but not in the OpName, which starts at the thread's target.
    assert op_name(sid) == got["op"] == "test_thread_holding_the_gil_and_stdlib_frames.<locals>.worker"


def test_without_the_gil_same_python_frames():
    # ctypes.CDLL released the GIL: the capture still reads this thread's own frames, and gets what the
    # interpreter itself shows (and the OpName it gives with the GIL held).
    sid, want, want_op = without_gil.stacks_capture(1, 1), expected_frames(), expected_op_name()
    assert with_gil.stacks_native_frames(sid) > 3
    assert render(sid, PYTHON) == want
    assert op_name(sid) == want_op

    per_thread = [[] for _ in range(4)]

    def worker(out):
        for _ in range(50):
            out.append((without_gil.stacks_capture(0, 1), expected_frames()))

    threads = [threading.Thread(target=worker, args=(out,)) for out in per_thread]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    results = [r for out in per_thread for r in out]
    assert len(results) == 200
    for r, want in results:
        assert render(r, PYTHON) == want
    assert len({out[-1][0] for out in per_thread}) == 1  # the same stack in every thread


def test_code_objects_made_and_dropped_keep_their_frames():
    # Functions compiled on the fly and thrown away: their code objects would be freed and their addresses reused
    # if the capture did not keep them alive; each stack must still show its own function and line.
    seen = []
    for i in range(30):
        ns = {"lib": with_gil}
        src = "\n" * i + f"def made_{i}():\n    return lib.stacks_capture(0, 1)\n"
        exec(compile(src, f"<made {i}>", "exec"), ns)
        seen.append((i, ns[f"made_{i}"]()))
        del ns
        gc.collect()
    for i, sid in seen:
        frames = render(sid, PYTHON)
        assert frames[0] == f"File <made {i}>, line {i + 2}, in made_{i}, \n ", frames[0]
    assert len({sid for _, sid in seen}) == 30


def test_code_objects_dropped_without_the_gil_are_told_apart():
    # GIL released: nothing pins the code objects, so the next function often lands at a freed one's address.
    # Same first line, names and filenames of the same lengths: each stack must still show its own function.
    seen = []
    for i in range(10, 60):
        ns = {"lib": without_gil}
        src = f"def made_{i}():\n    return lib.stacks_capture(0, 1)\n"
        exec(compile(src, f"<made {i}>", "exec"), ns)
        seen.append((i, id(ns[f"made_{i}"].__code__), ns[f"made_{i}"]()))
        del ns
        gc.collect()
    assert len({addr for _, addr, _ in seen}) < len(seen), "no address was reused: the test proves nothing"
    for i, _, sid in seen:
        frames = render(sid, PYTHON)
        assert frames[0] == f"File <made {i}>, line 2, in made_{i}, \n ", frames[0]
    assert len({sid for _, _, sid in seen}) == len(seen)


def site():
    return with_gil.stacks_capture(1, 1)


def site_released():
    return without_gil.stacks_capture(0, 1)


def test_direct_frame_walk_gil_held_or_not():
    # The walk reads the interpreter's frames; with the GIL held the first sight of a stack is checked against
    # the C API. From plain calls, a generator, a coroutine, a comprehension and a lambda, a stack gets the same
    # frames and OpName whether the GIL was held or released (the call sites differ by one line only).
    def from_generator(fn):
        def gen():
            yield fn()
        return next(gen())

    def from_coroutine(fn):
        async def coro():
            return fn()
        c = coro()
        try:
            c.send(None)
        except StopIteration as stop:
            return stop.value

    contexts = [lambda fn: fn(), from_generator, from_coroutine, lambda fn: [fn() for _ in range(1)][0]]
    for ctx in contexts:
        held, released = ctx(site), ctx(site_released)
        assert with_gil.stacks_raw_walk_active() == 1
        a, b = render(held, PYTHON), render(released, PYTHON)
        assert len(a) == len(b) > 2 and a[1:] == b[1:], (a, b)
        assert ", in site, \n" in a[0] and ", in site_released, \n" in b[0]
        assert op_name(held).rsplit("/", 1)[0] == op_name(released).rsplit("/", 1)[0]
    with_gil.stacks_allow_raw_walk(0)
    try:
        assert with_gil.stacks_capture(0, 1) == 0 and without_gil.stacks_capture(0, 1) == 0  # walk off: none
    finally:
        with_gil.stacks_allow_raw_walk(1)
    assert with_gil.stacks_python_frames(site()) > 0

    def in_generator():
        def gen():
            yield without_gil.stacks_capture(0, 1), expected_frames()
        return next(gen())
    sid, want = in_generator()
    assert render(sid, PYTHON) == want


def test_libffi_closure_frames_are_skipped_like_the_shims():
    # The shim's forwarders are libffi closures: between the hook and the host's call site sit frames of libffi's
    # closure entry code, outside the shim's object. Reached directly or through a closure, from one call site
    # here, the capture must record the same stack.
    direct, closure = with_gil.stacks_capture, with_gil.stacks_capture_via_closure
    got = [f(1, 1) for f in [direct] * 3 + [closure] * 3]  # the last of each is warmed up
    assert got[2] == got[5]
    frames = render(got[5], NATIVE)
    assert not any("libstacks_pytest.so" in f for f in frames)


def test_handled_exception_state_survives_a_capture():
    try:
        raise KeyError("kept")
    except KeyError as e:
        sid = with_gil.stacks_capture(1, 1)
        assert sys.exc_info()[1] is e
    assert with_gil.stacks_python_frames(sid) > 0


if __name__ == "__main__":
    sys.exit(pytest.main([__file__, "-q"]))
