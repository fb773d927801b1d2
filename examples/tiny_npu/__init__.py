"""tiny_npu: a small training framework over the CANN C API (ctypes), shaped like torch_npu."""
from . import acl, nn, ops, optim  # noqa: F401
from .runtime import current, init, shutdown  # noqa: F401
from .tensor import Tensor  # noqa: F401

float32, float16, bfloat16, int64 = acl.FLOAT, acl.FLOAT16, acl.BF16, acl.INT64
DTYPES = {"fp32": float32, "fp16": float16, "bf16": bfloat16}
