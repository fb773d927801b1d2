// FlashAttentionScore(V2) and FlashAttentionScoreGrad(V2): attention over the BSH, SBH, BSND and BNSD layouts with
// grouped-query heads, pse, attenMask / sparseMode and dropout by the caller's mask (attention.h). The forward
// writes softmaxMax / softmaxSum as [B, N, Sq, 8] (each row's value repeated 8 times, as CANN's kernel stores
// them); softmaxOut is "not used now" in CANN and is never written. The backward rebuilds the probabilities from
// those statistics and returns dq, dk, dv (dk, dv summed over the query heads of a group); dpse is "not used".
#include "attention.h"

#include <initializer_list>
#include <utility>

using namespace fakecann;
using namespace fakecann::ops;
using namespace fakecann::ops::attn;

namespace {

constexpr int64_t kStatRepeat = 8;  // softmaxMax / softmaxSum: [B, N, Sq, 8]
constexpr DtypeSet kMaskTypes = dtypes({ACL_BOOL, ACL_UINT8});

// CANN checks every required pointer before any dtype (CheckFaParam): NULL is 161001 whatever else is wrong.
void require_present(std::initializer_list<std::pair<const void *, const char *>> args) {
  for (const auto &[p, name] : args)
    if (p == nullptr) throw ParamError{ACLNN_ERR_PARAM_NULLPTR, std::string(name) + " is NULL"};
}

// The arguments the forward and the backward share, by their meaning.
struct Operand7 {
  const aclTensor *query, *key, *value, *pse, *dropMask, *paddingMask, *attenMask;
};
struct Attrs {
  const aclIntArray *prefix;
  double scale, keepProb;
  int64_t pre, next, headNum;
  const char *layout;
  int64_t sparseMode, pseType;
};
struct Common : Operand7, Attrs {
  bool grad;  // names: the grad's keyIn / pseShiftOptional, the forward's key / realShiftOptional
  Common(const Operand7 &t, const Attrs &a, bool is_grad) : Operand7(t), Attrs(a), grad(is_grad) {}
  const char *key_name() const { return grad ? "keyIn" : "key"; }
  const char *pse_name() const { return grad ? "pseShiftOptional" : "realShiftOptional"; }
};

Problem read_problem(const Common &c) {
  const TensorView &q = tensor(c.query, "query", kFloats);
  const TensorView &k = tensor(c.key, c.key_name(), kFloats);
  const TensorView &v = tensor(c.value, "value", kFloats);
  if (k.dtype != q.dtype || v.dtype != q.dtype) fail("query, key and value differ in dtype");
  Problem pb;
  pb.ax = read_axes(q, k, v, c.headNum, c.layout);
  pb.mask = read_masking(pb.ax, optional_tensor(c.attenMask, "attenMaskOptional", kMaskTypes), c.sparseMode, c.pre,
                         c.next, c.prefix);
  pb.shift = read_shift(pb.ax, optional_tensor(c.pse, c.pse_name(), kFloats), q.dtype, c.pseType);
  pb.drop = read_dropout(pb.ax, optional_tensor(c.dropMask, "dropMaskOptional", dtypes({ACL_UINT8})), c.keepProb);
  optional_tensor(c.paddingMask, "paddingMaskOptional", kArith);  // reserved by CANN: checked, never read
  pb.scale = c.scale;
  return pb;
}

// Slot indices of the shared operands (declaration order of the tensor parameters).
struct SlotMap {
  size_t q, k, v, pse, drop, mask;
};
constexpr SlotMap kForwardSlots{0, 1, 2, 3, 4, 6};
constexpr SlotMap kGradSlots{0, 1, 2, 4, 5, 7};

Operands gather_operands(const Slots &s, const Problem &pb, const SlotMap &m) {
  Operands in;
  in.q = gather(as_bnsd(view(s, m.q), pb.ax.layout, pb.ax.n1));
  in.k = gather(as_bnsd(view(s, m.k), pb.ax.layout, pb.ax.n2));
  in.v = gather(as_bnsd(view(s, m.v), pb.ax.layout, pb.ax.n2));
  if (pb.mask.reads_values()) in.mask = gather(view(s, m.mask));
  if (pb.shift.present) in.pse = gather(view(s, m.pse));
  if (pb.drop.active) in.drop = gather(view(s, m.drop));
  return in;
}

// c[m x n] += alpha * op(a) op(b), op(x) = x or its transpose (a: m x k or k x m, b: k x n or n x k).
void gemm(const double *a, bool ta, const double *b, bool tb, double *c, int64_t m, int64_t k, int64_t n,
          double alpha) {
  for (int64_t i = 0; i < m; ++i)
    for (int64_t t = 0; t < k; ++t) {
      const double x = alpha * (ta ? a[t * m + i] : a[i * k + t]);
      if (x == 0) continue;
      for (int64_t j = 0; j < n; ++j) c[i * n + j] += x * (tb ? b[j * k + t] : b[t * n + j]);
    }
}

Values elementwise_product(const Values &a, const Values &b) {
  Values r(a.size());
  for (size_t i = 0; i < a.size(); ++i) r[i] = a[i] * b[i];
  return r;
}

// ------------------------------------------------------------------------------------------- forward

struct ForwardOutputs {
  Values out, max, sum;
};

void forward_head(const Problem &pb, const Operands &in, int64_t b, int64_t n, ForwardOutputs &o) {
  const Axes &ax = pb.ax;
  const Softmax sm = softmax_rows(pb, logits(pb, in, b, n));
  const Values weights = elementwise_product(sm.p, dropout_factors(pb, in, b, n));
  gemm(weights.data(), false, &in.v[head_at(b, ax.n2, n / ax.group(), ax.s2, ax.dv)], false,
       &o.out[head_at(b, ax.n1, n, ax.s1, ax.dv)], ax.s1, ax.s2, ax.dv, 1.0);
  const size_t stats = head_at(b, ax.n1, n, ax.s1, kStatRepeat);
  for (int64_t i = 0; i < ax.s1; ++i)
    for (int64_t r = 0; r < kStatRepeat; ++r) {
      o.max[stats + (size_t)(i * kStatRepeat + r)] = sm.max[(size_t)i];
      o.sum[stats + (size_t)(i * kStatRepeat + r)] = sm.sum[(size_t)i];
    }
}

void forward_kernel(const Problem &pb, const Slots &s) {
  const Axes &ax = pb.ax;
  const Operands in = gather_operands(s, pb, kForwardSlots);
  const auto stats = (size_t)(ax.b * ax.n1 * ax.s1 * kStatRepeat);
  ForwardOutputs o{Values((size_t)(ax.b * ax.n1 * ax.s1 * ax.dv), 0.0), Values(stats), Values(stats)};
  for (int64_t b = 0; b < ax.b; ++b)
    for (int64_t n = 0; n < ax.n1; ++n) forward_head(pb, in, b, n, o);
  scatter(view(s, 7), o.max);
  scatter(view(s, 8), o.sum);
  scatter(as_bnsd(view(s, 10), ax.layout, ax.n1), o.out);
}

Shape stat_shape(const Axes &ax) { return {ax.b, ax.n1, ax.s1, kStatRepeat}; }

ExecutorSpec forward_spec(const Common &c, const aclTensor *softmaxMaxOut, const aclTensor *softmaxSumOut,
                          const aclTensor *softmaxOutOut, const aclTensor *attentionOutOut) {
  require_present({{c.query, "query"},
                   {c.key, "key"},
                   {c.value, "value"},
                   {c.layout, "inputLayout"},
                   {softmaxMaxOut, "softmaxMaxOut"},
                   {softmaxSumOut, "softmaxSumOut"},
                   {attentionOutOut, "attentionOutOut"}});
  const Problem pb = read_problem(c);
  const Axes &ax = pb.ax;
  tensor(softmaxMaxOut, "softmaxMaxOut", dtypes({ACL_FLOAT}), stat_shape(ax));
  tensor(softmaxSumOut, "softmaxSumOut", dtypes({ACL_FLOAT}), stat_shape(ax));
  optional_tensor(softmaxOutOut, "softmaxOutOut", kArith);
  const TensorView &out =
      tensor(attentionOutOut, "attentionOutOut", kFloats, layout_shape(ax.layout, ax.b, ax.n1, ax.s1, ax.dv));
  if (out.dtype != c.query->view.dtype) fail("attentionOutOut's dtype differs from query's");
  Slots slots;
  for (const aclTensor *t : {c.query, c.key, c.value, c.pse, c.dropMask, c.paddingMask, c.attenMask})
    slots.push_back(nn::slot(t, Io::Input));
  for (const aclTensor *t : {softmaxMaxOut, softmaxSumOut, softmaxOutOut, attentionOutOut})
    slots.push_back(nn::slot(t, Io::Output));
  return {"", std::move(slots), attention_workspace(ax), [pb](const Slots &s) { forward_kernel(pb, s); }};
}

// ------------------------------------------------------------------------------------------ backward

struct Gradients {
  Values dq, dk, dv;
};

// Upstream values of the backward: dy and the forward's out (both [B,N1,S1,Dv]) and its row statistics.
struct Upstream {
  Values dy, out, max, sum;
};

// One query head's share of dq, dk, dv (FlashAttention's backward: dS = P * (dP - rowsum(dY * O))).
void backward_head(const Problem &pb, const Operands &in, const Upstream &up, int64_t b, int64_t n, Gradients &g) {
  const Axes &ax = pb.ax;
  const int64_t kv = n / ax.group(), s1 = ax.s1, s2 = ax.s2;
  Values mx((size_t)s1), sm((size_t)s1), delta((size_t)s1, 0.0);
  const size_t stats = head_at(b, ax.n1, n, s1, kStatRepeat), rows = head_at(b, ax.n1, n, s1, ax.dv);
  for (int64_t i = 0; i < s1; ++i) {
    mx[(size_t)i] = up.max[stats + (size_t)(i * kStatRepeat)];
    sm[(size_t)i] = up.sum[stats + (size_t)(i * kStatRepeat)];
    for (int64_t t = 0; t < ax.dv; ++t)
      delta[(size_t)i] += up.dy[rows + (size_t)(i * ax.dv + t)] * up.out[rows + (size_t)(i * ax.dv + t)];
  }
  const Values p = saved_softmax(pb, logits(pb, in, b, n), mx.data(), sm.data());
  const Values keep = dropout_factors(pb, in, b, n);
  Values dp((size_t)(s1 * s2), 0.0);
  const double *dy = &up.dy[rows], *v = &in.v[head_at(b, ax.n2, kv, s2, ax.dv)];
  gemm(dy, false, v, true, dp.data(), s1, ax.dv, s2, 1.0);
  Values ds((size_t)(s1 * s2));
  for (size_t e = 0; e < ds.size(); ++e) ds[e] = p[e] * (dp[e] * keep[e] - delta[e / (size_t)s2]);
  const Values weights = elementwise_product(p, keep);
  const size_t kq = head_at(b, ax.n2, kv, s2, ax.d), qq = head_at(b, ax.n1, n, s1, ax.d);
  gemm(ds.data(), false, &in.k[kq], false, &g.dq[qq], s1, s2, ax.d, pb.scale);
  gemm(ds.data(), true, &in.q[qq], false, &g.dk[kq], s2, s1, ax.d, pb.scale);
  gemm(weights.data(), true, dy, false, &g.dv[head_at(b, ax.n2, kv, s2, ax.dv)], s2, s1, ax.dv, 1.0);
}

void backward_kernel(const Problem &pb, const Slots &s) {
  const Axes &ax = pb.ax;
  const Operands in = gather_operands(s, pb, kGradSlots);
  const Upstream up{gather(as_bnsd(view(s, 3), ax.layout, ax.n1)), gather(as_bnsd(view(s, 11), ax.layout, ax.n1)),
                    gather(view(s, 8)), gather(view(s, 9))};
  Gradients g{Values(in.q.size(), 0.0), Values(in.k.size(), 0.0), Values(in.v.size(), 0.0)};
  for (int64_t b = 0; b < ax.b; ++b)
    for (int64_t n = 0; n < ax.n1; ++n) backward_head(pb, in, up, b, n, g);
  scatter(as_bnsd(view(s, 12), ax.layout, ax.n1), g.dq);
  scatter(as_bnsd(view(s, 13), ax.layout, ax.n2), g.dk);
  scatter(as_bnsd(view(s, 14), ax.layout, ax.n2), g.dv);
}

struct GradTensors {
  const aclTensor *dy, *softmaxMax, *softmaxSum, *softmaxIn, *attentionIn, *dq, *dk, *dv, *dpse;
};

// Every tensor of the grad has query's dtype but the FLOAT statistics.
void check_grad_tensors(const Problem &pb, const GradTensors &t, aclDataType qdtype) {
  const Axes &ax = pb.ax;
  const DtypeSet same = dtypes({qdtype});
  const Shape out = layout_shape(ax.layout, ax.b, ax.n1, ax.s1, ax.dv);
  if (tensor(t.dy, "dy", kFloats).dtype != qdtype) fail("dy's dtype differs from query's");
  require_shape(t.dy->view, out, "dy");
  tensor(t.attentionIn, "attentionInOptional", same, out);
  tensor(t.softmaxMax, "softmaxMaxOptional", dtypes({ACL_FLOAT}), stat_shape(ax));
  tensor(t.softmaxSum, "softmaxSumOptional", dtypes({ACL_FLOAT}), stat_shape(ax));
  optional_tensor(t.softmaxIn, "softmaxInOptional", kArith);
  optional_tensor(t.dpse, "dpseOut", kArith);
  tensor(t.dq, "dqOut", same, layout_shape(ax.layout, ax.b, ax.n1, ax.s1, ax.d));
  tensor(t.dk, "dkOut", same, layout_shape(ax.layout, ax.b, ax.n2, ax.s2, ax.d));
  tensor(t.dv, "dvOut", same, layout_shape(ax.layout, ax.b, ax.n2, ax.s2, ax.dv));
}

ExecutorSpec grad_spec(const Common &c, const GradTensors &t) {
  // aclnnFlashAttentionScoreGrad's required pointers; the kernel cannot run without the forward's statistics
  // either, so the stand-in requires softmaxMax / softmaxSum too.
  require_present({{c.query, "query"},
                   {c.key, "keyIn"},
                   {c.value, "value"},
                   {t.dy, "dy"},
                   {t.attentionIn, "attentionInOptional"},
                   {t.dq, "dqOut"},
                   {t.dk, "dkOut"},
                   {t.dv, "dvOut"},
                   {c.layout, "inputLayout"},
                   {t.softmaxMax, "softmaxMaxOptional"},
                   {t.softmaxSum, "softmaxSumOptional"}});
  const Problem pb = read_problem(c);
  check_grad_tensors(pb, t, c.query->view.dtype);
  Slots slots;
  for (const aclTensor *x : {c.query, c.key, c.value, t.dy, c.pse, c.dropMask, c.paddingMask, c.attenMask, t.softmaxMax,
                             t.softmaxSum, t.softmaxIn, t.attentionIn})
    slots.push_back(nn::slot(x, Io::Input));
  for (const aclTensor *x : {t.dq, t.dk, t.dv, t.dpse}) slots.push_back(nn::slot(x, Io::Output));
  return {"", std::move(slots), attention_workspace(pb.ax), [pb](const Slots &s) { backward_kernel(pb, s); }};
}

}  // namespace

extern "C" {

aclnnStatus aclnnFlashAttentionScoreGetWorkspaceSize(
    const aclTensor *query, const aclTensor *key, const aclTensor *value, const aclTensor *realShiftOptional,
    const aclTensor *dropMaskOptional, const aclTensor *paddingMaskOptional, const aclTensor *attenMaskOptional,
    const aclIntArray *prefixOptional, double scaleValue, double keepProb, int64_t preTokens, int64_t nextTokens,
    int64_t headNum, char *inputLayout, int64_t /*innerPrecise*/, int64_t sparseMode, const aclTensor *softmaxMaxOut,
    const aclTensor *softmaxSumOut, const aclTensor *softmaxOutOut, const aclTensor *attentionOutOut,
    uint64_t *workspaceSize, aclOpExecutor **executor) {
  return phase1("FlashAttentionScore", workspaceSize, executor, [&] {
    const Common c({query, key, value, realShiftOptional, dropMaskOptional, paddingMaskOptional, attenMaskOptional},
                   {prefixOptional, scaleValue, keepProb, preTokens, nextTokens, headNum, inputLayout, sparseMode, 1},
                   false);
    return forward_spec(c, softmaxMaxOut, softmaxSumOut, softmaxOutOut, attentionOutOut);
  });
}

// V2 adds pseType (0: pse added after the scaling, 1: before, as V1) and the alibi start indices (read only for
// pseType 2 and 3, which the stand-in refuses).
aclnnStatus aclnnFlashAttentionScoreV2GetWorkspaceSize(
    const aclTensor *query, const aclTensor *key, const aclTensor *value, const aclTensor *realShiftOptional,
    const aclTensor *dropMaskOptional, const aclTensor *paddingMaskOptional, const aclTensor *attenMaskOptional,
    const aclIntArray *prefixOptional, const aclIntArray * /*qStartIdxOptional*/,
    const aclIntArray * /*kvStartIdxOptional*/, double scaleValue, double keepProb, int64_t preTokens,
    int64_t nextTokens, int64_t headNum, char *inputLayout, int64_t /*innerPrecise*/, int64_t sparseMode,
    int64_t pseType, const aclTensor *softmaxMaxOut, const aclTensor *softmaxSumOut, const aclTensor *softmaxOutOut,
    const aclTensor *attentionOutOut, uint64_t *workspaceSize, aclOpExecutor **executor) {
  return phase1("FlashAttentionScoreV2", workspaceSize, executor, [&] {
    const Common c(
        {query, key, value, realShiftOptional, dropMaskOptional, paddingMaskOptional, attenMaskOptional},
        {prefixOptional, scaleValue, keepProb, preTokens, nextTokens, headNum, inputLayout, sparseMode, pseType},
        false);
    return forward_spec(c, softmaxMaxOut, softmaxSumOut, softmaxOutOut, attentionOutOut);
  });
}

aclnnStatus aclnnFlashAttentionScoreGradGetWorkspaceSize(
    const aclTensor *query, const aclTensor *keyIn, const aclTensor *value, const aclTensor *dy,
    const aclTensor *pseShiftOptional, const aclTensor *dropMaskOptional, const aclTensor *paddingMaskOptional,
    const aclTensor *attenMaskOptional, const aclTensor *softmaxMaxOptional, const aclTensor *softmaxSumOptional,
    const aclTensor *softmaxInOptional, const aclTensor *attentionInOptional, const aclIntArray *prefixOptional,
    double scaleValue, double keepProb, int64_t preTokens, int64_t nextTokens, int64_t headNum, char *inputLayout,
    int64_t /*innerPrecise*/, int64_t sparseMode, const aclTensor *dqOut, const aclTensor *dkOut,
    const aclTensor *dvOut, const aclTensor *dpseOut, uint64_t *workspaceSize, aclOpExecutor **executor) {
  return phase1("FlashAttentionScoreGrad", workspaceSize, executor, [&] {
    const Common c({query, keyIn, value, pseShiftOptional, dropMaskOptional, paddingMaskOptional, attenMaskOptional},
                   {prefixOptional, scaleValue, keepProb, preTokens, nextTokens, headNum, inputLayout, sparseMode, 1},
                   true);
    return grad_spec(c, {dy, softmaxMaxOptional, softmaxSumOptional, softmaxInOptional, attentionInOptional, dqOut,
                         dkOut, dvOut, dpseOut});
  });
}

aclnnStatus aclnnFlashAttentionScoreGradV2GetWorkspaceSize(
    const aclTensor *query, const aclTensor *keyIn, const aclTensor *value, const aclTensor *dy,
    const aclTensor *pseShiftOptional, const aclTensor *dropMaskOptional, const aclTensor *paddingMaskOptional,
    const aclTensor *attenMaskOptional, const aclTensor *softmaxMaxOptional, const aclTensor *softmaxSumOptional,
    const aclTensor *softmaxInOptional, const aclTensor *attentionInOptional, const aclIntArray *prefixOptional,
    const aclIntArray * /*qStartIdxOptional*/, const aclIntArray * /*kvStartIdxOptional*/, double scaleValue,
    double keepProb, int64_t preTokens, int64_t nextTokens, int64_t headNum, char *inputLayout,
    int64_t /*innerPrecise*/, int64_t sparseMode, int64_t pseType, const aclTensor *dqOut, const aclTensor *dkOut,
    const aclTensor *dvOut, const aclTensor *dpseOut, uint64_t *workspaceSize, aclOpExecutor **executor) {
  return phase1("FlashAttentionScoreGradV2", workspaceSize, executor, [&] {
    const Common c(
        {query, keyIn, value, pseShiftOptional, dropMaskOptional, paddingMaskOptional, attenMaskOptional},
        {prefixOptional, scaleValue, keepProb, preTokens, nextTokens, headNum, inputLayout, sparseMode, pseType}, true);
    return grad_spec(c, {dy, softmaxMaxOptional, softmaxSumOptional, softmaxInOptional, attentionInOptional, dqOut,
                         dkOut, dvOut, dpseOut});
  });
}

}  // extern "C"
