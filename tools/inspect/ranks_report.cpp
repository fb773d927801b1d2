// first-nan / first-diff: the Finding as text or as one JSON document (docs/inspect.md).
#include <algorithm>

#include "format/format.h"
#include "format/stack_text.h"
#include "tools/inspect/ranks.h"
#include "tools/reader/json_reader.h"

namespace msprobe::tools::ranks {

namespace {

// A hop's side that has no global rank: a folder named plain "rank", or no folder and no list of the ranks.
constexpr const char *kUnknownRank = "a rank of unknown number";

const char *kind_text(Kind k) {
  switch (k) {
    case Kind::Compute: return "compute";
    case Kind::Collective: return "collective";
    case Kind::Send: return "send";
    case Kind::Recv: return "recv";
  }
  return "?";
}

std::string ranks_text(std::vector<uint32_t> v) {
  std::vector<uint64_t> w(v.begin(), v.end());
  std::sort(w.begin(), w.end());
  w.erase(std::unique(w.begin(), w.end()), w.end());
  if (w.empty()) return kUnknownRank;  // a hop's only sender or receiver is a folder named plain "rank"
  return (w.size() == 1 ? "rank " : "ranks ") + ranges_text(w);
}

std::string who(const std::optional<uint32_t> &r) { return rank_phrase(r); }

// A point-to-point side of a hop: its global rank, when known.
std::string side(const std::optional<uint32_t> &r) { return r ? "rank " + std::to_string(*r) : kUnknownRank; }

std::string instance_text(const Hop &h) {
  if (h.kind == Kind::Recv)
    return "comm " + h.comm + ", transfer " + std::to_string(h.seq) + " from " + side(h.src) + " to " + side(h.dst);
  return "comm " + h.comm + ", seq " + std::to_string(h.seq);
}

std::string kind_sentence(const Origin &o, Question q) {
  const bool nan = q == Question::Nan;
  if (o.kind == "compute")
    return nan ? "compute: its inputs are finite, its output is not (" + values_text(o.a.values) + ")"
               : "compute: its inputs agree with run B's, its outputs do not";
  if (!o.a.only_in.empty())
    return o.kind + ": run " + (o.a.only_in == "A" ? "B" : "A") +
           " has no such kernel; it was launched where the runs part, before the first departing kernel";
  if (o.kind == "input")
    return nan ? "input: it received non-finite values (" + values_text(o.a.values) + ") that no earlier kernel made"
               : "input: its inputs differ from run B's and no earlier kernel departed";
  if (o.uncertain)
    return std::string("communication (uncertain): ") + kind_text(o.a.kind) +
           (nan ? " with clean inputs on the members whose records hold it and a non-finite output"
                : " with agreeing inputs on the members whose records hold it and departing output");
  return std::string("communication: ") + kind_text(o.a.kind) +
         (nan ? " with clean inputs everywhere and a non-finite output" : " with agreeing inputs and departing output");
}

void origin_text(std::string &out, const Origin &o, Question q, bool primary) {
  const Anomaly &a = o.a;
  out += (primary ? "origin: " : "  ") + who(o.rank) + ", step " + std::to_string(a.step) + ": " + a.kernel +
         " (launch_index " + std::to_string(a.launch_index) + ")\n";
  const std::string pad = primary ? "  " : "    ";
  out += pad + "kind      " + kind_sentence(o, q) + "\n";
  if (!a.detail.empty()) out += pad + "tensors   " + a.detail + "\n";
  if (!a.verdict.empty())
    out += pad + "verdict   " + a.verdict + ": " + a.verdict_reason + "\n";
  else if (!a.verdict_reason.empty())
    out += pad + "verdict   not decided: " + a.verdict_reason + "\n";
  for (const std::string &n : o.notes) out += pad + "note      " + n + "\n";
  if (!o.preceded_by.empty()) out += pad + "after     the origin on " + ranks_text(o.preceded_by) + " (causally)\n";
  if (!primary) return;
  if (!a.stack.empty()) {
    out += pad + "stack:\n" + format::stack_text(a.stack, pad + "  ");
  }
  if (!o.spread.empty()) {
    out += pad + "spread (how the values travelled):\n";
    for (const Hop &h : o.spread)
      out += pad + "  step " + std::to_string(h.step) + " " + h.kernel + " (" + instance_text(h) +
             "): " + ranks_text(h.from) + " -> " + ranks_text(h.to) +
             (h.presumed ? " (presumed: no sender's record holds it)" : "") + "\n";
  }
  std::vector<uint64_t> reached(o.reached.begin(), o.reached.end());
  out += pad + "reached   " + std::to_string(reached.size()) + " rank(s)" +
         (reached.empty() ? "" : ": " + ranges_text(reached)) + "\n";
}

Json anomaly_json(const Anomaly &a, const std::optional<uint32_t> &rank) {
  Json j = Json::object();
  j["rank"] = rank ? Json(*rank) : Json(nullptr);
  j["step"] = a.step;
  j["folder"] = a.folder;
  j["kernel"] = a.kernel;
  j["launch_index"] = a.launch_index;
  j["timestamp"] = a.timestamp;
  j["op_kind"] = kind_text(a.kind);
  j["inputs_anomalous"] = a.in_bad;
  j["outputs_anomalous"] = a.out_bad;
  return j;
}

Json hop_json(const Hop &h) {
  Json j = Json::object();
  j["kernel"] = h.kernel;
  j["step"] = h.step;
  j["launch_index"] = h.launch_index;
  j["comm"] = h.comm;
  j["op_kind"] = kind_text(h.kind);
  if (h.kind == Kind::Recv) {
    j["pair_seq"] = h.seq;
    if (h.src) j["src"] = *h.src;  // omitted when not known
    if (h.dst) j["dst"] = *h.dst;
  } else {
    j["seq"] = h.seq;
  }
  j["from"] = h.from;
  j["to"] = h.to;
  j["depth"] = h.depth;
  j["presumed"] = h.presumed;
  return j;
}

Json origin_json(const Origin &o, Question q) {
  Json j = anomaly_json(o.a, o.rank);
  j["kind"] = o.kind;
  j["uncertain"] = o.uncertain;
  if (q == Question::Nan) {
    Json values = Json::array();
    for (uint8_t bit : {kNaN, kPosInf, kNegInf})
      if (o.a.values & bit) values.push_back(values_text(bit));
    j["values"] = values;
  }
  j["detail"] = o.a.detail;
  j["stack"] = o.a.stack;
  j["verdict"] = o.a.verdict.empty() ? Json(nullptr) : Json(o.a.verdict);
  j["verdict_reason"] = o.a.verdict_reason;
  j["notes"] = o.notes;
  if (!o.a.parted_at.empty()) j["parted_at"] = o.a.parted_at;  // "only in A": the first departing kernel after it
  j["preceded_by"] = o.preceded_by;
  Json spread = Json::array();
  for (const Hop &h : o.spread) spread.push_back(hop_json(h));
  j["spread"] = spread;
  j["reached"] = o.reached;
  return j;
}

}  // namespace

std::string report_text(const Finding &f) {
  const bool nan = f.question == Question::Nan;
  std::string out = nan ? "first-nan: " : "first-diff: ";
  out += std::to_string(f.ranks) + " rank(s)";
  if (!f.steps.empty()) out += ", step(s) " + ranges_text(f.steps);
  if (nan)
    out += ", " + std::to_string(f.kernels) + " kernel(s) read\n";
  else
    out += ", " + std::to_string(f.compared) + " kernel(s) paired, " + std::to_string(f.only_a) + " only in A, " +
           std::to_string(f.only_b) + " only in B\n";
  if (f.origins.empty()) {
    out += nan ? "no non-finite value in any kernel read\n" : "no kernel departs from run B beyond the tolerances\n";
  } else {
    origin_text(out, f.origins.front(), f.question, true);
    if (f.origins.size() > 1) {
      out += "other origins (" + std::to_string(f.origins.size() - 1) +
             "; no values flowed from the first to them before they began):\n";
      for (size_t i = 1; i < f.origins.size(); ++i) origin_text(out, f.origins[i], f.question, false);
    }
    out += "per rank (first anomalous kernel):\n";
    for (const Finding::PerRank &p : f.per_rank) {
      out += "  " + who(p.rank) + ": ";
      if (!p.first)
        out += "clean\n";
      else
        out += p.role + ", step " + std::to_string(p.first->step) + " " + p.first->kernel + " (launch_index " +
               std::to_string(p.first->launch_index) + ")\n";
    }
  }
  for (const std::string &m : f.missing) out += "missing: " + m + "\n";
  for (const std::string &p : f.problems) out += "problem: " + p + "\n";
  for (const std::string &p : f.being_written) out += "being written: " + p + "\n";
  return out;
}

std::string report_json(const Finding &f) {
  Json j = Json::object();
  j["command"] = f.question == Question::Nan ? "first-nan" : "first-diff";
  if (f.origins.empty()) {
    for (const char *k : {"rank", "step", "kernel", "launch_index", "kind", "verdict"}) j[k] = nullptr;
    j["stack"] = Json::array();
    j["spread"] = Json::array();
  } else {
    const Json first = origin_json(f.origins.front(), f.question);
    for (const auto &[k, v] : first.items()) j[k] = v;
  }
  Json origins = Json::array();
  for (const Origin &o : f.origins) origins.push_back(origin_json(o, f.question));
  j["origins"] = origins;
  Json per_rank = Json::array();
  for (const Finding::PerRank &p : f.per_rank) {
    Json r =
        p.first ? anomaly_json(*p.first, p.rank) : Json::object({{"rank", p.rank ? Json(*p.rank) : Json(nullptr)}});
    r["role"] = p.role;
    per_rank.push_back(r);
  }
  j["per_rank"] = per_rank;
  j["ranks"] = f.ranks;
  j["steps"] = f.steps;
  j["kernels"] = f.kernels;
  if (f.question == Question::Diff) {
    j["paired"] = f.compared;
    j["only_a"] = f.only_a;
    j["only_b"] = f.only_b;
  }
  j["missing"] = f.missing;
  j["problems"] = f.problems;
  j["being_written"] = f.being_written;
  return j.dump(2) + "\n";
}

std::string ranks_phrase(const std::vector<uint32_t> &ranks) { return ranks_text(ranks); }
std::string rank_phrase(const std::optional<uint32_t> &rank) {
  return rank ? "rank " + std::to_string(*rank)
              : "rank (folder " + format::rank_dir_name(std::nullopt) + ", no number)";
}
std::string hop_instance(const Hop &h) { return instance_text(h); }
std::string origin_kind(const Origin &o, Question q) { return kind_sentence(o, q); }

}  // namespace msprobe::tools::ranks
