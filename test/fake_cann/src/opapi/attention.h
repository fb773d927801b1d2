// FlashAttentionScore and its grad (ops-transformer attention/flash_attention_score*, docs
// aclnnFlashAttentionScore*.md): what the forward and the backward share. Phase 1 reads the layout string, the heads
// and the sparse mode into a Problem; kernels gather q, k, v as [B, N, S, D] (a view per layout, no copy) and rebuild
// one (batch, head)'s probabilities at a time (logits, softmax, dropout). Everything is computed in double and rounded
// once, at the outputs.
#pragma once
#include <cstdint>
#include <vector>

#include "op_common.h"

namespace fakecann::ops::attn {

enum class Layout { BSH, SBH, BSND, BNSD };

// Axes as CANN's aclnn layer names them: n1 query heads, n2 key/value heads (n1 = g * n2), d the q/k head dim,
// dv value's head dim (d >= dv).
struct Axes {
  Layout layout = Layout::BSND;
  int64_t b = 0, n1 = 0, n2 = 0, s1 = 0, s2 = 0, d = 0, dv = 0;
  int64_t group() const { return n1 / n2; }
};

// Reads the layout and the heads from q, k, v (161002 for a layout that is not BSH/SBH/BSND/BNSD, a rank that does
// not fit it, or inconsistent axes).
Axes read_axes(const TensorView &q, const TensorView &k, const TensorView &v, int64_t headNum, const char *layout);
// The shape a tensor of `heads` heads, `seq` rows and head dim `dim` has in the layout (q, dq: n1 and s1; k, v: n2,
// s2).
Shape layout_shape(Layout layout, int64_t b, int64_t heads, int64_t seq, int64_t dim);
// The [B, N, S, D] view of a tensor in the layout (BSH/SBH split H into N and D).
TensorView as_bnsd(const TensorView &v, Layout layout, int64_t heads);

// Which scores take part. sparseMode as docs/context/sparse_mode参数说明.md describes it; without an attenMask
// nothing is masked whatever the mode (the docs: "固定为全计算"). Modes 2, 3, 4 and 6 read the geometry their
// compressed mask stands for, modes 0, 1 and 5 the mask's values (1 = masked).
struct Masking {
  int64_t mode = 0, pre = 0, next = 0;
  bool present = false;
  Shape mask_shape;             // [S1,S2], [1,1,S1,S2], [B,1,S1,S2] or [B,N1,S1,S2] when read by value
  std::vector<int64_t> prefix;  // per batch, modes 5 and 6
  bool reads_values() const { return present && (mode == 0 || mode == 1 || mode == 5); }
  // Whether score (i, j) of (batch b, query head n) is masked; `mask` holds the mask's values when reads_values().
  bool hides(const Values &mask, const Axes &ax, int64_t b, int64_t n, int64_t i, int64_t j) const;
};
Masking read_masking(const Axes &ax, const TensorView *mask, int64_t sparseMode, int64_t pre, int64_t next,
                     const aclIntArray *prefix);

// pse ("realShift" / "pseShift"): [B,N1,S1,S2], [B,N1,1,S2] or [1,N1,S1,S2]; pseType 1 adds it before the
// scaling, 0 after it (V2 only; 2 and 3, the inner alibi, are not emulated).
struct Shift {
  bool present = false, before_scale = true;
  Shape shape;
  double at(const Values &pse, const Axes &ax, int64_t b, int64_t n, int64_t i, int64_t j) const;
};
Shift read_shift(const Axes &ax, const TensorView *pse, aclDataType qdtype, int64_t pseType);

// keepProb in (0, 1]; below 1 the caller's dropMask (uint8, one bit per score in [B,N1,S1,S2] order, LSB first,
// 1 = kept) decides, and kept probabilities are divided by keepProb. The stand-in generates no masks of its own.
struct Dropout {
  double keep_prob = 1.0;
  bool active = false;
};
Dropout read_dropout(const Axes &ax, const TensorView *dropMask, double keepProb);

struct Problem {
  Axes ax;
  Masking mask;
  Shift shift;
  Dropout drop;
  double scale = 1.0;
};

// The device values a kernel gathered: q [B,N1,S1,D], k [B,N2,S2,D], v [B,N2,S2,Dv] and the optional operands.
struct Operands {
  Values q, k, v, mask, pse, drop;
};

// One (batch, query head)'s scaled and shifted scores, S1 x S2 row-major, with the masked ones flagged.
struct Logits {
  Values s;
  std::vector<char> masked;
};
Logits logits(const Problem &pb, const Operands &in, int64_t b, int64_t n);

// The softmax of the unmasked logits (0 where masked) and each row's max and sum, as the forward writes them to
// softmaxMax / softmaxSum. A row whose every score is masked is "invalid": its probabilities are all 0, as with
// CANN's invalid-line handling, its max is -FLT_MAX (the kernel's mask fill) and its sum S2.
struct Softmax {
  Values p, max, sum;
};
Softmax softmax_rows(const Problem &pb, const Logits &lg);
// The same probabilities rebuilt from the forward's statistics (what the backward kernel does): exp(s - max) / sum.
Values saved_softmax(const Problem &pb, const Logits &lg, const double *max, const double *sum);
// Dropout's factor per score: 0 or 1/keepProb from the mask's bit, 1 everywhere without dropout.
Values dropout_factors(const Problem &pb, const Operands &in, int64_t b, int64_t n);

// Where one head's rows start inside a gathered [B,N,S,D] tensor.
inline size_t head_at(int64_t b, int64_t heads, int64_t n, int64_t seq, int64_t dim) {
  return (size_t)(((b * heads + n) * seq) * dim);
}

// Workspace a kernel of this size asks for (the real one keeps per-core score blocks).
uint64_t attention_workspace(const Axes &ax);

}  // namespace fakecann::ops::attn
