"""AdamW over aclnnApplyAdamWV2 (one fused kernel per parameter, as torch_npu's fused AdamW).

Low-precision (fp16/bf16) parameters get fp32 master copies, as mixed-precision training keeps them:
the fp32 optimizer states avoid fp16's underflow of v = grad^2 (which would blow the update up), and
the updated master is cast back into the model's parameter.
"""
from . import acl
from . import ops


class AdamW:
    def __init__(self, params, lr=1e-2, betas=(0.9, 0.999), eps=1e-8, weight_decay=1e-2):
        self.params = list(params)
        self.lr, self.betas, self.eps, self.weight_decay = lr, betas, eps, weight_decay
        self.master = [p if p.dtype == acl.FLOAT else ops.cast(p, acl.FLOAT) for p in self.params]
        self.state = [(ops.zeros(m.shape, acl.FLOAT), ops.zeros(m.shape, acl.FLOAT)) for m in self.master]
        # The step count lives on the device and is incremented there, like torch's state_steps.
        self.step_count = ops.zeros((1,), acl.FLOAT)

    def step(self):
        ops.adds(self.step_count, 1.0, out=self.step_count)
        b1, b2 = self.betas
        for p, master, (m, v) in zip(self.params, self.master, self.state):
            if p.grad is None:
                continue
            grad = p.grad if p.grad.dtype == acl.FLOAT else ops.cast(p.grad, acl.FLOAT)
            ops.apply_adamw_v2(master, m, v, grad, self.step_count, self.lr, b1, b2, self.weight_decay, self.eps)
            if master is not p:
                ops.cast(master, p.dtype, out=p)

    def zero_grad(self):
        for p in self.params:
            p.grad = None
