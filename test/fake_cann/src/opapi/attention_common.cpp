// FlashAttentionScore's shared geometry: layouts, masks, pse and dropout (attention.h).
#include <algorithm>
#include <cfloat>
#include <cmath>
#include <cstring>
#include <string>

#include "attention.h"

namespace fakecann::ops::attn {

namespace {

constexpr int64_t kMaxHeadDim = 768;       // aclnn_flash_attention_score.cpp HEAD_DIM_MAX
constexpr int64_t kCompressedCols = 2048;  // sparse modes 2, 3, 4: a [2048, 2048] mask
constexpr int64_t kPrefixRows = 3072;      // sparse mode 6: [3072, 2048]

Layout parse_layout(const char *s) {
  if (s == nullptr) throw ParamError{ACLNN_ERR_PARAM_NULLPTR, "inputLayout is NULL"};
  static const std::pair<const char *, Layout> kLayouts[] = {
      {"BSH", Layout::BSH}, {"SBH", Layout::SBH}, {"BSND", Layout::BSND}, {"BNSD", Layout::BNSD}};
  for (const auto &[name, layout] : kLayouts)
    if (std::strcmp(s, name) == 0) return layout;  // case matters: the aclnn layer compares exactly
  fail(std::string("inputLayout \"") + s + "\" is not BSH, SBH, BSND or BNSD");
}

bool is_hidden(Layout l) { return l == Layout::BSH || l == Layout::SBH; }

// Splits a packed hidden dim of `t` (BSH/SBH: H = heads * dim) and checks that it divides.
int64_t head_dim_of(const TensorView &t, int64_t heads, const char *name) {
  if (heads <= 0 || t.shape[2] % heads != 0)
    fail(std::string(name) + ": hidden size " + std::to_string(t.shape[2]) + " is not a multiple of the heads");
  return t.shape[2] / heads;
}

// (batch, seq, heads) of a 4-D tensor in BSND or BNSD.
void bsn_of(const TensorView &t, Layout l, int64_t &b, int64_t &s, int64_t &n) {
  b = t.shape[0];
  s = l == Layout::BSND ? t.shape[1] : t.shape[2];
  n = l == Layout::BSND ? t.shape[2] : t.shape[1];
}

void read_packed(const TensorView &q, const TensorView &k, const TensorView &v, Axes &ax, int64_t &dk) {
  const size_t bi = ax.layout == Layout::BSH ? 0 : 1, si = 1 - bi;
  ax.d = head_dim_of(q, ax.n1, "query");
  if (ax.d == 0) fail("query's head dim is 0");
  ax.n2 = k.shape[2] / ax.d;
  if (k.shape[2] % ax.d != 0 || ax.n2 == 0) fail("key's hidden size does not hold whole heads of query's head dim");
  dk = ax.d;
  ax.dv = head_dim_of(v, ax.n2, "value");
  ax.b = q.shape[bi];
  ax.s1 = q.shape[si];
  ax.s2 = k.shape[si];
  if (k.shape[bi] != ax.b || v.shape[bi] != ax.b || v.shape[si] != ax.s2)
    fail("key and value must share query's batch and each other's sequence");
}

void read_split(const TensorView &q, const TensorView &k, const TensorView &v, Axes &ax, int64_t &dk) {
  int64_t qn, kb, kn, vb, vs, vn;
  bsn_of(q, ax.layout, ax.b, ax.s1, qn);
  bsn_of(k, ax.layout, kb, ax.s2, kn);
  bsn_of(v, ax.layout, vb, vs, vn);
  if (qn != ax.n1) fail("headNum " + std::to_string(ax.n1) + " differs from query's heads " + std::to_string(qn));
  if (kb != ax.b || vb != ax.b) fail("query, key and value differ in batch");
  if (vs != ax.s2 || vn != kn) fail("key and value differ outside the head dim");
  ax.n2 = kn;
  ax.d = q.shape[3];
  dk = k.shape[3];
  ax.dv = v.shape[3];
}

}  // namespace

Axes read_axes(const TensorView &q, const TensorView &k, const TensorView &v, int64_t headNum, const char *layout) {
  Axes ax;
  ax.layout = parse_layout(layout);
  if (headNum <= 0) fail("headNum must be > 0, got " + std::to_string(headNum));
  ax.n1 = headNum;
  const size_t rank = is_hidden(ax.layout) ? 3 : 4;
  for (const TensorView *t : {&q, &k, &v})
    if (t->shape.size() != rank)
      fail(std::string("inputLayout ") + layout + " needs " + std::to_string(rank) + "-D query, key and value, got " +
           show(t->shape));
  int64_t dk = 0;
  if (is_hidden(ax.layout))
    read_packed(q, k, v, ax, dk);
  else
    read_split(q, k, v, ax, dk);
  if (ax.d != dk) fail("qD and kD must be equal, got " + std::to_string(ax.d) + " and " + std::to_string(dk));
  if (ax.dv > ax.d) fail("value's head dim " + std::to_string(ax.dv) + " exceeds key's " + std::to_string(ax.d));
  if (ax.d > kMaxHeadDim) fail("head dim " + std::to_string(ax.d) + " exceeds 768");
  if (ax.n2 <= 0 || ax.n1 % ax.n2 != 0)
    fail("query's heads " + std::to_string(ax.n1) + " are not a multiple of key's " + std::to_string(ax.n2));
  return ax;
}

Shape layout_shape(Layout layout, int64_t b, int64_t heads, int64_t seq, int64_t dim) {
  switch (layout) {
    case Layout::BSH: return {b, seq, heads * dim};
    case Layout::SBH: return {seq, b, heads * dim};
    case Layout::BSND: return {b, seq, heads, dim};
    case Layout::BNSD: break;
  }
  return {b, heads, seq, dim};
}

TensorView as_bnsd(const TensorView &v, Layout layout, int64_t heads) {
  TensorView t = v;
  if (is_hidden(layout)) {  // H -> (N, D): a split dim is always expressible by strides
    const int64_t stride = t.strides[2], dim = heads == 0 ? 0 : t.shape[2] / heads;
    t.shape = {t.shape[0], t.shape[1], heads, dim};
    t.strides = {t.strides[0], t.strides[1], stride * dim, stride};
  }
  static const int64_t kFromBsnd[4] = {0, 2, 1, 3}, kFromSbnd[4] = {1, 2, 0, 3}, kSame[4] = {0, 1, 2, 3};
  const int64_t *perm = layout == Layout::BNSD ? kSame : layout == Layout::SBH ? kFromSbnd : kFromBsnd;
  TensorView out = t;
  for (size_t i = 0; i < 4; ++i) {
    out.shape[i] = t.shape[(size_t)perm[i]];
    out.strides[i] = t.strides[(size_t)perm[i]];
  }
  return out;
}

uint64_t attention_workspace(const Axes &ax) {
  return workspace_for(ax.b * ax.n1 * ax.s1 * std::max<int64_t>(ax.s2, 1));
}

// ---------------------------------------------------------------------------------------------- masks

namespace {

bool compressed(int64_t mode) { return mode == 2 || mode == 3 || mode == 4 || mode == 6; }

void check_value_mask(const Axes &ax, const Shape &s, int64_t mode) {
  const bool plain = s == Shape{ax.s1, ax.s2} || s == Shape{1, 1, ax.s1, ax.s2};
  const bool batched = s == Shape{ax.b, 1, ax.s1, ax.s2} || s == Shape{ax.b, ax.n1, ax.s1, ax.s2};
  if (!plain && !batched)
    fail("attenMask shape " + show(s) + " is none of [B,N,Sq,Skv], [B,1,Sq,Skv], [1,1,Sq,Skv], [Sq,Skv]");
  if (mode == 5 && !batched && ax.b != 1) fail("sparseMode 5 needs an attenMask of [B,N,Sq,Skv] or [B,1,Sq,Skv]");
}

void check_compressed_mask(const Shape &s, int64_t mode) {
  const int64_t rows = mode == 6 ? kPrefixRows : kCompressedCols;
  if (s != Shape{rows, kCompressedCols})
    fail("sparseMode " + std::to_string(mode) + " takes the compressed attenMask [" + std::to_string(rows) +
         ",2048], got " + show(s));
}

std::vector<int64_t> read_prefix(const Axes &ax, const aclIntArray *prefix) {
  if (prefix == nullptr) fail("sparseMode 5 and 6 need prefixOptional");
  const std::vector<int64_t> &p = int_array(prefix, "prefixOptional");
  if ((int64_t)p.size() != ax.b) fail("prefixOptional needs one value per batch");
  for (int64_t v : p)
    if (v < 0 || v > ax.s2) fail("prefixOptional value " + std::to_string(v) + " is outside [0, Skv]");
  return p;
}

}  // namespace

Masking read_masking(const Axes &ax, const TensorView *mask, int64_t sparseMode, int64_t pre, int64_t next,
                     const aclIntArray *prefix) {
  if (sparseMode < 0 || sparseMode > 6)
    fail("sparseMode " + std::to_string(sparseMode) + " is not 0 to 6 (7 and 8 are for the varlen ops)");
  Masking m;
  m.mode = sparseMode;
  m.pre = pre;
  m.next = next;
  if (mask == nullptr) return m;  // no mask: every score takes part, whatever the mode
  m.present = true;
  if (compressed(sparseMode)) {
    check_compressed_mask(mask->shape, sparseMode);
  } else {
    check_value_mask(ax, mask->shape, sparseMode);
    m.mask_shape = mask->shape.size() == 2 ? Shape{1, 1, ax.s1, ax.s2} : mask->shape;
  }
  if (sparseMode == 5 || sparseMode == 6) m.prefix = read_prefix(ax, prefix);
  if ((sparseMode == 0 || sparseMode == 4) && pre < 0 && next < 0)
    fail("preTokens " + std::to_string(pre) + " and nextTokens " + std::to_string(next) + " leave no score");
  return m;
}

bool Masking::hides(const Values &mask, const Axes &ax, int64_t b, int64_t n, int64_t i, int64_t j) const {
  if (!present) return false;
  const int64_t shift = ax.s2 - ax.s1;  // the bottom-right origin of modes 3, 4 and 6
  auto by_value = [&] {
    const int64_t mb = mask_shape[0] == 1 ? 0 : b, mn = mask_shape[1] == 1 ? 0 : n;
    return mask[(size_t)(((mb * mask_shape[1] + mn) * ax.s1 + i) * ax.s2 + j)] != 0;
  };
  switch (mode) {
    case 0: return by_value() || j - i > next || i - j > pre;
    case 2: return j > i;
    case 3: return j > i + shift;
    case 4: return j - i > next + shift || i - j > pre - shift;
    case 6: return j > i + shift && j >= prefix[(size_t)b];
    default: return by_value();  // 1 and 5: the whole mask
  }
}

// ------------------------------------------------------------------------------------------ pse, dropout

Shift read_shift(const Axes &ax, const TensorView *pse, aclDataType qdtype, int64_t pseType) {
  if (pseType < 0 || pseType > 3) fail("pseType " + std::to_string(pseType) + " is not 0 to 3");
  if (pseType >= 2) fail("pseType 2 and 3 (the alibi pse generated inside) are not emulated by the stand-in");
  Shift sh;
  if (pse == nullptr) return sh;
  if (pse->dtype != qdtype) fail("pse's dtype differs from query's");
  const Shape &s = pse->shape;
  if (s != Shape{ax.b, ax.n1, ax.s1, ax.s2} && s != Shape{ax.b, ax.n1, 1, ax.s2} && s != Shape{1, ax.n1, ax.s1, ax.s2})
    fail("pse shape " + show(s) + " is none of [B,N,Sq,Skv], [B,N,1,Skv], [1,N,Sq,Skv]");
  sh.present = true;
  sh.before_scale = pseType == 1;
  sh.shape = s;
  return sh;
}

double Shift::at(const Values &pse, const Axes &ax, int64_t b, int64_t n, int64_t i, int64_t j) const {
  const int64_t pb = shape[0] == 1 ? 0 : b, pi = shape[2] == 1 ? 0 : i;
  return pse[(size_t)(((pb * ax.n1 + n) * shape[2] + pi) * ax.s2 + j)];
}

Dropout read_dropout(const Axes &ax, const TensorView *dropMask, double keepProb) {
  if (!(keepProb > 0 && keepProb <= 1)) fail("keepProb " + std::to_string(keepProb) + " is outside (0, 1]");
  Dropout d;
  d.keep_prob = keepProb;
  if (keepProb == 1) return d;  // the mask, if any, is not read
  if (dropMask == nullptr) fail("keepProb < 1 needs dropMaskOptional (the stand-in generates no dropout mask)");
  const int64_t bits = ax.b * ax.n1 * ax.s1 * ax.s2;
  if (dropMask->numel() < (bits + 7) / 8)
    fail("dropMaskOptional holds " + std::to_string(dropMask->numel()) + " bytes, needs " +
         std::to_string((bits + 7) / 8));
  d.active = true;
  return d;
}

// -------------------------------------------------------------------------------------------- scores

Logits logits(const Problem &pb, const Operands &in, int64_t b, int64_t n) {
  const Axes &ax = pb.ax;
  const double *q = &in.q[head_at(b, ax.n1, n, ax.s1, ax.d)];
  const double *k = &in.k[head_at(b, ax.n2, n / ax.group(), ax.s2, ax.d)];
  Logits lg{Values((size_t)(ax.s1 * ax.s2)), std::vector<char>((size_t)(ax.s1 * ax.s2))};
  for (int64_t i = 0; i < ax.s1; ++i)
    for (int64_t j = 0; j < ax.s2; ++j) {
      double dot = 0;
      for (int64_t t = 0; t < ax.d; ++t) dot += q[i * ax.d + t] * k[j * ax.d + t];
      const size_t at = (size_t)(i * ax.s2 + j);
      if (pb.shift.present) {
        const double shift = pb.shift.at(in.pse, ax, b, n, i, j);
        lg.s[at] = pb.shift.before_scale ? pb.scale * (dot + shift) : pb.scale * dot + shift;
      } else {
        lg.s[at] = pb.scale * dot;
      }
      lg.masked[at] = pb.mask.hides(in.mask, ax, b, n, i, j);
    }
  return lg;
}

Softmax softmax_rows(const Problem &pb, const Logits &lg) {
  const int64_t s1 = pb.ax.s1, s2 = pb.ax.s2;
  Softmax sm{Values((size_t)(s1 * s2), 0.0), Values((size_t)s1, -FLT_MAX), Values((size_t)s1, (double)s2)};
  for (int64_t i = 0; i < s1; ++i) {
    const size_t row = (size_t)(i * s2);
    // A NaN score makes the row's max NaN, and so its probabilities and sum (softmax's formula, torch's and the
    // kernel's exp(s - max)): std::max would drop it and turn a row of NaN scores into an "invalid" row of zeros.
    double mx = -INFINITY;
    for (int64_t j = 0; j < s2; ++j) {
      const double s = lg.s[row + (size_t)j];
      if (!lg.masked[row + (size_t)j] && (std::isnan(s) || s > mx)) mx = s;
    }
    if (mx == -INFINITY) continue;  // an invalid row
    double sum = 0;
    for (int64_t j = 0; j < s2; ++j)
      if (!lg.masked[row + (size_t)j]) sum += sm.p[row + (size_t)j] = std::exp(lg.s[row + (size_t)j] - mx);
    for (int64_t j = 0; j < s2; ++j) sm.p[row + (size_t)j] /= sum;
    sm.max[(size_t)i] = mx;
    sm.sum[(size_t)i] = sum;
  }
  return sm;
}

Values saved_softmax(const Problem &pb, const Logits &lg, const double *max, const double *sum) {
  const int64_t s1 = pb.ax.s1, s2 = pb.ax.s2;
  Values p((size_t)(s1 * s2), 0.0);
  for (int64_t i = 0; i < s1; ++i)
    for (int64_t j = 0; j < s2; ++j) {
      const size_t at = (size_t)(i * s2 + j);
      if (!lg.masked[at]) p[at] = std::exp(lg.s[at] - max[i]) / sum[i];
    }
  return p;
}

Values dropout_factors(const Problem &pb, const Operands &in, int64_t b, int64_t n) {
  const Axes &ax = pb.ax;
  Values f((size_t)(ax.s1 * ax.s2), 1.0);
  if (!pb.drop.active) return f;
  const int64_t base = (b * ax.n1 + n) * ax.s1 * ax.s2;
  for (size_t e = 0; e < f.size(); ++e) {
    const int64_t bit = base + (int64_t)e;
    const auto byte = (unsigned)in.drop[(size_t)(bit >> 3)];
    f[e] = (byte >> (bit & 7)) & 1u ? 1.0 / pb.drop.keep_prob : 0.0;
  }
  return f;
}

}  // namespace fakecann::ops::attn
