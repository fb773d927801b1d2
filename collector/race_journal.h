// The writer side of the race check (MSPROBE_RACECHECK, docs/races.md): each checked kernel, in submission order,
// against the device bytes the kernels before it touched (races/detector.h), and races.json in the later kernel's rank
// folder, a journal (journal.h) valid at every moment: one member per distinct race, appended when first found.
#pragma once
#include <cstdint>
#include <filesystem>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "collector/journal.h"
#include "races/detector.h"
#include "record/kernel_record.h"

namespace msprobe::collector {

class RaceLog {
 public:
  explicit RaceLog(std::shared_ptr<record::StackRenderer> stacks) : stacks_(std::move(stacks)) {}
  // In submission order, one at a time: `k` (k.race set) checked; races.json in `dir` begun on the folder's first
  // checked kernel, and a new distinct race appended at once. Throws std::system_error when the file cannot be written.
  void check(const record::KernelCapture &k, const std::filesystem::path &dir);
  // Every races.json rewritten whole with the final counts (one rename each: valid throughout), and one stderr line
  // per race kind. Nothing is written after it.
  void close();

 private:
  struct Distinct {
    std::string head, tail;  // the member's text before and after its count
    uint64_t count = 0;
  };
  struct File {
    JsonJournal journal;
    std::vector<Distinct> races;
    std::map<std::string, size_t> by_key;  // the two kernels' names and tensors -> races[]
  };
  std::string side_json(const races::Launch &l, uint32_t access);
  void add(const races::Race &r, File &f);

  std::shared_ptr<record::StackRenderer> stacks_;
  races::RaceDetector detector_;
  std::map<std::filesystem::path, File> files_;
  std::map<std::string, std::pair<uint64_t, uint64_t>> kinds_;  // kind -> (occurrences, distinct)
  bool closed_ = false;
};

}  // namespace msprobe::collector
