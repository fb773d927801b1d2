// Flight records: their fields read by both readers (entries and records), and kernels grouped into records.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "tools/reader/dump_reader.h"
#include "tools/reader/flight.h"

namespace mt = msprobe::tools;

namespace {

// Three kernels: a flight record's two (the second overflowed, with a note on the first) and one of no record.
const std::string kText =
    R"({"task": "tensor", "level": "L2", "framework": "mindspore", "data": {)"
    R"("Add.Default.0": {"input_args": [{"type": "mindspore.Tensor", "dtype": "Float32", "shape": [2], "Max": 1.0,)"
    R"( "Min": 0.0, "Mean": 0.5, "Norm": 1.0}], "output": [{"type": "mindspore.Tensor", "dtype": "Float32",)"
    R"( "shape": [2], "Max": 2.0, "Min": 0.0, "Mean": 1.0, "Norm": 2.0}], "launch_index": 7,)"
    R"( "flight_trigger": "overflow", "flight_trigger_kernel": "Muls.Default.0", "flight_note": "statistics only"},)"
    R"("Muls.Default.0": {"input_args": [{"type": "mindspore.Tensor", "dtype": "Float32", "shape": [2], "Max": 2.0,)"
    R"( "Min": 0.0, "Mean": 1.0, "Norm": 2.0}, {"type": "float", "value": Infinity}], "output": [{"type":)"
    R"( "mindspore.Tensor", "dtype": "Float32", "shape": [2], "Max": Infinity, "Min": NaN, "Mean": NaN,)"
    R"( "Norm": Infinity}], "launch_index": 8, "overflow": "output.0: 1 NaN, 1 +Inf, 0 -Inf",)"
    R"( "flight_trigger": "overflow", "flight_trigger_kernel": "Muls.Default.0"},)"
    R"("Gelu.Default.0": {"input_args": [], "output": [], "launch_index": 9, "flight_trigger": 3}}})";

struct Read {
  std::vector<mt::FlightFields> from_entries, from_records;
  std::vector<mt::FlightKernel> kernels;
};

Read read_both() {
  Read r;
  mt::DumpHeaderRead h;
  mt::DumpCallbacks entries;
  entries.on_header = [&](const mt::DumpHeaderRead &x) { h = x; };
  entries.on_kernel = [&](mt::EntryRead &&k) {
    r.from_entries.push_back(mt::flight_fields(k.entry));
    return true;
  };
  mt::stream_dump_json(kText, entries);
  const mt::RankDir dir{"/d/step3/rank1", 3, 1, true};
  mt::DumpCallbacks records;
  records.on_record = [&](mt::KernelRecord &&k) {
    r.from_records.push_back(k.flight);
    if (auto fk = mt::flight_kernel(0, dir, k.name, k.launch_index, k.flight, k.tensors)) r.kernels.push_back(*fk);
    return true;
  };
  mt::stream_dump_json(kText, records);
  return r;
}

mt::FlightKernel kernel(std::string rank, uint64_t step, uint64_t li, std::string name, std::string trigger,
                        std::string trigger_kernel = "") {
  mt::FlightKernel k;
  k.rank = std::move(rank);
  k.step = step;
  k.launch_index = li;
  k.name = std::move(name);
  k.fields.trigger = std::move(trigger);
  k.fields.trigger_kernel = std::move(trigger_kernel);
  return k;
}

}  // namespace

TEST(Flight, FieldsReadAlikeFromEntriesAndRecords) {
  const Read r = read_both();
  ASSERT_EQ(r.from_entries.size(), 3u);
  ASSERT_EQ(r.from_records.size(), 3u);
  for (size_t i = 0; i < 3; ++i) {
    EXPECT_EQ(r.from_entries[i].trigger, r.from_records[i].trigger);
    EXPECT_EQ(r.from_entries[i].trigger_kernel, r.from_records[i].trigger_kernel);
    EXPECT_EQ(r.from_entries[i].note, r.from_records[i].note);
    EXPECT_EQ(r.from_entries[i].overflow, r.from_records[i].overflow);
  }
  EXPECT_EQ(r.from_records[0].note, "statistics only");
  EXPECT_EQ(r.from_records[1].overflow, "output.0: 1 NaN, 1 +Inf, 0 -Inf");
  EXPECT_FALSE(r.from_records[2].recorded());  // a trigger that is not a string is no trigger
  // Only the record's kernels; the Muls turned finite inputs (the scalar is no tensor) into a non-finite output.
  ASSERT_EQ(r.kernels.size(), 2u);
  EXPECT_EQ(r.kernels[0].rank, "rank1");
  EXPECT_EQ(r.kernels[0].step, 3u);
  EXPECT_TRUE(r.kernels[0].inputs_finite);
  EXPECT_FALSE(r.kernels[0].output_non_finite);
  EXPECT_TRUE(r.kernels[1].inputs_finite);
  EXPECT_TRUE(r.kernels[1].output_non_finite);
}

TEST(Flight, RecordsPerRankAndTriggerInLaunchOrder) {
  // Folder order: step 6 before step 7, rank0 before rank1; a record spans both steps.
  std::vector<mt::FlightKernel> in = {
      kernel("rank0", 6, 40, "A.x.0", "overflow", "M.x.0"), kernel("rank1", 6, 41, "A.x.0", "exit"),
      kernel("rank0", 7, 90, "B.x.0", "overflow", "N.x.0"), kernel("rank0", 7, 42, "M.x.0", "overflow", "M.x.0"),
      kernel("rank0", 6, 39, "C.x.0", "overflow", "M.x.0"), kernel("rank1", 7, 45, "B.x.0", "signal SIGTERM")};
  in[4].fields.note = "n";
  const std::vector<mt::FlightRecord> records = mt::group_flight_records(in);
  ASSERT_EQ(records.size(), 4u);
  EXPECT_EQ(records[0].trigger_text(), "overflow in M.x.0");
  ASSERT_EQ(records[0].kernels.size(), 3u);
  EXPECT_EQ(records[0].kernels[0].name, "C.x.0");
  EXPECT_EQ(records[0].kernels[2].name, "M.x.0");
  EXPECT_EQ(records[0].trigger_entry(), &records[0].kernels[2]);
  EXPECT_EQ(records[0].steps(), (std::vector<uint64_t>{6, 7}));
  EXPECT_EQ(records[0].notes(), 1u);
  EXPECT_EQ(records[0].launch_range_text(), "launch_index 39-42");
  EXPECT_EQ(records[1].trigger_text(), "overflow in N.x.0");
  EXPECT_EQ(records[1].trigger_entry(), nullptr);  // its trigger kernel is not in the dump
  EXPECT_EQ(records[1].launch_range_text(), "launch_index 90");
  EXPECT_EQ(records[2].rank, "rank1");
  EXPECT_EQ(records[2].trigger_text(), "exit");
  EXPECT_EQ(records[2].trigger_entry(), nullptr);
  EXPECT_EQ(records[3].trigger_text(), "signal SIGTERM");
}
