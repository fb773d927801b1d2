#include "collector/race_journal.h"

#include <cinttypes>
#include <cstdio>

#include "format/dump_json.h"
#include "format/format.h"
#include "format/io.h"

namespace msprobe::collector {
namespace {

using record::AccessKind;

using format::kRacesJsonPrefix;
using format::kRacesJsonSuffix;

const char *kind_word(AccessKind k) {
  switch (k) {
    case AccessKind::Read: return "read";
    case AccessKind::Write: return "write";
    case AccessKind::ReadWrite: return "read-write";
    case AccessKind::Unknown: break;
  }
  return "unknown";
}

void append_hex(std::string &out, uint64_t v) {
  char buf[24];
  std::snprintf(buf, sizeof buf, "\"0x%" PRIx64 "\"", v);
  out += buf;
}

void append_range(std::string &out, uint64_t begin, uint64_t end) {
  out += '[';
  append_hex(out, begin);
  out += ", ";
  append_hex(out, end);
  out += ']';
}

std::shared_ptr<const races::Launch> launch_of(const record::KernelCapture &k) {
  auto l = std::make_shared<races::Launch>();
  l->stamp = k.race->stamp;
  l->accesses = races::accesses_of(k.race->accesses);
  l->origin.name = k.name;
  l->origin.step = k.step;
  l->origin.rank = k.rank;
  if (k.race->stamp.actor != 0) l->origin.stream_id = k.stream_id;
  l->origin.stack_id = k.stack_id;
  return l;
}

}  // namespace

std::string RaceLog::side_json(const races::Launch &l, uint32_t access) {
  const races::Access &a = l.accesses[access];
  std::string s = "{\"kernel\": ";
  format::append_json_string(s, l.origin.name);
  s += ", \"step\": ";
  format::append_json_integer(s, l.origin.step);
  s += ", \"stream_id\": ";
  if (l.origin.stream_id)
    format::append_json_integer(s, *l.origin.stream_id);
  else
    s += "\"host\"";
  s += ", \"access\": \"";
  s += kind_word(a.kind);
  s += "\", \"tensors\": [";
  for (size_t i = 0; i < a.tensors.size(); ++i) {
    if (i) s += ", ";
    format::append_json_string(s, a.tensors[i]);
  }
  s += "], \"range\": ";
  append_range(s, a.begin, a.end);
  s += ", \"stack\": [";
  std::vector<std::string> frames;
  if (stacks_ && l.origin.stack_id != 0) {
    try {
      if (const uint64_t g = stacks_->group(l.origin.stack_id)) frames = stacks_->frames(g);
    } catch (const std::exception &) {
      frames = {"The call stack retrieval failed."};
    }
  }
  for (size_t i = 0; i < frames.size(); ++i) {
    if (i) s += ", ";
    format::append_json_string(s, frames[i]);
  }
  s += "]}";
  return s;
}

void RaceLog::add(const races::Race &r, File &f) {
  const races::Access &ea = r.earlier->accesses[r.earlier_access], &la = r.later->accesses[r.later_access];
  const char *kind = races::race_kind(ea.kind, la.kind);
  std::string key = r.earlier->origin.name + '\n' + r.later->origin.name;
  for (const auto &t : ea.tensors) key += '\n' + t;
  key += '\n';
  for (const auto &t : la.tensors) key += '\n' + t;
  auto &[occurrences, distinct] = kinds_[kind];
  ++occurrences;
  if (auto it = f.by_key.find(key); it != f.by_key.end()) {
    ++f.races[it->second].count;
    return;
  }
  ++distinct;
  Distinct d;
  d.head = "\"race." + std::to_string(f.races.size()) + "\": {\"kind\": \"" + kind + "\", \"bytes\": ";
  append_range(d.head, r.begin, r.end);
  d.head += ", \"first\": " + side_json(*r.earlier, r.earlier_access);
  d.head += ", \"second\": " + side_json(*r.later, r.later_access) + ", \"count\": ";
  d.tail = "}";
  d.count = 1;
  f.by_key.emplace(std::move(key), f.races.size());
  f.journal.append(d.head + "1" + d.tail);
  f.races.push_back(std::move(d));
}

void RaceLog::check(const record::KernelCapture &k, const std::filesystem::path &dir) {
  if (closed_ || !k.race) return;
  auto [it, fresh] = files_.try_emplace(dir);
  File &f = it->second;
  if (fresh) f.journal.begin(dir / format::kRacesJson, kRacesJsonPrefix, kRacesJsonSuffix);
  for (const races::Race &r : detector_.check(launch_of(k))) add(r, f);
}

void RaceLog::close() {
  if (std::exchange(closed_, true)) return;
  for (auto &[dir, f] : files_) {
    f.journal.finish();
    bool repeated = false;
    for (const Distinct &d : f.races) repeated |= d.count > 1;
    if (!repeated) continue;  // the journal says it all already
    std::string text(kRacesJsonPrefix);
    text += '\n';
    for (size_t i = 0; i < f.races.size(); ++i) {
      if (i) text += ",\n";
      text += f.races[i].head + std::to_string(f.races[i].count) + f.races[i].tail;
    }
    text += kRacesJsonSuffix;
    format::write_file_atomic(dir / format::kRacesJson, text);
  }
  for (const auto &[kind, n] : kinds_)
    std::fprintf(stderr,
                 "msprobe-shim: race check: %" PRIu64 " %s race(s) between streams (%" PRIu64
                 " distinct), listed in races.json\n",
                 n.first, kind.c_str(), n.second);
}

}  // namespace msprobe::collector
