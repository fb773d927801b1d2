// The rank table of HcclCommInitClusterInfo (a JSON file, "RANK_TABLE_FILE"). The stand-in reads the
// subset it needs from the real version-1.0 layout:
//   {"version": "1.0", "server_count": "1", "status": "completed",
//    "server_list": [{"server_id": "127.0.0.1",
//                     "device": [{"device_id": "0", "device_ip": "...", "rank_id": "0"}, ...]}, ...]}
// Required: "server_list", a non-empty array of servers, each with a "device" array whose entries have a
// "rank_id" (string of digits or number). The rank ids over all servers must be exactly 0..N-1; N is the
// communicator size. If present, "status" must be "completed" and "server_count" must match the list.
// Other keys ("version", "device_ip", "super_pod_list", ...) are ignored.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include "hccl/hccl_types.h"

namespace fakecann::hccl {

struct RankTableEntry {
  uint32_t rank_id = 0;
  int64_t device_id = -1;  // -1 when absent
  std::string server_id;
};

struct RankTable {
  std::vector<RankTableEntry> ranks;  // indexed by rank_id
};

// HCCL_SUCCESS, or HCCL_E_OPEN_FILE_FAILURE / HCCL_E_PARA with a message in *err.
HcclResult load_rank_table(const std::string &path, RankTable *out, std::string *err);

}  // namespace fakecann::hccl
