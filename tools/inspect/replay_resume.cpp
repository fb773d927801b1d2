// replay --csv-path: the CSV files of an earlier (e.g. killed) run taken up, keeping the whole rows of the kernels it
// finished, so that the resumed run appends the rest.
#include <cerrno>
#include <cstring>
#include <fstream>
#include <sstream>
#include <system_error>

#include "tools/inspect/replay.h"
#include "tools/reader/csv.h"

namespace msprobe::tools::replay {

namespace {

std::string read_file_text(const fs::path &p) {
  std::ifstream in(p, std::ios::binary);
  if (!in) throw InputError(p.string() + ": cannot open the file (" + std::strerror(errno) + ")");
  std::ostringstream ss;
  ss << in.rdbuf();
  if (in.bad()) throw InputError(p.string() + ": read failed");
  return ss.str();
}

// Rewrites `path` as `text` atomically (temporary file + rename).
void replace_file(const fs::path &path, const std::string &text) {
  const fs::path tmp = path.string() + ".tmp";
  {
    std::ofstream out(tmp, std::ios::binary | std::ios::trunc);
    out << text;
    out.close();
    if (!out) throw InputError(tmp.string() + ": write failed");
  }
  std::error_code ec;
  fs::rename(tmp, path, ec);
  if (ec) throw InputError(path.string() + ": cannot replace the file (" + ec.message() + ")");
}

// The records of a CSV this tool wrote, header first; InputError when the header is not `columns`.
CsvRecords read_ours(const fs::path &path, const std::vector<std::string> &columns, std::string_view what, bool *cut) {
  const std::string text = read_file_text(path);
  CsvRecords records = parse_csv(text);
  if (records.rows.empty() || records.rows[0] != columns)
    throw InputError(path.string() + ": not a " + std::string(what) +
                     " CSV of msprobe-inspect replay (the header differs)");
  *cut = records.complete != text.size();  // a record cut by a kill: dropped
  return records;
}

void keep_result_rows(const fs::path &path, Resume &res) {
  bool dirty = false;
  const CsvRecords records = read_ours(path, kResultColumns, "result", &dirty);
  std::string kept = csv_row(kResultColumns);
  for (size_t i = 1; i < records.rows.size(); ++i) {
    const auto &row = records.rows[i];
    if (row.size() != kResultColumns.size()) {  // cannot be a record this tool wrote whole
      dirty = true;
      continue;
    }
    const Key key{row[kResultStep], row[kResultRank], row[0]};
    if (!res.done.insert(key).second) {
      dirty = true;
      continue;
    }
    kept += csv_row(row);
    res.rows.push_back(row);
  }
  if (dirty) replace_file(path, kept);
}

// Details: the rows of kernels in the result file (a kill between a kernel's details and its result row leaves
// details the resumed run writes again).
void keep_detail_rows(const fs::path &path, const Resume &res) {
  std::error_code ec;
  if (!fs::exists(path, ec)) {
    replace_file(path, csv_row(kDetailColumns));
    return;
  }
  bool dirty = false;
  const CsvRecords records = read_ours(path, kDetailColumns, "details", &dirty);
  std::string kept = csv_row(kDetailColumns);
  for (size_t i = 1; i < records.rows.size(); ++i) {
    const auto &row = records.rows[i];
    bool keep = row.size() == kDetailColumns.size();
    if (keep) {
      const std::string &api = row[0];
      const size_t cut = api.rfind(".output.");
      keep = cut != std::string::npos && res.done.count(Key{row[kDetailStep], row[kDetailRank], api.substr(0, cut)});
    }
    if (!keep) {
      dirty = true;
      continue;
    }
    kept += csv_row(row);
  }
  if (dirty) replace_file(path, kept);
}

}  // namespace

fs::path details_path_for(const fs::path &result) {
  const std::string name = result.filename().string();
  const std::string prefix = "accuracy_checking_result_";
  if (name.rfind(prefix, 0) != 0)
    throw InputError(result.string() +
                     ": not an accuracy_checking_result_*.csv file (its details file is found by "
                     "that name)");
  return result.parent_path() / ("accuracy_checking_details_" + name.substr(prefix.size()));
}

Resume load_resume(const fs::path &result_path, const fs::path &details_path) {
  Resume res;
  keep_result_rows(result_path, res);
  keep_detail_rows(details_path, res);
  return res;
}

}  // namespace msprobe::tools::replay
