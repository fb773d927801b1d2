"""A host with no numpy and no tiny_npu: ctypes only, its own declarations of the few ACL/aclnn functions it needs,
launching aclnnAdd from nested functions, methods, a generator, an `async def` driven by asyncio and a second
Python thread, while another thread keeps running Python. Runs under any CPython 3.8+.

usage: ctypes_host.py CDLL|PyDLL RECORDS.json

At every phase 1 the interpreter's own view of the stack is recorded on the same line as the call:
traceback.extract_stack() (file, line, name) and the qualified names of the same frames (co_qualname from 3.11,
co_name before). RECORDS.json gets them, innermost first, one list per launch in launch order."""
import asyncio
import ctypes
import json
import os
import sys
import threading
import traceback

KIND = {"CDLL": ctypes.CDLL, "PyDLL": ctypes.PyDLL}[sys.argv[1]]  # PyDLL keeps the GIL held during the call
lib64 = os.path.join(os.environ["ASCEND_HOME_PATH"], "lib64")
acl = ctypes.CDLL(os.path.join(lib64, "libascendcl.so"))
nn = KIND(os.path.join(lib64, "libnnopbase.so"))
opapi = KIND(os.path.join(lib64, "libopapi.so"))
P, S, I64, U64 = ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int64, ctypes.c_uint64
for fn, args, res in [(acl.aclInit, [P], ctypes.c_int), (acl.aclrtSetDevice, [ctypes.c_int], ctypes.c_int),
                      (acl.aclrtCreateStream, [P], ctypes.c_int), (acl.aclrtMalloc, [P, S, ctypes.c_int], ctypes.c_int),
                      (acl.aclrtMemcpy, [P, S, P, S, ctypes.c_int], ctypes.c_int),
                      (acl.aclrtSynchronizeStream, [P], ctypes.c_int),
                      (nn.aclCreateTensor, [P, U64, ctypes.c_int, P, I64, ctypes.c_int, P, U64, P], P),
                      (nn.aclCreateScalar, [P, ctypes.c_int], P),
                      (opapi.aclnnAddGetWorkspaceSize, [P, P, P, P, P, P], ctypes.c_int),
                      (opapi.aclnnAdd, [P, U64, P, P], ctypes.c_int)]:
    fn.argtypes, fn.restype = args, res

assert acl.aclInit(None) == 0 and acl.aclrtSetDevice(0) == 0
stream = P()
assert acl.aclrtCreateStream(ctypes.byref(stream)) == 0
dev = P()
assert acl.aclrtMalloc(ctypes.byref(dev), 64, 0) == 0
host = (ctypes.c_float * 16)(*range(16))
assert acl.aclrtMemcpy(dev, 64, host, 64, 1) == 0
dims, strides = (I64 * 1)(16), (I64 * 1)(1)
tensor = nn.aclCreateTensor(dims, 1, 0, strides, 0, 2, dims, 1, dev)
one = ctypes.c_float(1.0)
alpha = nn.aclCreateScalar(ctypes.byref(one), 0)
records = []
lock = threading.Lock()


def qualnames(frame):
    out = []
    while frame is not None:
        out.append(getattr(frame.f_code, "co_qualname", frame.f_code.co_name))
        frame = frame.f_back
    return out


def launch_an_add_from_the_innermost_function_with_a_long_name():
    ws, ex = U64(), P()
    # One line: the reference and phase 1 see the same frames at the same line.
    summary, names, rc = traceback.extract_stack(), qualnames(sys._getframe()), opapi.aclnnAddGetWorkspaceSize(tensor, tensor, alpha, tensor, ctypes.byref(ws), ctypes.byref(ex))  # noqa: E501
    assert rc == 0, rc
    assert opapi.aclnnAdd(None, ws.value, ex, stream) == 0
    assert acl.aclrtSynchronizeStream(stream) == 0
    frames = list(reversed(summary))
    assert len(frames) == len(names), (len(frames), len(names))
    with lock:
        records.append([[f.filename, f.lineno, f.name, q] for f, q in zip(frames, names)])


def nested_outer():
    def nested_middle():
        def nested_inner():
            launch_an_add_from_the_innermost_function_with_a_long_name()
        nested_inner()
    nested_middle()


class Model:
    class Block:
        def forward(self):
            launch_an_add_from_the_innermost_function_with_a_long_name()

    def forward(self):
        self.Block().forward()
        return self

    @property
    def launched_by_a_property(self):
        launch_an_add_from_the_innermost_function_with_a_long_name()
        return 1


def generator():
    for _ in range(2):
        launch_an_add_from_the_innermost_function_with_a_long_name()
        yield


async def coroutine():
    await asyncio.sleep(0)
    launch_an_add_from_the_innermost_function_with_a_long_name()
    await asyncio.sleep(0)
    nested_outer()


stop = threading.Event()


def spinner():  # other Python code runs while the hook reads this thread's frames
    n = 0
    while not stop.is_set():
        n = (n * 31 + 7) % 1000003
        sorted(range(50), key=lambda x: -x)


spin = threading.Thread(target=spinner, daemon=True)
spin.start()
nested_outer()
Model().forward()
assert Model().launched_by_a_property == 1
for _ in generator():
    pass
asyncio.run(coroutine())


def second_thread():
    assert acl.aclrtSetDevice(0) == 0  # the device context is per thread
    nested_outer()


second = threading.Thread(target=second_thread, name="second")
second.start()
second.join()
stop.set()
spin.join()
assert len(records) == 8, len(records)  # every launch made it (a failing thread only prints)
with open(sys.argv[2], "w") as f:
    json.dump({"version": list(sys.version_info[:3]), "launches": records}, f)
print("launches", len(records))
