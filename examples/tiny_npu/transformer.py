"""The layers of a decoder-only transformer, launched as torch_npu + MindSpeed launch them (explicit forward and
backward, no autograd tape), and their tensor, sequence and expert parallelism over one group of ranks.

Activations are [tokens, hidden] matrices whose rows are the tokens in Megatron's order, sequence-major ([S, B]), so
that splitting the rows splits the sequence. The attention works in the BSND layout on views of them.

Parallelism (`Parallel`), Megatron's layout with MindSpeed's fused kernels:
- column-parallel linears (QKV, the MLP's gate and up) hold rows of the weight, row-parallel ones (the attention's
  output, the MLP's down projection) columns; a rank computes its own heads and its slice of the MLP;
- mode "allreduce": the row-parallel matmul and the all-reduce of its partial sums are one MatmulAllReduce; in the
  backward the column-parallel input gradient is all-reduced with a plain HcclAllReduce on the HCCL stream, issued
  before the weight gradient's matmul and waited for after it (Megatron's asynchronous gradient all-reduce);
- mode "sequence" (sequence parallel): between the parallel regions every rank holds its rows of the sequence;
  a column-parallel linear gathers them inside AllGatherMatmul, a row-parallel one scatters its sums with
  MatmulReduceScatter; the backward swaps them (MatmulReduceScatter for the column-parallel input gradient,
  AllGatherMatmul for the row-parallel one, whose gathered gradient gives the weight's), as MindSpeed's
  ascend_turbo linears do;
- MoE: the experts are split over the same ranks (expert parallelism over the tensor-parallel group, MindSpeed's
  --moe-tp-extend-ep); each rank routes its rows (its sequence rows, or with "allreduce" its slice of the replicated
  rows, whose results an HcclAllGather puts back together) and exchanges them with HcclAlltoAllV (dispatch, combine);
- parameters whose gradient is a per-rank partial sum (the norms', the embedding's with "sequence", the router's)
  carry `sum_over_ranks`: the trainer all-reduces them after the backward, as Megatron's sequence-parallel
  layer-norm gradients.
Collectives other than the MC2 kernels run on the HCCL stream (distributed.CommStream); MC2 runs on the compute stream.
"""
import numpy as np

from . import acl, ops
from .distributed import CommStream
from .nn import Module, parameter
from .tensor import Tensor

# FlashAttention as MindSpeed calls it for a causal model: sparse mode 2 (causal from the top left) with CANN's
# compressed [2048, 2048] mask (True above the diagonal: masked), preTokens 65536 and nextTokens 0.
CAUSAL_SPARSE_MODE, COMPRESSED_MASK, PRE_TOKENS, NEXT_TOKENS = 2, 2048, 65536, 0


def _cast(x, dtype):
    """x in `dtype` (a Cast kernel only when it is another)."""
    return x if x.dtype == dtype else ops.cast(x, dtype)


class Parallel:
    """This rank's place in the tensor-parallel group: mode "none" (one rank), "allreduce" or "sequence"."""

    def __init__(self, rank=0, size=1, mode="none", group=None):
        self.rank, self.size, self.mode, self.group = rank, size, mode if size > 1 else "none", group
        self.name = group.name() if group is not None else None  # the MC2 kernels find the communicator by it
        self.comm = CommStream(group) if group is not None else None

    @property
    def sequence(self):
        return self.mode == "sequence"

    def shard(self, n):
        """This rank's [start, stop) of n items split evenly."""
        return self.rank * n // self.size, (self.rank + 1) * n // self.size

    def rows(self, x):
        """This rank's rows of a replicated [T, ...] tensor (a view)."""
        start, stop = self.shard(x.shape[0])
        return x[start:stop]

    def gather_rows(self, local):
        """Every rank's rows, in rank order (HcclAllGather on the HCCL stream)."""
        out = Tensor.empty((local.shape[0] * self.size,) + local.shape[1:], local.dtype)
        self.comm.all_gather(local, out).wait()
        return out


class RmsNorm(Module):
    def __init__(self, dim, dtype, partial, eps=1e-6):
        self.eps = eps
        self.weight = parameter(np.ones(dim), dtype)
        self.weight.sum_over_ranks = partial

    def forward(self, x):
        self.x = x
        out, self.rstd = ops.rms_norm(x, self.weight, self.eps)
        return out

    def backward(self, grad):
        dx, self.weight.grad = ops.rms_norm_grad(grad, self.x, self.rstd, self.weight)
        return dx


class ColumnParallelLinear(Module):
    """y = x W^T with W [out, in] as torch.nn.Linear, this rank holding the rows `rows` of the full weight."""

    def __init__(self, full, rows, par, dtype):
        self.par = par
        self.weight = parameter(full[rows], dtype)

    def forward(self, x):
        w, par = self.weight, self.par
        if par.sequence:
            y, self.x = ops.all_gather_matmul(x, w.T, par.name, par.size)  # keeps the gathered input
            return y
        self.x = x
        return ops.matmul(x, w.T)

    def backward(self, grad):
        w, par = self.weight, self.par
        if par.sequence:
            dx = ops.matmul_reduce_scatter(grad, w, par.name, par.size)
            w.grad = ops.matmul(grad.T, self.x)
            return dx
        dx = ops.matmul(grad, w)
        work = par.comm.all_reduce(dx) if par.mode == "allreduce" else None
        w.grad = ops.matmul(grad.T, self.x)  # on the compute stream while the all-reduce runs
        if work is not None:
            work.wait()
        return dx


class RowParallelLinear(Module):
    """y = x W^T, this rank holding the columns `cols` of the full weight (its slice of the inputs)."""

    def __init__(self, full, cols, par, dtype):
        self.par = par
        self.weight = parameter(full[:, cols], dtype)

    def forward(self, x):
        w, par = self.weight, self.par
        self.x = x
        if par.mode == "allreduce":
            return ops.matmul_all_reduce(x, w.T, par.name)
        if par.sequence:
            return ops.matmul_reduce_scatter(x, w.T, par.name, par.size)
        return ops.matmul(x, w.T)

    def backward(self, grad):
        w, par = self.weight, self.par
        if par.sequence:
            dx, full_grad = ops.all_gather_matmul(grad, w, par.name, par.size)
            w.grad = ops.matmul(full_grad.T, self.x)
            return dx
        dx = ops.matmul(grad, w)
        w.grad = ops.matmul(grad.T, self.x)
        return dx


def rope_tables(seq, head_dim, dtype, base=10000.0):
    """cos and sin [1, S, 1, D] for npu_rotary_mul's "half" mode (the frequencies repeated over both halves)."""
    inv = 1.0 / base ** (np.arange(0, head_dim, 2) / head_dim)
    angles = np.arange(seq)[:, None] * inv[None, :]
    angles = np.concatenate([angles, angles], axis=1)[None, :, None, :]
    return Tensor.from_numpy(np.cos(angles), dtype), Tensor.from_numpy(np.sin(angles), dtype)


def causal_mask():
    return Tensor.from_numpy(np.triu(np.ones((COMPRESSED_MASK, COMPRESSED_MASK), dtype=bool), 1))


class Attention(Module):
    """Grouped-query causal self-attention: QKV projection, RoPE on q and k, FlashAttentionScore (BSND), output
    projection. This rank computes `heads / size` query heads over `kv_heads / size` key-value heads."""

    def __init__(self, cfg, par, w_qkv, w_o, tables, mask, dtype):
        self.cfg, self.par, self.cos, self.sin, self.mask = cfg, par, tables[0], tables[1], mask
        self.nq, self.nkv = cfg.heads // par.size, cfg.kv_heads // par.size
        d = cfg.head_dim
        q0, q1 = par.shard(cfg.heads)
        k0, k1 = par.shard(cfg.kv_heads)
        kv = cfg.heads * d
        rows = np.concatenate([np.arange(q0 * d, q1 * d), kv + np.arange(k0 * d, k1 * d),
                               kv + cfg.kv_heads * d + np.arange(k0 * d, k1 * d)])
        self.qkv = ColumnParallelLinear(w_qkv, rows, par, dtype)
        self.o = RowParallelLinear(w_o, np.arange(q0 * d, q1 * d), par, dtype)
        self.scale = 1.0 / np.sqrt(d)
        self.plant_overflow = False

    def _bsnd(self, sb, heads, col):
        """The [B, S, heads, D] view of columns col.. of an [S*B, width] matrix (rows sequence-major)."""
        c = self.cfg
        width = sb.shape[1]
        return sb.as_strided((c.batch, c.seq, heads, c.head_dim), (width, c.batch * width, c.head_dim, 1), col)

    def _sb(self, bsnd):
        """A contiguous [B, S, N, D] tensor seen as [S, B, N*D]."""
        b, s, n, d = bsnd.shape
        return bsnd.as_strided((s, b, n * d), (n * d, s * n * d, 1))

    def forward(self, x):
        c, d = self.cfg, self.cfg.head_dim
        qkv = self.qkv(x)
        if self.plant_overflow:  # --nan-kind data: finite values times 3e38 leave the dtype's range
            qkv = ops.muls(qkv, 3.0e38)
        self.q_in, self.k_in = self._bsnd(qkv, self.nq, 0), self._bsnd(qkv, self.nkv, self.nq * d)
        self.q = ops.rotary_position_embedding(self.q_in, self.cos, self.sin)
        self.k = ops.rotary_position_embedding(self.k_in, self.cos, self.sin)
        self.v = self._bsnd(qkv, self.nkv, (self.nq + self.nkv) * d)
        self.out, self.smax, self.ssum = ops.flash_attention_score(
            self.q, self.k, self.v, self.nq, "BSND", self.scale, self.mask, CAUSAL_SPARSE_MODE, PRE_TOKENS,
            NEXT_TOKENS)
        attn = self._sb(self.out).contiguous()  # [S, B, N*D]: back to the rows' order
        return self.o(attn.view(c.seq * c.batch, self.nq * d))

    def backward(self, grad):
        c = self.cfg
        g = self.o.backward(grad)
        dq, dk, dv = ops.flash_attention_score_grad(
            self.q, self.k, self.v, self._bsnd(g, self.nq, 0), self.out, self.smax, self.ssum, self.nq, "BSND",
            self.scale, self.mask, CAUSAL_SPARSE_MODE, PRE_TOKENS, NEXT_TOKENS)
        dq = ops.rotary_position_embedding_grad(dq, self.cos, self.sin, self.q_in)[0]  # cos and sin are constants
        dk = ops.rotary_position_embedding_grad(dk, self.cos, self.sin, self.k_in)[0]
        dqkv = ops.cat([self._sb(dq), self._sb(dk), self._sb(dv)], dim=2)
        return self.qkv.backward(dqkv.view(c.seq * c.batch, -1))


class SwiGluMlp(Module):
    """down(swiglu(x gate_up^T)): the gate and up rows of this rank's slice side by side, as SwiGlu splits them."""

    def __init__(self, ffn, par, w_gate_up, w_down, dtype):
        f0, f1 = par.shard(ffn)
        self.gate_up = ColumnParallelLinear(w_gate_up, np.r_[f0:f1, ffn + f0:ffn + f1], par, dtype)
        self.down = RowParallelLinear(w_down, np.arange(f0, f1), par, dtype)

    def forward(self, x):
        self.h = self.gate_up(x)
        return self.down(ops.swi_glu(self.h))

    def backward(self, grad):
        return self.gate_up.backward(ops.swi_glu_grad(self.down.backward(grad), self.h))


class ExpertExchange:
    """Expert parallelism's all-to-all: the rows one MoE layer routed on this rank (sorted by expert) go to the ranks
    owning their experts, and come back. Planned from every rank's tokens per expert, which an HcclAllGather brings and
    the host reads (as Megatron's all-to-all dispatcher reads its splits). Rows arrive grouped by source rank, then by
    expert; the experts' GroupedMatmul wants them grouped by expert: a Cat of the chunks reorders them (Megatron's
    sort_chunks_by_idxs), and back."""

    def __init__(self, par, counts, experts):
        all_counts = Tensor.empty((par.size * experts,), acl.INT64)
        par.comm.all_gather(counts, all_counts).wait()
        per_rank = all_counts.numpy().reshape(par.size, experts)  # [source rank, expert]: rows
        mine = per_rank[:, par.rank * experts // par.size:(par.rank + 1) * experts // par.size]
        self.par, self.chunks = par, mine  # [source rank, local expert]
        self.send = [int(per_rank[par.rank, r * experts // par.size:(r + 1) * experts // par.size].sum())
                     for r in range(par.size)]
        self.recv = [int(n) for n in mine.sum(axis=1)]
        self.group_sizes = mine.sum(axis=0)

    def _exchange(self, x, send, recv):
        out = Tensor.empty((sum(recv), x.shape[1]), x.dtype)
        h = x.shape[1]
        self.par.comm.all_to_all_v(x, [n * h for n in send], out, [n * h for n in recv]).wait()
        return out

    def _reorder(self, x, by_expert):
        """Rows in chunks ordered (source rank, expert) -> (expert, source rank), or back; a chunk's rows keep their
        order. One Cat of the chunks' views (a row slice of x, contiguous)."""
        source_major = [(s, e) for s in range(self.chunks.shape[0]) for e in range(self.chunks.shape[1])]
        expert_major = sorted(source_major, key=lambda c: (c[1], c[0]))
        have, want = (source_major, expert_major) if by_expert else (expert_major, source_major)
        start, at = {}, 0
        for c in have:
            start[c], at = at, at + int(self.chunks[c])
        parts = [x[start[c]:start[c] + int(self.chunks[c])] for c in want if self.chunks[c]]
        if len(parts) > 1:
            return ops.cat(parts, dim=0)
        return parts[0] if parts else x  # one chunk (or none): already in order

    def dispatch(self, x):
        return self._reorder(self._exchange(x, self.send, self.recv), by_expert=True)

    def combine(self, y):
        return self._exchange(self._reorder(y, by_expert=False), self.recv, self.send)


class Moe(Module):
    """A top-k routed mixture of SwiGlu experts: router (MoeGatingTopKSoftmaxV2), MoeInitRoutingV2, GroupedMatmulV5
    (gate-up), SwiGlu, GroupedMatmulV5 (down), MoeFinalizeRoutingV2; the backward MindSpeed runs
    (MoeFinalizeRoutingV2Grad, GroupedMatmulV5 over the transposed weights and, with groups of K, over the transposed
    activations, SwiGluGrad, MoeInitRoutingV2Grad). The router's backward is torch's top-k and softmax backward: the
    top-k gradient goes back to its experts' places (a one-hot of the chosen experts, an Embedding of an identity
    table, times the gradient in a BatchMatMul: the stand-in has no aclnnScatter, which torch's top-k backward
    launches), then SoftmaxBackward. No auxiliary load-balancing loss."""

    def __init__(self, cfg, par, w_router, w_gate_up, w_down, dtype):
        self.cfg, self.par, self.dtype = cfg, par, dtype
        self.router = parameter(w_router, dtype)
        self.router.sum_over_ranks = par.size > 1  # each rank routes its own rows
        e0, e1 = par.shard(cfg.experts)
        self.gate_up = parameter(w_gate_up[e0:e1], dtype)  # [E, H, 2F]: GroupedMatmul's [E, K, N]
        self.down = parameter(w_down[e0:e1], dtype)  # [E, F, H]
        self.one_hot = Tensor.from_numpy(np.eye(cfg.experts), dtype)
        self.split_rows = par.mode == "allreduce"  # replicated rows in: route this rank's slice

    def forward(self, x):
        c = self.cfg
        self.x = self.par.rows(x) if self.split_rows else x
        self.probs, self.idx, self.soft = ops.moe_gating_top_k_softmax_v2(ops.matmul(self.x, self.router.T), c.top_k)
        expanded, self.row_idx, counts = ops.moe_init_routing_v2(self.x, self.idx, c.experts)
        self.exchange = ExpertExchange(self.par, counts, c.experts) if self.par.size > 1 else None
        if self.exchange is not None:
            self.group_list = Tensor.from_numpy(self.exchange.group_sizes.astype(np.int64))
            self.rows_in = self.exchange.dispatch(expanded)
        else:
            self.group_list, self.rows_in = counts, expanded
        self.h = self._experts_forward(self.rows_in)
        self.out_rows = self.exchange.combine(self.h) if self.exchange is not None else self.h
        y = ops.moe_finalize_routing_v2(self.out_rows, self.row_idx, self.probs)
        return self.par.gather_rows(y) if self.split_rows else y

    def _experts_forward(self, rows):
        if rows.shape[0] == 0:  # no token chose this rank's experts
            self.gu = rows
            return Tensor.empty((0, self.cfg.hidden), self.dtype)
        self.gu = ops.grouped_matmul_v5(rows, self.gate_up, self.group_list, (rows.shape[0], self.gate_up.shape[2]))
        self.act = ops.swi_glu(self.gu)
        return ops.grouped_matmul_v5(self.act, self.down, self.group_list, (rows.shape[0], self.cfg.hidden))

    def _experts_backward(self, grad):
        n = grad.shape[0]
        if n == 0:
            self.gate_up.grad, self.down.grad = ops.zeros(self.gate_up.shape, self.dtype), ops.zeros(
                self.down.shape, self.dtype)
            return grad
        e, f, h = self.down.shape
        down_t = self.down.as_strided((e, h, f), (f * h, 1, h))
        d_act = ops.grouped_matmul_v5(grad, down_t, self.group_list, (n, f))
        act_t = self.act.as_strided((f, n), (1, f))
        self.down.grad = ops.grouped_matmul_v5(act_t, grad, self.group_list, (e, f, h), ops.GMM_GROUP_K)
        d_gu = ops.swi_glu_grad(d_act, self.gu)
        gu_t = self.gate_up.as_strided((e, 2 * f, h), (2 * f * h, 1, 2 * f))
        d_rows = ops.grouped_matmul_v5(d_gu, gu_t, self.group_list, (n, h))
        rows_t = self.rows_in.as_strided((h, n), (1, h))
        self.gate_up.grad = ops.grouped_matmul_v5(rows_t, d_gu, self.group_list, (e, h, 2 * f), ops.GMM_GROUP_K)
        return d_rows

    def backward(self, grad):
        c = self.cfg
        g = self.par.rows(grad) if self.split_rows else grad
        d_out_rows, d_probs = ops.moe_finalize_routing_v2_grad(g, self.row_idx, self.out_rows, self.probs)
        d_h = self.exchange.dispatch(d_out_rows) if self.exchange is not None else d_out_rows
        d_rows = self._experts_backward(d_h)
        d_expanded = self.exchange.combine(d_rows) if self.exchange is not None else d_rows
        dx = ops.moe_init_routing_v2_grad(d_expanded, self.row_idx, c.top_k)
        # The router: the top-k gradient at its experts' places, softmax's backward, the router matmul's.
        t = self.x.shape[0]
        picked = ops.embedding(self.one_hot, self.idx)  # [t, k, E]
        dense = ops.bmm(d_probs.view(t, 1, c.top_k), picked)  # [t, 1, E]
        d_logits = _cast(ops.softmax_backward(_cast(dense.view(t, c.experts), acl.FLOAT), self.soft), self.dtype)
        self.router.grad = ops.matmul(d_logits.T, self.x)
        dx = ops.add(dx, ops.matmul(d_logits, self.router))
        return self.par.gather_rows(dx) if self.split_rows else dx


class Layer(Module):
    """x + attention(norm(x)), then + mlp(norm(x)): the pre-norm block."""

    def __init__(self, attention, mlp, cfg, par, dtype):
        self.attn_norm = RmsNorm(cfg.hidden, dtype, par.sequence)
        self.attention = attention
        self.mlp_norm = RmsNorm(cfg.hidden, dtype, par.sequence)
        self.mlp = mlp

    def forward(self, x):
        x = ops.add(x, self.attention(self.attn_norm(x)))
        return ops.add(x, self.mlp(self.mlp_norm(x)))

    def backward(self, grad):
        grad = ops.add(grad, self.mlp_norm.backward(self.mlp.backward(grad)))
        return ops.add(grad, self.attn_norm.backward(self.attention.backward(grad)))


class CrossEntropy(Module):
    """F.cross_entropy as torch_npu runs it under autocast: the logits cast to FLOAT, LogSoftmax, NLLLoss (a weight
    of ones, mean over the tokens), and their backwards from d(loss) = 1."""

    def __init__(self, vocab):
        self.weight = Tensor.from_numpy(np.ones(vocab, dtype=np.float32))
        self.one = Tensor.from_numpy(np.ones((), dtype=np.float32))

    def forward(self, logits, target):
        self.dtype, self.target = logits.dtype, target
        self.logp = ops.log_softmax(_cast(logits, acl.FLOAT), -1)
        loss, self.total = ops.nll_loss(self.logp, target, self.weight)
        return loss

    def backward(self):
        g = ops.nll_loss_backward(self.one, self.logp, self.target, self.weight, self.total)
        g = ops.log_softmax_backward(g, self.logp, -1)
        return _cast(g, self.dtype)
