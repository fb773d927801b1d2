"""replay's references of the mixture-of-experts ops against numpy written here from their READMEs' formulas
(ops-transformer moe/*/README.md, gmm/grouped_matmul/README.md): MoeGatingTopKSoftmax(V2) (softmax then top-k, or top-k
then softmax with renorm, finished rows, the softmax output), MoeInitRoutingV2 (the key-value sort by expert,
expandedRowIdx[sortedRowIdx[i]] = i, the active rows, the per-expert counts or their cumulative sum, and the drop / pad
mode with its capacity), MoeInitRoutingV2Grad, MoeFinalizeRoutingV2 (x1 + x2 + the scaled expert rows plus bias, in both
layouts of expandedRowIdx) and its grad, GroupedMatmulV4 / V5 in the README's group types (-1 lists, 0 groups of rows
with a stacked or listed weight, 2 groups of k; cumulative or counted group lists; rows past the groups are not written
and not judged). Outputs of a misreading (the experts sorted unstably, the row layout for a column one) are errors.
Each test writes a hand-made tensor dump (replay_dumps.py) and reads replay's CSVs.
"""
import numpy as np

from replay_dumps import Dump, Replay, T

RNG = np.random.default_rng(11)


def run(tmp_path, cases):
    d = Dump(tmp_path / "dump")
    for op, case, inputs, outputs in cases:
        d.kernel(op, case, inputs, outputs)
    d.close()
    return Replay(d.root, tmp_path / "out")


def softmax(x):
    e = np.exp(x - x.max(-1, keepdims=True))
    return e / e.sum(-1, keepdims=True)


def top_k(x, k):
    """The k largest along the last axis, largest first; among equal values the lower index first."""
    idx = np.argsort(-x, axis=-1, kind="stable")[..., :k]
    return np.take_along_axis(x, idx, -1), idx


# ---- gating -------------------------------------------------------------------------------------------------------
def test_gating_top_k_softmax(tmp_path):
    x = RNG.normal(size=(12, 6))
    x[3, 4] = x[3, 1]  # a tie: the lower expert first
    finished = np.zeros(12, bool)
    finished[[2, 7]] = True
    cases = []
    y, idx = top_k(softmax(x), 2)
    cases.append(("MoeGatingTopKSoftmaxV2", "renorm0", [T(x), None, 2, 0, True],
                  [T(y), T(idx, "Int32"), T(softmax(x), "Float32")]))
    top, idx1 = top_k(x, 3)
    cases.append(("MoeGatingTopKSoftmaxV2", "renorm1_finished", [T(x), T(finished, "Bool"), 3, 1, False],
                  [T(softmax(top)), T(np.where(finished[:, None], 6, idx1), "Int32"), None]))
    x3 = RNG.normal(size=(2, 5, 4))
    y3, idx3 = top_k(softmax(x3), 2)
    rows = np.arange(10 * 2).reshape(2, 10).T.reshape(2, 5, 2)  # README: arange(rows * k).reshape(k, rows).T
    cases.append(("MoeGatingTopKSoftmax", "v1_3d", [T(x3), None, 2], [T(y3), T(idx3, "Int32"), T(rows, "Int32")]))
    r = run(tmp_path, cases)
    r.expect_close("MoeGatingTopKSoftmaxV2.renorm0.0.forward", [0, 1, 2], tol=1e-7)  # the softmax output is float32
    r.expect_close("MoeGatingTopKSoftmaxV2.renorm1_finished.0.forward", [0, 1])
    r.expect_close("MoeGatingTopKSoftmax.v1_3d.0.forward", [0, 1, 2])


# ---- routing ------------------------------------------------------------------------------------------------------
def init_routing(x, experts_idx, active, experts, count_flag):
    n, k = experts_idx.shape
    flat = experts_idx.reshape(-1)
    order = np.argsort(flat, kind="stable")  # keyValueSort: sortedExpertIdx, sortedRowIdx
    row_idx = np.empty(n * k)
    row_idx[order] = np.arange(n * k)  # expandedRowIdx[sortedRowIdx[i]] = i
    rows = min(active, n * k) if active > 0 else n * k
    counts = np.bincount(flat, minlength=experts)[:experts]
    counts = np.cumsum(counts) if count_flag == 1 else counts
    return x[order[:rows] // k], row_idx, counts


def drop_pad_routing(x, experts_idx, capacity, experts):
    n, k = experts_idx.shape
    flat = experts_idx.reshape(-1)
    out, row_idx, seen = np.zeros((experts, capacity, x.shape[1])), np.full(n * k, -1.0), np.zeros(experts, int)
    for p in np.argsort(flat, kind="stable"):
        e = flat[p]
        if seen[e] < capacity:
            row_idx[p] = e * capacity + seen[e]
            out[e, seen[e]] = x[p // k]
        seen[e] += 1
    return out, row_idx, np.bincount(flat, minlength=experts)


def test_init_routing_v2_and_its_grad(tmp_path):
    x = RNG.normal(size=(10, 6))
    experts_idx = RNG.integers(0, 4, size=(10, 2))
    cases = []
    for case, active, flag in (("all_count", 0, 2), ("active_cumsum", 13, 1)):
        ex, rows, counts = init_routing(x, experts_idx, active, 4, flag)
        cases.append(("MoeInitRoutingV2", case, [T(x), T(experts_idx, "Int32"), active, 0, 4, 0, flag, False],
                      [T(ex), T(rows, "Int32"), T(counts, "Int64"), None]))
        g = RNG.normal(size=ex.shape)
        grad = np.zeros_like(x)
        for i in range(10):
            for t in range(2):
                r = int(rows[i * 2 + t])
                if r < ex.shape[0]:
                    grad[i] += g[r]  # gradX_i = sum over t of gradExpandedX[expandedRowIdx[i * topK + t]]
        cases.append(("MoeInitRoutingV2Grad", case, [T(g), T(rows, "Int32"), 2, 0, active], [T(grad)]))
    ex, rows, before = drop_pad_routing(x, experts_idx, 3, 4)
    cases.append(("MoeInitRoutingV2", "drop_pad", [T(x), T(experts_idx, "Int32"), 0, 3, 4, 1, 0, True],
                  [T(ex), T(rows, "Int32"), None, T(before, "Int32")]))
    g = RNG.normal(size=ex.shape)
    grad = np.zeros_like(x)
    for p, r in enumerate(rows):
        if r >= 0:
            grad[p // 2] += g.reshape(-1, 6)[int(r)]
    cases.append(("MoeInitRoutingV2Grad", "drop_pad", [T(g), T(rows, "Int32"), 2, 1, 0], [T(grad)]))
    ex0, rows0, counts0 = init_routing(x, experts_idx, 0, 4, 2)
    flat = experts_idx.reshape(-1)
    p, q = next((p, q) for p in range(20) for q in range(p + 1, 20) if flat[p] == flat[q])
    swapped = rows0.copy()
    swapped[[p, q]] = swapped[[q, p]]  # two positions of one expert in the other order: an unstable sort
    cases.append(("MoeInitRoutingV2", "unstable_sort", [T(x), T(experts_idx, "Int32"), 0, 0, 4, 0, 2, False],
                  [T(ex0), T(swapped, "Int32"), T(counts0, "Int64"), None]))
    r = run(tmp_path, cases)
    for op, case, _, _ in cases[:-1]:
        slots = {"MoeInitRoutingV2Grad": [0], "MoeInitRoutingV2": [0, 1, 3] if case == "drop_pad" else [0, 1, 2]}[op]
        r.expect_close(f"{op}.{case}.0.forward", slots)
    assert r.output("MoeInitRoutingV2.unstable_sort.0.forward", 1)["Status"] == "error"


def finalize(ex, rows, x1, x2, bias, scales, experts_idx, by_row):
    n, k = scales.shape
    flat = ex.reshape(-1, ex.shape[-1])
    out = x1 + (0 if x2 is None else x2)
    for i in range(n):
        for j in range(k):
            r = int(rows[i * k + j] if by_row else rows[i + j * n])  # README: expandedRowIdx[i + k * num_rows]
            if r >= 0:
                out[i] = out[i] + scales[i, j] * (flat[r] + bias[experts_idx[i, j]])
    return out


def test_finalize_routing_v2_and_its_grad(tmp_path):
    n, k, h, e = 6, 2, 5, 3
    ex, x1, x2 = RNG.normal(size=(n * k, h)), RNG.normal(size=(n, h)), RNG.normal(size=(n, h))
    bias, scales = RNG.normal(size=(e, h)), RNG.uniform(size=(n, k))
    experts_idx = RNG.integers(0, e, size=(n, k))
    rows = RNG.permutation(n * k)
    cases = []
    for case, mode in (("by_column", 0), ("by_row", 2)):
        out = finalize(ex, rows, x1.copy(), x2, bias, scales, experts_idx, mode == 2)
        cases.append(("MoeFinalizeRoutingV2", case, [T(ex), T(rows, "Int32"), T(x1), T(x2), T(bias), T(scales),
                                                     T(experts_idx, "Int32"), mode], [T(out)]))
    wrong = finalize(ex, rows, x1.copy(), x2, bias, scales, experts_idx, True)
    cases.append(("MoeFinalizeRoutingV2", "row_for_column", [T(ex), T(rows, "Int32"), T(x1), T(x2), T(bias), T(scales),
                                                            T(experts_idx, "Int32"), 0], [T(wrong)]))
    # The grad (README's formulas, positions i = n * K + k).
    gy = RNG.normal(size=(n, h))
    rows_d = rows.copy()
    rows_d[3] = -1
    gex, gsc = np.zeros((n * k, h)), np.zeros(n * k)
    for i, r in enumerate(rows_d):
        if r >= 0:
            gex[r] = gy[i // k] * scales.reshape(-1)[i]
            gsc[i] = ((ex[r] + bias[experts_idx.reshape(-1)[i]]) * gy[i // k]).sum()
    cases.append(("MoeFinalizeRoutingV2Grad", "bias", [T(gy), T(rows_d, "Int32"), T(ex), T(scales),
                                                        T(experts_idx, "Int32"), T(bias), 0, 0, 0, 0],
                  [T(gex), T(gsc.reshape(n, k))]))
    r = run(tmp_path, cases)
    r.expect_close("MoeFinalizeRoutingV2.by_column.0.forward", [0])
    r.expect_close("MoeFinalizeRoutingV2.by_row.0.forward", [0])
    r.expect_close("MoeFinalizeRoutingV2Grad.bias.0.forward", [0, 1])
    assert r.status("MoeFinalizeRoutingV2.row_for_column.0.forward") == "error"


# ---- GroupedMatmul ------------------------------------------------------------------------------------------------
def gmm_args(x, w, bias=None, group_list=None, split=3, group_type=0, list_type=1, v5=True):
    gl = None if group_list is None else T(np.asarray(group_list), "Int64")
    return [x, w, bias, None, None, None, None, None, gl, None, None, None, split, group_type, list_type, 0] + \
        ([None] if v5 else [])


def test_grouped_matmul(tmp_path):
    cases = []
    x, w = RNG.normal(size=(9, 4)), RNG.normal(size=(3, 4, 5))
    bias = RNG.normal(size=(3, 5))
    sizes = [2, 0, 5]  # 7 of 9 rows: the last two are not written
    y = np.full((9, 5), 99.0)
    at = np.cumsum([0] + sizes)
    for g in range(3):
        y[at[g]:at[g + 1]] = x[at[g]:at[g + 1]] @ w[g] + bias[g]
    cases.append(("GroupedMatmulV5", "rows_stacked_counts", gmm_args([T(x)], [T(w)], [T(bias)], sizes), [[T(y)], None, None]))
    cases.append(("GroupedMatmulV4", "rows_listed_cumulative",
                  gmm_args([T(x)], [T(w[g]) for g in range(3)], [T(bias[g]) for g in range(3)], np.cumsum(sizes),
                           list_type=0, v5=False), [[T(y)], None, None]))
    xs = [RNG.normal(size=(m, 4)) for m in (3, 1, 2)]
    cases.append(("GroupedMatmulV5", "lists", gmm_args([T(a) for a in xs], [T(w[g]) for g in range(3)], split=0,
                                                         group_type=-1),
                  [[T(xs[g] @ w[g]) for g in range(3)], None, None]))
    cases.append(("GroupedMatmulV5", "lists_to_one", gmm_args([T(a) for a in xs], [T(w[g]) for g in range(3)],
                                                               group_type=0),
                  [[T(np.concatenate([xs[g] @ w[g] for g in range(3)]))], None, None]))
    xk, wk = RNG.normal(size=(4, 10)), RNG.normal(size=(10, 3))  # groups of k: the weight gradient
    ks = [4, 0, 6]
    kat = np.cumsum([0] + ks)
    yk = np.stack([xk[:, kat[g]:kat[g + 1]] @ wk[kat[g]:kat[g + 1]] for g in range(3)])
    cases.append(("GroupedMatmulV5", "groups_of_k", gmm_args([T(xk)], [T(wk)], group_list=ks, group_type=2),
                  [[T(yk)], None, None]))
    wks = [RNG.normal(size=(kk, 3)) for kk in (3, 7)]
    cases.append(("GroupedMatmulV5", "groups_of_k_listed", gmm_args([T(xk)], [T(a) for a in wks], split=0, group_type=2),
                  [[T(xk[:, :3] @ wks[0]), T(xk[:, 3:] @ wks[1])], None, None]))
    wrong = y.copy()
    wrong[:2] = x[:2] @ w[1] + bias[1]
    cases.append(("GroupedMatmulV5", "wrong_expert", gmm_args([T(x)], [T(w)], [T(bias)], sizes), [[T(wrong)], None, None]))
    r = run(tmp_path, cases)
    for op, case, _, outputs in cases[:-1]:
        r.expect_close(f"{op}.{case}.0.forward", [f"0.{i}" for i in range(len(outputs[0]))])
    assert "10 element(s) the kernel does not write not judged" in \
        r.output("GroupedMatmulV5.rows_stacked_counts.0.forward", "0.0")["Message"]
    assert r.status("GroupedMatmulV5.wrong_expert.0.forward") == "error"
