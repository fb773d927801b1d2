// The collectives, moved through the ranks' staging slots chunk by chunk. Per chunk: every rank stages
// what it contributes into its own slot, all meet at a barrier, every rank reads what it needs from the
// slots into its device buffer, and all meet again before the slots are reused.
#include <algorithm>
#include <cstring>
#include <exception>
#include <map>
#include <thread>
#include <vector>

#include "comm.h"
#include "fakecann/stream.h"
#include "fakecann/tensor_io.h"
#include "reduce.h"

namespace fakecann::hccl {

namespace {

const char *kind_name(uint32_t k) {
  switch ((CollKind)k) {
    case CollKind::AllReduce: return "AllReduce";
    case CollKind::Broadcast: return "Broadcast";
    case CollKind::AllGather: return "AllGather";
    case CollKind::ReduceScatter: return "ReduceScatter";
    case CollKind::Barrier: return "Barrier";
    case CollKind::Send: return "Send";
    case CollKind::Recv: return "Recv";
    case CollKind::Reduce: return "Reduce";
    case CollKind::Scatter: return "Scatter";
  }
  return "?";
}

bool reduces(CollKind k) { return k == CollKind::AllReduce || k == CollKind::ReduceScatter || k == CollKind::Reduce; }
bool rooted(CollKind k) { return k == CollKind::Broadcast || k == CollKind::Reduce || k == CollKind::Scatter; }
// Collectives whose chunk holds one block per rank in a slot.
bool per_rank_blocks(CollKind k) { return k == CollKind::ReduceScatter || k == CollKind::Scatter; }

std::string describe(const CollDesc &d) {
  std::string s = std::string(kind_name(d.kind)) + " #" + std::to_string(d.seq);
  if ((CollKind)d.kind == CollKind::Barrier) return s;
  s += " count=" + std::to_string(d.count) + " " + dtype_name((HcclDataType)d.dtype);
  if (reduces((CollKind)d.kind)) s += std::string(" ") + op_name((HcclReduceOp)d.op);
  if (rooted((CollKind)d.kind)) s += " root=" + std::to_string(d.root);
  return s;
}

// Host alias of a device range (nothing for an empty range: a zero-length chunk touches no memory).
char *dev(const void *base, uint64_t byte_off, uint64_t bytes) {
  if (bytes == 0) return nullptr;
  return static_cast<char *>(device_bytes(static_cast<const char *>(base) + byte_off, bytes));
}

void copy(char *to, const char *from, uint64_t bytes) {
  if (bytes != 0) std::memcpy(to, from, bytes);
}

void check_agreement(Segment &s, const CollDesc &mine, const std::string &what) {
  for (uint32_t r = 0; r < s.nranks(); ++r) {
    const CollDesc &theirs = s.desc(r);
    if (theirs == mine) continue;
    s.mark_broken(Broken::Mismatch);
    throw KernelError(what + ": ranks issued different collectives: rank " + std::to_string(s.rank()) + " runs " +
                      describe(mine) + ", rank " + std::to_string(r) + " runs " + describe(theirs));
  }
}

// The pair's segment of `src` -> `dst`, joined at the first use (both sides block until the other arrives).
Segment &pair_segment(Comm &c, Comm::Pair &p, uint32_t src, uint32_t dst, bool sender, const std::string &what) {
  if (p.seg) return *p.seg;
  const std::string name = c.name + ".p" + std::to_string(src) + "-" + std::to_string(dst);
  std::string err;
  if (HcclResult r = Segment::join(name, 2, sender ? 0 : 1, c.connect_timeout_s, &p.seg, &err); r != HCCL_SUCCESS)
    throw KernelError(what + ": rank " + std::to_string(src) + " could not connect to rank " + std::to_string(dst) +
                      " (" + err + ")");
  return *p.seg;
}

}  // namespace

void execute(Comm &c, const PointToPoint &op) {
  const std::string what = op.api;
  c.seg->check_usable(what);
  const uint32_t me = c.seg->rank();
  const uint32_t src = op.send ? me : op.peer, dst = op.send ? op.peer : me;
  std::shared_ptr<Comm::Pair> p;
  {
    std::lock_guard<std::mutex> lk(c.pairs_mu);
    auto &slot = c.pairs[{src, dst}];
    if (!slot) slot = std::make_shared<Comm::Pair>();
    p = slot;
  }
  std::lock_guard<std::mutex> lk(p->mu);
  Segment &s = pair_segment(c, *p, src, dst, op.send, what);
  s.check_usable(what);
  const uint32_t side = op.send ? 0 : 1;
  const CollDesc mine{
      (uint32_t)(op.send ? CollKind::Send : CollKind::Recv), (uint32_t)op.dtype, 0, 0, op.count, ++p->seq};
  s.desc(side) = mine;
  const uint64_t es = dtype_bytes(op.dtype);
  const uint64_t chunk = s.slot_bytes() / es;
  try {
    uint64_t off = 0;
    bool first = true;
    do {
      const uint64_t len = std::min(chunk, op.count - off), bytes = len * es, at = off * es;
      if (op.send) copy(s.slot(0), dev(op.buf, at, bytes), bytes);
      s.barrier(c.exec_timeout_s, what);
      if (first) {  // the other side must be the matching call: a receive for a send, same count and type
        const CollDesc &theirs = s.desc(1 - side);
        CollDesc want = mine;
        want.kind = (uint32_t)(op.send ? CollKind::Recv : CollKind::Send);
        if (!(theirs == want)) {
          s.mark_broken(Broken::Mismatch);
          throw KernelError(what + ": rank " + std::to_string(src) + " -> rank " + std::to_string(dst) +
                            ": the two sides do not match: rank " + std::to_string(me) + " runs " + describe(mine) +
                            ", rank " + std::to_string(op.peer) + " runs " + describe(theirs));
        }
        first = false;
      }
      if (!op.send) copy(dev(op.buf, at, bytes), s.slot(0), bytes);
      s.barrier(c.exec_timeout_s, what);
      off += len;
    } while (off < op.count);
  } catch (const KernelError &) {
    s.mark_broken(Broken::LocalFault);
    throw;
  }
}

void execute(Comm &c, const Batch &op) {
  std::map<std::pair<bool, uint32_t>, std::vector<const PointToPoint *>> lanes;  // (send, peer) -> in order
  for (const PointToPoint &p : op.items) lanes[{p.send, p.peer}].push_back(&p);
  std::vector<std::exception_ptr> errors(lanes.size());
  auto run_lane = [&c](const std::vector<const PointToPoint *> &lane, std::exception_ptr *err) {
    try {
      for (const PointToPoint *p : lane) execute(c, *p);
    } catch (...) {
      *err = std::current_exception();
    }
  };
  std::vector<std::thread> threads;
  size_t k = 0;
  for (auto &[key, lane] : lanes) {
    if (k + 1 == lanes.size())
      run_lane(lane, &errors[k]);  // the last on this worker
    else
      threads.emplace_back(run_lane, std::cref(lane), &errors[k]);
    ++k;
  }
  for (std::thread &t : threads) t.join();
  for (const std::exception_ptr &e : errors)
    if (e) std::rethrow_exception(e);
}

namespace {

// What rank `me` puts in its own slot for chunk [off, off+len) of `op` (`bytes` = len elements, `es` each).
void stage(Segment &s, const Collective &op, uint32_t me, uint64_t off, uint64_t len, uint64_t es) {
  const uint32_t n = s.nranks();
  const uint64_t bytes = len * es, at = off * es;
  char *mine_slot = s.slot(me);
  switch (op.kind) {
    case CollKind::AllReduce:
    case CollKind::AllGather:
    case CollKind::Reduce: copy(mine_slot, dev(op.send, at, bytes), bytes); break;
    case CollKind::Broadcast:
      if (me == op.root) copy(mine_slot, dev(op.recv, at, bytes), bytes);
      break;
    case CollKind::ReduceScatter:  // rank j's block of this chunk goes to slot offset j*len
      for (uint32_t j = 0; j < n; ++j) copy(mine_slot + j * bytes, dev(op.send, (j * op.count + off) * es, bytes), bytes);
      break;
    case CollKind::Scatter:
      if (me == op.root)
        for (uint32_t j = 0; j < n; ++j)
          copy(mine_slot + j * bytes, dev(op.send, (j * op.count + off) * es, bytes), bytes);
      break;
    default: break;  // Barrier; point-to-point transfers have their own execute()
  }
}

// What rank `me` takes from the slots into its buffers for the same chunk.
void gather_chunk(Segment &s, const Collective &op, uint32_t me, uint64_t off, uint64_t len, uint64_t es) {
  const uint32_t n = s.nranks();
  const uint64_t bytes = len * es, at = off * es;
  std::vector<const char *> srcs(n);
  switch (op.kind) {
    case CollKind::AllReduce:
    case CollKind::Reduce:
      if (op.kind == CollKind::Reduce && me != op.root) break;
      for (uint32_t r = 0; r < n; ++r) srcs[r] = s.slot(r);
      if (len != 0) reduce(op.dtype, op.op, srcs.data(), n, dev(op.recv, at, bytes), len);
      break;
    case CollKind::Broadcast:
      if (me != op.root) copy(dev(op.recv, at, bytes), s.slot(op.root), bytes);
      break;
    case CollKind::AllGather:
      for (uint32_t q = 0; q < n; ++q) copy(dev(op.recv, (q * op.count + off) * es, bytes), s.slot(q), bytes);
      break;
    case CollKind::ReduceScatter:
      for (uint32_t q = 0; q < n; ++q) srcs[q] = s.slot(q) + me * bytes;
      if (len != 0) reduce(op.dtype, op.op, srcs.data(), n, dev(op.recv, at, bytes), len);
      break;
    case CollKind::Scatter: copy(dev(op.recv, at, bytes), s.slot(op.root) + me * bytes, bytes); break;
    default: break;
  }
}

}  // namespace

void execute(Comm &c, const Collective &op) {
  Segment &s = *c.seg;
  const std::string what = op.api;
  std::lock_guard<std::mutex> lk(c.exec_mu);
  s.check_usable(what);
  const uint32_t n = s.nranks(), me = s.rank();
  const bool barrier = op.kind == CollKind::Barrier;
  const CollDesc mine{(uint32_t)op.kind,
                      barrier ? 0u : (uint32_t)op.dtype,
                      reduces(op.kind) ? (uint32_t)op.op : 0u,
                      rooted(op.kind) ? op.root : 0u,
                      barrier ? 0 : op.count,
                      ++c.seq};
  s.desc(me) = mine;  // published to the others by the first barrier

  const uint64_t es = barrier ? 1 : dtype_bytes(op.dtype);
  const uint64_t slot_elems = s.slot_bytes() / es;
  const uint64_t chunk = per_rank_blocks(op.kind) ? slot_elems / n : slot_elems;
  const uint64_t total = barrier ? 0 : op.count;
  try {
    uint64_t off = 0;
    bool first = true;
    do {  // at least once: a Barrier (or empty collective) still meets its peers
      const uint64_t len = std::min(chunk, total - off);
      stage(s, op, me, off, len, es);
      s.barrier(c.exec_timeout_s, what);
      if (first) {
        check_agreement(s, mine, what);
        first = false;
      }
      gather_chunk(s, op, me, off, len, es);
      s.barrier(c.exec_timeout_s, what);
      off += len;
    } while (off < total);
  } catch (const KernelError &) {
    s.mark_broken(Broken::LocalFault);  // keeps an earlier reason; wakes peers waiting for us
    throw;
  }
}

}  // namespace fakecann::hccl
