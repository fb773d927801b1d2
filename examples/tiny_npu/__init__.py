"""tiny_npu: a small training framework over the CANN C API (ctypes), shaped like torch_npu."""
from . import acl, nn, ops, optim
from .runtime import current, init, shutdown
from .tensor import Tensor

float32, float16, bfloat16, int64 = acl.FLOAT, acl.FLOAT16, acl.BF16, acl.INT64
DTYPES = {"fp32": float32, "fp16": float16, "bf16": bfloat16}

__all__ = ["acl", "nn", "ops", "optim", "current", "init", "shutdown", "Tensor", "float32", "float16", "bfloat16",
           "int64", "DTYPES"]
