#!/usr/bin/env python3
"""Trains a tiny decoder-only transformer with tiny_npu on synthetic text and prints `step {i} loss {value:.6f}`.

    tokens -> Embedding -> 2 x [x + Attention(RmsNorm(x)); x + MLP(RmsNorm(x))] -> RmsNorm -> LM head -> cross entropy

    python3 examples/llm_train.py [--steps 5] [--dtype bf16|fp16|fp32] [--moe]
                                  [--ranks R [--tp-mode allreduce|sequence]] [--mark-steps] [--dump PATH]
                                  [--nan-at STEP [--nan-rank R] [--nan-kind data|kernel] [--nan-op OP]]

Every op is the aclnn op torch_npu launches for a MindSpeed model: RmsNorm; the QKV projection (Matmul); RoPE
(RotaryPositionEmbedding, npu_rotary_mul's "half" mode); causal grouped-query attention (FlashAttentionScore, BSND,
sparse mode 2 with the compressed [2048, 2048] mask, 4 query heads over 2 key-value heads); the output projection;
the SwiGlu MLP (gate and up in one Matmul, SwiGlu, down), or with --moe a mixture of 4 SwiGlu experts, top-2 routed
(MoeGatingTopKSoftmaxV2, MoeInitRoutingV2, GroupedMatmulV5, MoeFinalizeRoutingV2); the LM head; cross entropy as
torch_npu runs F.cross_entropy (Cast to fp32, LogSoftmax, NLLLoss). The backward launches each op's grad
(FlashAttentionScoreGrad from the forward's softmax max and sum, RotaryPositionEmbeddingGrad, SwiGluGrad,
RmsNormGrad, NLLLossBackward, LogSoftmaxBackward, MoeFinalizeRoutingV2Grad, GroupedMatmulV5 for the input and
weight gradients, MoeInitRoutingV2Grad, SoftmaxBackward for the router, Matmul on transposed views), then AdamW
(ApplyAdamWV2 on fp32 master weights). bf16 by default; fp16 and fp32 too (fp32 on one rank only: the MC2 kernels
take fp16 and bf16).

--ranks R starts R copies of this script (RANK_ID=r, device r) that form one tensor-parallel group and train on the
same batches (tiny_npu/transformer.py describes the split): --tp-mode allreduce (default) runs each row-parallel
matmul and its all-reduce as one MatmulAllReduce, and all-reduces the column-parallel input gradients with
HcclAllReduce on the HCCL stream; --tp-mode sequence keeps the sequence split between the parallel regions, with
AllGatherMatmul and MatmulReduceScatter (forward and backward). With --moe the experts are split over the ranks too
(expert parallelism: HcclAlltoAllV dispatches the routed rows to their experts and combines them back). The
gradients that are per-rank partial sums (the norms' and, with sequence parallelism, the embedding's; the router's)
are summed with HcclAllReduce. Every rank computes the loss over the whole batch, so the ranks print the same lines;
the launcher prints each rank's prefixed with `[rank r] ` and exits nonzero if a rank fails.

The same model and batches on one rank and on R: the losses of a tensor-parallel run are the one-rank run's up to
the rounding of the partial sums (each rank's matmul is rounded to the dtype before the ranks' sums are added).

Test seams (planted bugs, one rank at one step): --nan-at STEP --nan-rank R --nan-kind data (default) multiplies the
first layer's QKV projection by 3e38, so that it leaves the dtype's range (a correct kernel, values out of range);
--nan-kind kernel has the stand-in write a NaN into the first output of that step's first launch of --nan-op
(default FlashAttentionScore; any op this run launches: FAKE_CANN_NAN_OP, a wrong kernel).
"""
import argparse
import ctypes
import os
import sys
from dataclasses import dataclass

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import tiny_npu  # noqa: E402
from tiny_npu import nn, ops  # noqa: E402
from tiny_npu.launcher import launch_ranks  # noqa: E402
from tiny_npu.optim import AdamW  # noqa: E402
from tiny_npu.transformer import (Attention, CrossEntropy, Layer, Moe, Parallel, RmsNorm, SwiGluMlp,  # noqa: E402
                                  causal_mask, rope_tables)


@dataclass(frozen=True)
class Config:
    """Small enough for a step well under a second on the CPU stand-in; as wide as the MC2 kernels allow with 2
    ranks (AllGatherMatmul and MatmulReduceScatter take k in [256, 65535): the hidden size, a rank's query heads x
    head dim, a rank's share of the MLP)."""
    vocab: int = 64
    hidden: int = 256
    heads: int = 4
    kv_heads: int = 2
    head_dim: int = 128
    ffn: int = 512
    layers: int = 2
    experts: int = 0  # 0: the dense SwiGlu MLP
    top_k: int = 2
    expert_ffn: int = 256
    seq: int = 16
    batch: int = 2


EXPERTS = 4


def weights(cfg, rng):
    """The whole model's initial weights (the same on every rank, which keeps its shards): Linear weights [out, in]
    uniform in +-1/sqrt(in) as torch.nn.Linear, the expert weights as GroupedMatmul's [E, K, N]."""
    def linear(out, inp):
        return rng.uniform(-1.0, 1.0, (out, inp)) / np.sqrt(inp)

    h, d = cfg.hidden, cfg.head_dim
    w = {"embed": rng.normal(0.0, 1.0, (cfg.vocab, h)), "layers": []}
    for _ in range(cfg.layers):
        layer = {"qkv": linear((cfg.heads + 2 * cfg.kv_heads) * d, h), "o": linear(h, cfg.heads * d)}
        if cfg.experts:
            e, f = cfg.experts, cfg.expert_ffn
            layer.update(router=linear(e, h), gate_up=linear(e * 2 * f, h).reshape(e, 2 * f, h).transpose(0, 2, 1),
                         down=linear(e * h, f).reshape(e, h, f).transpose(0, 2, 1))
        else:
            layer.update(gate_up=linear(2 * cfg.ffn, h), down=linear(h, cfg.ffn))
        w["layers"].append(layer)
    w["lm_head"] = linear(cfg.vocab, h)
    return w


class Decoder(nn.Module):
    def __init__(self, cfg, par, rng, dtype):
        self.cfg, self.par = cfg, par
        w = weights(cfg, rng)
        self.embed = nn.parameter(w["embed"], dtype)
        self.embed.sum_over_ranks = par.sequence  # each rank embeds its own rows
        tables, mask = rope_tables(cfg.seq, cfg.head_dim, dtype), causal_mask()
        self.layers = []
        for lw in w["layers"]:
            attention = Attention(cfg, par, lw["qkv"], lw["o"], tables, mask, dtype)
            if cfg.experts:
                mlp = Moe(cfg, par, lw["router"], lw["gate_up"], lw["down"], dtype)
            else:
                mlp = SwiGluMlp(cfg.ffn, par, lw["gate_up"], lw["down"], dtype)
            self.layers.append(Layer(attention, mlp, cfg, par, dtype))
        self.norm = RmsNorm(cfg.hidden, dtype, par.sequence)
        self.lm_head = nn.parameter(w["lm_head"], dtype)
        self.loss = CrossEntropy(cfg.vocab)

    def forward(self, tokens, target):
        """tokens and target: [S * B] INT64, sequence-major. Returns the mean loss (FLOAT, 0-d)."""
        par = self.par
        self.tokens = par.rows(tokens) if par.sequence else tokens
        x = ops.embedding(self.embed, self.tokens)
        for layer in self.layers:
            x = layer(x)
        h = self.norm(x)
        self.h = par.gather_rows(h) if par.sequence else h  # the LM head sees every row
        return self.loss(ops.matmul(self.h, self.lm_head.T), target)

    def backward(self):
        g = self.loss.backward()
        dh = ops.matmul(g, self.lm_head)
        self.lm_head.grad = ops.matmul(g.T, self.h)
        g = self.norm.backward(self.par.rows(dh) if self.par.sequence else dh)
        for layer in reversed(self.layers):
            g = layer.backward(g)
        self.embed.grad = ops.embedding_dense_backward(g, self.tokens, self.cfg.vocab)


def synthetic_batch(rng, cfg):
    """Sequences that follow a rule (next = 5 * token + 3 mod vocab) from random starts, sequence-major as the model
    keeps its rows; the target of each token is the next one."""
    seqs = np.empty((cfg.batch, cfg.seq + 1), dtype=np.int64)
    seqs[:, 0] = rng.randint(0, cfg.vocab, size=cfg.batch)
    for t in range(cfg.seq):
        seqs[:, t + 1] = (5 * seqs[:, t] + 3) % cfg.vocab
    return np.ascontiguousarray(seqs[:, :-1].T).reshape(-1), np.ascontiguousarray(seqs[:, 1:].T).reshape(-1)


def step_marker():
    """The capture shim's step marker, when the shim is loaded into this process."""
    here = ctypes.CDLL(None)
    if hasattr(here, "msprobe_shim_step"):
        fn = here.msprobe_shim_step
        fn.restype = None
        return fn
    return None


def sum_partial_gradients(model, par):
    """All-reduce (sum) the gradients that are per-rank partial sums, all issued before any is waited for."""
    works = [par.comm.all_reduce(p.grad) for p in model.parameters() if getattr(p, "sum_over_ranks", False)]
    for w in works:
        w.wait()


def plant(args, step, rank, model):
    """The planted bug of this step on this rank, if any (see the module's docstring)."""
    if step != args.nan_at or rank != args.nan_rank:
        return None
    if args.nan_kind == "data":
        model.layers[0].attention.plant_overflow = True
    else:
        ops.plant_nan(args.nan_op)
    return args.nan_kind


def unplant(kind, model, args, step):
    if kind == "data":
        model.layers[0].attention.plant_overflow = False
    elif kind == "kernel" and ops.planted_nan_pending():
        ops.planted_nan_clear()
        raise SystemExit(f"llm_train.py: --nan-op {args.nan_op}: step {step} launched no aclnn{args.nan_op} "
                         "(a NaN can be planted only in an op this configuration launches)")


def train(args, rank, world_size):
    rt = tiny_npu.init(device=rank)
    dtype = tiny_npu.DTYPES[args.dtype]
    group = None
    if world_size > 1:
        from tiny_npu.distributed import ProcessGroup
        group = ProcessGroup(rank, world_size)
    par = Parallel(rank, world_size, args.tp_mode, group)
    cfg = Config(experts=EXPERTS if args.moe else 0)
    model = Decoder(cfg, par, np.random.RandomState(args.seed), dtype)
    opt = AdamW(model.parameters(), lr=args.lr)
    data_rng = np.random.RandomState(args.seed + 1)  # the same batches on every rank: one tensor-parallel group
    marker = step_marker() if args.mark_steps else None

    losses = []
    for i in range(args.steps):
        tokens, target = synthetic_batch(data_rng, cfg)
        planted = plant(args, i, rank, model)
        loss = model.forward(tiny_npu.Tensor.from_numpy(tokens), tiny_npu.Tensor.from_numpy(target))
        model.backward()
        if par.size > 1:
            sum_partial_gradients(model, par)
        opt.step()
        losses.append(loss.item())
        unplant(planted, model, args, i)
        print(f"step {i} loss {losses[-1]:.6f}", flush=True)
        opt.zero_grad()
        if marker is not None:
            marker()
    rt.synchronize()
    if group is not None:
        group.destroy()
    if args.dump:
        path = args.dump.replace("{rank}", str(rank))
        np.savez(path, losses=np.array(losses, dtype=np.float64),
                 **{name: p.numpy() for name, p in model.named_parameters()})
    tiny_npu.shutdown()


def check_args(ap, args):
    cfg = Config(experts=EXPERTS if args.moe else 0)
    r = args.ranks
    if args.steps < 0 or r < 1:
        ap.error("--steps must be at least 0 and --ranks at least 1")
    if r > 1 and args.dtype == "fp32":
        ap.error("--ranks > 1 runs the MC2 kernels (MatmulAllReduce, AllGatherMatmul, MatmulReduceScatter), which take "
                 "fp16 or bf16 only: use --dtype bf16 or fp16")
    if cfg.heads % r or cfg.kv_heads % r or EXPERTS % r or (cfg.seq * cfg.batch) % r:
        ap.error(f"--ranks must divide the {cfg.kv_heads} key-value heads, the {cfg.heads} query heads, the {EXPERTS} "
                 f"experts and the {cfg.seq * cfg.batch} tokens, not {r}")
    if args.tp_mode == "sequence" and r > 1:
        narrow = {"hidden size": cfg.hidden, "query heads x head dim per rank": cfg.heads * cfg.head_dim // r,
                  "MLP width per rank": cfg.ffn // r}
        small = {k: v for k, v in narrow.items() if v < 256}
        if small:
            ap.error(f"--tp-mode sequence with {r} ranks: AllGatherMatmul and MatmulReduceScatter take k >= 256, "
                     f"and {', '.join(f'{k} is {v}' for k, v in small.items())}")
    if args.nan_at >= 0 and not 0 <= args.nan_rank < r:
        ap.error(f"--nan-rank must be a rank of the run (0 to {r - 1}), not {args.nan_rank}")
    if args.nan_op not in ops.SIGNATURES:
        ap.error(f"--nan-op {args.nan_op} is no aclnn op of tiny_npu (one of: {', '.join(sorted(ops.SIGNATURES))})")


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--steps", type=int, default=5)
    ap.add_argument("--dtype", choices=sorted(tiny_npu.DTYPES), default="bf16")
    ap.add_argument("--moe", action="store_true", help=f"a top-2 mixture of {EXPERTS} experts instead of the MLP")
    ap.add_argument("--ranks", type=int, default=1, help="rank processes of one tensor-parallel group")
    ap.add_argument("--tp-mode", choices=["allreduce", "sequence"], default="allreduce",
                    help="allreduce: MatmulAllReduce; sequence: AllGatherMatmul and MatmulReduceScatter")
    ap.add_argument("--lr", type=float, default=0.005)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--mark-steps", action="store_true",
                    help="call msprobe_shim_step() at the end of each step when the shim is loaded")
    ap.add_argument("--timeout", type=float, default=600.0, help="seconds before the launcher gives up on ranks")
    ap.add_argument("--dump", metavar="PATH",
                    help="save the exact losses and final parameters to PATH (.npz; {rank} is replaced)")
    ap.add_argument("--nan-at", type=int, default=-1, metavar="STEP",
                    help="plant a non-finite value in one rank's kernel at this step (with --nan-rank)")
    ap.add_argument("--nan-rank", type=int, default=0, metavar="R", help="the rank of --nan-at (default 0)")
    ap.add_argument("--nan-kind", choices=["data", "kernel"], default="data",
                    help="data: the QKV projection times 3e38; kernel: --nan-op writes a NaN")
    ap.add_argument("--nan-op", default="FlashAttentionScore", metavar="OP",
                    help="the aclnn op of --nan-kind kernel, without its prefix (default FlashAttentionScore)")
    args = ap.parse_args()
    check_args(ap, args)
    if args.ranks > 1 and "RANK_ID" not in os.environ:
        return launch_ranks(__file__, sys.argv[1:], args.ranks, args.timeout)
    rank = int(os.environ.get("RANK_ID", "0"))
    world_size = int(os.environ.get("RANK_SIZE", str(args.ranks)))
    train(args, rank, world_size)
    return 0


if __name__ == "__main__":
    sys.exit(main())
