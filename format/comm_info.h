// What joins the ranks: the communicator of an HCCL kernel and this kernel's place in it, written as one nested
// object at the entry's top level (docs/format.md "comm"):
//   "comm": {"name": "...", "rank": 1, "size": 4, "ranks": [0, 2, 4, 6], "seq": 12}               a collective
//   "comm": {"name": "...", "rank": 1, "size": 4, "peer": 2, "pair_seq": 0}                        HcclSend / HcclRecv
//   "comm": {"name": "...", "rank": 1, "size": 4, "seq": 3, "root": 0}                             broadcast...
// A dict is safe at an entry's top level for msprobe (its `"md5" in value` test is a key lookup there), and numbers
// are inside it, never at the top level. The tools join collectives across ranks by (name, seq) and point-to-point
// transfers by (name, sender, receiver, pair_seq).
#pragma once
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace msprobe::format {

namespace comm_key {
inline constexpr std::string_view kComm = "comm";  // the entry's member
inline constexpr std::string_view kName = "name";
inline constexpr std::string_view kRank = "rank";
inline constexpr std::string_view kSize = "size";
inline constexpr std::string_view kRanks = "ranks";
inline constexpr std::string_view kSeq = "seq";
inline constexpr std::string_view kPeer = "peer";
inline constexpr std::string_view kPairSeq = "pair_seq";
inline constexpr std::string_view kRoot = "root";
}  // namespace comm_key

struct CommInfo {
  std::string name;                            // HcclGetCommName, or a key every member derives the same way
  uint32_t rank = 0;                           // this rank's index in the communicator
  uint32_t size = 0;                           // its member count
  std::optional<std::vector<uint32_t>> ranks;  // global ranks of its members in comm-rank order, when known locally
  std::optional<uint64_t> seq;                 // collectives: this rank's collectives on it before this one, from 0
  std::optional<uint32_t> peer;                // send / recv: the other side's comm rank
  std::optional<uint64_t> pair_seq;            // send / recv: earlier transfers of this (comm, peer, direction)
  std::optional<uint32_t> root;                // broadcast, reduce, scatter: the root's comm rank
  bool operator==(const CommInfo &) const = default;
};

// The object `{"name": .., "rank": .., "size": .., ["ranks": [..]], ["seq": ..], ["peer": .., "pair_seq": ..],
// ["root": ..]}` (the name made csv-safe, as every string of a dump). Defined with the entry's writer
// (dump_json.cpp), whose scalars it uses; this header holds data only.
void append_comm_info(std::string &out, const CommInfo &c);

}  // namespace msprobe::format
