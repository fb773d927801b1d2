// dump.json, stack.json and construct.json, written by hand so that msprobe's rules hold exactly:
// - tensor keys in msprobe's order: type, dtype, shape, Max, Min, Mean, Norm, then md5, data_name, format, stride,
//   offset;
// - numbers as Python's json.dump prints them: repr() of the float (shortest round trip), bare NaN / Infinity /
//   -Infinity, null for a missing statistic;
// - strings escaped as json.dump(ensure_ascii=True) does (non-ASCII as \uXXXX, so the file is plain ASCII and any
//   reader decodes it), invalid UTF-8 as \ufffd;
// - every string the structured writers below emit (kernel names, string values, stack frames, type/dtype
//   overrides, data_name...) goes through csv_safe_text() (naming.h) so that msprobe's compare accepts the dump;
//   for names made by naming.h that changes nothing.
//
//
// The encoder only makes text; the journals that append it to files live with the writer (collector/journal.h), and
// repair_journal_text() gives a journal cut by a crash its closing text back (the tools' repair).
#pragma once
#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <string_view>

#include "format/model.h"

namespace msprobe::format {

// ---- Scalars ------------------------------------------------------------------------------------------------------
// Quoted and escaped (see above); the text is used as given (not made csv-safe).
void append_json_string(std::string &out, std::string_view s);
// Python repr(float): 1.0, 0.1, 1e-05, 1e+16, 2.2360680103302; NaN, Infinity, -Infinity.
void append_json_number(std::string &out, double v);
std::string json_number(double v);
void append_json_integer(std::string &out, int64_t v);
void append_json_integer(std::string &out, uint64_t v);
// null, a number (integers without a fraction), true/false.
void append_stat_value(std::string &out, const StatValue &v);
// A string made csv-safe (csv_safe_text, naming.h) and quoted.
void append_csv_safe_json_string(std::string &out, std::string_view s);

// ---- A kernel entry -------------------------------------------------------------------------------------------------

void append_tensor_summary(std::string &out, const TensorSummary &t, Framework framework);
void append_arg(std::string &out, const Arg &a, Framework framework);
// The member `"name": {"input_args": [...], "output": [...], "launch": {"index": .., "task_id": .., "stream_id": ..,
// "timestamp": .., launch_extra...}, notes...}` on one line.
void append_kernel_entry(std::string &out, const KernelEntry &e, Framework framework);
std::string kernel_entry_json(const KernelEntry &e, Framework framework);

// ---- dump.json and construct.json as journals: prefix line, members, suffix ----------------------------------------
// `{"task": .., "level": "L2", "framework": .., "host_framework": .., "dump_data_dir": .., "data": {`
std::string dump_json_prefix(const DumpHeader &h);
inline constexpr std::string_view kDumpJsonSuffix = "\n}}\n";
inline constexpr std::string_view kConstructJsonPrefix = "{";
inline constexpr std::string_view kConstructJsonSuffix = "\n}\n";
// races.json (MSPROBE_RACECHECK) as a journal: {"races": {"race.0": {...}, ...}}.
inline constexpr std::string_view kRacesJsonPrefix = "{\"races\": {";
inline constexpr std::string_view kRacesJsonSuffix = "\n}}\n";
// A construct.json member: `"name": null`.
std::string construct_json_member(std::string_view kernel_name);

// Given what a journal left on disk and its suffix, the text of a valid file: the header, every complete member,
// the suffix. A member cut short by a crash is dropped. A file that already ends with the suffix is returned as
// is. nullopt when not even the prefix line is complete.
std::optional<std::string> repair_journal_text(std::string_view content, std::string_view suffix);

// ---- Whole files ----------------------------------------------------------------------------------------------------
// stack.json; frames and names are made csv-safe.
std::string stack_json(std::span<const StackGroup> groups);
// construct.json in one piece.
std::string construct_json(std::span<const std::string> kernel_names);

}  // namespace msprobe::format
