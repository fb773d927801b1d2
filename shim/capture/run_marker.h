// One dump root holds one run (issue 39). msprobe's users reuse `./dump` all the time: a second run into the same
// path used to mix its folders with the first's (a 3-step run's step2 beside a 2-step run's steps, one task's files
// beside another's), and every tool presented them as one run.
//
// Each process that writes a rank folder leaves its run's marker in the dump root (format::run_marker_name: its run
// id, pid, start, command line, task; at its end the end time and one line of what came of it). When a process claims
// its first rank folder in a root, the folders of an earlier run found there are moved to
// {root}/earlier_runs/{that run's id}/ (a dump root of its own, never deleted), with one line saying so. A run is
// earlier when its writer is no longer alive (its rank lock is not held) and it ended before this process started,
// or never ended (killed); the ranks of one job run together, so a peer rank is never taken for an earlier run.
// Folders with no marker at all (an older version, or msprobe itself) whose rank is not being written count as one
// earlier run, "unknown".
#pragma once
#include <cstdint>
#include <string>
#include <string_view>

#include "format/format.h"

namespace msprobe::shim::run_marker {

struct RunIdentity {
  std::string id;  // "20261128-082311-4521": start (UTC) and pid
  int64_t pid = 0;
  int64_t start_us = 0;  // the process's start, µs since the epoch
  std::string command;   // the command line, cut to 512 bytes
};

// This process's run (made when first asked; a fork child gets its own).
const RunIdentity &this_run();

// This process has just claimed `rank_dir` under `root` (lifecycle::claim_rank_output, before its first folder is
// made there): earlier runs' folders are moved aside, and this run's marker for the rank is written.
void claimed(const std::string &root, const std::string &rank_dir, format::Task task) noexcept;

// This process's folders of `from` became `to`'s (a rank adopted: rank_map.h): its marker for `from` goes, the one for
// `to` (written when `to` was claimed) stays.
void renamed(const std::string &root, const std::string &from, const std::string &to) noexcept;

// At the end of the dump: each marker this process wrote gets the end time and `outcome` (one line, may be empty).
// A run that wrote nothing (flight with no NaN/Inf, filters that selected nothing) leaves its marker all the same,
// for `rank_dir`, so that `msprobe-inspect summary` on the root can say what came of it.
void ended(const std::string &root, const std::string &rank_dir, format::Task task, std::string_view outcome) noexcept;

}  // namespace msprobe::shim::run_marker
