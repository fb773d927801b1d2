#include "races/clocks.h"

#include <algorithm>

namespace msprobe::races {

void join(VectorClock &into, const VectorClock &from) {
  if (into.size() < from.size()) into.resize(from.size(), 0);
  for (size_t i = 0; i < from.size(); ++i) into[i] = std::max(into[i], from[i]);
}

bool ordered_before(const record::LaunchStamp &a, const record::LaunchStamp &b) {
  if (a.epoch == 0 || b.epoch == 0) return false;
  if (a.actor == b.actor) return a.epoch <= b.epoch;
  return a.actor < b.clock.size() && b.clock[a.actor] >= a.epoch;
}

uint32_t StreamClocks::actor_locked(const void *stream) {
  auto [it, fresh] = actors_.try_emplace(stream, (uint32_t)clocks_.size());
  if (fresh) clocks_.emplace_back(clocks_.size() + 1, 0);
  return it->second;
}

uint32_t StreamClocks::actor_of(const void *stream) {
  std::lock_guard<std::mutex> lk(mu_);
  return actor_locked(stream);
}

record::LaunchStamp StreamClocks::launch(const void *stream) {
  std::lock_guard<std::mutex> lk(mu_);
  const uint32_t a = actor_locked(stream);
  VectorClock &c = clocks_[a];
  join(c, clocks_[kHost]);
  if (c.size() <= a) c.resize(a + 1, 0);
  return record::LaunchStamp{a, ++c[a], c};
}

record::LaunchStamp StreamClocks::host_access() {
  std::lock_guard<std::mutex> lk(mu_);
  VectorClock &c = clocks_[kHost];
  return record::LaunchStamp{kHost, ++c[kHost], c};
}

void StreamClocks::record(const void *event, const void *stream) {
  std::lock_guard<std::mutex> lk(mu_);
  VectorClock &c = clocks_[actor_locked(stream)];
  join(c, clocks_[kHost]);
  events_[event] = c;
}

void StreamClocks::wait(const void *stream, const void *event) {
  std::lock_guard<std::mutex> lk(mu_);
  VectorClock &c = clocks_[actor_locked(stream)];
  join(c, clocks_[kHost]);
  if (auto it = events_.find(event); it != events_.end()) join(c, it->second);
}

VectorClock StreamClocks::of_stream(const void *stream) {
  std::lock_guard<std::mutex> lk(mu_);
  return clocks_[actor_locked(stream)];
}

VectorClock StreamClocks::of_event(const void *event) const {
  std::lock_guard<std::mutex> lk(mu_);
  auto it = events_.find(event);
  return it == events_.end() ? VectorClock{} : it->second;
}

VectorClock StreamClocks::of_device() const {
  std::lock_guard<std::mutex> lk(mu_);
  VectorClock all;
  for (size_t a = 1; a < clocks_.size(); ++a) join(all, clocks_[a]);
  return all;
}

void StreamClocks::host_learns(const VectorClock &clock) {
  std::lock_guard<std::mutex> lk(mu_);
  join(clocks_[kHost], clock);
}

}  // namespace msprobe::races
