"""ctypes declarations of the ACL calls the aclop host scripts of the tests use (runtime memory, tensor descs, data
buffers, attributes), loaded from $ASCEND_HOME_PATH/lib64 with ctypes.CDLL as a plain host would: one copy instead of
one per test. Import: `from aclop_ctypes import acl, compiler, P, I64`."""
import ctypes
import os

home = os.environ["ASCEND_HOME_PATH"]
acl = ctypes.CDLL(os.path.join(home, "lib64", "libascendcl.so"))
compiler = ctypes.CDLL(os.path.join(home, "lib64", "libacl_op_compiler.so"))
P, I64 = ctypes.c_void_p, ctypes.c_int64
acl.aclrtMalloc.argtypes = [P, ctypes.c_size_t, ctypes.c_int]
acl.aclrtMemcpy.argtypes = [P, ctypes.c_size_t, P, ctypes.c_size_t, ctypes.c_int]
acl.aclrtSynchronizeStream.argtypes = [P]
acl.aclCreateTensorDesc.argtypes = [ctypes.c_int, ctypes.c_int, P, ctypes.c_int]
acl.aclCreateTensorDesc.restype = P
acl.aclCreateDataBuffer.argtypes = [P, ctypes.c_size_t]
acl.aclCreateDataBuffer.restype = P
acl.aclopCreateAttr.restype = P
