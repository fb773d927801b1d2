// first-nan / first-diff: the digest of one rank and its bytes (ranks.h). The format is private to this version of
// msprobe-inspect (every process of one run is the same program): a magic line, then fields in a fixed order as
// little-endian integers and length-prefixed strings.
#include <algorithm>
#include <cmath>
#include <cstring>
#include <stdexcept>

#include "tools/inspect/ranks.h"

namespace msprobe::tools::ranks {

uint8_t value_bits(const TensorInfo &t) {
  const format::StatValue &max = t.stats[0], &min = t.stats[1];
  if (max.kind != format::StatValue::Kind::Real && min.kind != format::StatValue::Kind::Real) return 0;
  const double hi = max.as_double(), lo = min.as_double();
  uint8_t bits = 0;
  if (std::isnan(hi) || std::isnan(lo)) bits |= kNaN;  // NaN makes all four statistics NaN
  if (hi == INFINITY || lo == INFINITY) bits |= kPosInf;
  if (lo == -INFINITY || hi == -INFINITY) bits |= kNegInf;
  return bits;
}

std::string values_text(uint8_t bits) {
  std::string s;
  for (auto [bit, text] : {std::pair{kNaN, "NaN"}, std::pair{kPosInf, "+Inf"}, std::pair{kNegInf, "-Inf"}})
    if (bits & bit) s += (s.empty() ? "" : ", ") + std::string(text);
  return s;
}

void SeqSet::add(uint64_t s) {
  // Usually s extends the last run (sequence numbers come in launch order).
  if (!runs.empty() && s >= runs.back().first) {
    auto &last = runs.back();
    if (s <= last.second) return;
    if (s == last.second + 1) {
      last.second = s;
      return;
    }
    if (runs.size() >= kMaxRuns) {
      last.second = UINT64_MAX;  // from here on (documented approximation)
      return;
    }
    runs.emplace_back(s, s);
    return;
  }
  auto it = std::lower_bound(runs.begin(), runs.end(), std::pair{s, s});
  if (it != runs.begin() && std::prev(it)->second >= s) return;
  it = runs.insert(it, {s, s});
  // Merge with the neighbours it touches.
  if (it != runs.begin() && std::prev(it)->second + 1 >= it->first) {
    std::prev(it)->second = std::max(std::prev(it)->second, it->second);
    it = std::prev(runs.erase(it));
  }
  while (std::next(it) != runs.end() && it->second != UINT64_MAX && it->second + 1 >= std::next(it)->first) {
    it->second = std::max(it->second, std::next(it)->second);
    runs.erase(std::next(it));
  }
}

bool SeqSet::contains(uint64_t s) const {
  auto it = std::upper_bound(runs.begin(), runs.end(), std::pair{s, UINT64_MAX});
  return it != runs.begin() && std::prev(it)->second >= s;
}

// ---- Bytes ----------------------------------------------------------------------------------------------------------
namespace {

constexpr char kMagic[] = "msprobe-inspect rank digest 2\n";

struct Writer {
  std::string out;
  void u8(uint8_t v) { out += static_cast<char>(v); }
  void u64(uint64_t v) {
    for (int i = 0; i < 8; ++i) out += static_cast<char>((v >> (8 * i)) & 0xff);
  }
  void str(const std::string &s) {
    u64(s.size());
    out += s;
  }
  void strs(const std::vector<std::string> &v) {
    u64(v.size());
    for (const auto &s : v) str(s);
  }
  void seqs(const SeqSet &s) {
    u64(s.runs.size());
    for (auto [a, b] : s.runs) {
      u64(a);
      u64(b);
    }
  }
  void counts(const std::map<uint32_t, uint64_t> &m) {
    u64(m.size());
    for (const auto &[k, v] : m) {
      u64(k);
      u64(v);
    }
  }
  template <typename T>
  void opt(const std::optional<T> &v) {
    u8(v.has_value());
    if (v) u64(*v);
  }
};

struct Reader {
  const std::string &in;
  size_t at = 0;
  void need(size_t n) {
    if (in.size() - at < n) throw std::runtime_error("rank digest cut short");
  }
  uint8_t u8() {
    need(1);
    return static_cast<uint8_t>(in[at++]);
  }
  uint64_t u64() {
    need(8);
    uint64_t v = 0;
    for (int i = 0; i < 8; ++i) v |= static_cast<uint64_t>(static_cast<unsigned char>(in[at + i])) << (8 * i);
    at += 8;
    return v;
  }
  uint32_t u32() {
    const uint64_t v = u64();
    if (v > UINT32_MAX) throw std::runtime_error("rank digest: value out of range");
    return static_cast<uint32_t>(v);
  }
  size_t count() {
    const uint64_t n = u64();
    if (n > in.size() - at) throw std::runtime_error("rank digest: bad count");
    return static_cast<size_t>(n);
  }
  std::string str() {
    const size_t n = count();
    std::string s = in.substr(at, n);
    at += n;
    return s;
  }
  std::vector<std::string> strs() {
    std::vector<std::string> v(count());
    for (auto &s : v) s = str();
    return v;
  }
  SeqSet seqs() {
    SeqSet s;
    s.runs.resize(count());
    for (auto &[a, b] : s.runs) {
      a = u64();
      b = u64();
    }
    return s;
  }
  std::map<uint32_t, uint64_t> counts() {
    std::map<uint32_t, uint64_t> m;
    for (size_t n = count(); n > 0; --n) {
      const uint32_t k = u32();
      m[k] = u64();
    }
    return m;
  }
  std::optional<uint64_t> opt64() {
    if (!u8()) return std::nullopt;
    return u64();
  }
};

}  // namespace

std::string serialize(const RankDigest &d) {
  Writer w;
  w.out = kMagic;
  w.opt(d.rank);
  w.u64(d.steps.size());
  for (uint64_t s : d.steps) w.u64(s);
  w.u64(d.kernels);
  w.u64(d.compared);
  w.u64(d.only_a);
  w.u64(d.only_b);
  w.strs(d.problems);
  w.strs(d.being_written);
  w.u64(d.comms.size());
  for (const CommEntry &c : d.comms) {
    w.str(c.name);
    w.u64(c.comm_rank);
    w.u64(c.size);
    w.u8(c.ranks.has_value());
    if (c.ranks) {
      w.u64(c.ranks->size());
      for (uint32_t r : *c.ranks) w.u64(r);
    }
    w.seqs(c.bad_inputs);
    w.u64(c.bad_sends.size());
    for (const auto &[peer, s] : c.bad_sends) {
      w.u64(peer);
      w.seqs(s);
    }
    w.opt(c.before);
    w.opt(c.next);
    w.u64(c.first_bad_launch);
    w.counts(c.first_bad_send_launch);
    w.u64(c.seen_end);
    w.counts(c.sends_end);
  }
  w.u8(d.first.has_value());
  if (d.first) {
    const Anomaly &a = *d.first;
    w.u64(a.step);
    w.str(a.folder);
    w.str(a.kernel);
    w.u64(a.launch_index);
    w.u64(a.timestamp);
    w.u8(static_cast<uint8_t>(a.kind));
    w.u8(a.in_bad);
    w.u8(a.out_bad);
    w.u8(a.values);
    w.str(a.detail);
    w.u64(static_cast<uint64_t>(static_cast<int64_t>(a.comm)));
    w.u64(a.seq);
    w.u64(a.peer);
    w.u64(static_cast<uint64_t>(a.root));
    w.strs(a.stack);
    w.str(a.verdict);
    w.str(a.verdict_reason);
    w.str(a.only_in);
    w.str(a.parted_at);
  }
  return w.out;
}

RankDigest deserialize(const std::string &bytes) {
  if (bytes.compare(0, sizeof(kMagic) - 1, kMagic) != 0) throw std::runtime_error("not a rank digest of this version");
  Reader r{bytes, sizeof(kMagic) - 1};
  RankDigest d;
  if (auto v = r.opt64()) {
    if (*v > UINT32_MAX) throw std::runtime_error("rank digest: rank out of range");
    d.rank = static_cast<uint32_t>(*v);
  }
  d.steps.resize(r.count());
  for (auto &s : d.steps) s = r.u64();
  d.kernels = r.u64();
  d.compared = r.u64();
  d.only_a = r.u64();
  d.only_b = r.u64();
  d.problems = r.strs();
  d.being_written = r.strs();
  d.comms.resize(r.count());
  for (CommEntry &c : d.comms) {
    c.name = r.str();
    c.comm_rank = r.u32();
    c.size = r.u32();
    if (r.u8()) {
      c.ranks.emplace(r.count());
      for (auto &x : *c.ranks) x = r.u32();
    }
    c.bad_inputs = r.seqs();
    for (size_t n = r.count(); n > 0; --n) {
      const uint32_t peer = r.u32();
      c.bad_sends[peer] = r.seqs();
    }
    c.before = r.opt64();
    c.next = r.opt64();
    c.first_bad_launch = r.u64();
    c.first_bad_send_launch = r.counts();
    c.seen_end = r.u64();
    c.sends_end = r.counts();
  }
  if (r.u8()) {
    Anomaly a;
    a.step = r.u64();
    a.folder = r.str();
    a.kernel = r.str();
    a.launch_index = r.u64();
    a.timestamp = r.u64();
    a.kind = static_cast<Kind>(r.u8());
    a.in_bad = r.u8() != 0;
    a.out_bad = r.u8() != 0;
    a.values = r.u8();
    a.detail = r.str();
    a.comm = static_cast<int32_t>(static_cast<int64_t>(r.u64()));
    a.seq = r.u64();
    a.peer = r.u32();
    a.root = static_cast<int64_t>(r.u64());
    a.stack = r.strs();
    a.verdict = r.str();
    a.verdict_reason = r.str();
    a.only_in = r.str();
    a.parted_at = r.str();
    if (a.comm >= static_cast<int32_t>(d.comms.size())) throw std::runtime_error("rank digest: bad communicator index");
    d.first = std::move(a);
  }
  if (r.at != bytes.size()) throw std::runtime_error("rank digest: trailing bytes");
  return d;
}

}  // namespace msprobe::tools::ranks
