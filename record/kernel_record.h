// The capture record: what the shim hands the collector for one kernel (spec §2, "records in, files out"), and the
// four ports through which the collector reaches back to whoever produced it. The collector calls the ports only on
// its writer threads, never on a launching thread:
//   Completion::wait        the staged bytes are valid (for a device: an event after the copies)
//   HostBlock (destructor)  the staged bytes are no longer needed (pinned memory goes back to its pool)
//   PrecomputedStats        statistics computed elsewhere (on the device) instead of from the bytes
//   StackRenderer           stack ids to frames, for stack.json and races.json (symbolization off the launch path)
// Nothing else crosses: the record is handed over once, by value, and the collector knows nothing of ACL.
#pragma once
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <variant>
#include <vector>

#include "format/model.h"

namespace msprobe::record {

using format::ArgValue;
using format::KernelHeader;
using format::TensorDescription;
using format::TensorStats;
using format::ValueArg;

// Host bytes staged for one tensor (or several). The producer's destructor gives the memory back.
class HostBlock {
 public:
  virtual ~HostBlock() = default;
  virtual const void *data() const = 0;
  virtual uint64_t size() const = 0;
};

// Says when staged bytes are valid (for a device, an event after the copies). wait() returns false when
// they never will be (the copy failed); the kernel is then recorded without data.
class Completion {
 public:
  virtual ~Completion() = default;
  virtual bool wait() = 0;
};

// Statistics computed elsewhere (on the device, by the shim) instead of from the tensor's bytes. Read only
// after the kernel's `ready` completed; nullopt when they could not be had (the tensor then has none).
class PrecomputedStats {
 public:
  virtual ~PrecomputedStats() = default;
  virtual std::optional<TensorStats> stats() const = 0;
};

// One tensor argument: its description (stride and offset as the device gave them) and the view over its staged
// bytes: element block_offset + sum(i_k * block_strides_k) of `block` is element i.
struct TensorCapture : TensorDescription {
  std::vector<int64_t> block_strides;      // elements
  int64_t block_offset = 0;                // elements from block->data()
  std::shared_ptr<const HostBlock> block;  // null: metadata only (structure task, data not taken)
  // Set: the statistics written for this tensor (Max, Min, Mean, Norm, with the NaN/Inf counts for
  // overflow_check), exactly as if computed from `block`; `block` is then only read for files and md5.
  std::shared_ptr<const PrecomputedStats> device_stats;
};

struct CapturedArg;
using CapturedList = std::vector<CapturedArg>;
// One slot of input_args / output: null (absent optional tensor), a tensor, a value, or a list.
struct CapturedArg {
  std::variant<std::monostate, TensorCapture, ValueArg, CapturedList> v;
};

// Turns stack ids into frames for stack.json. The collector does not capture stacks; whoever does gives it
// one of these, called on the writer side only (symbolization is slow the first time and must stay off the
// launch path).
class StackRenderer {
 public:
  virtual ~StackRenderer() = default;
  // The id of the group `id` belongs to (stacks that render the same share one), or 0 for "no stack".
  virtual uint64_t group(uint64_t id) = 0;
  // The frames of a group's representative, innermost first, as msprobe writes them.
  virtual std::vector<std::string> frames(uint64_t group_id) = 0;
};

// ---- What the race check between streams needs (races/, docs/races.md) ----------------------------------------------
// How a launch touches a range of device bytes. Unknown: the bytes are an argument of a kernel whose reads and writes
// are not described (a raw runtime kernel's blob); the check counts it as a possible write and says so.
enum class AccessKind : uint8_t { Read = 1, Write = 2, ReadWrite = 3, Unknown = 4 };
// Which argument an access comes from, as dump.json names it (input.{slot}[.{item}], output...), or which side of a
// runtime call (a copy's source and destination, a memset's destination).
enum class AccessRole : uint8_t { Input, Output, Source, Destination };

struct DeviceAccess {
  uint64_t begin = 0, end = 0;  // device bytes [begin, end)
  AccessKind kind = AccessKind::Read;
  AccessRole role = AccessRole::Input;
  uint32_t slot = 0;  // the argument's place in input_args / output
  int32_t item = -1;  // its member in a tensor list; -1: not in a list
};

// When a launch happened in the process's happens-before order (races/clocks.h): its actor (the host, 0, or a stream),
// its epoch on that actor, and the vector clock it ran with (what it knows of every actor's epochs). Epoch 0: none.
struct LaunchStamp {
  uint32_t actor = 0;
  uint64_t epoch = 0;
  std::vector<uint64_t> clock;
};

// A launch's stamp and the device bytes it reads and writes, taken on the launching thread; the writer side checks
// them (collector/race_journal.h).
struct RaceFacts {
  LaunchStamp stamp;
  std::vector<DeviceAccess> accesses;
};

// One kernel: its header (name, step, rank, indices), stack id and arguments.
struct KernelCapture : KernelHeader {
  uint64_t stack_id = 0;                // 0: no stack
  std::optional<CapturedList> inputs;   // nullopt: left out (data_mode "output")
  std::optional<CapturedList> outputs;  // nullopt: left out (data_mode "input")
  std::shared_ptr<Completion> ready;    // null: the bytes are valid already
  format::EntryNotes notes;             // text members of the entry (flight_note, graph_note...)
  format::LaunchFields launch_extra;    // further members of its "launch" object
  std::optional<RaceFacts> race;        // MSPROBE_RACECHECK=1: what the race check needs
};

}  // namespace msprobe::record
