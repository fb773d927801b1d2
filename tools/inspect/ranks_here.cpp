// first-nan / first-diff in one process over the rank folders it sees: the map (one digest per rank) and the reduce,
// without a transport.
#include <map>

#include "tools/inspect/ranks.h"

namespace msprobe::tools::ranks {

Finding analyze_here(const std::filesystem::path &a, const std::filesystem::path *b, const ScanOptions &o) {
  using Layout = std::map<std::optional<uint32_t>, std::vector<RankDir>>;
  Layout la, lb;
  for (RankDir &d : find_rank_dirs(a)) la[d.rank].push_back(std::move(d));
  if (b)
    for (RankDir &d : find_rank_dirs(*b)) lb[d.rank].push_back(std::move(d));
  std::vector<RankDigest> digests;
  const auto no_progress = [](uint64_t) {};
  for (const auto &[rank, dirs] : la) {
    if (b && !lb.count(rank)) continue;  // ranks are paired by global rank
    RankDigest d = b ? scan_diff(dirs, lb.at(rank), o, no_progress) : scan_nan(dirs, o, no_progress);
    d.rank = rank;
    digests.push_back(std::move(d));
  }
  return reduce(std::move(digests), o.question);
}

}  // namespace msprobe::tools::ranks
