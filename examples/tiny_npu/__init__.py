"""tiny_npu: a small training framework over the CANN C API (ctypes), shaped like torch_npu."""
