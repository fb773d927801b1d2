#include "races/detector.h"

#include <algorithm>
#include <iterator>

#include "races/clocks.h"

namespace msprobe::races {

using record::AccessKind;
using record::AccessRole;
using record::DeviceAccess;

namespace {

std::string label(const DeviceAccess &a) {
  switch (a.role) {
    case AccessRole::Source: return "src";
    case AccessRole::Destination: return "dst";
    case AccessRole::Input:
    case AccessRole::Output: break;
  }
  std::string s = a.role == AccessRole::Input ? "input." : "output.";
  s += std::to_string(a.slot);
  if (a.item >= 0) s += "." + std::to_string(a.item);
  return s;
}

AccessKind combined(AccessKind a, AccessKind b) {
  if (a == AccessKind::Unknown || b == AccessKind::Unknown) return AccessKind::Unknown;
  return static_cast<AccessKind>(static_cast<uint8_t>(a) | static_cast<uint8_t>(b));
}

bool ordered(const Launch &a, const Launch &b) {
  return ordered_before(a.stamp, b.stamp) || ordered_before(b.stamp, a.stamp);
}

}  // namespace

bool may_write(AccessKind k) { return k != AccessKind::Read; }

const char *race_kind(AccessKind a, AccessKind b) {
  if (a == AccessKind::Unknown || b == AccessKind::Unknown) return "unknown";
  return may_write(a) && may_write(b) ? "write-write" : "read-write";
}

std::vector<Access> accesses_of(const std::vector<DeviceAccess> &raw) {
  std::vector<Access> out;
  for (const DeviceAccess &d : raw) {
    if (d.end <= d.begin) continue;
    auto same = std::find_if(out.begin(), out.end(), [&](const Access &a) { return a.begin == d.begin && a.end == d.end; });
    if (same == out.end()) {
      out.push_back(Access{d.begin, d.end, d.kind, {label(d)}});
    } else {
      same->kind = combined(same->kind, d.kind);
      same->tensors.push_back(label(d));
    }
  }
  return out;
}

size_t RaceDetector::entries() const {
  size_t n = 0;
  for (const auto &[begin, seg] : segments_) n += seg.entries.size();
  return n;
}

void RaceDetector::split_at(uint64_t at) {
  auto it = segments_.upper_bound(at);
  if (it == segments_.begin()) return;
  --it;
  if (it->first == at || it->second.end <= at) return;
  Segment tail{it->second.end, it->second.entries};
  it->second.end = at;
  segments_.emplace_hint(std::next(it), at, std::move(tail));
}

void RaceDetector::cover(uint64_t begin, uint64_t end) {
  // Another access of the launch may have coalesced segments across these bounds since the look.
  split_at(begin);
  split_at(end);
  uint64_t pos = begin;
  auto it = segments_.lower_bound(begin);
  while (pos < end) {
    if (it == segments_.end() || it->first > pos) {
      const uint64_t gap_end = it == segments_.end() ? end : std::min(end, it->first);
      it = std::next(segments_.emplace_hint(it, pos, Segment{gap_end, {}}));
      pos = gap_end;
    } else {
      pos = it->second.end;
      ++it;
    }
  }
}

void RaceDetector::coalesce(uint64_t begin, uint64_t end) {
  auto it = segments_.lower_bound(begin);
  if (it != segments_.begin()) --it;
  while (it != segments_.end() && it->first <= end) {
    auto next = std::next(it);
    if (next == segments_.end()) break;
    if (it->second.end == next->first && it->second.entries == next->second.entries) {
      it->second.end = next->second.end;
      segments_.erase(next);
    } else {
      it = next;
    }
  }
}

void RaceDetector::look(const Segment &seg, uint64_t begin, const std::shared_ptr<const Launch> &launch,
                        uint32_t index, std::vector<Race> &found) const {
  const AccessKind mine = launch->accesses[index].kind;
  for (const Entry &x : seg.entries) {
    if (x.launch == launch) continue;
    const AccessKind theirs = x.launch->accesses[x.access].kind;
    if ((!may_write(mine) && !may_write(theirs)) || ordered(*x.launch, *launch)) continue;
    auto same = std::find_if(found.begin(), found.end(), [&](const Race &r) {
      return r.earlier == x.launch && r.earlier_access == x.access && r.later_access == index;
    });
    if (same == found.end()) {
      found.push_back(Race{x.launch, launch, x.access, index, begin, seg.end});
    } else {
      same->begin = std::min(same->begin, begin);
      same->end = std::max(same->end, seg.end);
    }
  }
}

void RaceDetector::keep(Segment &seg, const std::shared_ptr<const Launch> &launch, uint32_t index) {
  const bool writes = may_write(launch->accesses[index].kind);
  std::erase_if(seg.entries, [&](const Entry &x) {
    return x.launch != launch && ordered_before(x.launch->stamp, launch->stamp) &&
           (writes || x.launch->accesses[x.access].kind == AccessKind::Read);
  });
  seg.entries.push_back(Entry{launch, index});
}

std::vector<Race> RaceDetector::check(const std::shared_ptr<const Launch> &launch) {
  std::vector<Race> found;
  const std::vector<Access> &accesses = launch->accesses;
  for (uint32_t i = 0; i < accesses.size(); ++i) {
    const Access &a = accesses[i];
    split_at(a.begin);
    split_at(a.end);
    for (auto it = segments_.lower_bound(a.begin); it != segments_.end() && it->first < a.end; ++it)
      look(it->second, it->first, launch, i, found);
  }
  // Kept only once every access looked: an in-place launch's read must not hide the bytes from its own write's look.
  for (uint32_t i = 0; i < accesses.size(); ++i) {
    const Access &a = accesses[i];
    cover(a.begin, a.end);
    for (auto it = segments_.lower_bound(a.begin); it != segments_.end() && it->first < a.end; ++it)
      keep(it->second, launch, i);
    coalesce(a.begin, a.end);
  }
  return found;
}

}  // namespace msprobe::races
