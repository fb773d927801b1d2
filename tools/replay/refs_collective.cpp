// Collectives and the MC2 kernels (a matmul fused with a collective): HcclAllReduce, HcclAllGather, HcclReduceScatter,
// HcclBroadcast, HcclReduce, HcclScatter, HcclAlltoAll, HcclAlltoAllV, HcclAlltoAllVC, MatmulAllReduce,
// AllGatherMatmul, MatmulReduceScatter. Each rank's output is computed from the arguments every member recorded
// (Call::members, in comm-rank order), so every member's rank folder must be in the dump. Definitions: HCCL's hccl.h
// comments and the collectives' semantics; the MC2 ops' docs pages (ops-transformer mc2/*/docs): output = allreduce(x1
// @ x2 + bias), allgather(x1) @ x2 + bias, reducescatter(x1 @ x2 + bias). A fused kernel hands its matmul result to the
// collective in the output's dtype (the communication buffer holds that dtype), so each member's x1 @ x2 + bias is
// rounded to it before the reduction.
#include <algorithm>
#include <cmath>

#include "format/hccl_calls.h"
#include "tools/reader/dump_reader.h"
#include "tools/replay/refs.h"

namespace msprobe::tools::replay {
namespace {

// HcclReduceOp as the dump spells it (shim/hooks/hccl.cpp: reduce_op).
double reduce(const std::string &op, double a, double b) {
  if (op == "sum") return a + b;
  if (op == "prod") return a * b;
  if (op == "max") return std::isnan(a) || std::isnan(b) ? std::nan("") : std::max(a, b);
  if (op == "min") return std::isnan(a) || std::isnan(b) ? std::nan("") : std::min(a, b);
  throw RefError("unknown reduce op '" + op + "'");
}

// The elementwise reduction of `parts` (equal sizes).
Tensor reduce_all(const char *what, const std::string &op, const std::vector<Tensor> &parts) {
  Tensor out = parts.at(0);
  for (size_t r = 1; r < parts.size(); ++r) {
    if (parts[r].size() != out.size()) throw RefError(std::string(what) + ": the members' inputs differ in size");
    for (size_t k = 0; k < out.size(); ++k) out.v[k] = reduce(op, out.v[k], parts[r].v[k]);
  }
  out.dtype.reset();
  return out;
}

// Input 0 of every member.
std::vector<Tensor> member_inputs(const Call &c) {
  std::vector<Tensor> out;
  for (const Call *m : c.member_calls()) out.push_back(m->tensor(0));
  return out;
}

// The shape the kernel's output has, when it holds `n` elements (the result's own shape otherwise).
Shape output_shape(const Call &c, size_t slot, Shape fallback, size_t n) {
  if (slot < c.outputs.size() && c.outputs[slot].present && static_cast<size_t>(numel(c.outputs[slot].shape)) == n)
    return c.outputs[slot].shape;
  return fallback;
}

Outputs all_reduce(const Call &c) {  // (sendBuf, op)
  c.expect_at_least(2);
  return {reduce_all("HcclAllReduce", c.text(1), member_inputs(c))};
}

Outputs all_gather(const Call &c) {  // (sendBuf): the members' buffers one after another
  std::vector<double> v;
  for (const Tensor &t : member_inputs(c)) v.insert(v.end(), t.v.begin(), t.v.end());
  Shape s = output_shape(c, 0, {static_cast<int64_t>(v.size())}, v.size());
  return {Tensor(std::move(s), std::move(v))};
}

Outputs reduce_scatter(const Call &c) {  // (sendBuf, op): this rank's share of the reduction
  c.expect_at_least(2);
  const Tensor sum = reduce_all("HcclReduceScatter", c.text(1), member_inputs(c));
  const size_t n = c.member_calls().size(), share = sum.size() / n;
  if (share * n != sum.size()) throw RefError("HcclReduceScatter: the input does not split into the members' shares");
  const auto from = sum.v.begin() + static_cast<long>(c.members.self * share);
  std::vector<double> v(from, from + static_cast<long>(share));
  Shape s = output_shape(c, 0, {static_cast<int64_t>(share)}, share);
  return {Tensor(std::move(s), std::move(v))};
}

Outputs broadcast(const Call &c) {  // (buf, root): the root's buffer
  c.expect_at_least(2);
  const int64_t root = c.integer(1);
  const auto &calls = c.member_calls();
  if (root < 0 || static_cast<size_t>(root) >= calls.size())
    throw RefError("HcclBroadcast: root " + std::to_string(root) + " is not a member");
  Tensor out = calls[static_cast<size_t>(root)]->tensor(0);
  out.dtype.reset();
  return {std::move(out)};
}

// The root's comm rank (argument i) among the members.
size_t root_of(const Call &c, size_t i, const char *op) {
  const int64_t root = c.integer(i);
  if (root < 0 || static_cast<size_t>(root) >= c.member_calls().size())
    throw RefError(std::string(op) + ": root " + std::to_string(root) + " is not a member");
  return static_cast<size_t>(root);
}

// (sendBuf, op, root): the root receives the reduction (the other members' output is null: nothing to judge).
Outputs reduce_to_root(const Call &c) {
  c.expect_at_least(3);
  root_of(c, 2, "HcclReduce");
  return {reduce_all("HcclReduce", c.text(1), member_inputs(c))};
}

// (sendBuf, root): member r receives block r of the root's send buffer (null on the other members), a block being
// the receive buffer's size.
Outputs scatter(const Call &c) {
  c.expect_at_least(2);
  const Tensor &buf = c.member_calls()[root_of(c, 1, "HcclScatter")]->tensor(0);
  const size_t n = c.member_calls().size(), share = buf.size() / n;
  if (share * n != buf.size()) throw RefError("HcclScatter: the root's buffer does not split into the members' blocks");
  const auto from = buf.v.begin() + static_cast<long>(c.members.self * share);
  return {Tensor(output_shape(c, 0, {static_cast<int64_t>(share)}, share),
                 std::vector<double>(from, from + static_cast<long>(share)))};
}

// ---- All-to-all -----------------------------------------------------------------------------------------------------
// What one member sends to each member (counts and offsets in elements of its send buffer) and where this rank puts
// what it receives from each.
struct Exchange {
  std::vector<int64_t> send_counts, send_offsets, recv_counts, recv_offsets;
};

// The int arrays of a call, in order (counts and displacements, whatever else the dump records beside them).
std::vector<std::vector<int64_t>> int_lists(const Call &c) {
  std::vector<std::vector<int64_t>> out;
  for (size_t i = 1; i < c.count(); ++i)
    if (c.args[i].kind == Arg::Kind::IntList) out.push_back(c.args[i].ints);
  return out;
}

std::vector<int64_t> prefix_sums(const std::vector<int64_t> &counts) {
  std::vector<int64_t> out(counts.size(), 0);
  for (size_t i = 1; i < counts.size(); ++i) out[i] = out[i - 1] + counts[i - 1];
  return out;
}

// HcclAlltoAllV: sendCounts, sdispls, recvCounts, rdispls (uint64 arrays, one entry per member).
Exchange exchange_v(const Call &m, size_t members) {
  const auto lists = int_lists(m);
  if (lists.size() < 4) throw RefError("HcclAlltoAllV: the counts and displacements are not recorded");
  for (size_t i = 0; i < 4; ++i)
    if (lists[i].size() != members) throw RefError("HcclAlltoAllV: an array does not have one entry per member");
  return {lists[0], lists[1], lists[2], lists[3]};
}

// HcclAlltoAll: sendCount elements to each member, recvCount from each, packed in member order. The counts are the
// recorded Int arguments when there are any, else the send buffer's share per member (the shim records the buffers
// only, and HCCL takes sendCount == recvCount).
Exchange exchange_even(const Call &m, size_t members) {
  std::vector<int64_t> counts;
  for (size_t i = 1; i < m.count() && counts.size() < 2; ++i)
    if (m.args[i].kind == Arg::Kind::Int) counts.push_back(m.args[i].i);
  if (counts.empty()) {
    const size_t n = m.tensor(0).size();
    if (members == 0 || n % members != 0)
      throw RefError("HcclAlltoAll: the send buffer does not split into one block per member");
    counts.assign(2, static_cast<int64_t>(n / members));
  }
  if (counts.size() < 2) throw RefError("HcclAlltoAll: sendCount and recvCount are not both recorded");
  const std::vector<int64_t> send(members, counts[0]), recv(members, counts[1]);
  return {send, prefix_sums(send), recv, prefix_sums(recv)};
}

// HcclAlltoAllVC: the members x members matrix of counts (row: sender), packed in member order on both sides; recorded
// either whole or as this member's row and column (sendCounts, recvCounts: what the shim writes).
Exchange exchange_vc(const Call &m, size_t members, size_t self) {
  const auto lists = int_lists(m);
  Exchange e;
  if (lists.size() >= 2 && lists[0].size() == members && lists[1].size() == members) {
    e.send_counts = lists[0], e.recv_counts = lists[1];
  } else if (!lists.empty() && lists[0].size() == members * members) {
    const std::vector<int64_t> &mat = lists[0];
    for (size_t p = 0; p < members; ++p) {
      e.send_counts.push_back(mat[self * members + p]);
      e.recv_counts.push_back(mat[p * members + self]);
    }
  } else {
    throw RefError("HcclAlltoAllVC: neither the count matrix nor this member's send and receive counts are recorded");
  }
  e.send_offsets = prefix_sums(e.send_counts);
  e.recv_offsets = prefix_sums(e.recv_counts);
  return e;
}

// Every member s sends send_counts[self] elements from send_offsets[self] of its buffer; this rank places them at
// recv_offsets[s]. Elements no member writes are not judged.
template <class ExchangeOf>
Outputs all_to_all(const Call &c, const char *op, ExchangeOf exchange_of) {
  const auto &calls = c.member_calls();
  const size_t n = calls.size(), self = c.members.self;
  const Exchange mine = exchange_of(*calls[self], n, self);
  size_t size = 0;
  for (size_t s = 0; s < n; ++s) size = std::max<size_t>(size, mine.recv_offsets[s] + mine.recv_counts[s]);
  if (!c.outputs.empty() && c.outputs[0].present) size = std::max<size_t>(size, numel(c.outputs[0].shape));
  Tensor out = Tensor::zeros({static_cast<int64_t>(size)});
  out.written.assign(size, false);
  for (size_t s = 0; s < n; ++s) {
    const Exchange theirs = exchange_of(*calls[s], n, s);
    const Tensor &buf = calls[s]->tensor(0);
    const int64_t count = theirs.send_counts[self], from = theirs.send_offsets[self], to = mine.recv_offsets[s];
    if (count != mine.recv_counts[s])
      throw RefError(std::string(op) + ": member " + std::to_string(s) + " sends " + std::to_string(count) +
                     " elements, this rank expects " + std::to_string(mine.recv_counts[s]));
    if (from < 0 || to < 0 || static_cast<size_t>(from + count) > buf.size())
      throw RefError(std::string(op) + ": member " + std::to_string(s) + "'s send range is outside its buffer");
    for (int64_t k = 0; k < count; ++k) {
      out.v[static_cast<size_t>(to + k)] = buf.v[static_cast<size_t>(from + k)];
      out.written[static_cast<size_t>(to + k)] = true;
    }
  }
  out.shape = output_shape(c, 0, out.shape, size);
  return {std::move(out)};
}

Outputs all_to_all_v(const Call &c) {
  return all_to_all(c, "HcclAlltoAllV", [](const Call &m, size_t n, size_t) { return exchange_v(m, n); });
}
Outputs all_to_all_even(const Call &c) {
  return all_to_all(c, "HcclAlltoAll", [](const Call &m, size_t n, size_t) { return exchange_even(m, n); });
}
Outputs all_to_all_vc(const Call &c) { return all_to_all(c, "HcclAlltoAllVC", exchange_vc); }

// ---- MC2 ------------------------------------------------------------------------------------------------------------
// x1 [..., k] @ x2 [k, n] + bias [n] (x1's leading dims kept).
Tensor linear(const Tensor &x1, const Tensor &x2, const Tensor *bias) {
  if (x1.rank() < 2 || x2.rank() != 2 || x1.shape.back() != x2.shape[0])
    throw RefError("MC2 matmul: shapes " + shape_text(x1.shape) + " @ " + shape_text(x2.shape) + " do not fit");
  const auto k = static_cast<size_t>(x2.shape[0]), n = static_cast<size_t>(x2.shape[1]), m = x1.size() / k;
  if (bias && bias->size() != n && bias->size() != 1) throw RefError("MC2 matmul: bias is not [n]");
  Shape s(x1.shape.begin(), x1.shape.end() - 1);
  s.push_back(x2.shape[1]);
  Tensor out = Tensor::zeros(s);
  gemm(x1.v.data(), x2.v.data(), out.v.data(), m, k, n);
  if (bias)
    for (size_t i = 0; i < out.size(); ++i) out.v[i] += bias->size() == 1 ? bias->v[0] : bias->v[i % n];
  return out;
}

// Each member's x1 @ x2 + bias as it enters the collective: rounded to the output's dtype.
std::vector<Tensor> member_products(const Call &c) {
  const format::DType dt = c.outputs.empty() ? format::DType::F64 : c.outputs[0].dtype.value_or(format::DType::F64);
  std::vector<Tensor> out;
  for (const Call *m : c.member_calls()) {
    m->expect_at_least(3);
    Tensor p = linear(m->tensor(0), m->tensor(1), m->optional_tensor(2));
    for (double &x : p.v) x = replay::round_to_dtype(x, dt);  // not the reader's (found by ADL)
    out.push_back(std::move(p));
  }
  return out;
}

void expect_sum(const Call &c, size_t i) {
  if (i < c.count() && c.args[i].kind == Arg::Kind::Text && c.args[i].text != "sum")
    throw RefError(std::string(c.op) + ": reduceOp '" + c.args[i].text + "' (the op takes \"sum\" only)");
}

// (x1, x2, bias, group, reduceOp, commTurn, streamMode): every rank holds the sum of the members' products.
Outputs matmul_all_reduce(const Call &c) {
  expect_sum(c, 4);
  return {reduce_all("MatmulAllReduce", "sum", member_products(c))};
}

// (x1, x2, bias, group, reduceOp, commTurn, streamMode): this rank's rows of the sum.
Outputs matmul_reduce_scatter(const Call &c) {
  expect_sum(c, 4);
  Tensor sum = reduce_all("MatmulReduceScatter", "sum", member_products(c));
  const size_t n = c.member_calls().size();
  if (sum.rank() != 2 || sum.shape[0] % static_cast<int64_t>(n) != 0)
    throw RefError("MatmulReduceScatter: the product's rows do not split into the members' shares");
  const int64_t rows = sum.shape[0] / static_cast<int64_t>(n), cols = sum.shape[1];
  const auto from = sum.v.begin() + static_cast<long>(c.members.self) * rows * cols;
  return {Tensor({rows, cols}, std::vector<double>(from, from + rows * cols))};
}

// (x1, x2, bias, group, gatherIndex, commTurn, streamMode): gatherOut = the members' x1 stacked by rows, output =
// gatherOut @ this rank's x2 + bias.
Outputs all_gather_matmul(const Call &c) {
  c.expect_at_least(3);
  if (c.count() > 4 && c.args[4].kind == Arg::Kind::Int && c.args[4].i != 0)
    throw RefError("AllGatherMatmul: gatherIndex " + std::to_string(c.args[4].i) +
                   " (only 0, x1 gathered, is defined)");
  Tensor gathered;
  for (const Call *m : c.member_calls()) {
    const Tensor &x1 = m->tensor(0);
    if (gathered.shape.empty()) gathered.shape = {0, x1.shape.empty() ? 1 : x1.shape.back()};
    if (x1.rank() != 2 || x1.shape[1] != gathered.shape[1]) throw RefError("AllGatherMatmul: the members' x1 differ");
    gathered.shape[0] += x1.shape[0];
    gathered.v.insert(gathered.v.end(), x1.v.begin(), x1.v.end());
  }
  Tensor out = linear(gathered, c.tensor(1), c.optional_tensor(2));
  return {std::move(out), std::move(gathered)};
}

const RefEntry kRefs[] = {
    {format::kHcclAllReduce, all_reduce, false, true},
    {format::kHcclAllGather, all_gather, false, true},
    {format::kHcclReduceScatter, reduce_scatter, false, true},
    {format::kHcclBroadcast, broadcast, false, true},
    {"HcclReduce", reduce_to_root, false, true},
    {"HcclScatter", scatter, false, true},
    {"HcclAlltoAll", all_to_all_even, false, true},
    {"HcclAlltoAllV", all_to_all_v, false, true},
    {"HcclAlltoAllVC", all_to_all_vc, false, true},
    {"MatmulAllReduce", matmul_all_reduce, false, true},
    {"MatmulReduceScatter", matmul_reduce_scatter, false, true},
    {"AllGatherMatmul", all_gather_matmul, false, true},
};

}  // namespace

std::span<const RefEntry> collective_refs() { return kRefs; }

}  // namespace msprobe::tools::replay
