// decode_stats_csv and StatsAssembler (stats_csv.h).
#include "shim/graph/stats_csv.h"

#include <algorithm>
#include <array>
#include <charconv>

namespace msprobe::shim::graph {
namespace {

constexpr std::array<std::string_view, 6> kFixed = {"Input/Output", "Index",  "Data Size",
                                                    "Data Type",    "Format", "Shape"};

template <typename T>
bool number(std::string_view s, T *v) {
  if (s.starts_with('+')) return false;
  auto [end, ec] = std::from_chars(s.data(), s.data() + s.size(), *v);
  return ec == std::errc() && end == s.data() + s.size() && !s.empty();
}

// An optional statistic: "NA" is absent; anything else must parse.
template <typename T>
bool optional_number(std::string_view s, std::optional<T> *v) {
  if (s == "NA") return true;
  T x{};
  if (!number(s, &x)) return false;
  *v = x;
  return true;
}

bool parse_shape(std::string_view s, std::vector<int64_t> *shape) {
  if (s == "-") return true;
  for (std::string_view d : split_fields(s, 'x')) {
    int64_t v = 0;
    if (!number(d, &v) || v < 0) return false;
    shape->push_back(v);
  }
  return true;
}

bool fixed_cells(const std::vector<std::string_view> &c, StatsRow *r) {
  if (c[0] != "Input" && c[0] != "Output") return false;
  r->io = c[0] == "Input" ? format::IoKind::Input : format::IoKind::Output;
  r->dtype_name = c[3], r->format_name = c[4];
  if (auto v = proto_dtype_value(c[3])) r->dtype = proto_dtype(*v);
  return number(c[1], &r->index) && number(c[2], &r->data_size) && parse_shape(c[5], &r->shape);
}

// The cell of one statistic column; unknown columns are skipped.
bool stat_cell(std::string_view column, std::string_view cell, StatsRow *r) {
  if (column == "Max Value") return optional_number(cell, &r->max);
  if (column == "Min Value") return optional_number(cell, &r->min);
  if (column == "Avg Value") return optional_number(cell, &r->avg);
  if (column == "l2norm") return optional_number(cell, &r->l2norm);
  if (column == "Count") return optional_number(cell, &r->count);
  if (column == "Nan Count") return optional_number(cell, &r->nan);
  if (column == "Negative Inf Count") return optional_number(cell, &r->neg_inf);
  if (column == "Positive Inf Count") return optional_number(cell, &r->pos_inf);
  return true;
}

bool parse_row(std::string_view line, const std::vector<std::string> &columns, StatsRow *r) {
  const std::vector<std::string_view> cells = split_fields(line, ',');
  if (cells.size() != columns.size() || !fixed_cells(cells, r)) return false;
  for (size_t i = kFixed.size(); i < cells.size(); ++i)
    if (!stat_cell(columns[i], cells[i], r)) return false;
  return true;
}

bool parse_header(std::string_view line, std::vector<std::string> *columns) {
  const std::vector<std::string_view> cells = split_fields(line, ',');
  if (cells.size() < kFixed.size() || !std::equal(kFixed.begin(), kFixed.end(), cells.begin())) return false;
  columns->assign(cells.begin(), cells.end());
  return true;
}

bool fail(std::string *error, std::string text) {
  if (error) *error = one_line(std::move(text));
  return false;
}

// The lines of the text: one trailing run of NULs dropped, "\r\n" accepted, the last empty line ignored.
bool lines_of(std::string_view text, std::vector<std::string_view> *lines) {
  while (!text.empty() && text.back() == '\0') text.remove_suffix(1);
  if (text.find('\0') != std::string_view::npos) return false;
  if (text.ends_with('\n')) text.remove_suffix(1);
  if (text.empty()) return true;
  for (std::string_view l : split_fields(text, '\n'))
    lines->push_back(l.ends_with('\r') ? l.substr(0, l.size() - 1) : l);
  return true;
}

}  // namespace

std::optional<StatsFile> decode_stats_csv(std::string_view path, std::string_view text, std::string *error,
                                          const std::vector<std::string> *header) {
  const std::string where = "stats file " + std::string(path) + ": ";
  StatsFile out;
  out.path = path;
  std::string_view base = base_name(path);
  if (base.ends_with(".csv")) base.remove_suffix(4);
  std::string why;
  std::optional<DumpName> name = parse_dump_name(base, &why);
  if (!name) return fail(error, where + why), std::nullopt;
  out.name = std::move(*name);
  out.place = parse_dump_place(path);
  std::vector<std::string_view> lines;
  if (!lines_of(text, &lines)) return fail(error, where + "NUL inside the text"), std::nullopt;
  size_t first = 0;
  if (!lines.empty() && lines[0].starts_with("Input/Output,")) {
    if (!parse_header(lines[0], &out.columns)) return fail(error, where + "malformed header line"), std::nullopt;
    out.had_header = true, first = 1;
  } else if (header != nullptr) {
    out.columns = *header;
  } else if (!lines.empty()) {
    return fail(error, where + "a piece without header and no earlier header for this file"), std::nullopt;
  }
  for (size_t i = first; i < lines.size(); ++i) {
    if (!parse_row(lines[i], out.columns, &out.rows.emplace_back())) {
      return fail(error, where + "malformed row on line " + std::to_string(i + 1)), std::nullopt;
    }
  }
  return out;
}

std::optional<StatsFile> StatsAssembler::feed(std::string_view path, std::string_view text, std::string *error) {
  auto known = headers_.find(path);
  std::optional<StatsFile> f = decode_stats_csv(path, text, error, known == headers_.end() ? nullptr : &known->second);
  if (!f || !f->had_header) return f;
  if (known != headers_.end()) {
    known->second = f->columns;
    return f;
  }
  headers_.emplace(std::string(path), f->columns);
  order_.emplace_back(path);
  if (order_.size() > capacity_) {
    headers_.erase(order_.front());
    order_.pop_front();
  }
  return f;
}

}  // namespace msprobe::shim::graph
