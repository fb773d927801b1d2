// IndexSet, the step and rank numbers ("all", or "0,2,4-6"), and the parsing of their items: parse_index_set for
// MSPROBE_STEP / MSPROBE_RANK, parse_index_item for one item of config.json's "step" and "rank" lists too.
#include <algorithm>

#include "shim/base/text.h"
#include "shim/config/values.h"

namespace msprobe::shim::config_internal {

namespace {

std::string shown_item(std::string_view item) { return quote_value(item, 40); }

}  // namespace

bool parse_index_item(std::string_view item, std::vector<std::pair<int64_t, int64_t>> *out, std::string *why) {
  const auto number = [&](std::string_view text, int64_t *v) {
    const NumberResult r = parse_int64(trim(text), v);
    if (r == NumberResult::Ok && *v >= 0 && *v <= IndexSet::kMax) return true;
    if (r == NumberResult::NotNumber) {
      *why = "item " + shown_item(item) + " is not a number or a range a-b of numbers";
    } else {
      *why = "item " + shown_item(item) + " is out of range [0, 1000000]";
    }
    return false;
  };
  // The range hyphen is the first '-' after a digit (a leading '-' is a minus sign, which is out of range).
  size_t dash = std::string_view::npos;
  for (size_t i = 1; i < item.size(); ++i) {
    if (item[i] == '-' && !trim(item.substr(0, i)).empty()) {
      dash = i;
      break;
    }
  }
  int64_t lo, hi;
  if (dash == std::string_view::npos) {
    if (!number(item, &lo)) return false;
    out->emplace_back(lo, lo);
    return true;
  }
  if (!number(item.substr(0, dash), &lo) || !number(item.substr(dash + 1), &hi)) return false;
  if (lo > hi) {
    *why = "item " + shown_item(item) + ": the left boundary " + std::to_string(lo) +
           " is greater than the right boundary " + std::to_string(hi);
    return false;
  }
  out->emplace_back(lo, hi);
  return true;
}

IndexSet make_index_set(std::vector<std::pair<int64_t, int64_t>> ranges) {
  IndexSet set = IndexSet::none();
  std::sort(ranges.begin(), ranges.end());
  for (const auto &[lo, hi] : ranges) set.add(lo, hi);  // sorted: each add appends or extends the last range
  return set;
}

}  // namespace msprobe::shim::config_internal

namespace msprobe::shim {

using namespace config_internal;

bool IndexSet::in_ranges(int64_t i) const noexcept {
  auto it = std::upper_bound(ranges_.begin(), ranges_.end(), i,
                             [](int64_t v, const std::pair<int64_t, int64_t> &r) { return v < r.first; });
  if (it == ranges_.begin()) return false;
  --it;
  return i <= it->second;
}

void IndexSet::add(int64_t lo, int64_t hi) {
  if (lo > hi) std::swap(lo, hi);
  if (all_) {
    all_ = false;
    ranges_.clear();
  }
  // Insert, then merge the neighbours that now overlap or touch.
  // a touches b when a.second + 1 >= b.first, written so that it cannot overflow at the int64 limits.
  const auto touches = [](int64_t a_second, int64_t b_first) { return a_second >= b_first || a_second == b_first - 1; };
  auto it = std::lower_bound(ranges_.begin(), ranges_.end(), std::make_pair(lo, hi));
  it = ranges_.insert(it, {lo, hi});
  if (it != ranges_.begin() && touches(std::prev(it)->second, lo)) {
    --it;
    it->second = std::max(it->second, hi);
    ranges_.erase(std::next(it));
  }
  while (std::next(it) != ranges_.end() && touches(it->second, std::next(it)->first)) {
    it->second = std::max(it->second, std::next(it)->second);
    ranges_.erase(std::next(it));
  }
}

std::string IndexSet::to_string() const {
  if (all_) return "all";
  std::string out;
  for (const auto &[lo, hi] : ranges_) {
    if (!out.empty()) out += ',';
    out += std::to_string(lo);
    if (hi != lo) out += '-' + std::to_string(hi);
  }
  return out.empty() ? "none" : out;
}

std::optional<IndexSet> parse_index_set(std::string_view text, std::string *why) {
  std::string scratch;
  std::string &err = why ? *why : scratch;
  const std::string_view t = trim(text);
  if (iequals(t, "all")) return IndexSet{};
  if (t.empty()) {
    err = "it is empty";
    return std::nullopt;
  }
  std::vector<std::pair<int64_t, int64_t>> ranges;
  size_t start = 0, index = 0;
  while (true) {
    const size_t comma = t.find(',', start);
    const std::string_view item = trim(t.substr(start, comma == std::string_view::npos ? t.npos : comma - start));
    ++index;
    if (item.empty()) {
      err = "item " + std::to_string(index) + " is empty";
      return std::nullopt;
    }
    if (!parse_index_item(item, &ranges, &err)) return std::nullopt;
    if (comma == std::string_view::npos) break;
    start = comma + 1;
  }
  return make_index_set(std::move(ranges));
}

}  // namespace msprobe::shim
