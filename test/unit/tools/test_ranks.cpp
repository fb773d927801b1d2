// first-nan / first-diff (tools/inspect/ranks.h): the digest's sequence sets and bytes, and the reduce's causal rules
// on hand-built digests: origins, carriers, broadcast roots, point-to-point, members without data, order of origins.
#include <gtest/gtest.h>

#include <algorithm>
#include <string>
#include <vector>

#include "tools/inspect/ranks.h"

namespace msprobe::tools::ranks {
namespace {

TEST(SeqSet, RunsMergeAndAnswer) {
  SeqSet s;
  for (uint64_t v : {3, 4, 5, 9, 7, 8, 1}) s.add(v);
  EXPECT_EQ(s.runs, (std::vector<std::pair<uint64_t, uint64_t>>{{1, 1}, {3, 5}, {7, 9}}));
  s.add(6);
  s.add(2);
  EXPECT_EQ(s.runs, (std::vector<std::pair<uint64_t, uint64_t>>{{1, 9}}));
  EXPECT_TRUE(s.contains(1) && s.contains(9));
  EXPECT_FALSE(s.contains(0) || s.contains(10));
}

TEST(SeqSet, BoundedByFromHereOn) {
  SeqSet s;
  for (uint64_t v = 0; v < 2 * SeqSet::kMaxRuns; ++v) s.add(2 * v);  // every other instance
  EXPECT_EQ(s.runs.size(), SeqSet::kMaxRuns);
  EXPECT_TRUE(s.contains(2 * SeqSet::kMaxRuns + 1));  // approximated: from the last run on
  EXPECT_FALSE(s.contains(1));
}

// A rank in communicators; `first` set by the caller.
RankDigest rank(uint32_t r) {
  RankDigest d;
  d.rank = r;
  d.steps = {0};
  d.kernels = 10;
  return d;
}

CommEntry comm(const std::string &name, uint32_t comm_rank, uint32_t size) {
  CommEntry c;
  c.name = name;
  c.comm_rank = comm_rank;
  c.size = size;
  c.seen_end = 100;
  return c;
}

// Ranks 0..n-1, each in the communicator `name` of `size` members at its own rank.
std::vector<RankDigest> ranks_in(const std::string &name, uint32_t n, uint32_t size) {
  std::vector<RankDigest> ds;
  for (uint32_t r = 0; r < n; ++r) {
    ds.push_back(rank(r));
    ds.back().comms.push_back(comm(name, r, size));
  }
  return ds;
}

Anomaly anomaly(Kind kind, uint64_t launch, bool in_bad, bool out_bad, int32_t comm = -1, uint64_t seq = 0) {
  Anomaly a;
  a.kernel = "K" + std::to_string(launch);
  a.launch_index = launch;
  a.timestamp = 1000 + launch;
  a.kind = kind;
  a.in_bad = in_bad;
  a.out_bad = out_bad;
  a.comm = comm;
  a.seq = seq;
  a.values = kNaN;
  return a;
}

TEST(Digest, RoundTrip) {
  RankDigest d = rank(7);
  d.problems = {"step0/rank7: something"};
  d.comms.push_back(comm("world", 7, 8));
  d.comms[0].ranks = std::vector<uint32_t>{0, 1, 2, 3, 4, 5, 6, 7};
  d.comms[0].bad_inputs.add(4);
  d.comms[0].bad_sends[3].add(2);
  d.comms[0].sends_end[3] = 5;
  d.comms[0].before = 4;
  d.comms[0].next = 4;
  d.first = anomaly(Kind::Collective, 40, true, true, 0, 4);
  d.first->root = 2;
  d.first->stack = {"frame 1", "frame 2"};
  d.first->verdict = "data";
  d.first->only_in = "A";
  d.first->parted_at = "Gelu.Default.0.forward (launch_index 41)";
  d.being_written = {"step1/rank7: being written by a running process (pid 42): ..."};
  const RankDigest back = deserialize(serialize(d));
  EXPECT_EQ(serialize(back), serialize(d));
  EXPECT_EQ(back.rank, 7u);
  EXPECT_EQ(back.comms[0].ranks->size(), 8u);
  EXPECT_TRUE(back.comms[0].bad_sends.at(3).contains(2));
  EXPECT_EQ(back.first->root, 2);
  EXPECT_EQ(back.first->only_in, "A");
  EXPECT_EQ(back.first->parted_at, "Gelu.Default.0.forward (launch_index 41)");
  EXPECT_EQ(back.being_written, d.being_written);
  std::string cut = serialize(d);
  cut.pop_back();
  EXPECT_THROW(deserialize(cut), std::runtime_error);
  EXPECT_THROW(deserialize("not a digest"), std::runtime_error);
}

// Rank 1 computes a NaN; the all-reduce (seq 3) carries it from rank 1 to ranks 0 and 2; rank 3 is clean.
TEST(Reduce, OriginAndSpreadThroughACollective) {
  std::vector<RankDigest> ds = ranks_in("g", 4, 3);
  ds[3].comms[0] = comm("other", 0, 1);
  ds[1].first = anomaly(Kind::Compute, 20, false, true);
  ds[1].comms[0].bad_inputs.add(3);
  ds[1].comms[0].bad_inputs.add(4);
  for (uint32_t r : {0u, 2u}) ds[r].first = anomaly(Kind::Collective, 25, false, true, 0, 3);
  ds[0].comms[0].bad_inputs.add(4);  // later instances are tainted too
  const Finding f = reduce(ds, Question::Nan);
  ASSERT_EQ(f.origins.size(), 1u);
  EXPECT_EQ(f.origins[0].rank, 1u);
  EXPECT_EQ(f.origins[0].kind, "compute");
  ASSERT_EQ(f.origins[0].spread.size(), 1u);
  const Hop &h = f.origins[0].spread[0];
  EXPECT_EQ(h.comm, "g");
  EXPECT_EQ(h.seq, 3u);
  EXPECT_EQ(h.from, std::vector<uint32_t>{1});
  EXPECT_EQ(h.to, (std::vector<uint32_t>{0, 2}));
  EXPECT_EQ(f.origins[0].reached, (std::vector<uint32_t>{0, 1, 2}));
  EXPECT_EQ(f.per_rank[3].role, "clean");
  EXPECT_EQ(f.per_rank[0].role, "reached");
  const std::string json = report_json(f);
  EXPECT_NE(json.find("\"rank\": 1"), std::string::npos);
  EXPECT_NE(report_text(f).find("origin: rank 1, step 0: K20"), std::string::npos);
}

// A collective whose inputs were clean on every member and whose output is not: each member is an origin; a member
// without data is named.
TEST(Reduce, CommunicationOriginNamesMembersWithoutData) {
  std::vector<RankDigest> ds = ranks_in("g", 2, 3);
  for (RankDigest &d : ds) {
    d.comms[0].ranks = std::vector<uint32_t>{0, 1, 5};
    d.first = anomaly(Kind::Collective, 30, false, true, 0, 7);
  }
  const Finding f = reduce(ds, Question::Nan);
  ASSERT_EQ(f.origins.size(), 2u);
  EXPECT_EQ(f.origins[0].kind, "communication");
  ASSERT_EQ(f.missing.size(), 1u);
  EXPECT_NE(f.missing[0].find("comm rank 2 (rank 5)"), std::string::npos) << f.missing[0];
  bool named = false;
  for (const std::string &n : f.origins[0].notes) named |= n.find("rank 5") != std::string::npos;
  EXPECT_TRUE(named);
}

// A broadcast carries only the root's input; a receive is explained by the matching send only.
TEST(Reduce, BroadcastRootAndPointToPoint) {
  std::vector<RankDigest> ds = ranks_in("w", 3, 3);
  // Rank 2 (not the root, 1) had bad input to the broadcast; rank 0's output went bad: not explained by rank 2.
  ds[2].first = anomaly(Kind::Compute, 5, false, true);
  ds[2].comms[0].bad_inputs.add(0);
  ds[0].first = anomaly(Kind::Collective, 9, false, true, 0, 0);
  ds[0].first->root = 1;
  Finding f = reduce(ds, Question::Nan);
  EXPECT_EQ(f.origins.size(), 2u);  // rank 0's is not explained by rank 2
  // The root had the bad input: explained.
  ds[1].first = anomaly(Kind::Compute, 4, false, true);
  ds[1].comms[0].bad_inputs.add(0);
  f = reduce(ds, Question::Nan);
  ASSERT_EQ(f.per_rank[0].role, "reached");
  // A receive at pair_seq 2 from comm rank 1: explained by rank 1's bad send to comm rank 0, pair_seq 2; not by
  // rank 1's clean sends (its record of them goes on past 2).
  ds[0].first = anomaly(Kind::Recv, 9, false, true, 0, 2);
  ds[0].first->peer = 1;
  ds[1].comms[0].sends_end[0] = 5;
  f = reduce(ds, Question::Nan);
  EXPECT_EQ(f.per_rank[0].role, "origin");
  ds[1].comms[0].bad_sends[0].add(2);
  f = reduce(ds, Question::Nan);
  EXPECT_EQ(f.per_rank[0].role, "reached");
  const Origin &o = *std::find_if(f.origins.begin(), f.origins.end(), [](const Origin &x) { return x.rank == 1u; });
  ASSERT_EQ(o.spread.size(), 1u);
  EXPECT_EQ(o.spread[0].kind, Kind::Recv);
  EXPECT_EQ(o.spread[0].src, 1u);
  EXPECT_EQ(o.spread[0].dst, 0u);
}

// Two origins in one communicator: the one whose next collective the other had issued before its own anomaly comes
// first, though it happened later in time.
TEST(Reduce, CausalPrecedenceBeforeTime) {
  std::vector<RankDigest> ds = ranks_in("w", 2, 2);
  ds[0].first = anomaly(Kind::Compute, 10, false, true);
  ds[0].first->timestamp = 5000;
  ds[0].comms[0].next = 2;  // its first collective after the anomaly: seq 2
  ds[1].first = anomaly(Kind::Compute, 50, false, true);
  ds[1].first->timestamp = 100;  // earlier clock
  ds[1].comms[0].before = 3;     // it had issued seq 0..2 before its anomaly
  const Finding f = reduce(ds, Question::Nan);
  ASSERT_EQ(f.origins.size(), 2u);
  EXPECT_EQ(f.origins[0].rank, 0u);
  EXPECT_EQ(f.origins[1].preceded_by, std::vector<uint32_t>{0});
}

// A flight record that ends before the instance: the tainted member is the presumed sender.
TEST(Reduce, PresumedSenderWhenItsRecordEnds) {
  std::vector<RankDigest> ds = ranks_in("w", 2, 2);
  ds[0].first = anomaly(Kind::Compute, 10, false, true);
  ds[0].comms[0].seen_end = 4;  // its record stops at its trigger, before seq 4
  ds[1].first = anomaly(Kind::Collective, 12, false, true, 0, 4);
  const Finding f = reduce(ds, Question::Nan);
  ASSERT_EQ(f.origins.size(), 1u);
  ASSERT_EQ(f.origins[0].spread.size(), 1u);
  EXPECT_TRUE(f.origins[0].spread[0].presumed);
}

// Groups {0,1} ("g0") and {2,3} ("g1"), then pairs across them ("x0" = {0,2}, "x1" = {1,3}), and "world" over all
// four (no collective on it in the step unless a test says so: it orders nothing); rank 3's record ends before seq 5
// (a missing step folder). Rank 2 computes a NaN; g1 seq 5 carries it to rank 3 (no record), x1 seq 5
// to rank 1: rank 1 is reached through rank 3, presumed, not an origin, whatever the time stamps say.
std::vector<RankDigest> groups_and_pairs() {
  std::vector<RankDigest> ds;
  for (uint32_t r = 0; r < 4; ++r) {
    ds.push_back(rank(r));
    ds[r].comms.push_back(comm(r < 2 ? "g0" : "g1", r % 2, 2));
    ds[r].comms.push_back(comm(r % 2 ? "x1" : "x0", r / 2, 2));
    ds[r].comms[0].ranks = r < 2 ? std::vector<uint32_t>{0, 1} : std::vector<uint32_t>{2, 3};
    ds[r].comms[1].ranks = r % 2 ? std::vector<uint32_t>{1, 3} : std::vector<uint32_t>{0, 2};
    ds[r].comms.push_back(comm("world", r, 4));
    ds[r].comms[2].ranks = std::vector<uint32_t>{0, 1, 2, 3};
  }
  ds[3].steps = {};  // its step folder is missing
  for (CommEntry &c : ds[3].comms) c.seen_end = 5;
  return ds;
}

TEST(Reduce, ReachedThroughAMemberWithoutDataIsNotAnOrigin) {
  std::vector<RankDigest> ds = groups_and_pairs();
  ds[2].first = anomaly(Kind::Compute, 10, false, true);
  ds[2].first->timestamp = 5000;
  ds[2].comms[0].bad_inputs.add(5);
  ds[2].comms[1].bad_inputs.add(5);
  ds[0].first = anomaly(Kind::Collective, 12, false, true, 1, 5);  // x0 from rank 2
  ds[1].first = anomaly(Kind::Collective, 12, false, true, 1, 5);  // x1 from rank 3, which has no record of it
  ds[1].first->timestamp = 100;                                    // earlier than rank 2's origin by the clock
  const Finding f = reduce(ds, Question::Nan);
  ASSERT_EQ(f.origins.size(), 1u);
  EXPECT_EQ(f.origins[0].rank, 2u);
  EXPECT_FALSE(f.origins[0].uncertain);
  EXPECT_EQ(f.per_rank[1].role, "reached");
  EXPECT_EQ(f.origins[0].reached, (std::vector<uint32_t>{0, 1, 2}));
  const auto hop =
      std::find_if(f.origins[0].spread.begin(), f.origins[0].spread.end(), [](const Hop &h) { return h.comm == "x1"; });
  ASSERT_NE(hop, f.origins[0].spread.end());
  EXPECT_EQ(hop->from, std::vector<uint32_t>{3});
  EXPECT_EQ(hop->to, std::vector<uint32_t>{1});
  EXPECT_TRUE(hop->presumed);
  EXPECT_EQ(hop->depth, 2u);
  EXPECT_TRUE(f.problems.empty());
}

// The same with no origin whose values could have reached rank 3 (only rank 1's anomaly is in the data): rank 1 is
// an uncertain origin, and the Finding says so.
TEST(Reduce, UncertainOriginIsSaidAndComesAfterCertainOnes) {
  std::vector<RankDigest> ds = groups_and_pairs();
  ds[1].first = anomaly(Kind::Collective, 12, false, true, 1, 5);
  ds[1].first->timestamp = 100;
  Finding f = reduce(ds, Question::Nan);
  ASSERT_EQ(f.origins.size(), 1u);
  EXPECT_TRUE(f.origins[0].uncertain);
  EXPECT_EQ(f.origins[0].kind, "communication");
  ASSERT_EQ(f.problems.size(), 1u);
  EXPECT_NE(f.problems[0].find("uncertain"), std::string::npos);
  bool named = false;
  for (const std::string &n : f.origins[0].notes) named |= n.find("rank 3") != std::string::npos;
  EXPECT_TRUE(named);
  // A certain origin that cannot have reached rank 3 (later step) comes first, though its clock is later.
  ds[0].first = anomaly(Kind::Compute, 30, false, true);
  ds[0].first->step = 1;
  ds[0].first->timestamp = 9000;
  ds[0].comms[0].bad_inputs.add(6);
  f = reduce(ds, Question::Nan);
  ASSERT_EQ(f.origins.size(), 2u);
  EXPECT_EQ(f.origins[0].rank, 0u);
  EXPECT_FALSE(f.origins[0].uncertain);
  EXPECT_TRUE(f.origins[1].uncertain);
  EXPECT_TRUE(f.problems.empty());
}

// Rank 5 receives (pp transfer 4) from comm rank 1 = rank 3, which has no folder; rank 3 is also in dp with rank 7, a
// certain origin whose input to dp was bad. Rank 5 is reached through rank 3: the hop names rank 3 as the sender, not
// the key's "no folder" marker (it read "from rank 4294967295").
TEST(Reduce, ReceiveFromARankWithoutFolderNamesItsGlobalRank) {
  std::vector<RankDigest> ds{rank(5), rank(7)};
  ds[0].comms.push_back(comm("pp", 0, 2));
  ds[0].comms[0].ranks = std::vector<uint32_t>{5, 3};
  ds[0].first = anomaly(Kind::Recv, 12, false, true, 0, 4);
  ds[0].first->peer = 1;
  ds[1].comms.push_back(comm("dp", 1, 2));
  ds[1].comms[0].ranks = std::vector<uint32_t>{3, 7};
  ds[1].first = anomaly(Kind::Compute, 10, false, true);
  ds[1].comms[0].bad_inputs.add(2);
  const Finding f = reduce(ds, Question::Nan);
  ASSERT_EQ(f.origins.size(), 1u);
  EXPECT_EQ(f.origins[0].rank, 7u);
  EXPECT_EQ(f.per_rank[0].role, "reached");
  ASSERT_EQ(f.origins[0].spread.size(), 1u);
  const Hop &h = f.origins[0].spread[0];
  EXPECT_EQ(h.kind, Kind::Recv);
  EXPECT_EQ(h.src, 3u);
  EXPECT_EQ(h.dst, 5u);
  EXPECT_EQ(h.from, std::vector<uint32_t>{3});
  EXPECT_EQ(report_json(f).find("4294967295"), std::string::npos);
  EXPECT_NE(report_text(f).find("transfer 4 from rank 3 to rank 5"), std::string::npos) << report_text(f);
  // No member knows the communicator's global ranks and the sender has no number: no "src" is made up.
  Hop unknown = h;
  unknown.src.reset();
  EXPECT_EQ(hop_instance(unknown).find("rank 0"), std::string::npos) << hop_instance(unknown);
}

// Pipeline pp = {0, 1, 2}: rank 0 computes a NaN and sends it to rank 1 (no folder); rank 2's first anomaly is its
// receive from rank 1. A send in the instance's own communicator reaches rank 1: rank 2 is reached through it, not an
// uncertain origin.
TEST(Reduce, ReachedThroughASendInTheSameCommunicator) {
  std::vector<RankDigest> ds{rank(0), rank(2)};
  ds[0].comms.push_back(comm("pp", 0, 3));
  ds[1].comms.push_back(comm("pp", 2, 3));
  for (RankDigest &d : ds) d.comms[0].ranks = std::vector<uint32_t>{0, 1, 2};
  ds[0].first = anomaly(Kind::Compute, 10, false, true);
  ds[0].comms[0].bad_sends[1].add(0);
  ds[0].comms[0].sends_end[1] = 1;
  ds[1].first = anomaly(Kind::Recv, 12, false, true, 0, 0);
  ds[1].first->peer = 1;
  const Finding f = reduce(ds, Question::Nan);
  ASSERT_EQ(f.origins.size(), 1u);
  EXPECT_EQ(f.origins[0].rank, 0u);
  EXPECT_FALSE(f.origins[0].uncertain);
  EXPECT_EQ(f.per_rank[1].role, "reached");
  ASSERT_EQ(f.origins[0].spread.size(), 1u);
  EXPECT_EQ(f.origins[0].spread[0].from, std::vector<uint32_t>{1});
  EXPECT_EQ(f.origins[0].spread[0].src, 1u);
  EXPECT_EQ(f.origins[0].spread[0].depth, 2u);
  // A bad input to an earlier collective of the same communicator is not taken: it would have reached rank 2 too.
  ds[0].comms[0].bad_sends.clear();
  ds[0].comms[0].bad_inputs.add(0);
  EXPECT_EQ(reduce(ds, Question::Nan).per_rank[1].role, "origin");
}

// The member without a record of the instance is a folder named plain "rank" (no number): the hop through it, and a
// carrier without a number, do not name rank 0.
TEST(Reduce, MemberWithoutANumberIsNotRankZero) {
  std::vector<RankDigest> ds = groups_and_pairs();
  ds[3].rank.reset();
  ds[2].first = anomaly(Kind::Compute, 10, false, true);
  ds[2].comms[0].bad_inputs.add(5);
  ds[1].first = anomaly(Kind::Collective, 12, false, true, 1, 5);  // x1 with the unnumbered member
  Finding f = reduce(ds, Question::Nan);
  auto role = [](const Finding &g, uint32_t r) {
    return std::find_if(g.per_rank.begin(), g.per_rank.end(), [&](const auto &p) { return p.rank == r; })->role;
  };
  ASSERT_EQ(f.origins.size(), 1u);
  EXPECT_EQ(role(f, 1), "reached");
  const auto x1 = [](const Finding &g) {
    return *std::find_if(g.origins[0].spread.begin(), g.origins[0].spread.end(),
                         [](const Hop &h) { return h.comm == "x1"; });
  };
  EXPECT_EQ(x1(f).from, std::vector<uint32_t>{});
  EXPECT_NE(report_text(f).find("a rank of unknown number -> rank 1"), std::string::npos) << report_text(f);
  // The unnumbered member's record holds x1 seq 5 with a bad input: a carrier without a number.
  for (CommEntry &c : ds[3].comms) c.seen_end = 100;
  ds[3].first = anomaly(Kind::Collective, 11, false, true, 0, 5);
  ds[3].comms[1].bad_inputs.add(5);
  f = reduce(ds, Question::Nan);
  EXPECT_EQ(role(f, 1), "reached");
  EXPECT_EQ(x1(f).from, std::vector<uint32_t>{});
}

// groups_and_pairs(), with collectives on "world". Rank 1's first anomaly is x1 seq 5 (rank 3 has no record
// of it); rank 2 computes a NaN in the same step, but after rank 1's anomaly in program order: rank 2 had issued world
// seq 0..2 before its anomaly, rank 1 issued world seq 2 after its own. Rank 2's values cannot have reached rank 1:
// rank 1 is an (uncertain) origin, listed first since it comes first causally.
TEST(Reduce, FeederLaterInProgramOrderDoesNotReach) {
  std::vector<RankDigest> ds = groups_and_pairs();
  ds[3].comms[2].seen_end = 2;
  ds[2].first = anomaly(Kind::Compute, 40, false, true);
  ds[2].first->timestamp = 100;  // its clock says first
  ds[2].comms[0].bad_inputs.add(5);
  ds[2].comms[2].before = 3;
  ds[2].comms[2].next = 3;
  ds[1].first = anomaly(Kind::Collective, 12, false, true, 1, 5);
  ds[1].first->timestamp = 5000;
  ds[1].comms[2].before = 2;
  ds[1].comms[2].next = 2;
  Finding f = reduce(ds, Question::Nan);
  ASSERT_EQ(f.origins.size(), 2u);
  EXPECT_EQ(f.per_rank[1].role, "origin");
  EXPECT_EQ(f.origins[0].rank, 1u);
  EXPECT_TRUE(f.origins[0].uncertain);
  EXPECT_EQ(f.origins[1].rank, 2u);
  EXPECT_EQ(f.origins[1].preceded_by, std::vector<uint32_t>{1});
  // Rank 2's anomaly before rank 1's (rank 1 had issued world seq 3 before its anomaly, rank 2 issued it after):
  // reached through rank 3.
  ds[2].comms[2].before = 2;
  ds[2].comms[2].next = 2;
  ds[1].comms[2].before = 3;
  ds[1].comms[2].next = 3;
  f = reduce(ds, Question::Nan);
  EXPECT_EQ(f.per_rank[1].role, "reached");
  // Shown later again, but in an earlier step: reached.
  ds[2].comms[2].before = 3;
  ds[1].comms[2].next = 2;
  ds[2].first->step = 0;
  ds[1].first->step = 1;
  for (RankDigest &d : ds) d.steps = {0, 1};
  ds[3].steps = {0};
  f = reduce(ds, Question::Nan);
  EXPECT_EQ(f.per_rank[1].role, "reached");
  // The same step and no communicator in common (no world): nothing orders them, taken (presumed).
  ds[1].first->step = 0;
  for (RankDigest &d : ds) d.comms.pop_back();
  f = reduce(ds, Question::Nan);
  EXPECT_EQ(f.per_rank[1].role, "reached");
}

TEST(Reduce, InputOriginAndDuplicates) {
  std::vector<RankDigest> ds{rank(0), rank(0)};
  ds[0].first = anomaly(Kind::Compute, 0, true, true);
  const Finding f = reduce(ds, Question::Nan);
  ASSERT_EQ(f.origins.size(), 1u);
  EXPECT_EQ(f.origins[0].kind, "input");
  ASSERT_EQ(f.problems.size(), 1u);
  EXPECT_NE(f.problems[0].find("read twice"), std::string::npos);
}

// first-diff: a kernel only run A has, where the runs part, before a departing kernel whose inputs differ: the origin
// is that kernel, of kind "only in A", its note ahead of "from before the dump"; a rank being written is not a problem.
TEST(Reduce, OnlyInOneRunIsAnOriginOfItsOwnKind) {
  std::vector<RankDigest> ds = {rank(0)};
  ds[0].first = anomaly(Kind::Compute, 47, false, true);
  ds[0].first->only_in = "A";
  ds[0].first->parted_at = "Gelu.Default.0.forward (launch_index 48): input.0: diff";
  ds[0].being_written = {"step1/rank0: being written by a running process (pid 42): ..."};
  const Finding f = reduce(ds, Question::Diff);
  ASSERT_EQ(f.origins.size(), 1u);
  EXPECT_EQ(f.origins[0].kind, "only in A");
  ASSERT_EQ(f.origins[0].notes.size(), 2u);
  EXPECT_NE(f.origins[0].notes[0].find("Gelu.Default.0.forward (launch_index 48): input.0: diff"), std::string::npos);
  EXPECT_NE(f.origins[0].notes[0].find("likeliest cause"), std::string::npos);
  EXPECT_NE(f.origins[0].notes[1].find("from before the dump"), std::string::npos);
  EXPECT_TRUE(f.problems.empty());
  EXPECT_EQ(f.being_written, ds[0].being_written);
  const std::string text = report_text(f);
  EXPECT_NE(text.find("kind      only in A: run B has no such kernel"), std::string::npos) << text;
  EXPECT_NE(text.find("being written: step1/rank0"), std::string::npos) << text;
}

}  // namespace
}  // namespace msprobe::tools::ranks
