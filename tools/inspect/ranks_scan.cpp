// first-nan / first-diff, the map step: one rank's folders streamed once into a RankDigest (ranks.h). Memory is what
// one rank's HCCL kernels take (a few words each) plus, for first-diff, run B's kernels of one step folder.
#include <algorithm>
#include <cstdio>
#include <system_error>
#include <unordered_map>

#include "format/format.h"
#include "format/hccl_calls.h"
#include "format/naming.h"
#include "tools/inspect/compare.h"
#include "tools/inspect/ranks.h"
#include "tools/inspect/replay.h"
#include "tools/reader/json_reader.h"
#include "tools/reader/partial_read.h"

namespace msprobe::tools::ranks {

namespace {

// One HCCL kernel, as the reduce needs it.
struct Event {
  int32_t comm = -1;
  Kind kind = Kind::Collective;
  uint64_t seq = 0;
  uint32_t peer = 0;
  uint64_t step = 0, launch = 0;
  bool in_bad = false, out_bad = false;
  std::string op;  // dumps without "comm": numbered per op type once sorted
  bool numbered = true;
};

// The "comm" name given to the collectives of dumps written before the object existed: joined over all ranks, by op
// type and order of occurrence (msprobe's own rule).
constexpr char kInferredComm[] = "(no comm recorded: all ranks, by op type and order)";

struct Key {
  uint64_t step = 0, launch = 0;
  auto operator<=>(const Key &) const = default;
};

// The state of one rank's scan.
class RankScan {
 public:
  explicit RankScan(RankDigest &d) : d_(d) {}

  int32_t comm_index(const format::CommInfo &c) {
    auto [it, added] = comm_index_.try_emplace(c.name, static_cast<int32_t>(d_.comms.size()));
    if (added) {
      CommEntry e;
      e.name = c.name;
      e.comm_rank = c.rank;
      e.size = c.size;
      e.ranks = c.ranks;
      d_.comms.push_back(std::move(e));
    }
    return it->second;
  }

  // One kernel: `in_bad` / `out_bad` say whether its input / output tensors are anomalous; `record` is used only
  // when it becomes the first anomaly (to fill the details).
  void kernel(const KernelRecord &k, uint64_t step, uint64_t launch, bool in_bad, bool out_bad,
              const std::function<void(Anomaly &)> &details, const RankDir &folder) {
    ++d_.kernels;
    Kind kind = Kind::Compute;
    const std::string_view op = op_type_of(k.name);
    const std::optional<format::HcclCall> hccl = format::hccl_call(op);
    Event e;
    e.step = step;
    e.launch = launch;
    e.in_bad = in_bad;
    e.out_bad = out_bad;
    if (k.comm) {
      e.comm = comm_index(*k.comm);
      if (k.comm->peer && k.comm->pair_seq) {
        kind = hccl && hccl->shape == format::HcclShape::Send ? Kind::Send : Kind::Recv;
        e.peer = *k.comm->peer;
        e.seq = *k.comm->pair_seq;
      } else {
        kind = Kind::Collective;
        e.seq = k.comm->seq.value_or(0);
      }
    } else if (hccl && !hccl->point_to_point()) {
      kind = Kind::Collective;
      format::CommInfo inferred;
      inferred.name = kInferredComm;
      inferred.rank = d_.rank.value_or(0);
      e.comm = comm_index(inferred);
      e.op = std::string(op);
      e.numbered = false;
    }
    e.kind = kind;
    if (kind != Kind::Compute) events_.push_back(e);
    if (!(in_bad || out_bad)) return;
    const Key key{step, launch};
    if (first_ && !(key < first_key_)) return;
    first_key_ = key;
    Anomaly a;
    a.step = step;
    a.folder = folder.label();
    a.kernel = k.name;
    a.launch_index = launch;
    a.timestamp = k.timestamp.value_or(0);
    a.kind = kind;
    a.in_bad = in_bad;
    a.out_bad = out_bad;
    a.comm = e.comm;
    a.peer = e.peer;
    a.seq = e.seq;
    // Only where the root's input alone is sent; a reduce takes every member's input (to the root's output).
    if (k.comm && k.comm->root && hccl && hccl->shape == format::HcclShape::FromRoot) a.root = *k.comm->root;
    details(a);
    first_ = std::move(a);
    first_dir_ = &folder;
  }

  // The digest's communicator entries and first anomaly, once every folder is read.
  void finish() {
    // Collectives of dumps without "comm": the n-th of each op type, in launch order.
    std::sort(events_.begin(), events_.end(), [](const Event &a, const Event &b) {
      return Key{a.step, a.launch} < Key{b.step, b.launch};
    });
    std::unordered_map<std::string, uint64_t> counts;
    for (Event &e : events_) {
      if (e.numbered) continue;
      e.seq = counts[e.op]++;
      if (first_ && Key{e.step, e.launch} == first_key_) first_->seq = e.seq;
    }
    for (const Event &e : events_) {
      CommEntry &c = d_.comms[static_cast<size_t>(e.comm)];
      if (e.kind == Kind::Collective) c.seen_end = std::max(c.seen_end, e.seq + 1);
      if (e.kind == Kind::Send) c.sends_end[e.peer] = std::max(c.sends_end[e.peer], e.seq + 1);
      if (e.kind == Kind::Collective && e.in_bad) {
        if (c.bad_inputs.empty()) c.first_bad_launch = e.launch;
        c.bad_inputs.add(e.seq);
      }
      if (e.kind == Kind::Send && e.in_bad) {
        if (!c.bad_sends.count(e.peer)) c.first_bad_send_launch[e.peer] = e.launch;
        c.bad_sends[e.peer].add(e.seq);
      }
      if (!first_ || e.kind != Kind::Collective) continue;
      const Key k{e.step, e.launch};
      // Before the first anomaly; "next": the first collective whose input it can reach (its own, when its input
      // was the anomaly).
      if (k < first_key_) c.before = std::max(c.before.value_or(0), e.seq + 1);
      const bool after = first_key_ < k || (k == first_key_ && first_->in_bad);
      if (after && (!c.next || e.seq < *c.next)) c.next = e.seq;
    }
    d_.first = std::move(first_);
  }

  const RankDir *first_dir() const { return first_dir_; }
  const std::optional<Anomaly> &first() const { return first_; }
  // Another first anomaly than the kernels gave (first-diff: a kernel only one run has, where the runs part); before
  // finish(), which places the communicators around it.
  void set_first(Anomaly a, const RankDir &folder) {
    first_key_ = Key{a.step, a.launch_index};
    first_ = std::move(a);
    first_dir_ = &folder;
  }

 private:
  RankDigest &d_;
  std::unordered_map<std::string, int32_t> comm_index_;
  std::vector<Event> events_;
  std::optional<Anomaly> first_;
  Key first_key_;
  const RankDir *first_dir_ = nullptr;
};

std::string stat_pair(const TensorInfo &t) { return "Max " + stat_text(t.stats[0]) + ", Min " + stat_text(t.stats[1]); }

// "output.0: +Inf, -Inf (Max inf, Min -inf); ..." for the anomalous tensors of a kernel (at most four named).
std::string nan_detail(const std::vector<TensorInfo> &tensors, uint8_t mask) {
  std::string s;
  size_t named = 0, more = 0;
  for (const TensorInfo &t : tensors) {
    const uint8_t bits = value_bits(t) & mask;
    if (!bits) continue;
    if (named == 4) {
      ++more;
      continue;
    }
    s += (s.empty() ? "" : "; ") + t.row_suffix() + ": " + values_text(bits) + " (" + stat_pair(t) + ")";
    ++named;
  }
  if (more) s += "; and " + std::to_string(more) + " more";
  return s;
}

// Where read_folder says what it could not read: a damaged or unclosed dump.json in `problems`, one a running process
// is still writing in `being_written` ("B " before each line of run B's folders).
struct FolderNotes {
  std::vector<std::string> &problems, &being_written;
  std::string prefix;
};

// Reads `dir`'s dump.json with `on_record`; what came before the end of a file read in part is kept and the file
// named in `notes`. Progress in dump.json bytes.
void read_folder(const RankDir &dir, const std::function<bool(KernelRecord &&)> &on_record,
                 const std::function<void(const DumpHeaderRead &)> &on_header, const FolderNotes &notes,
                 const std::function<void(uint64_t)> &progress) {
  DumpCallbacks cb;
  cb.on_header = on_header;
  cb.on_record = on_record;
  uint64_t last = 0;
  cb.on_progress = [&](size_t at) {
    if (progress && at > last) progress(at - last);
    last = std::max<uint64_t>(last, at);
  };
  try {
    if (const std::optional<Shortfall> s = read_dump_json_partial(dir, cb))
      (s->damage() ? notes.problems : notes.being_written).push_back(notes.prefix + s->text());
  } catch (const InputError &e) {
    notes.problems.push_back(notes.prefix + dir.label() + ": " + e.what());
  } catch (const std::system_error &e) {
    notes.problems.push_back(notes.prefix + dir.label() + ": dump.json: " + e.what());
  }
  const uint64_t size = compare::dump_json_size(dir);
  if (progress && size > last) progress(size - last);
}

// The entry of `kernel` in `dir`'s dump.json, for replay.
std::optional<replay::Folder> folder_with(const RankDir &dir, const std::string &kernel) {
  replay::Folder f;
  f.dir = &dir;
  DumpCallbacks cb;
  cb.on_header = [&](const DumpHeaderRead &h) { f.header = h; };
  cb.on_kernel = [&](EntryRead &&e) {
    if (e.name != kernel) return true;
    f.kernels.push_back(std::move(e));
    return false;
  };
  try {
    read_dump_json_partial(dir, cb);
  } catch (const std::exception &) {
  }
  if (f.kernels.empty()) return std::nullopt;
  return f;
}

// first-nan's verdict on an origin that computed non-finite values from finite inputs.
void judge(Anomaly &a, const RankDir &dir, const std::vector<TensorInfo> &tensors) {
  const bool files = std::any_of(tensors.begin(), tensors.end(), [](const TensorInfo &t) {
    return t.io == format::IoKind::Output && t.data_name.has_value();
  });
  if (!files) {
    a.verdict_reason = "no tensor data in this dump: a dump of the tensor or flight task tells kernel from data";
    return;
  }
  std::optional<replay::Folder> f = folder_with(dir, a.kernel);
  if (!f) {
    a.verdict_reason = "the kernel's entry could not be read again";
    return;
  }
  replay::Context ctx;
  const replay::NonFiniteCheck c = replay::check_nonfinite(*f, f->kernels.front(), ctx);
  using R = replay::NonFiniteCheck::Result;
  a.verdict = c.result == R::Kernel ? "kernel" : c.result == R::Data ? "data" : "";
  a.verdict_reason = c.reason;
}

void add_stack(Anomaly &a, const RankDir *dir) {
  if (dir == nullptr) return;
  try {
    if (auto frames = find_stack(*dir, a.kernel)) a.stack = std::move(*frames);
  } catch (const std::exception &) {
  }
}

}  // namespace

RankDigest scan_nan(const std::vector<RankDir> &folders, const ScanOptions &o,
                    const std::function<void(uint64_t)> &progress) {
  RankDigest d;
  if (!folders.empty()) d.rank = folders.front().rank;
  RankScan scan(d);
  const uint8_t mask = o.nan_only ? kNaN : (kNaN | kPosInf | kNegInf);
  std::vector<TensorInfo> first_tensors;
  uint64_t fallback_launch = 0;
  for (const RankDir &dir : folders) {
    const uint64_t step = dir.step.value_or(0);
    d.steps.push_back(step);
    read_folder(
        dir,
        [&](KernelRecord &&k) {
          uint8_t in = 0, out = 0;
          for (const TensorInfo &t : k.tensors) (t.io == format::IoKind::Input ? in : out) |= value_bits(t) & mask;
          const uint64_t launch = k.launch_index.value_or(fallback_launch);
          fallback_launch = launch + 1;
          scan.kernel(
              k, step, launch, in != 0, out != 0,
              [&](Anomaly &a) {
                a.values = in | out;
                a.detail = nan_detail(k.tensors, mask);
                first_tensors = k.tensors;
              },
              dir);
          return true;
        },
        nullptr, FolderNotes{d.problems, d.being_written, ""}, progress);
  }
  scan.finish();
  if (d.first) {
    add_stack(*d.first, scan.first_dir());
    if (o.replay && d.first->kind == Kind::Compute && !d.first->in_bad && scan.first_dir())
      judge(*d.first, *scan.first_dir(), first_tensors);
  }
  return d;
}

namespace {

// One tensor's departure, as first-diff prints it: "output.0: error (Cosine 0.99, MaxAbsErr 0.1) message".
std::string departure_text(const std::string &row, const compare::RowResult &r) {
  std::string why = row + ": " + compare::verdict_text(r.verdict);
  if (r.metrics)
    why += " (Cosine " + metric_text(r.metrics->cosine) + ", MaxAbsErr " + metric_text(r.metrics->max_abs_err) + ")";
  else if (r.verdict != compare::Verdict::Different)
    why += " (Max diff " + metric_text(r.stats[0].diff) + ", Min diff " + metric_text(r.stats[1].diff) +
           ", Mean diff " + metric_text(r.stats[2].diff) + ", L2norm diff " + metric_text(r.stats[3].diff) + ")";
  if (!r.message.empty()) why += " " + r.message;
  return why;
}

// Which of a kernel's inputs and outputs depart from run B's, and why.
struct Departure {
  bool in_bad = false, out_bad = false;
  std::string detail;
};

Departure departure(const compare::Side &A, const std::vector<TensorInfo> &a, const compare::Side &B,
                    const std::vector<TensorInfo> &b, const Thresholds &th) {
  Departure d;
  for (const TensorInfo &ta : a) {
    const std::string row = ta.row_suffix();
    auto tb = std::find_if(b.begin(), b.end(), [&](const TensorInfo &t) { return t.row_suffix() == row; });
    compare::RowResult r;
    if (tb == b.end()) {
      r.verdict = compare::Verdict::Error;
      r.message = "in A only";
    } else {
      r = compare::compare_tensor(A, ta, B, *tb, th);
    }
    if (!compare::diverges(r.verdict)) continue;
    (ta.io == format::IoKind::Input ? d.in_bad : d.out_bad) = true;
    if (d.detail.size() < 2000) d.detail += (d.detail.empty() ? "" : "; ") + departure_text(row, r);
  }
  return d;
}

// first-diff's scan of one rank: run A's step folders against run B's of the same step.
// A kernel only one run has: where the two runs part, when it is the first.
struct Parting {
  uint64_t step = 0, launch = UINT64_MAX, timestamp = 0;
  std::string name, side;  // side "A" or "B": the run that has it
  const RankDir *dir = nullptr;
};

// B's kernels of one step, by name without its direction token (old and new names pair).
struct BKernel {
  std::string name;
  std::vector<TensorInfo> tensors;
  uint64_t launch = UINT64_MAX, timestamp = 0;
};
using BKernels = std::unordered_map<std::string, BKernel>;

class DiffScan {
 public:
  DiffScan(RankDigest &d, const ScanOptions &o, const std::function<void(uint64_t)> &progress)
      : d_(d), o_(o), progress_(progress), scan_(d) {}

  void step(const RankDir &adir, const RankDir &bdir) {
    const uint64_t step = adir.step.value_or(0);
    d_.steps.push_back(step);
    // Run B's kernels of this step, by name without its direction token (old and new names pair).
    compare::Side B;
    B.dir = &bdir;
    BKernels b_kernels;
    read_folder(
        bdir,
        [&](KernelRecord &&k) {
          b_kernels.emplace(
              std::string(format::kernel_stem(k.name)),
              BKernel{k.name, std::move(k.tensors), k.launch_index.value_or(UINT64_MAX), k.timestamp.value_or(0)});
          return true;
        },
        [&](const DumpHeaderRead &h) { B.header = h; }, FolderNotes{d_.problems, d_.being_written, "B "}, nullptr);
    compare::Side A;
    A.dir = &adir;
    read_folder(
        adir,
        [&](KernelRecord &&k) {
          kernel(A, B, b_kernels, std::move(k), step, adir);
          return true;
        },
        [&](const DumpHeaderRead &h) { A.header = h; }, FolderNotes{d_.problems, d_.being_written, ""}, progress_);
    d_.only_b += b_kernels.size();
    for (const auto &[stem, k] : b_kernels) parts(Parting{step, k.launch, k.timestamp, k.name, "B", &bdir});
  }

  void finish() {
    blame_parting();
    scan_.finish();
    if (!d_.first) return;
    add_stack(*d_.first, scan_.first_dir());
    if (d_.first->kind == Kind::Compute && !d_.first->in_bad && d_.first->only_in.empty()) {
      d_.first->verdict = "kernel";
      d_.first->verdict_reason = "its inputs agree with run B and its outputs do not: the kernel computes differently";
    }
  }

 private:
  void kernel(const compare::Side &A, const compare::Side &B, BKernels &b_kernels, KernelRecord &&k, uint64_t step,
              const RankDir &adir) {
    const uint64_t launch = k.launch_index.value_or(fallback_launch_);
    fallback_launch_ = launch + 1;
    auto it = b_kernels.find(std::string(format::kernel_stem(k.name)));
    if (it == b_kernels.end()) {
      ++d_.only_a;
      parts(Parting{step, launch, k.timestamp.value_or(0), k.name, "A", &adir});
      return;
    }
    ++d_.compared;
    const Departure dep = departure(A, k.tensors, B, it->second.tensors, o_.thresholds);
    const uint64_t b_launch = it->second.launch;
    b_kernels.erase(it);
    scan_.kernel(
        k, step, launch, dep.in_bad, dep.out_bad,
        [&](Anomaly &an) {
          an.detail = dep.detail;
          first_b_launch_ = b_launch;
        },
        adir);
  }

  // The first kernel only one run has, by step and launch index (before the runs part their launch indexes agree).
  void parts(Parting p) {
    if (!parting_ || Key{p.step, p.launch} < Key{parting_->step, parting_->launch}) parting_ = std::move(p);
  }

  // When the first kernel both runs have that departs was given inputs that already differ, and a kernel only one run
  // has was launched before it, where the runs part, that kernel is the likeliest origin (kind "only in A"), ahead of
  // "from before the dump".
  void blame_parting() {
    const std::optional<Anomaly> &d = scan_.first();
    if (!parting_ || !d || !d->in_bad) return;
    // Launch indexes of the run that has the kernel: after it, A's and B's differ by the kernels only one has.
    const uint64_t d_launch = parting_->side == "A" ? d->launch_index : first_b_launch_;
    if (!(Key{parting_->step, parting_->launch} < Key{d->step, d_launch})) return;
    Anomaly a;
    a.step = parting_->step;
    a.folder = parting_->dir->label();
    a.kernel = parting_->name;
    a.launch_index = parting_->launch;
    a.timestamp = parting_->timestamp;
    a.out_bad = true;
    a.only_in = parting_->side;
    a.parted_at = d->kernel + " (launch_index " + std::to_string(d->launch_index) + ")" +
                  (d->detail.empty() ? "" : ": " + d->detail);
    scan_.set_first(std::move(a), *parting_->dir);
  }

  RankDigest &d_;
  const ScanOptions &o_;
  const std::function<void(uint64_t)> &progress_;
  RankScan scan_;
  uint64_t fallback_launch_ = 0;
  std::optional<Parting> parting_;
  uint64_t first_b_launch_ = UINT64_MAX;  // B's launch index of the first departing kernel
};

}  // namespace

RankDigest scan_diff(const std::vector<RankDir> &a_folders, const std::vector<RankDir> &b_folders, const ScanOptions &o,
                     const std::function<void(uint64_t)> &progress) {
  RankDigest d;
  if (!a_folders.empty()) d.rank = a_folders.front().rank;
  DiffScan scan(d, o, progress);
  const auto same_step = [](const RankDir &x) {
    return [&x](const RankDir &y) { return y.step.value_or(0) == x.step.value_or(0); };
  };
  for (const RankDir &adir : a_folders) {
    auto bdir = std::find_if(b_folders.begin(), b_folders.end(), same_step(adir));
    if (bdir == b_folders.end())
      d.problems.push_back(adir.label() + ": in A only (B has no such folder): not compared");
    else
      scan.step(adir, *bdir);
  }
  for (const RankDir &bdir : b_folders)
    if (std::none_of(a_folders.begin(), a_folders.end(), same_step(bdir)))
      d.problems.push_back(bdir.label() + ": in B only (A has no such folder): not compared");
  scan.finish();
  return d;
}

}  // namespace msprobe::tools::ranks
