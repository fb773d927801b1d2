"""Tensor: device storage plus a strided view of it (shape, strides and offset in elements)."""
import numpy as np

from . import acl
from . import runtime as _rt


class Storage:
    """One block of device memory from the caching allocator, shared by every view of it."""

    __slots__ = ("rt", "ptr", "nbytes", "block", "__weakref__")

    def __init__(self, rt, nbytes):
        self.rt = rt
        self.nbytes = nbytes
        self.ptr, self.block = rt.allocator.malloc(max(nbytes, 1))

    def __del__(self):
        rt = self.rt
        if rt is not None and rt.alive:
            rt.allocator.free(self.ptr, self.block)


def contiguous_strides(shape):
    strides, acc = [], 1
    for d in reversed(shape):
        strides.append(acc)
        acc *= d
    return tuple(reversed(strides))


def torch_format(ndim):
    """torch_npu's base format of an n-D tensor (op_api_common ConvertType)."""
    return {3: acl.FORMAT_NCL, 4: acl.FORMAT_NCHW, 5: acl.FORMAT_NCDHW}.get(ndim, acl.FORMAT_ND)


class Tensor:
    def __init__(self, storage, shape, strides, offset, dtype):
        self.storage = storage
        self.shape = tuple(int(d) for d in shape)
        self.strides = tuple(int(s) for s in strides)
        self.offset = int(offset)
        self.dtype = dtype
        self.grad = None

    # ---- construction -------------------------------------------------------------------------
    @staticmethod
    def empty(shape, dtype=acl.FLOAT, rt=None):
        rt = rt or _rt.current()
        shape = tuple(int(d) for d in shape)
        n = int(np.prod(shape, dtype=np.int64)) if shape else 1
        return Tensor(Storage(rt, n * acl.itemsize(dtype)), shape, contiguous_strides(shape), 0, dtype)

    @staticmethod
    def from_numpy(array, dtype=None, rt=None):
        """Copies a host array to the device (bf16: rounded to nearest even)."""
        a = np.asarray(array)
        if dtype is None:
            dtype = acl.ACL_OF[a.dtype]
        t = Tensor.empty(a.shape, dtype, rt)
        host = acl.to_host_array(a, dtype)
        t.storage.rt.copy_to_device(t.storage.ptr, host.tobytes())
        return t

    # ---- properties ---------------------------------------------------------------------------
    @property
    def ndim(self):
        return len(self.shape)

    @property
    def itemsize(self):
        return acl.itemsize(self.dtype)

    def numel(self):
        return int(np.prod(self.shape, dtype=np.int64)) if self.shape else 1

    @property
    def rt(self):
        return self.storage.rt

    def data_ptr(self):
        """Address of the view's first element (the storage base plus the offset)."""
        return self.storage.ptr + self.offset * self.itemsize

    def storage_elements(self):
        return self.storage.nbytes // self.itemsize

    def is_contiguous(self):
        expect = contiguous_strides(self.shape)
        return all(st == ex for d, st, ex in zip(self.shape, self.strides, expect) if d != 1)

    def __repr__(self):
        return f"Tensor(shape={self.shape}, dtype={self.dtype}, strides={self.strides}, offset={self.offset})"

    # ---- views (share storage) ----------------------------------------------------------------
    def transpose(self, d0, d1):
        shape, strides = list(self.shape), list(self.strides)
        shape[d0], shape[d1] = shape[d1], shape[d0]
        strides[d0], strides[d1] = strides[d1], strides[d0]
        return Tensor(self.storage, shape, strides, self.offset, self.dtype)

    @property
    def T(self):
        if self.ndim != 2:
            raise ValueError("T needs a 2-D tensor")
        return self.transpose(0, 1)

    def __getitem__(self, index):
        """Integer and slice (step >= 1) indexing over the leading dimensions: a strided view."""
        if not isinstance(index, tuple):
            index = (index,)
        if len(index) > self.ndim:
            raise IndexError("too many indices")
        shape, strides, offset = [], [], self.offset
        for dim, idx in enumerate(index):
            size, stride = self.shape[dim], self.strides[dim]
            if isinstance(idx, slice):
                start, stop, step = idx.indices(size)
                if step < 1:
                    raise IndexError("negative slice steps are not supported")
                n = max(0, (stop - start + step - 1) // step)
                offset += start * stride
                shape.append(n)
                strides.append(stride * step)
            else:
                i = int(idx)
                if i < 0:
                    i += size
                if not 0 <= i < size:
                    raise IndexError(f"index {idx} out of range for dimension {dim} of size {size}")
                offset += i * stride
        shape += self.shape[len(index):]
        strides += self.strides[len(index):]
        return Tensor(self.storage, shape, strides, offset, self.dtype)

    def as_strided(self, shape, strides, offset=0):
        """Another view of the same storage: `offset` elements past this view's start (torch's as_strided)."""
        return Tensor(self.storage, shape, strides, self.offset + offset, self.dtype)

    def view(self, *shape):
        if len(shape) == 1 and isinstance(shape[0], (tuple, list)):
            shape = tuple(shape[0])
        shape = list(shape)
        if -1 in shape:
            known = int(np.prod([d for d in shape if d != -1], dtype=np.int64))
            shape[shape.index(-1)] = self.numel() // max(known, 1)
        if int(np.prod(shape, dtype=np.int64)) != self.numel():
            raise ValueError(f"cannot view {self.shape} as {tuple(shape)}")
        if not self.is_contiguous():
            raise ValueError("view of a non-contiguous tensor: call contiguous() first")
        return Tensor(self.storage, shape, contiguous_strides(shape), self.offset, self.dtype)

    def contiguous(self):
        if self.is_contiguous():
            return self
        from . import ops
        out = Tensor.empty(self.shape, self.dtype, self.rt)
        ops.inplace_copy(out, self)
        return out

    # ---- readback -----------------------------------------------------------------------------
    def numpy(self):
        """Synchronizes, copies the storage to the host and applies the view (bf16 -> float32)."""
        if self.numel() == 0:
            return np.zeros(self.shape, dtype=np.float32 if self.dtype == acl.BF16 else acl.NUMPY_OF[self.dtype])
        raw = self.rt.copy_to_host(self.storage.ptr, self.storage.nbytes)
        base = np.frombuffer(raw, dtype=acl.NUMPY_OF[self.dtype])
        isz = self.itemsize
        view = np.lib.stride_tricks.as_strided(base[self.offset:], shape=self.shape,
                                               strides=[s * isz for s in self.strides])
        return acl.from_host_array(np.array(view), self.dtype)

    def item(self):
        return float(self.numpy().reshape(-1)[0])
