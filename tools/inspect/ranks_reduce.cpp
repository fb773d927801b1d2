// first-nan / first-diff, the reduce step: every rank's digest -> the origins and how their values spread (ranks.h).
// Cost: one pass over the digests plus, for each rank whose first anomaly arrived through a communicator, one look at
// each member of that instance.
#include <algorithm>
#include <functional>
#include <map>
#include <set>
#include <tuple>
#include <unordered_map>

#include "tools/inspect/ranks.h"

namespace msprobe::tools::ranks {

namespace {

std::string rank_name(const std::optional<uint32_t> &r) { return r ? "rank " + std::to_string(*r) : "rank (none)"; }

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

}  // namespace

Finding reduce(std::vector<RankDigest> digests, Question q) {
  Finding f;
  f.question = q;
  std::stable_sort(digests.begin(), digests.end(),
                   [](const RankDigest &a, const RankDigest &b) { return a.rank < b.rank; });
  // A rank read twice (two processes saw different copies): the first is kept.
  for (size_t i = 1; i < digests.size();) {
    if (digests[i].rank == digests[i - 1].rank) {
      f.problems.push_back(rank_name(digests[i].rank) + ": read twice; the second copy is ignored");
      digests.erase(digests.begin() + static_cast<std::ptrdiff_t>(i));
    } else {
      ++i;
    }
  }
  std::set<uint64_t> steps;
  for (const RankDigest &d : digests) {
    f.kernels += d.kernels;
    f.compared += d.compared;
    f.only_a += d.only_a;
    f.only_b += d.only_b;
    steps.insert(d.steps.begin(), d.steps.end());
    f.problems.insert(f.problems.end(), d.problems.begin(), d.problems.end());
  }
  f.ranks = digests.size();
  f.steps.assign(steps.begin(), steps.end());

  // Communicators: who is in each, and each digest's entry for it.
  std::map<std::string, Members> comms;
  std::vector<std::unordered_map<std::string, size_t>> entry_of(digests.size());
  for (size_t i = 0; i < digests.size(); ++i) {
    for (size_t e = 0; e < digests[i].comms.size(); ++e) {
      const CommEntry &c = digests[i].comms[e];
      entry_of[i].emplace(c.name, e);
      Members &m = comms[c.name];
      m.size = std::max(m.size, c.size);
      if (c.ranks && !m.ranks) m.ranks = c.ranks;
      auto [it, added] = m.by_comm_rank.emplace(c.comm_rank, i);
      if (!added && it->second != i)
        f.problems.push_back("communicator " + c.name + ": comm rank " + std::to_string(c.comm_rank) +
                             " is claimed by " + rank_name(digests[it->second].rank) + " and by " +
                             rank_name(digests[i].rank));
    }
  }
  // Members without data: a communicator's comm rank that no folder read speaks for.
  std::map<std::string, std::vector<std::string>> absent;  // communicator -> "comm rank 3 (rank 7)"
  for (const auto &[name, m] : comms) {
    for (uint32_t r = 0; r < m.size; ++r) {
      if (m.by_comm_rank.count(r)) continue;
      std::string who = "comm rank " + std::to_string(r);
      if (const auto g = listed_rank(m, r)) who += " (rank " + std::to_string(*g) + ")";
      absent[name].push_back(who);
    }
    if (absent.count(name))
      f.missing.push_back("communicator " + name + ": no data for " + std::to_string(absent[name].size()) + " of " +
                          std::to_string(m.size) + " members: " + absent[name].front() +
                          (absent[name].size() > 1 ? ", ..." : ""));
  }
  auto entry = [&](size_t i, const std::string &name) -> const CommEntry * {
    auto it = entry_of[i].find(name);
    return it == entry_of[i].end() ? nullptr : &digests[i].comms[it->second];
  };

  // Each rank's first anomaly: an origin, or reached through an instance.
  std::vector<int> role(digests.size(), 0);  // 0 clean, 1 origin, 2 reached
  std::vector<Origin> origins;
  std::vector<size_t> origin_digest;
  std::map<size_t, Reach> reached;
  // Ranks whose first anomaly arrived through an instance that no member with a record of it carried, while some
  // members' input to it is unknown: reached through them when an origin's values presumably reached them (below),
  // else uncertain origins.
  std::map<size_t, Reach> pending;
  std::map<size_t, Origin> pending_origin;
  for (size_t i = 0; i < digests.size(); ++i) {
    if (!digests[i].first) continue;
    const Anomaly &a = *digests[i].first;
    Origin o;
    o.rank = digests[i].rank;
    o.a = a;
    if (a.kind == Kind::Compute || a.in_bad) {
      o.kind = a.in_bad ? "input" : "compute";
      if (a.in_bad)
        o.notes.push_back(
            "its inputs were already " + std::string(q == Question::Nan ? "non-finite" : "different") +
            " and no earlier kernel of the dump made them so: they come from before the dump (an earlier step not "
            "dumped, parameters or optimizer state, input data) or from a kernel that was not captured");
    } else {
      const CommEntry &c = digests[i].comms[static_cast<size_t>(a.comm)];
      const Members &m = comms[c.name];
      Reach r;
      if (a.kind == Kind::Collective) {
        r.key = {c.name, static_cast<int>(a.kind), a.seq, -1, -1};
        std::vector<size_t> presumed;
        for (const auto &[cr, j] : m.by_comm_rank) {
          if (a.root >= 0 && cr != static_cast<uint64_t>(a.root)) continue;  // a broadcast sends the root's input
          const CommEntry *e = j == i ? nullptr : entry(j, c.name);
          if (e && e->bad_inputs.contains(a.seq)) r.carriers.push_back(j);
          // A member whose record ended before this instance, after its own first anomaly: its input is unknown here,
          // and it held bad values by then. Without an anomaly in its record, its input is simply unknown.
          if (e && a.seq >= e->seen_end) {
            if (digests[j].first)
              presumed.push_back(j);
            else
              r.unknown.push_back({j, digests[j].rank, cr});
          }
        }
        for (uint32_t cr = 0; cr < m.size; ++cr)  // members no folder speaks for
          if (!m.by_comm_rank.count(cr) && (a.root < 0 || cr == static_cast<uint64_t>(a.root)))
            r.unknown.push_back({std::nullopt, listed_rank(m, cr), cr});
        if (r.carriers.empty() && !presumed.empty()) {
          r.carriers = std::move(presumed);
          r.presumed = true;
        }
      } else {  // a receive: the matching send
        auto src = m.by_comm_rank.find(a.peer);
        // The sender's global rank: its folder's, else the communicator's list (it may have no folder).
        const std::optional<uint32_t> sender =
            src != m.by_comm_rank.end() ? digests[src->second].rank : listed_rank(m, a.peer);
        r.key = {c.name, static_cast<int>(a.kind), a.seq, key_rank(sender, a.peer),
                 key_rank(digests[i].rank, c.comm_rank)};
        if (src != m.by_comm_rank.end()) {
          if (const CommEntry *e = entry(src->second, c.name)) {
            auto sends = e->bad_sends.find(c.comm_rank);
            auto end = e->sends_end.find(c.comm_rank);
            if (sends != e->bad_sends.end() && sends->second.contains(a.seq)) {
              r.carriers.push_back(src->second);
            } else if (end == e->sends_end.end() || a.seq >= end->second) {
              if (digests[src->second].first) {
                r.carriers.push_back(src->second);
                r.presumed = true;
              } else {
                r.unknown.push_back({src->second, digests[src->second].rank, a.peer});
              }
            }
          }
        } else {
          r.unknown.push_back({std::nullopt, sender, a.peer});
        }
      }
      if (!r.carriers.empty()) {
        role[i] = 2;
        r.unknown.clear();
        reached[i] = std::move(r);
        continue;
      }
      o.kind = "communication";
      if (!r.unknown.empty()) {
        std::string list;
        for (size_t u = 0; u < r.unknown.size() && u < 8; ++u) list += (u ? ", " : "") + unknown_text(r.unknown[u]);
        if (r.unknown.size() > 8) list += ", and " + std::to_string(r.unknown.size() - 8) + " more";
        o.notes.push_back(
            std::string(a.kind == Kind::Collective ? "no member whose record holds this collective had an anomalous "
                                                     "input to it, but the input of "
                                                   : "the sender's record does not hold this transfer: the input of ") +
            list +
            " to it is unknown (no folder speaks for it, or its record ends before it): the values may have come "
            "from there");
        pending_origin[i] = std::move(o);
        pending[i] = std::move(r);
        continue;
      }
      o.notes.push_back(a.kind == Kind::Collective
                            ? "every member's input to this collective was clean and its output is not: the "
                              "reduction itself left the range, or the transfer broke"
                            : "the matching send's input was clean: the transfer broke");
      if (absent.count(c.name))
        o.notes.push_back("members without data (their input is unknown, the values may come from them): " +
                          std::to_string(absent[c.name].size()) + ", e.g. " + absent[c.name].front());
    }
    role[i] = 1;
    origins.push_back(std::move(o));
    origin_digest.push_back(i);
  }

  // A rank pending on members whose input is unknown is reached through them when an origin's values presumably reached
  // one of them: a rank that holds bad values (in an earlier step, or in the same step and not after the pending rank's
  // anomaly in program order, `precedes` below) fed them to a communicator
  // the member is in, at an instance the member's record does not hold (a collective past its record's end; a send
  // to it while its record is incomplete; in the instance's own communicator only a send). Presumed only from the
  // certain origins, through what they reached.
  const auto incomplete = [&](size_t j) {
    return !digests[j].problems.empty() || digests[j].steps.size() < f.steps.size();
  };
  // Whether rank x's anomaly comes before rank y's in program order, through a communicator both are in: x's next
  // collective on it after its anomaly is one that y had issued before its own. `at_instance`: on that communicator,
  // x's next is taken to be collective `seq` instead (x's own anomaly is that collective, which values y issued after
  // it cannot have fed). Used between origins (below) and between a feeder and a pending rank in the same step.
  struct Instance {
    const std::string *comm = nullptr;
    uint64_t seq = 0;
  };
  const auto precedes = [&](size_t x, size_t y, Instance at_instance = {}) {
    for (const CommEntry &cx : digests[x].comms) {
      const CommEntry *cy = entry(y, cx.name);
      const std::optional<uint64_t> next =
          at_instance.comm && cx.name == *at_instance.comm ? std::optional<uint64_t>(at_instance.seq) : cx.next;
      if (next && cy && cy->before && *cy->before > *next) return true;
    }
    return false;
  };
  for (auto &[i, p] : pending) {
    const Anomaly &a = *digests[i].first;
    const std::string &own = digests[i].comms[static_cast<size_t>(a.comm)].name;
    for (const Unknown &u : p.unknown) {
      for (const auto &[name, mm] : comms) {
        // In the instance's own communicator only sends count: a bad input to one of its collectives would have
        // reached rank i too, as its first anomaly. (Not so for a reduce or a gather, whose output reaches only the
        // root; the digest does not record which bad inputs were rooted, so those are not taken: uncertain.)
        const bool own_comm = name == own;
        const CommEntry *ue = u.digest ? entry(*u.digest, name) : nullptr;
        std::optional<uint32_t> ucr;  // the member's comm rank in `name`
        if (own_comm) {
          ucr = u.comm_rank;
        } else if (ue) {
          ucr = ue->comm_rank;
        } else if (u.rank && mm.ranks) {
          auto at = std::find(mm.ranks->begin(), mm.ranks->end(), *u.rank);
          if (at != mm.ranks->end()) ucr = static_cast<uint32_t>(at - mm.ranks->begin());
        }
        if (!ucr) continue;  // not a member
        const uint64_t end = ue ? ue->seen_end : 0;
        const bool sends_unknown = !ue || (u.digest && incomplete(*u.digest));
        for (const auto &[cr, k] : mm.by_comm_rank) {
          if (k == i || (u.digest && k == *u.digest) || !digests[k].first || digests[k].first->step > a.step) continue;
          const CommEntry *ek = entry(k, name);
          bool fed = !own_comm && ek && !ek->bad_inputs.empty() && ek->bad_inputs.runs.back().second >= end;
          if (ek && !fed && sends_unknown) fed = ek->bad_sends.count(*ucr) > 0;
          // In the same step, a feeder whose anomaly a communicator in common shows to come after rank i's is not
          // taken: uncertain rather than a wrong "reached". With no communicator in common nothing orders them and it
          // is taken (presumed), as when the members' groups never meet but through the member without data.
          if (fed && digests[k].first->step == a.step &&
              precedes(i, k, a.kind == Kind::Collective ? Instance{&own, a.seq} : Instance{}))
            fed = false;
          if (fed) p.via.emplace_back(u.rank, k);
        }
      }
    }
  }
  {
    std::vector<std::vector<size_t>> next(digests.size());
    for (const auto &[i, r] : reached)
      for (size_t c : r.carriers) next[c].push_back(i);
    for (const auto &[i, p] : pending)
      for (const auto &[u, k] : p.via) next[k].push_back(i);
    std::vector<char> seen(digests.size(), 0);
    std::vector<size_t> queue(origin_digest.begin(), origin_digest.end());
    for (size_t i : queue) seen[i] = 1;
    for (size_t q = 0; q < queue.size(); ++q)
      for (size_t n : next[queue[q]])
        if (!seen[n]) {
          seen[n] = 1;
          queue.push_back(n);
        }
    for (auto &[i, p] : pending) {
      std::erase_if(p.via, [&](const auto &v) { return !seen[v.second]; });
      if (seen[i]) {
        role[i] = 2;
        p.presumed = true;
        reached[i] = std::move(p);
        continue;
      }
      Origin &o = pending_origin[i];
      o.uncertain = true;
      role[i] = 1;
      origins.push_back(std::move(o));
      origin_digest.push_back(i);
    }
  }

  // Depth and root origin of every reached rank (through the carrier nearest to an origin).
  std::vector<uint32_t> depth(digests.size(), UINT32_MAX);
  std::vector<size_t> root(digests.size(), SIZE_MAX);
  for (size_t k = 0; k < origin_digest.size(); ++k) {
    depth[origin_digest[k]] = 0;
    root[origin_digest[k]] = k;
  }
  std::vector<char> visiting(digests.size(), 0);
  std::function<void(size_t)> settle = [&](size_t i) {
    if (depth[i] != UINT32_MAX || visiting[i] || !reached.count(i)) return;
    visiting[i] = 1;
    for (size_t c : reached[i].carriers) {
      settle(c);
      if (depth[c] != UINT32_MAX && depth[c] + 1 < depth[i]) {
        depth[i] = depth[c] + 1;
        root[i] = root[c];
      }
    }
    for (const auto &[u, c] : reached[i].via) {  // through a member without data: two hops
      settle(c);
      if (depth[c] != UINT32_MAX && depth[c] + 2 < depth[i]) {
        depth[i] = depth[c] + 2;
        root[i] = root[c];
      }
    }
    visiting[i] = 0;
  };
  for (const auto &[i, r] : reached) settle(i);

  // The instances, grouped, under the origin their first receiver descends from.
  std::map<InstanceKey, Hop> hops;
  for (const auto &[i, r] : reached) {
    Hop &h = hops[r.key];
    const Anomaly &a = *digests[i].first;
    if (h.to.empty()) {
      h.comm = std::get<0>(r.key);
      h.kind = static_cast<Kind>(std::get<1>(r.key));
      h.seq = std::get<2>(r.key);
      if (h.kind == Kind::Recv) {  // unset when the rank is not known (a negative key)
        if (std::get<3>(r.key) >= 0) h.src = static_cast<uint32_t>(std::get<3>(r.key));
        if (std::get<4>(r.key) >= 0) h.dst = static_cast<uint32_t>(std::get<4>(r.key));
      }
      h.kernel = a.kernel;
      h.step = a.step;
      h.launch_index = a.launch_index;
      h.timestamp = a.timestamp;
      h.depth = depth[i];
    }
    h.depth = std::min(h.depth, depth[i]);
    h.presumed = h.presumed || r.presumed;
    if (digests[i].rank) h.to.push_back(*digests[i].rank);
    // `from` holds global ranks: a sender without a number (a folder named plain "rank") is left out.
    for (const auto &[u, c] : r.via)
      if (u) h.from.push_back(*u);
    for (size_t c : r.carriers) {
      if (digests[c].rank) h.from.push_back(*digests[c].rank);
      // When the instance is the first this carrier fed bad values to, its launch index is known.
      if (const CommEntry *e = entry(c, h.comm)) {
        if (h.kind == Kind::Collective && !e->bad_inputs.empty() && e->bad_inputs.runs.front().first == h.seq)
          h.sent_at = std::min(h.sent_at, e->first_bad_launch);
        if (h.kind == Kind::Recv) {
          auto sends = e->bad_sends.find(digests[i].comms[static_cast<size_t>(a.comm)].comm_rank);
          auto at = sends == e->bad_sends.end() ? e->first_bad_send_launch.end()
                                                : e->first_bad_send_launch.find(sends->first);
          if (at != e->first_bad_send_launch.end() && sends->second.runs.front().first == h.seq)
            h.sent_at = std::min(h.sent_at, at->second);
        }
      }
    }
  }
  for (auto &[key, h] : hops) {
    std::sort(h.from.begin(), h.from.end());
    h.from.erase(std::unique(h.from.begin(), h.from.end()), h.from.end());
    std::sort(h.to.begin(), h.to.end());
    // The origin: the root of its first receiver.
    size_t owner = SIZE_MAX;
    for (const auto &[i, r] : reached)
      if (r.key == key && root[i] != SIZE_MAX) {
        owner = root[i];
        break;
      }
    if (owner != SIZE_MAX) origins[owner].spread.push_back(h);
  }
  for (size_t i = 0; i < digests.size(); ++i)
    if (root[i] != SIZE_MAX && digests[i].rank) origins[root[i]].reached.push_back(*digests[i].rank);
  for (Origin &o : origins) {
    // By hops from the origin, then in the order the senders issued them (their launch index, when known), then the
    // first receiver's step and launch time stamp (launch indexes of different ranks do not compare).
    std::stable_sort(o.spread.begin(), o.spread.end(), [](const Hop &a, const Hop &b) {
      return std::tie(a.depth, a.sent_at, a.step, a.timestamp) < std::tie(b.depth, b.sent_at, b.step, b.timestamp);
    });
    std::sort(o.reached.begin(), o.reached.end());
  }

  // Order of the origins: one that another precedes causally (through a communicator both are in: the earlier one's
  // next collective on it is one the later one had issued before its anomaly) comes after it; then the certain before
  // the uncertain; then step, time, rank.
  if (origins.size() <= 512) {
    for (size_t x = 0; x < origins.size(); ++x)
      for (size_t y = 0; y < origins.size(); ++y)
        if (x != y && precedes(origin_digest[x], origin_digest[y]))
          origins[y].preceded_by.push_back(origins[x].rank.value_or(0));
  }
  std::stable_sort(origins.begin(), origins.end(), [](const Origin &a, const Origin &b) {
    return std::make_tuple(!a.preceded_by.empty(), a.uncertain, a.a.step, a.a.timestamp, a.rank) <
           std::make_tuple(!b.preceded_by.empty(), b.uncertain, b.a.step, b.a.timestamp, b.rank);
  });
  f.origins = std::move(origins);
  if (!f.origins.empty() && f.origins.front().uncertain) {
    size_t n = 0;
    for (const Origin &o : f.origins) n += o.uncertain;
    f.problems.push_back(
        "the first origin is uncertain: " + rank_name(f.origins.front().rank) + "'s " + f.origins.front().a.kernel +
        " received its values through an instance some of whose members have no record of it (their "
        "folders are missing or damaged), and no certain origin comes before it; " +
        std::to_string(n) +
        " origin(s) are uncertain, ordered by step and time stamp, which do not tell which came first");
  }

  for (size_t i = 0; i < digests.size(); ++i) {
    Finding::PerRank p;
    p.rank = digests[i].rank;
    p.first = digests[i].first;
    p.role = role[i] == 1 ? "origin" : role[i] == 2 ? "reached" : "clean";
    f.per_rank.push_back(std::move(p));
  }
  return f;
}

}  // namespace msprobe::tools::ranks
