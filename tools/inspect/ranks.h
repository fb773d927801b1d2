// first-nan and first-diff across ranks (docs/inspect.md): where non-finite values (or a divergence between two runs)
// began, in causal order, over the rank folders of any number of ranks and steps.
//
// The work is split so that it can run where the data lies:
//   map     scan_*():   one rank's folders (every step), streamed once -> a RankDigest of a few KB
//   reduce  reduce():   the digests of every rank -> the Finding (origins, how the values spread)
// The digest is the only thing that crosses processes (serialize() / deserialize()); one process or many (MPI,
// transport.h) give the same answer because the reduce sees the same digests.
//
// Causal order: each rank's launch order, joined at collectives by (communicator, seq) and at point-to-point
// transfers by (communicator, sender, receiver, pair_seq) from the entries' "comm" objects (format/comm_info.h).
// Values reach a rank only through a kernel: a rank's FIRST anomalous kernel (by step, then launch index) is
//   - a compute kernel whose inputs are clean: an origin (the kernel made the values: "compute");
//   - any kernel whose inputs are already anomalous: an origin whose cause is not in the dump ("input": an earlier
//     step not dumped, optimizer state, host data, a kernel not captured);
//   - a collective (or a receive) whose input is clean and whose output is not: explained when another member's
//     input to the same instance (or the matching send's) was anomalous, which is how the values spread; else an
//     origin ("communication": the reduction itself overflowed, or the transfer broke). When some member has no record
//     of the instance (its folder missing or damaged), the rank is reached through that member if a certain origin's
//     values presumably reached it, else an origin marked uncertain. Origins are listed in causal order first (one that
//     another precedes through a communicator comes after it, whether certain or not: an uncertain origin that
//     precedes a certain one is listed before it), then the certain before the uncertain, then step, time, rank.
// Everything a rank computes after its first anomaly is downstream of it and is not looked at again.
#pragma once
#include <cstdint>
#include <filesystem>
#include <functional>
#include <map>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "tools/inspect/cli.h"
#include "tools/reader/dump_reader.h"
#include "tools/reader/metrics.h"

namespace msprobe::tools::ranks {

// Which question: non-finite values (first-nan) or a departure from a second run (first-diff).
enum class Question : uint8_t { Nan, Diff };

// The non-finite kinds found in a tensor's statistics (Max NaN: NaN; Max +inf: +Inf; Min -inf: -Inf; Mean and Norm
// are not used: an fp16 Norm overflows for finite elements).
enum ValueBits : uint8_t { kNaN = 1, kPosInf = 2, kNegInf = 4 };
uint8_t value_bits(const TensorInfo &t);
std::string values_text(uint8_t bits);  // "NaN, +Inf"

// What an HCCL kernel is in causal terms.
enum class Kind : uint8_t { Compute = 0, Collective = 1, Send = 2, Recv = 3 };

// Sequence numbers as sorted, disjoint runs [first, last]. Once a rank holds bad values it usually feeds them to every
// later collective, so a few runs describe thousands of instances; past kMaxRuns the last run is extended to the end
// (approximate: "from here on").
struct SeqSet {
  static constexpr size_t kMaxRuns = 256;
  std::vector<std::pair<uint64_t, uint64_t>> runs;
  void add(uint64_t s);
  bool contains(uint64_t s) const;
  bool empty() const { return runs.empty(); }
};

// One communicator as one rank saw it.
struct CommEntry {
  std::string name;
  uint32_t comm_rank = 0, size = 0;  // size 0: unknown (collectives of dumps written before the "comm" object)
  std::optional<std::vector<uint32_t>> ranks;
  SeqSet bad_inputs;                     // collectives at which this rank's input was anomalous
  std::map<uint32_t, SeqSet> bad_sends;  // receiver's comm rank -> transfers whose input was anomalous
  // The launch index of the first of each (to order the hops a rank sent in the order it sent them).
  uint64_t first_bad_launch = UINT64_MAX;
  std::map<uint32_t, uint64_t> first_bad_send_launch;
  std::optional<uint64_t> before;  // collectives issued before the first anomaly (max seq + 1)
  std::optional<uint64_t> next;    // the first collective issued after it (at it, when its input was bad)
  // Where this rank's record of the communicator ends (max seq + 1; per receiver for sends): a flight record stops
  // at its trigger, so a later instance is not "clean" on this rank but unknown.
  uint64_t seen_end = 0;
  std::map<uint32_t, uint64_t> sends_end;
};

// A rank's first anomalous kernel.
struct Anomaly {
  uint64_t step = 0;
  std::string folder;  // "step1/rank3"
  std::string kernel;
  uint64_t launch_index = 0, timestamp = 0;
  Kind kind = Kind::Compute;
  bool in_bad = false, out_bad = false;
  uint8_t values = 0;  // first-nan: the non-finite kinds of its anomalous tensors
  std::string detail;  // the anomalous tensors and why ("output.0: Max inf, Min -inf"; "output.0 diff: ...")
  int32_t comm = -1;   // index in RankDigest::comms (kind != Compute)
  uint64_t seq = 0;    // its seq (collective) or pair_seq (send / recv)
  uint32_t peer = 0;   // send / recv: the other side's comm rank
  int64_t root = -1;   // broadcast, scatter: the root's comm rank, whose input alone is sent (-1: every member's)
  std::vector<std::string> stack;
  std::string verdict;  // "kernel", "data" or "" (not decided)
  std::string verdict_reason;
  // first-diff: a kernel only one run has ("A" or "B"), launched where the runs part, before the first kernel both have
  // whose inputs differ (`parted_at`: that kernel, its launch index and how it departs). Empty otherwise.
  std::string only_in, parted_at;
};

// What one rank's folders say, for the reduce.
struct RankDigest {
  std::optional<uint32_t> rank;                   // nullopt: the folder "rank" (no rank known)
  std::vector<uint64_t> steps;                    // step folders read
  uint64_t kernels = 0;                           // kernels read (first-diff: of A)
  uint64_t compared = 0, only_a = 0, only_b = 0;  // first-diff: kernels paired, and on one side only
  std::vector<std::string> problems;              // damaged folders and what was done (one line each)
  std::vector<std::string> being_written;         // folders a running process is still writing: read so far
  std::vector<CommEntry> comms;
  std::optional<Anomaly> first;
};

std::string serialize(const RankDigest &d);
// Throws std::runtime_error on bytes that are not a digest of this version.
RankDigest deserialize(const std::string &bytes);

// ---- map ------------------------------------------------------------------------------------------------------------
struct ScanOptions {
  Question question = Question::Nan;
  bool nan_only = false;  // first-nan: infinities are not anomalies (attention masks of -inf)
  bool replay = true;     // first-nan: judge an origin with its CPU reference when its tensors are on disk
  Thresholds thresholds;  // first-diff: compare's
};

// `folders`: one rank's step folders (step order). Damaged folders are reported in `problems`, folders a running
// process is still writing in `being_written`; what could be read of them is used. `progress(bytes)` is called as
// dump.json bytes are read (from this thread).
RankDigest scan_nan(const std::vector<RankDir> &folders, const ScanOptions &o,
                    const std::function<void(uint64_t)> &progress);
// Rank folders of run A and of run B (the same global rank), paired by step.
RankDigest scan_diff(const std::vector<RankDir> &a, const std::vector<RankDir> &b, const ScanOptions &o,
                     const std::function<void(uint64_t)> &progress);

// ---- reduce ---------------------------------------------------------------------------------------------------------
// How one instance carried the values: from the ranks whose input was anomalous to those whose output became so.
struct Hop {
  std::string comm;
  Kind kind = Kind::Collective;
  uint64_t seq = 0;                  // collective seq, or pair_seq
  std::optional<uint32_t> src, dst;  // point-to-point: global ranks (unset when not known: no folder and no list)
  std::string kernel;                // the receiving kernel (the first receiver's, by rank)
  uint64_t step = 0;
  uint64_t launch_index = 0, timestamp = 0;  // the first receiver's
  uint64_t sent_at = UINT64_MAX;             // the carrier's launch index of it, when known (orders the hops)
  std::vector<uint32_t> from, to;            // global ranks
  uint32_t depth = 1;                        // hops from the origin
  bool presumed = false;  // no sender's record holds this instance (it ended before, as a flight record
                          // does at its trigger, or its folder is missing or damaged): the senders are the
                          // members that held bad values then, or that another rank's values presumably reached
};

struct Origin {
  std::optional<uint32_t> rank;
  Anomaly a;
  std::string kind;  // "compute", "input", "communication", "only in A", "only in B"
  // "communication" whose instance has members whose input to it is unknown (no folder speaks for them, or their
  // record ends before it: a missing step folder, a damaged dump.json) and that no origin is presumed to have reached:
  // the values may have come from them. Listed after the certain origins that no origin precedes (reduce()).
  bool uncertain = false;
  std::vector<std::string> notes;     // e.g. members without data
  std::vector<uint32_t> preceded_by;  // origins that come before it causally (one hop through a communicator)
  std::vector<Hop> spread;            // instances that carried its values, by depth
  std::vector<uint32_t> reached;      // ranks its values reached (itself first)
};

struct Finding {
  Question question = Question::Nan;
  std::vector<Origin> origins;  // the first (primary) first; the others are independent of it or later
  struct PerRank {
    std::optional<uint32_t> rank;
    std::optional<Anomaly> first;
    std::string role;  // "origin", "reached", "clean"
  };
  std::vector<PerRank> per_rank;
  uint64_t ranks = 0, kernels = 0, compared = 0, only_a = 0, only_b = 0;
  std::vector<uint64_t> steps;
  std::vector<std::string> missing;        // folders that should exist and do not
  std::vector<std::string> problems;       // damaged folders, inconsistencies
  std::vector<std::string> being_written;  // folders a running process is still writing (not a problem: read so far)
};

Finding reduce(std::vector<RankDigest> digests, Question q);

// ---- report ---------------------------------------------------------------------------------------------------------
std::string report_text(const Finding &f);
std::string report_json(const Finding &f);
// Pieces of the text, for other presentations of a Finding (the HTML report's marks).
std::string ranks_phrase(const std::vector<uint32_t> &ranks);  // "rank 5", "ranks 0-3, 6"
// One rank as the text names it: "rank 5", or "rank (folder rank, no number)" for the folder of a process whose rank
// was not known, by the name --rank and the folder take.
std::string rank_phrase(const std::optional<uint32_t> &rank);
std::string hop_instance(const Hop &h);                // "comm hccl_world_group, seq 7"
std::string origin_kind(const Origin &o, Question q);  // "compute: its inputs are finite, ..."

// ---- one process
// ------------------------------------------------------------------------------------------------------ The whole
// analysis where every rank folder is on this machine (the HTML report; first-nan and first-diff themselves go through
// the transport, which also runs under mpirun): `b` null for first-nan.
Finding analyze_here(const std::filesystem::path &a, const std::filesystem::path *b, const ScanOptions &o);

}  // namespace msprobe::tools::ranks
