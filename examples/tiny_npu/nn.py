"""Layers with explicit forward and backward methods (no autograd tape): every kernel is launched
from a meaningful Python frame such as `Linear.backward`."""
import numpy as np

from . import acl
from . import ops
from .tensor import Tensor


class Module:
    def __call__(self, *args, **kwargs):
        return self.forward(*args, **kwargs)

    def named_parameters(self, prefix=""):
        for name, value in vars(self).items():
            if isinstance(value, Tensor) and getattr(value, "requires_grad", False):
                yield prefix + name, value
            elif isinstance(value, Module):
                yield from value.named_parameters(prefix + name + ".")
            elif isinstance(value, (list, tuple)):  # a stack of layers
                for i, m in enumerate(value):
                    if isinstance(m, Module):
                        yield from m.named_parameters(f"{prefix}{name}.{i}.")

    def parameters(self):
        return [p for _, p in self.named_parameters()]


def parameter(array, dtype):
    t = Tensor.from_numpy(np.asarray(array, dtype=np.float32), dtype)
    t.requires_grad = True
    return t


class Embedding(Module):
    def __init__(self, num_embeddings, dim, rng, dtype=acl.FLOAT):
        self.num_embeddings = num_embeddings
        self.weight = parameter(rng.normal(0.0, 1.0, (num_embeddings, dim)), dtype)

    def forward(self, indices):
        self.indices = indices
        return ops.embedding(self.weight, indices)

    def backward(self, grad):
        self.weight.grad = ops.embedding_dense_backward(grad, self.indices, self.num_embeddings)


class LayerNorm(Module):
    def __init__(self, dim, dtype=acl.FLOAT, eps=1e-5):
        self.normalized_shape = (dim,)
        self.eps = eps
        self.weight = parameter(np.ones(dim), dtype)
        self.bias = parameter(np.zeros(dim), dtype)

    def forward(self, x):
        out, self.mean, self.rstd = ops.layer_norm(x, self.normalized_shape, self.weight, self.bias, self.eps)
        self.x = x
        return out

    def backward(self, grad):
        dx, self.weight.grad, self.bias.grad = ops.layer_norm_backward(
            grad, self.x, self.normalized_shape, self.mean, self.rstd, self.weight, self.bias)
        return dx


class Linear(Module):
    """y = x W^T + b with W of shape [out, in], as torch.nn.Linear."""

    def __init__(self, in_features, out_features, rng, dtype=acl.FLOAT):
        bound = 1.0 / np.sqrt(in_features)
        self.weight = parameter(rng.uniform(-bound, bound, (out_features, in_features)), dtype)
        self.bias = parameter(rng.uniform(-bound, bound, out_features), dtype)

    def forward(self, x):
        self.x = x
        y = ops.matmul(x, self.weight.T)  # W^T is a strided view of W's storage
        return ops.add(y, self.bias)

    def backward(self, grad):
        self.weight.grad = ops.matmul(grad.T, self.x)  # [out, N] @ [N, in], grad.T strided
        self.bias.grad = ops.reduce_sum(grad, (0,))
        return ops.matmul(grad, self.weight)


class Gelu(Module):
    def forward(self, x):
        self.x = x
        return ops.gelu(x)

    def backward(self, grad):
        return ops.gelu_backward(grad, self.x)


class Relu(Module):
    def forward(self, x):
        self.x = x
        return ops.relu(x)

    def backward(self, grad):
        return ops.relu_backward(grad, self.x)


class Softmax(Module):
    def __init__(self, dim=-1):
        self.dim = dim

    def forward(self, x):
        self.y = ops.softmax(x, self.dim)
        return self.y

    def backward(self, grad):
        return ops.softmax_backward(grad, self.y, self.dim)


class Cast(Module):
    """Autocast boundary: computes the following layers in `dtype`, casts gradients back."""

    def __init__(self, dtype):
        self.dtype = dtype

    def forward(self, x):
        self.src_dtype = x.dtype
        return x if x.dtype == self.dtype else ops.cast(x, self.dtype)

    def backward(self, grad):
        return grad if grad.dtype == self.src_dtype else ops.cast(grad, self.src_dtype)


class MseLoss(Module):
    """Mean squared error; backward starts from d(loss)/d(loss) = 1."""

    def __init__(self, dtype=acl.FLOAT):
        self.one = Tensor.from_numpy(np.ones((), dtype=np.float32), dtype)

    def forward(self, x, target):
        self.x, self.target = x, target
        return ops.mse_loss(x, target, ops.REDUCTION_MEAN)

    def backward(self):
        return ops.mse_loss_backward(self.one, self.x, self.target, ops.REDUCTION_MEAN)
