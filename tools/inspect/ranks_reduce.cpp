// first-nan / first-diff, the reduce step: every rank's digest -> the origins and how their values spread (ranks.h).
// Cost: one pass over the digests plus, for each rank whose first anomaly arrived through a communicator, one look at
// each member of that instance.
//
// The steps, in the order reduce() takes them (one member function each):
//   gather          sort the digests by rank, drop a rank read twice, sum the counts
//   index_comms     who is in each communicator, from every rank's view of it; members without data
//   classify        each rank's first anomaly: an origin, reached through an instance, or pending on members whose
//                   input to that instance is unknown
//   find_feeders    for a pending rank: the ranks whose values presumably reached one of those members
//   settle_pending  pending ranks an origin's values reach through their feeders are reached (presumed), the others
//                   uncertain origins
//   assign_depths   each reached rank's depth and root origin (through the carrier nearest an origin)
//   build_hops      the instances that carried values, grouped, under the origin their first receiver descends from
//   order_origins   causal precedence between origins, then the sort
#include <algorithm>
#include <functional>
#include <map>
#include <set>
#include <tuple>
#include <unordered_map>

#include "format/hccl_calls.h"
#include "format/naming.h"
#include "tools/inspect/ranks.h"

namespace msprobe::tools::ranks {

namespace {

// Who is in one communicator, from every rank's view of it.
struct Members {
  uint32_t size = 0;
  std::optional<std::vector<uint32_t>> ranks;  // global ranks, when some member knew them
  std::map<uint32_t, size_t> by_comm_rank;     // comm rank -> digest index
};

// An instance that carried values: (communicator, kind, seq, sender, receiver); sender and receiver -1 for a
// collective.
using InstanceKey = std::tuple<std::string, int, uint64_t, int64_t, int64_t>;

// A point-to-point side in an InstanceKey: its global rank, or -1 - its comm rank when that is not known (no folder and
// no list of the communicator's ranks, or a folder without a number), which keeps different unknown sides apart.
int64_t key_rank(const std::optional<uint32_t> &rank, uint32_t comm_rank) {
  return rank ? static_cast<int64_t>(*rank) : -1 - static_cast<int64_t>(comm_rank);
}

// A member whose input to an instance is unknown: no folder speaks for it, or its record ends before the instance
// (a missing step folder, a damaged dump.json) and shows no anomaly.
struct Unknown {
  std::optional<size_t> digest;  // its digest, when it has one
  std::optional<uint32_t> rank;  // its global rank, when known
  uint32_t comm_rank = 0;
};

struct Reach {
  InstanceKey key;
  std::vector<size_t> carriers;  // digest indexes
  bool presumed = false;
  std::vector<Unknown> unknown;  // when no carrier is known: the members whose input is unknown
  // Presumed senders without data (global rank, when known) and, for each, a rank whose values presumably reached it.
  std::vector<std::pair<std::optional<uint32_t>, size_t>> via;
};

// The global rank of a communicator's member, from the communicator's list of ranks, when it has one.
std::optional<uint32_t> listed_rank(const Members &m, uint32_t comm_rank) {
  if (m.ranks && comm_rank < m.ranks->size()) return (*m.ranks)[comm_rank];
  return std::nullopt;
}

std::string unknown_text(const Unknown &u) {
  return u.rank ? "rank " + std::to_string(*u.rank) : "comm rank " + std::to_string(u.comm_rank);
}

// A collective of a communicator, for precedes().
struct Instance {
  const std::string *comm = nullptr;
  uint64_t seq = 0;
};

enum Role : int { kClean = 0, kOrigin = 1, kReached = 2 };

class Reducer {
 public:
  Reducer(std::vector<RankDigest> digests, Question q) : d_(std::move(digests)) { f_.question = q; }

  Finding run() {
    gather();
    index_comms();
    role_.assign(d_.size(), kClean);
    for (size_t i = 0; i < d_.size(); ++i)
      if (d_[i].first) classify(i);
    for (auto &[i, p] : pending_) find_feeders(i, p);
    settle_pending();
    assign_depths();
    build_hops();
    order_origins();
    for (size_t i = 0; i < d_.size(); ++i) {
      Finding::PerRank p;
      p.rank = d_[i].rank;
      p.first = d_[i].first;
      p.role = role_[i] == kOrigin ? "origin" : role_[i] == kReached ? "reached" : "clean";
      f_.per_rank.push_back(std::move(p));
    }
    return std::move(f_);
  }

 private:
  // ---- gather, index_comms --------------------------------------------------------------------------------------
  void gather() {
    std::stable_sort(d_.begin(), d_.end(), [](const RankDigest &a, const RankDigest &b) { return a.rank < b.rank; });
    // A rank read twice (two processes saw different copies): the first is kept.
    for (size_t i = 1; i < d_.size();) {
      if (d_[i].rank == d_[i - 1].rank) {
        f_.problems.push_back(rank_phrase(d_[i].rank) + ": read twice; the second copy is ignored");
        d_.erase(d_.begin() + static_cast<std::ptrdiff_t>(i));
      } else {
        ++i;
      }
    }
    std::set<uint64_t> steps;
    for (const RankDigest &d : d_) {
      f_.kernels += d.kernels;
      f_.compared += d.compared;
      f_.only_a += d.only_a;
      f_.only_b += d.only_b;
      steps.insert(d.steps.begin(), d.steps.end());
      f_.problems.insert(f_.problems.end(), d.problems.begin(), d.problems.end());
      f_.being_written.insert(f_.being_written.end(), d.being_written.begin(), d.being_written.end());
    }
    f_.ranks = d_.size();
    f_.steps.assign(steps.begin(), steps.end());
  }

  void index_comms() {
    entry_of_.resize(d_.size());
    for (size_t i = 0; i < d_.size(); ++i) {
      for (size_t e = 0; e < d_[i].comms.size(); ++e) {
        const CommEntry &c = d_[i].comms[e];
        entry_of_[i].emplace(c.name, e);
        Members &m = comms_[c.name];
        m.size = std::max(m.size, c.size);
        if (c.ranks && !m.ranks) m.ranks = c.ranks;
        auto [it, added] = m.by_comm_rank.emplace(c.comm_rank, i);
        if (!added && it->second != i)
          f_.problems.push_back("communicator " + c.name + ": comm rank " + std::to_string(c.comm_rank) +
                                " is claimed by " + rank_phrase(d_[it->second].rank) + " and by " +
                                rank_phrase(d_[i].rank));
      }
    }
    // Members without data: a communicator's comm rank that no folder read speaks for.
    for (const auto &[name, m] : comms_) {
      for (uint32_t r = 0; r < m.size; ++r) {
        if (m.by_comm_rank.count(r)) continue;
        std::string who = "comm rank " + std::to_string(r);
        if (const auto g = listed_rank(m, r)) who += " (rank " + std::to_string(*g) + ")";
        absent_[name].push_back(who);
      }
      if (absent_.count(name))
        f_.missing.push_back("communicator " + name + ": no data for " + std::to_string(absent_[name].size()) + " of " +
                             std::to_string(m.size) + " members: " + absent_[name].front() +
                             (absent_[name].size() > 1 ? ", ..." : ""));
    }
  }

  const CommEntry *entry(size_t i, const std::string &name) const {
    auto it = entry_of_[i].find(name);
    return it == entry_of_[i].end() ? nullptr : &d_[i].comms[it->second];
  }

  // ---- classify: each rank's first anomaly ------------------------------------------------------------------------
  void classify(size_t i) {
    const Anomaly &a = *d_[i].first;
    Origin o;
    o.rank = d_[i].rank;
    o.a = a;
    if (a.kind == Kind::Compute || a.in_bad || !a.only_in.empty()) {
      o.kind = local_origin_kind(a, o.notes);
      add_origin(i, std::move(o));
      return;
    }
    const CommEntry &c = d_[i].comms[static_cast<size_t>(a.comm)];
    Reach r = a.kind == Kind::Collective ? reach_collective(i, a, c) : reach_recv(i, a, c);
    if (!r.carriers.empty()) {
      role_[i] = kReached;
      r.unknown.clear();
      reached_[i] = std::move(r);
      return;
    }
    o.kind = "communication";
    if (!r.unknown.empty()) {
      o.notes.push_back(unknown_note(a, r.unknown));
      pending_origin_[i] = std::move(o);
      pending_[i] = std::move(r);
      return;
    }
    o.notes.push_back(communication_note(a));
    if (absent_.count(c.name))
      o.notes.push_back("members without data (their input is unknown, the values may come from them): " +
                        std::to_string(absent_[c.name].size()) + ", e.g. " + absent_[c.name].front());
    add_origin(i, std::move(o));
  }

  // Why a collective whose every input was clean is an origin. An MC2 kernel (an aclnn op with a "comm": it computes
  // and communicates in one kernel) may also have left the range in its own computation.
  static std::string communication_note(const Anomaly &a) {
    if (a.kind != Kind::Collective) return "the matching send's input was clean: the transfer broke";
    if (!format::hccl_call(format::op_type_of(a.kernel)))
      return "every member's input to this fused kernel (it computes and communicates in one kernel, as MC2's do) was "
             "clean and its output is not: its computation or its reduction left the range, or the transfer broke";
    return "every member's input to this collective was clean and its output is not: the reduction itself left the "
           "range, or the transfer broke";
  }

  // A kernel that made the values itself ("compute"), took them from outside the dump ("input"), or that only one
  // run has ("only in A"), with what explains it.
  std::string local_origin_kind(const Anomaly &a, std::vector<std::string> &notes) const {
    const std::string before_dump =
        "its inputs were already " + std::string(f_.question == Question::Nan ? "non-finite" : "different") +
        " and no earlier kernel of the dump made them so: they come from before the dump (an earlier step not "
        "dumped, parameters or optimizer state, input data) or from a kernel that was not captured";
    if (!a.only_in.empty()) {
      notes.push_back("run " + std::string(a.only_in == "A" ? "B" : "A") +
                      " has no kernel of this name, and it was launched where the runs part, before the first kernel "
                      "both runs have that departs, " +
                      a.parted_at + ", whose inputs already differ: the likeliest cause");
      notes.push_back(
          "if it is not, that kernel's inputs come from before the dump (an earlier step not dumped, "
          "parameters or optimizer state, input data) or from a kernel that was not captured");
      return "only in " + a.only_in;
    }
    if (!a.in_bad) return "compute";
    notes.push_back(before_dump);
    return "input";
  }

  void add_origin(size_t i, Origin &&o) {
    role_[i] = kOrigin;
    origins_.push_back(std::move(o));
    origin_digest_.push_back(i);
  }

  // A collective whose output went bad on rank i: carried by the members whose input to it was bad.
  Reach reach_collective(size_t i, const Anomaly &a, const CommEntry &c) const {
    const Members &m = comms_.at(c.name);
    Reach r;
    r.key = {c.name, static_cast<int>(a.kind), a.seq, -1, -1};
    std::vector<size_t> presumed;
    for (const auto &[cr, j] : m.by_comm_rank) {
      if (a.root >= 0 && cr != static_cast<uint64_t>(a.root)) continue;  // broadcast, scatter: the root's input
      const CommEntry *e = j == i ? nullptr : entry(j, c.name);
      if (e && e->bad_inputs.contains(a.seq)) r.carriers.push_back(j);
      // A member whose record ended before this instance, after its own first anomaly: its input is unknown here,
      // and it held bad values by then. Without an anomaly in its record, its input is simply unknown.
      if (e && a.seq >= e->seen_end) {
        if (d_[j].first)
          presumed.push_back(j);
        else
          r.unknown.push_back({j, d_[j].rank, cr});
      }
    }
    for (uint32_t cr = 0; cr < m.size; ++cr)  // members no folder speaks for
      if (!m.by_comm_rank.count(cr) && (a.root < 0 || cr == static_cast<uint64_t>(a.root)))
        r.unknown.push_back({std::nullopt, listed_rank(m, cr), cr});
    if (r.carriers.empty() && !presumed.empty()) {
      r.carriers = std::move(presumed);
      r.presumed = true;
    }
    return r;
  }

  // A receive whose output went bad on rank i: carried by the matching send.
  Reach reach_recv(size_t i, const Anomaly &a, const CommEntry &c) const {
    const Members &m = comms_.at(c.name);
    Reach r;
    auto src = m.by_comm_rank.find(a.peer);
    // The sender's global rank: its folder's, else the communicator's list (it may have no folder).
    const std::optional<uint32_t> sender = src != m.by_comm_rank.end() ? d_[src->second].rank : listed_rank(m, a.peer);
    r.key = {c.name, static_cast<int>(a.kind), a.seq, key_rank(sender, a.peer), key_rank(d_[i].rank, c.comm_rank)};
    if (src == m.by_comm_rank.end()) {
      r.unknown.push_back({std::nullopt, sender, a.peer});
      return r;
    }
    const CommEntry *e = entry(src->second, c.name);
    if (!e) return r;
    auto sends = e->bad_sends.find(c.comm_rank);
    auto end = e->sends_end.find(c.comm_rank);
    if (sends != e->bad_sends.end() && sends->second.contains(a.seq)) {
      r.carriers.push_back(src->second);
    } else if (end == e->sends_end.end() || a.seq >= end->second) {
      if (d_[src->second].first) {
        r.carriers.push_back(src->second);
        r.presumed = true;
      } else {
        r.unknown.push_back({src->second, d_[src->second].rank, a.peer});
      }
    }
    return r;
  }

  static std::string unknown_note(const Anomaly &a, const std::vector<Unknown> &unknown) {
    std::string list;
    for (size_t u = 0; u < unknown.size() && u < 8; ++u) list += (u ? ", " : "") + unknown_text(unknown[u]);
    if (unknown.size() > 8) list += ", and " + std::to_string(unknown.size() - 8) + " more";
    return std::string(a.kind == Kind::Collective ? "no member whose record holds this collective had an anomalous "
                                                    "input to it, but the input of "
                                                  : "the sender's record does not hold this transfer: the input of ") +
           list +
           " to it is unknown (no folder speaks for it, or its record ends before it): the values may have come "
           "from there";
  }

  // ---- find_feeders, settle_pending -------------------------------------------------------------------------------
  // A rank pending on members whose input is unknown is reached through them when an origin's values presumably
  // reached one of them: a rank that holds bad values (in an earlier step, or in the same step and not after the
  // pending rank's anomaly in program order, `precedes` below) fed them to a communicator the member is in, at an
  // instance the member's record does not hold (a collective past its record's end; a send to it while its record is
  // incomplete; in the instance's own communicator only a send). Presumed only from the certain origins, through what
  // they reached (settle_pending).
  bool incomplete(size_t j) const {
    return !d_[j].problems.empty() || !d_[j].being_written.empty() || d_[j].steps.size() < f_.steps.size();
  }

  // Whether rank x's anomaly comes before rank y's in program order, through a communicator both are in: x's next
  // collective on it after its anomaly is one that y had issued before its own. `at_instance`: on that communicator,
  // x's next is taken to be collective `seq` instead (x's own anomaly is that collective, which values y issued after
  // it cannot have fed). Used between origins and between a feeder and a pending rank in the same step.
  bool precedes(size_t x, size_t y, Instance at_instance = {}) const {
    for (const CommEntry &cx : d_[x].comms) {
      const CommEntry *cy = entry(y, cx.name);
      const std::optional<uint64_t> next =
          at_instance.comm && cx.name == *at_instance.comm ? std::optional<uint64_t>(at_instance.seq) : cx.next;
      if (next && cy && cy->before && *cy->before > *next) return true;
    }
    return false;
  }

  // The member's comm rank in communicator `name` (`mm`), nullopt when it is not one of its members.
  std::optional<uint32_t> member_rank(const Unknown &u, const std::string &name, const Members &mm,
                                      bool own_comm) const {
    if (own_comm) return u.comm_rank;
    if (const CommEntry *ue = u.digest ? entry(*u.digest, name) : nullptr) return ue->comm_rank;
    if (u.rank && mm.ranks) {
      auto at = std::find(mm.ranks->begin(), mm.ranks->end(), *u.rank);
      if (at != mm.ranks->end()) return static_cast<uint32_t>(at - mm.ranks->begin());
    }
    return std::nullopt;
  }

  void find_feeders(size_t i, Reach &p) const {
    const Anomaly &a = *d_[i].first;
    const std::string &own = d_[i].comms[static_cast<size_t>(a.comm)].name;
    for (const Unknown &u : p.unknown) {
      for (const auto &[name, mm] : comms_) {
        // In the instance's own communicator only sends count: a bad input to one of its collectives would have
        // reached rank i too, as its first anomaly. (Not so for a reduce, whose output reaches only its root; the
        // digest does not record which bad inputs went to a reduce, so those are not taken: uncertain.)
        const bool own_comm = name == own;
        const std::optional<uint32_t> ucr = member_rank(u, name, mm, own_comm);
        if (!ucr) continue;  // not a member
        const CommEntry *ue = u.digest ? entry(*u.digest, name) : nullptr;
        const uint64_t end = ue ? ue->seen_end : 0;
        const bool sends_unknown = !ue || (u.digest && incomplete(*u.digest));
        for (const auto &[cr, k] : mm.by_comm_rank) {
          if (k == i || (u.digest && k == *u.digest) || !d_[k].first || d_[k].first->step > a.step) continue;
          const CommEntry *ek = entry(k, name);
          bool fed = !own_comm && ek && !ek->bad_inputs.empty() && ek->bad_inputs.runs.back().second >= end;
          if (ek && !fed && sends_unknown) fed = ek->bad_sends.count(*ucr) > 0;
          // In the same step, a feeder whose anomaly a communicator in common shows to come after rank i's is not
          // taken: uncertain rather than a wrong "reached". With no communicator in common nothing orders them and it
          // is taken (presumed), as when the members' groups never meet but through the member without data.
          if (fed && d_[k].first->step == a.step &&
              precedes(i, k, a.kind == Kind::Collective ? Instance{&own, a.seq} : Instance{}))
            fed = false;
          if (fed) p.via.emplace_back(u.rank, k);
        }
      }
    }
  }

  void settle_pending() {
    std::vector<std::vector<size_t>> next(d_.size());
    for (const auto &[i, r] : reached_)
      for (size_t c : r.carriers) next[c].push_back(i);
    for (const auto &[i, p] : pending_)
      for (const auto &[u, k] : p.via) next[k].push_back(i);
    std::vector<char> seen(d_.size(), 0);
    std::vector<size_t> queue(origin_digest_.begin(), origin_digest_.end());
    for (size_t i : queue) seen[i] = 1;
    for (size_t q = 0; q < queue.size(); ++q)
      for (size_t n : next[queue[q]])
        if (!seen[n]) {
          seen[n] = 1;
          queue.push_back(n);
        }
    for (auto &[i, p] : pending_) {
      std::erase_if(p.via, [&](const auto &v) { return !seen[v.second]; });
      if (seen[i]) {
        role_[i] = kReached;
        p.presumed = true;
        reached_[i] = std::move(p);
        continue;
      }
      Origin &o = pending_origin_[i];
      o.uncertain = true;
      add_origin(i, std::move(o));
    }
  }

  // ---- assign_depths, build_hops ----------------------------------------------------------------------------------
  void settle(size_t i, std::vector<char> &visiting) {
    if (depth_[i] != UINT32_MAX || visiting[i] || !reached_.count(i)) return;
    visiting[i] = 1;
    for (size_t c : reached_[i].carriers) {
      settle(c, visiting);
      if (depth_[c] != UINT32_MAX && depth_[c] + 1 < depth_[i]) {
        depth_[i] = depth_[c] + 1;
        root_[i] = root_[c];
      }
    }
    for (const auto &[u, c] : reached_[i].via) {  // through a member without data: two hops
      settle(c, visiting);
      if (depth_[c] != UINT32_MAX && depth_[c] + 2 < depth_[i]) {
        depth_[i] = depth_[c] + 2;
        root_[i] = root_[c];
      }
    }
    visiting[i] = 0;
  }

  void assign_depths() {
    depth_.assign(d_.size(), UINT32_MAX);
    root_.assign(d_.size(), SIZE_MAX);
    for (size_t k = 0; k < origin_digest_.size(); ++k) {
      depth_[origin_digest_[k]] = 0;
      root_[origin_digest_[k]] = k;
    }
    std::vector<char> visiting(d_.size(), 0);
    for (const auto &[i, r] : reached_) settle(i, visiting);
  }

  // The first receiver's view of the instance rank i was reached through.
  Hop new_hop(size_t i, const InstanceKey &key) const {
    const Anomaly &a = *d_[i].first;
    Hop h;
    h.comm = std::get<0>(key);
    h.kind = static_cast<Kind>(std::get<1>(key));
    h.seq = std::get<2>(key);
    if (h.kind == Kind::Recv) {  // unset when the rank is not known (a negative key)
      if (std::get<3>(key) >= 0) h.src = static_cast<uint32_t>(std::get<3>(key));
      if (std::get<4>(key) >= 0) h.dst = static_cast<uint32_t>(std::get<4>(key));
    }
    h.kernel = a.kernel;
    h.step = a.step;
    h.launch_index = a.launch_index;
    h.timestamp = a.timestamp;
    h.depth = depth_[i];
    return h;
  }

  // When the instance is the first the carrier fed bad values to, its launch index is known.
  void note_sent_at(Hop &h, size_t carrier, size_t receiver) const {
    const CommEntry *e = entry(carrier, h.comm);
    if (!e) return;
    if (h.kind == Kind::Collective && !e->bad_inputs.empty() && e->bad_inputs.runs.front().first == h.seq)
      h.sent_at = std::min(h.sent_at, e->first_bad_launch);
    if (h.kind != Kind::Recv) return;
    const Anomaly &a = *d_[receiver].first;
    auto sends = e->bad_sends.find(d_[receiver].comms[static_cast<size_t>(a.comm)].comm_rank);
    auto at =
        sends == e->bad_sends.end() ? e->first_bad_send_launch.end() : e->first_bad_send_launch.find(sends->first);
    if (at != e->first_bad_send_launch.end() && sends->second.runs.front().first == h.seq)
      h.sent_at = std::min(h.sent_at, at->second);
  }

  void build_hops() {
    std::map<InstanceKey, Hop> hops;
    for (const auto &[i, r] : reached_) {
      auto [it, added] = hops.try_emplace(r.key);
      Hop &h = it->second;
      if (added) h = new_hop(i, r.key);
      h.depth = std::min(h.depth, depth_[i]);
      h.presumed = h.presumed || r.presumed;
      if (d_[i].rank) h.to.push_back(*d_[i].rank);
      // `from` holds global ranks: a sender without a number (a folder named plain "rank") is left out.
      for (const auto &[u, c] : r.via)
        if (u) h.from.push_back(*u);
      for (size_t c : r.carriers) {
        if (d_[c].rank) h.from.push_back(*d_[c].rank);
        note_sent_at(h, c, i);
      }
    }
    for (auto &[key, h] : hops) {
      std::sort(h.from.begin(), h.from.end());
      h.from.erase(std::unique(h.from.begin(), h.from.end()), h.from.end());
      std::sort(h.to.begin(), h.to.end());
      // The origin: the root of its first receiver.
      for (const auto &[i, r] : reached_)
        if (r.key == key && root_[i] != SIZE_MAX) {
          origins_[root_[i]].spread.push_back(h);
          break;
        }
    }
    for (size_t i = 0; i < d_.size(); ++i)
      if (root_[i] != SIZE_MAX && d_[i].rank) origins_[root_[i]].reached.push_back(*d_[i].rank);
    for (Origin &o : origins_) {
      // By hops from the origin, then in the order the senders issued them (their launch index, when known), then the
      // first receiver's step and launch time stamp (launch indexes of different ranks do not compare).
      std::stable_sort(o.spread.begin(), o.spread.end(), [](const Hop &a, const Hop &b) {
        return std::tie(a.depth, a.sent_at, a.step, a.timestamp) < std::tie(b.depth, b.sent_at, b.step, b.timestamp);
      });
      std::sort(o.reached.begin(), o.reached.end());
    }
  }

  // ---- order_origins ----------------------------------------------------------------------------------------------
  // One that another precedes causally (through a communicator both are in: the earlier one's next collective on it
  // is one the later one had issued before its anomaly) comes after it; then the certain before the uncertain; then
  // step, time, rank.
  void order_origins() {
    if (origins_.size() <= 512) {
      for (size_t x = 0; x < origins_.size(); ++x)
        for (size_t y = 0; y < origins_.size(); ++y)
          if (x != y && precedes(origin_digest_[x], origin_digest_[y]))
            origins_[y].preceded_by.push_back(origins_[x].rank.value_or(0));
    }
    std::stable_sort(origins_.begin(), origins_.end(), [](const Origin &a, const Origin &b) {
      return std::make_tuple(!a.preceded_by.empty(), a.uncertain, a.a.step, a.a.timestamp, a.rank) <
             std::make_tuple(!b.preceded_by.empty(), b.uncertain, b.a.step, b.a.timestamp, b.rank);
    });
    f_.origins = std::move(origins_);
    if (f_.origins.empty() || !f_.origins.front().uncertain) return;
    size_t n = 0;
    for (const Origin &o : f_.origins) n += o.uncertain;
    f_.problems.push_back(
        "the first origin is uncertain: " + rank_phrase(f_.origins.front().rank) + "'s " + f_.origins.front().a.kernel +
        " received its values through an instance some of whose members have no record of it (their "
        "folders are missing or damaged), and no certain origin comes before it; " +
        std::to_string(n) +
        " origin(s) are uncertain, ordered by step and time stamp, which do not tell which came first");
  }

  std::vector<RankDigest> d_;
  Finding f_;
  std::map<std::string, Members> comms_;
  std::vector<std::unordered_map<std::string, size_t>> entry_of_;
  std::map<std::string, std::vector<std::string>> absent_;  // communicator -> "comm rank 3 (rank 7)"
  std::vector<int> role_;
  std::vector<Origin> origins_;
  std::vector<size_t> origin_digest_;  // parallel to origins_ until they are sorted
  std::map<size_t, Reach> reached_;
  // Ranks whose first anomaly arrived through an instance that no member with a record of it carried, while some
  // members' input to it is unknown: reached through them when an origin's values presumably reached them, else
  // uncertain origins.
  std::map<size_t, Reach> pending_;
  std::map<size_t, Origin> pending_origin_;
  std::vector<uint32_t> depth_;
  std::vector<size_t> root_;
};

}  // namespace

Finding reduce(std::vector<RankDigest> digests, Question q) { return Reducer(std::move(digests), q).run(); }

}  // namespace msprobe::tools::ranks
