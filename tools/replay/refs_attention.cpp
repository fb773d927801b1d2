// FlashAttentionScore(V2) and FlashAttentionScoreGrad(V2) (what torch_npu.npu_fusion_attention launches), from the
// docs of ops-transformer attention/flash_attention_score*/docs and docs/context/sparse_mode参数说明.md:
//   out = Dropout(Softmax(Mask(scale * (pse + q @ k^T), attenMask)), keepProb) @ v      (V2 pseType 0: pse after scale)
// - layouts BSH, SBH (H = N * D), BSND, BNSD; query heads over key / value heads in groups (GQA: query head n reads
//   key-value head n / (Nq / Nkv)); value's head dim may be smaller than the key's;
// - attenMask 1 = masked, [Sq, Skv] / [1, 1, Sq, Skv] / [B, 1, Sq, Skv] / [B, N, Sq, Skv]. sparseMode 0: the mask and
//   the band j - i <= nextTokens, i - j <= preTokens; 1 and 5: the mask; 2: causal from the top left (j <= i);
//   3: from the bottom right (j <= i + Skv - Sq); 4: the band around that diagonal; 6: causal from the bottom right
//   plus the first prefix[b] columns. Modes 2, 3, 4 and 6 take a compressed mask whose geometry they stand for: its
//   values are not read. Without a mask nothing is masked, whatever the mode;
// - dropout only through the caller's dropMask (one bit per score of [B, N, Sq, Skv], least significant first, 1 =
//   kept, kept values divided by keepProb): a random mask is not in the dump;
// - softmaxMaxOut / softmaxSumOut: each row's max of the masked scores and sum of exp(score - max), [B, N, Sq, 8] (the
//   value repeated along the last dim); softmaxOutOut and dpseOut are "not used" and not written.
// A row whose every score is masked (an "invalid row") has no defined softmax: it contributes nothing to the
// gradients and its outputs are not judged.
// The backward takes the forward's statistics and output as given (the kernel rebuilds the probabilities from them):
//   P = exp(S - max) / sum, dP = dy @ v^T, dS = P * (dP * keep - rowsum(dy * attentionIn)),
//   dq = scale * dS @ k, dk = scale * dS^T @ q and dv = (P * keep)^T @ dy, both summed over a group's query heads.
#include <algorithm>
#include <cmath>
#include <limits>

#include "tools/reader/dump_reader.h"
#include "tools/replay/refs.h"

namespace msprobe::tools::replay {
namespace {

constexpr size_t kNone = SIZE_MAX;

// Where the arguments stand in each prototype (aclnn_flash_attention_score*.h).
struct Positions {
  size_t q, k, v, dy, pse, drop, padding, mask, max, sum, attention_in, prefix, scale, keep, pre, next, heads, layout,
      sparse, pse_type;
};
constexpr Positions kForward{0, 1, 2, kNone, 3, 4, 5, 6, kNone, kNone, kNone, 7, 8, 9, 10, 11, 12, 13, 15, kNone};
constexpr Positions kForwardV2{0, 1, 2, kNone, 3, 4, 5, 6, kNone, kNone, kNone, 7, 10, 11, 12, 13, 14, 15, 17, 18};
constexpr Positions kGrad{0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 11, 12, 13, 14, 15, 16, 17, 18, 20, kNone};
constexpr Positions kGradV2{0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 11, 12, 15, 16, 17, 18, 19, 20, 22, 23};

// A q / k / v / out tensor seen as [B, N, S, D] through its layout.
struct Heads {
  int64_t b = 0, n = 0, s = 0, d = 0;
  int64_t sb = 0, sn = 0, ss = 0;  // strides (D's is 1)
  size_t at(int64_t bi, int64_t ni, int64_t si, int64_t di) const {
    return static_cast<size_t>(bi * sb + ni * sn + si * ss + di);
  }
};

// `n` heads of `d` each in the layout (for BSH / SBH, which do not show N); shape the tensor of that view has.
Heads heads_in(const std::string &layout, int64_t b, int64_t n, int64_t s, int64_t d, Shape *shape) {
  Heads h{b, n, s, d};
  if (layout == "BSH" || layout == "BSND") {
    h.sb = s * n * d, h.ss = n * d, h.sn = d;
    *shape = layout == "BSH" ? Shape{b, s, n * d} : Shape{b, s, n, d};
  } else if (layout == "SBH") {
    h.ss = b * n * d, h.sb = n * d, h.sn = d;
    *shape = {s, b, n * d};
  } else if (layout == "BNSD") {
    h.sb = n * s * d, h.sn = s * d, h.ss = d;
    *shape = {b, n, s, d};
  } else {
    throw RefError("FlashAttention: inputLayout '" + layout + "' (BSH, SBH, BSND or BNSD)");
  }
  return h;
}

// The view of tensor t; `n` is the head count for the layouts whose shape does not show it, `d` (when n is 0) the
// head dim from which BSH / SBH derive it.
Heads view_of(const Tensor &t, const std::string &layout, int64_t n, int64_t d, const char *what) {
  const bool hidden = layout == "BSH" || layout == "SBH";
  if (t.rank() != (hidden ? 3 : 4)) throw RefError(std::string("FlashAttention: ") + what + " is not " + layout);
  const Shape &s = t.shape;
  int64_t b = 0, seq = 0;
  if (hidden) {
    b = layout == "BSH" ? s[0] : s[1], seq = layout == "BSH" ? s[1] : s[0];
    if (n == 0) n = d > 0 && s[2] % d == 0 ? s[2] / d : 0;
    if (n <= 0 || s[2] % n != 0) throw RefError(std::string("FlashAttention: ") + what + "'s H does not split");
    d = s[2] / n;
  } else {
    b = s[0], n = layout == "BSND" ? s[2] : s[1], seq = layout == "BSND" ? s[1] : s[2], d = s[3];
  }
  Shape unused;
  return heads_in(layout, b, n, seq, d, &unused);
}

struct Problem {
  const Positions *at = nullptr;
  std::string layout;
  Heads q, k, v;
  int64_t group = 1;  // query heads per key-value head
  double scale = 1, keep_prob = 1;
  int64_t mode = 0, pre = 0, next = 0;
  std::vector<double> mask;  // [B, N, Sq, Skv], modes 0, 1, 5 with a mask
  bool has_mask = false;
  std::vector<int64_t> prefix;
  std::vector<double> pse;  // [B, N, Sq, Skv], or empty
  bool pse_scaled = true;   // pse added before the scaling
  const Tensor *drop = nullptr;
};

const Tensor &operand(const Call &c, size_t i) { return c.tensor(i); }
const Tensor *maybe(const Call &c, size_t i) { return i == kNone ? nullptr : c.optional_tensor(i); }

void read_heads(const Call &c, Problem &p) {
  const int64_t head_num = c.integer(p.at->heads);
  p.q = view_of(operand(c, p.at->q), p.layout, head_num, 0, "query");
  p.k = view_of(operand(c, p.at->k), p.layout, 0, p.q.d, "key");
  p.v = view_of(operand(c, p.at->v), p.layout, p.k.n, 0, "value");
  if (p.q.n != head_num) throw RefError("FlashAttention: headNum is not the query's head count");
  if (p.k.b != p.q.b || p.v.b != p.q.b || p.k.d != p.q.d || p.v.n != p.k.n || p.v.s != p.k.s || p.v.d > p.k.d ||
      p.k.n == 0 || p.q.n % p.k.n != 0)
    throw RefError("FlashAttention: query, key and value do not fit together");
  p.group = p.q.n / p.k.n;
}

// [B, N, Sq, Skv] of an optional tensor broadcast from the shapes the docs allow ([Sq, Skv] and 4-D ones).
std::vector<double> full_scores(const Problem &p, const Tensor &t, const char *what) {
  const Shape full{p.q.b, p.q.n, p.q.s, p.k.s};
  try {
    return broadcast_to(t, full);
  } catch (const RefError &) {
    throw RefError(std::string("FlashAttention: ") + what + " " + shape_text(t.shape) + " does not fit " +
                   shape_text(full));
  }
}

void read_masking(const Call &c, Problem &p) {
  p.mode = c.integer(p.at->sparse);
  p.pre = c.integer(p.at->pre), p.next = c.integer(p.at->next);
  if (p.mode < 0 || p.mode > 6) throw RefError("FlashAttention: sparseMode " + std::to_string(p.mode) + " (0 to 6)");
  if (const Tensor *m = maybe(c, p.at->mask)) {
    p.has_mask = true;
    if (p.mode == 0 || p.mode == 1 || p.mode == 5) p.mask = full_scores(p, *m, "attenMask");
  }
  if (p.mode == 6 && p.has_mask) {
    p.prefix = c.int_list(p.at->prefix);
    if (p.prefix.size() != static_cast<size_t>(p.q.b)) throw RefError("FlashAttention: prefix is not one per batch");
  }
  if (maybe(c, p.at->padding)) throw RefError("FlashAttention: paddingMask is reserved (not defined)");
}

Problem problem(const Call &c, const Positions &at) {
  Problem p;
  p.at = &at;
  p.layout = c.text(at.layout);
  read_heads(c, p);
  p.scale = c.number(at.scale);
  p.keep_prob = c.number(at.keep);
  read_masking(c, p);
  if (const Tensor *pse = maybe(c, at.pse)) p.pse = full_scores(p, *pse, "pse");
  if (at.pse_type != kNone) {
    const int64_t t = c.integer(at.pse_type);
    if (t != 0 && t != 1) throw RefError("FlashAttention: pseType " + std::to_string(t) + " (alibi) is not defined");
    p.pse_scaled = t == 1;
  }
  p.drop = maybe(c, at.drop);
  if (!p.drop && p.keep_prob < 1)
    throw RefError("FlashAttention: keepProb below 1 without a dropMask (the random mask is not in the dump)");
  if (p.drop && static_cast<int64_t>(p.drop->size()) * 8 < p.q.b * p.q.n * p.q.s * p.k.s)
    throw RefError("FlashAttention: dropMask has fewer bits than scores");
  return p;
}

bool masked(const Problem &p, size_t flat, int64_t b, int64_t i, int64_t j) {
  if (!p.has_mask) return false;
  const int64_t shift = p.k.s - p.q.s;  // the bottom-right diagonal
  switch (p.mode) {
    case 0: return p.mask[flat] != 0 || j - i > p.next || i - j > p.pre;
    case 1:
    case 5: return p.mask[flat] != 0;
    case 2: return j > i;
    case 3: return j > i + shift;
    case 4: return j > i + shift + p.next || j < i + shift - p.pre;
    default: return j > i + shift && j >= p.prefix[static_cast<size_t>(b)];
  }
}

// One query head's scores (scaled, pse added, masked ones flagged) and dropout factors, row-major [Sq, Skv].
struct Scores {
  std::vector<double> s, keep;
  std::vector<char> off;  // masked
  std::vector<char> invalid_row;
};

Scores scores(const Problem &p, const Tensor &q, const Tensor &k, int64_t b, int64_t n) {
  const int64_t sq = p.q.s, skv = p.k.s, g = n / p.group;
  Scores sc{std::vector<double>(static_cast<size_t>(sq * skv)), std::vector<double>(static_cast<size_t>(sq * skv), 1),
            std::vector<char>(static_cast<size_t>(sq * skv)), std::vector<char>(static_cast<size_t>(sq), 1)};
  for (int64_t i = 0; i < sq; ++i)
    for (int64_t j = 0; j < skv; ++j) {
      const size_t e = static_cast<size_t>(i * skv + j),
                   flat = static_cast<size_t>(((b * p.q.n + n) * sq + i) * skv + j);
      double dot = 0;
      for (int64_t d = 0; d < p.q.d; ++d) dot += q.v[p.q.at(b, n, i, d)] * k.v[p.k.at(b, g, j, d)];
      const double pse = p.pse.empty() ? 0.0 : p.pse[flat];
      sc.s[e] = p.pse_scaled ? p.scale * (dot + pse) : p.scale * dot + pse;
      sc.off[e] = masked(p, flat, b, i, j);
      if (!sc.off[e]) sc.invalid_row[static_cast<size_t>(i)] = 0;
      if (p.drop) {
        const auto byte = static_cast<uint64_t>(p.drop->v[flat / 8]);
        sc.keep[e] = (byte >> (flat % 8) & 1u) ? 1.0 / p.keep_prob : 0.0;
      }
    }
  return sc;
}

// P from each row's max and sum (the forward computes them, the backward is given them); 0 where masked.
std::vector<double> probabilities(const Scores &sc, int64_t skv, const std::vector<double> &max,
                                  const std::vector<double> &sum) {
  std::vector<double> prob(sc.s.size(), 0.0);
  for (size_t e = 0; e < prob.size(); ++e) {
    const size_t i = e / static_cast<size_t>(skv);
    if (!sc.off[e] && !sc.invalid_row[i]) prob[e] = std::exp(sc.s[e] - max[i]) / sum[i];
  }
  return prob;
}

// ---- Forward --------------------------------------------------------------------------------------------------------
struct Forward {
  Tensor max, sum, out;
};

void forward_head(const Problem &p, const Call &c, int64_t b, int64_t n, int64_t repeat, const Heads &o, Forward &f) {
  const Tensor &q = operand(c, p.at->q), &k = operand(c, p.at->k), &v = operand(c, p.at->v);
  const Scores sc = scores(p, q, k, b, n);
  const int64_t sq = p.q.s, skv = p.k.s, g = n / p.group;
  std::vector<double> max(static_cast<size_t>(sq), -std::numeric_limits<double>::infinity()), sum(max.size(), 0.0);
  for (size_t e = 0; e < sc.s.size(); ++e)
    if (!sc.off[e]) max[e / static_cast<size_t>(skv)] = std::max(max[e / static_cast<size_t>(skv)], sc.s[e]);
  for (size_t e = 0; e < sc.s.size(); ++e)
    if (!sc.off[e]) sum[e / static_cast<size_t>(skv)] += std::exp(sc.s[e] - max[e / static_cast<size_t>(skv)]);
  const std::vector<double> prob = probabilities(sc, skv, max, sum);
  for (int64_t i = 0; i < sq; ++i) {
    const bool invalid = sc.invalid_row[static_cast<size_t>(i)];
    for (int64_t r = 0; r < repeat; ++r) {
      const auto at = static_cast<size_t>(((b * p.q.n + n) * sq + i) * repeat + r);
      f.max.v[at] = max[static_cast<size_t>(i)], f.sum.v[at] = sum[static_cast<size_t>(i)];
      f.max.written[at] = f.sum.written[at] = !invalid;
    }
    for (int64_t d = 0; d < p.v.d; ++d) {
      double acc = 0;
      for (int64_t j = 0; j < skv; ++j) {
        const auto e = static_cast<size_t>(i * skv + j);
        acc += prob[e] * sc.keep[e] * v.v[p.v.at(b, g, j, d)];
      }
      f.out.v[o.at(b, n, i, d)] = acc;
      f.out.written[o.at(b, n, i, d)] = !invalid;
    }
  }
}

// (query, key, value, realShift, dropMask, paddingMask, attenMask, prefix, [qStartIdx, kvStartIdx,] scaleValue,
// keepProb, preTokens, nextTokens, headNum, inputLayout, innerPrecise, sparseMode[, pseType]) -> softmaxMax,
// softmaxSum, softmaxOut (not written), attentionOut.
Outputs forward(const Call &c, const Positions &at) {
  const Problem p = problem(c, at);
  const int64_t repeat = !c.outputs.empty() && c.outputs[0].present && !c.outputs[0].shape.empty()
                             ? std::max<int64_t>(c.outputs[0].shape.back(), 1)
                             : 8;
  const Shape stats{p.q.b, p.q.n, p.q.s, repeat};
  Shape out_shape;
  const Heads o = heads_in(p.layout, p.q.b, p.q.n, p.q.s, p.v.d, &out_shape);
  Forward f{Tensor::zeros(stats), Tensor::zeros(stats), Tensor::zeros(out_shape)};
  for (Tensor *t : {&f.max, &f.sum, &f.out}) t->written.assign(t->size(), true);
  for (int64_t b = 0; b < p.q.b; ++b)
    for (int64_t n = 0; n < p.q.n; ++n) forward_head(p, c, b, n, repeat, o, f);
  return {std::move(f.max), std::move(f.sum), std::nullopt, std::move(f.out)};
}

Outputs forward_v1(const Call &c) { return forward(c, kForward); }
Outputs forward_v2(const Call &c) { return forward(c, kForwardV2); }

// ---- Backward -------------------------------------------------------------------------------------------------------
struct Grads {
  Tensor dq, dk, dv;
};

// Row i's max and sum from the [B, N, Sq, r] statistics.
std::vector<double> row_stat(const Tensor &t, const Problem &p, int64_t b, int64_t n) {
  const int64_t r = t.rank() == 4 ? t.shape[3] : 1;
  if (t.size() != static_cast<size_t>(p.q.b * p.q.n * p.q.s * r))
    throw RefError("FlashAttentionScoreGrad: softmax statistics " + shape_text(t.shape) + " do not fit");
  std::vector<double> out(static_cast<size_t>(p.q.s));
  for (int64_t i = 0; i < p.q.s; ++i)
    out[static_cast<size_t>(i)] = t.v[static_cast<size_t>(((b * p.q.n + n) * p.q.s + i) * r)];
  return out;
}

// rowsum(dy * O) per query row: O is attentionIn, or (without it) the output P * keep @ v.
std::vector<double> delta(const Problem &p, const Call &c, const std::vector<double> &pk, int64_t b, int64_t n) {
  const Tensor &dy = operand(c, p.at->dy), &v = operand(c, p.at->v);
  const Tensor *o = maybe(c, p.at->attention_in);
  std::vector<double> out(static_cast<size_t>(p.q.s), 0.0);
  Shape unused;
  const Heads oh = heads_in(p.layout, p.q.b, p.q.n, p.q.s, p.v.d, &unused);
  if (o && o->size() != dy.size()) throw RefError("FlashAttentionScoreGrad: attentionIn does not fit dy");
  for (int64_t i = 0; i < p.q.s; ++i)
    for (int64_t d = 0; d < p.v.d; ++d) {
      double od = 0;
      if (o) {
        od = o->v[oh.at(b, n, i, d)];
      } else {
        for (int64_t j = 0; j < p.k.s; ++j)
          od += pk[static_cast<size_t>(i * p.k.s + j)] * v.v[p.v.at(b, n / p.group, j, d)];
      }
      out[static_cast<size_t>(i)] += dy.v[oh.at(b, n, i, d)] * od;
    }
  return out;
}

void backward_head(const Problem &p, const Call &c, int64_t b, int64_t n, Grads &g) {
  const Tensor &q = operand(c, p.at->q), &k = operand(c, p.at->k), &v = operand(c, p.at->v), &dy = operand(c, p.at->dy);
  const Scores sc = scores(p, q, k, b, n);
  const std::vector<double> prob =
      probabilities(sc, p.k.s, row_stat(c.tensor(p.at->max), p, b, n), row_stat(c.tensor(p.at->sum), p, b, n));
  std::vector<double> pk(prob.size());
  for (size_t e = 0; e < pk.size(); ++e) pk[e] = prob[e] * sc.keep[e];
  const std::vector<double> dlt = delta(p, c, pk, b, n);
  Shape unused;
  const Heads oh = heads_in(p.layout, p.q.b, p.q.n, p.q.s, p.v.d, &unused);
  const int64_t kv = n / p.group;
  for (int64_t i = 0; i < p.q.s; ++i) {
    g.dq.written[p.q.at(b, n, i, 0)] = !sc.invalid_row[static_cast<size_t>(i)];
    for (int64_t j = 0; j < p.k.s; ++j) {
      const auto e = static_cast<size_t>(i * p.k.s + j);
      double dp = 0;
      for (int64_t d = 0; d < p.v.d; ++d) dp += dy.v[oh.at(b, n, i, d)] * v.v[p.v.at(b, kv, j, d)];
      const double ds = prob[e] * (dp * sc.keep[e] - dlt[static_cast<size_t>(i)]);
      for (int64_t d = 0; d < p.q.d; ++d) {
        g.dq.v[p.q.at(b, n, i, d)] += p.scale * ds * k.v[p.k.at(b, kv, j, d)];
        g.dk.v[p.k.at(b, kv, j, d)] += p.scale * ds * q.v[p.q.at(b, n, i, d)];
      }
      for (int64_t d = 0; d < p.v.d; ++d) g.dv.v[p.v.at(b, kv, j, d)] += pk[e] * dy.v[oh.at(b, n, i, d)];
    }
  }
}

// (query, keyIn, value, dy, pseShift, dropMask, paddingMask, attenMask, softmaxMax, softmaxSum, softmaxIn,
// attentionIn, prefix, [qStartIdx, kvStartIdx,] scaleValue, keepProb, preTokens, nextTokens, headNum, inputLayout,
// innerPrecise, sparseMode[, pseType]) -> dq, dk, dv, dpse (not written).
Outputs backward(const Call &c, const Positions &at) {
  const Problem p = problem(c, at);
  if (operand(c, at.dy).size() != static_cast<size_t>(p.q.b * p.q.n * p.q.s * p.v.d))
    throw RefError("FlashAttentionScoreGrad: dy does not fit the output of the attention");
  Grads g{Tensor::zeros(operand(c, at.q).shape), Tensor::zeros(operand(c, at.k).shape),
          Tensor::zeros(operand(c, at.v).shape)};
  g.dq.written.assign(g.dq.size(), true);
  for (int64_t b = 0; b < p.q.b; ++b)
    for (int64_t n = 0; n < p.q.n; ++n) backward_head(p, c, b, n, g);
  // An invalid row's flag was set on its first element: spread it over the row's head dim.
  for (int64_t b = 0; b < p.q.b; ++b)
    for (int64_t n = 0; n < p.q.n; ++n)
      for (int64_t i = 0; i < p.q.s; ++i)
        for (int64_t d = 1; d < p.q.d; ++d) g.dq.written[p.q.at(b, n, i, d)] = g.dq.written[p.q.at(b, n, i, 0)];
  return {std::move(g.dq), std::move(g.dk), std::move(g.dv), std::nullopt};
}

Outputs backward_v1(const Call &c) { return backward(c, kGrad); }
Outputs backward_v2(const Call &c) { return backward(c, kGradV2); }

const RefEntry kRefs[] = {
    {"FlashAttentionScore", forward_v1},
    {"FlashAttentionScoreV2", forward_v2},
    {"FlashAttentionScoreGrad", backward_v1},
    {"FlashAttentionScoreGradV2", backward_v2},
};

}  // namespace

std::span<const RefEntry> attention_refs() { return kRefs; }

}  // namespace msprobe::tools::replay
