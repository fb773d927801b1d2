// report: the page's data as JSON and the HTML around it. The template (report_page/report.html) holds four markers
// that are replaced by the title, the CSS, the data and the two scripts (Chart.js, then the page's report.js); the
// data is one <script type="application/json"> for the whole dump plus one per folder, which the page parses only
// when that folder is shown.
#include <algorithm>
#include <array>
#include <cmath>
#include <ctime>
#include <set>
#include <tuple>

#include "format/dump_json.h"
#include "format/stack_text.h"
#include "tools/inspect/report.h"
#include "tools/inspect/report_assets.h"

namespace msprobe::tools::report {

namespace {

// The whole-dump part of the page's data is small and built as a JSON value; the per-folder arrays (100k+ kernels)
// are written as text by folder_json.
Json page_number(double v) {
  if (std::isnan(v)) return "NaN";
  if (std::isinf(v)) return v > 0 ? "Inf" : "-Inf";
  return v;
}

Json page_stat(const format::StatValue &v) {
  using K = format::StatValue::Kind;
  switch (v.kind) {
    case K::Null: break;
    case K::Real: return page_number(v.real);
    case K::Integer: return v.integer;
    case K::Unsigned: return v.uinteger;
    case K::Bool: return v.boolean;
  }
  return nullptr;
}

template <typename T>
Json or_null(const std::optional<T> &v) {
  return v ? Json(*v) : Json(nullptr);
}

// Where a marked kernel is in the report: (folder, position), when the report holds it.
std::optional<std::pair<size_t, size_t>> locate(const Report &r, const MarkedKernel &k) {
  for (size_t f = 0; f < r.folders.size(); ++f) {
    const FolderData &fd = r.folders[f];
    if (fd.dir.rank_label() != k.rank || fd.dir.step != k.step) continue;
    auto it = fd.by_name.find(k.kernel);
    if (it != fd.by_name.end()) return std::pair(f, it->second);
  }
  return std::nullopt;
}

Json marked_json(const Report &r, const MarkedKernel &k) {
  const auto at = locate(r, k);
  return {{"rank", k.rank},
          {"step", or_null(k.step)},
          {"kernel", k.kernel},
          {"launch_index", or_null(k.launch_index)},
          {"note", k.note},
          {"folder", at ? Json(at->first) : Json(nullptr)},
          {"pos", at ? Json(at->second) : Json(nullptr)}};
}

// A mark as first-nan --json / first-diff --json print it, with where the report holds each kernel.
Json mark_json(const Report &r, const std::optional<Mark> &m) {
  if (!m) return nullptr;
  Json j = marked_json(r, m->at);
  j["stack"] = Json::array();
  for (const std::string &f : m->stack) j["stack"].push_back(format::frame_line(f));
  const std::optional<size_t> user = format::user_frame(m->stack);
  j["stack_user"] = user ? Json(*user) : Json(nullptr);
  j["verdict"] = m->verdict;
  j["spread"] = Json::array();
  for (const MarkedKernel &k : m->spread) j["spread"].push_back(marked_json(r, k));
  return j;
}

struct TopDiff {
  size_t folder, pos;
  double rel;
};

std::vector<TopDiff> top_diffs(const Report &r) {
  std::vector<TopDiff> all;
  for (size_t f = 0; f < r.folders.size(); ++f)
    for (size_t p = 0; p < r.folders[f].diffs.size(); ++p)
      if (const auto &rel = r.folders[f].diffs[p].rel; rel && *rel > 0) all.push_back({f, p, *rel});
  const size_t n = std::min(all.size(), kTopDiffs);
  std::partial_sort(all.begin(), all.begin() + static_cast<ptrdiff_t>(n), all.end(),
                    [](const TopDiff &a, const TopDiff &b) {
                      return std::tuple(-a.rel, a.folder, a.pos) < std::tuple(-b.rel, b.folder, b.pos);
                    });
  all.resize(n);
  return all;
}

// The kernels whose tensors a large folder still writes into the page: those the page names.
std::vector<std::set<size_t>> featured(const Report &r, const std::vector<TopDiff> &top) {
  std::vector<std::set<size_t>> out(r.folders.size());
  auto add_mark = [&](const std::optional<Mark> &m) {
    if (!m) return;
    if (auto at = locate(r, m->at)) out[at->first].insert(at->second);
    for (const MarkedKernel &k : m->spread)
      if (auto at = locate(r, k)) out[at->first].insert(at->second);
  };
  add_mark(r.first_nan);
  add_mark(r.first_diff);
  for (const TopDiff &t : top) out[t.folder].insert(t.pos);
  for (const auto &[folder, race] : r.races)
    for (const RaceSide *s : {&race.first, &race.second})
      if (auto it = r.folders[folder].by_name.find(s->kernel); it != r.folders[folder].by_name.end())
        out[folder].insert(it->second);
  for (const FlightRecord &rec : r.flight)
    for (const FlightKernel &k : rec.kernels)
      if (auto it = r.folders[k.folder].by_name.find(k.name); it != r.folders[k.folder].by_name.end())
        out[k.folder].insert(it->second);
  return out;
}

Json flight_json(const Report &r, const FlightRecord &rec) {
  const FlightKernel *t = rec.trigger_entry();
  Json kernels = Json::array();
  for (const FlightKernel &k : rec.kernels) {
    const FolderData &fd = r.folders[k.folder];
    auto it = fd.by_name.find(k.name);
    kernels.push_back({{"folder", k.folder},
                       {"pos", it == fd.by_name.end() ? Json(nullptr) : Json(it->second)},
                       {"name", k.name},
                       {"note", k.fields.note},
                       {"inputs_finite", k.inputs_finite},
                       {"output_non_finite", k.output_non_finite}});
  }
  return {{"rank", rec.rank},
          {"trigger", rec.trigger},
          {"trigger_kernel", rec.trigger_kernel},
          {"trigger_text", rec.trigger_text()},
          {"overflow", t ? t->fields.overflow : std::string()},
          {"kernels", std::move(kernels)}};
}

// One kernel of a race: its place in its folder's data (null: not in dump.json), stream ("host" for the host).
Json race_side_json(const FolderData &fd, const RaceSide &s) {
  auto it = fd.by_name.find(s.kernel);
  return {{"name", s.kernel},
          {"pos", it == fd.by_name.end() ? Json(nullptr) : Json(it->second)},
          {"stream", s.stream_id ? Json(*s.stream_id) : Json("host")},
          {"access", s.access},
          {"tensors", s.tensors}};
}

Json race_json(const Report &r, size_t folder, const RaceEntry &e) {
  return {{"folder", folder},
          {"kind", e.kind},
          {"bytes", e.end - e.begin},
          {"count", e.count},
          {"first", race_side_json(r.folders[folder], e.first)},
          {"second", race_side_json(r.folders[folder], e.second)}};
}

Json folder_info(const Report &r, const FolderData &f) {
  Json first_bad = nullptr;
  if (f.first_bad)
    first_bad = {
        {"pos", *f.first_bad}, {"x", f.kernels[*f.first_bad].x}, {"kernel", f.name_of(*f.first_bad, r.strings)}};
  return {{"label", f.dir.label()}, {"step", or_null(f.dir.step)}, {"rank", f.dir.rank_label()},
          {"task", f.task},         {"kernels", f.kernels.size()}, {"nan", f.nan},
          {"inf", f.inf},           {"first_bad", first_bad},      {"against", or_null(f.against)}};
}

std::string chartjs_version() {
  const std::string_view js = chart_js();
  const size_t v = js.find("Chart.js v");
  if (v == std::string_view::npos) return "?";
  return std::string(js.substr(v + 10, js.find_first_of(" \n", v + 10) - v - 10));
}

std::string main_json(const Report &r, const std::vector<TopDiff> &top) {
  char when[32] = "";
  const std::time_t now = std::time(nullptr);
  std::tm tm{};
  if (localtime_r(&now, &tm)) std::strftime(when, sizeof when, "%Y-%m-%d %H:%M:%S", &tm);
  Json j = {{"schema", 1},
            {"root", r.root.string()},
            {"against", r.against ? Json(r.against->string()) : Json(nullptr)},
            {"generated", when},
            {"chartjs", chartjs_version()},
            {"thresholds",
             {{"stat_rtol", page_number(r.th.stat_rtol)},
              {"atol", page_number(r.th.atol)},
              {"cos", page_number(r.th.cosine)}}},
            {"stems", r.strings.stems.items()},
            {"tails", r.strings.tails.items()},
            {"frames", r.strings.frames.items()},
            {"stacks", r.strings.stacks},
            {"stack_user", r.strings.stack_user},
            {"partial", r.partial}};
  j["folders"] = Json::array();
  for (const FolderData &f : r.folders) j["folders"].push_back(folder_info(r, f));
  j["first_nan"] = mark_json(r, r.first_nan);
  j["first_diff"] = mark_json(r, r.first_diff);
  j["top"] = Json::array();
  for (const TopDiff &t : top) {
    const KernelDiff &d = r.folders[t.folder].diffs[t.pos];
    j["top"].push_back({{"folder", t.folder},
                        {"pos", t.pos},
                        {"rel", page_number(t.rel)},
                        {"where", d.where},
                        {"a", page_stat(d.a)},
                        {"b", page_stat(d.b)}});
  }
  j["only_a"] = r.only_a;
  j["only_b"] = r.only_b;
  j["kernels_only_a"] = r.kernels_only_a;
  j["kernels_only_b"] = r.kernels_only_b;
  j["flight"] = Json::array();
  for (const FlightRecord &rec : r.flight) j["flight"].push_back(flight_json(r, rec));
  j["races"] = Json::array();
  for (const auto &[folder, race] : r.races) j["races"].push_back(race_json(r, folder, race));
  // Stack frames may hold bytes that are not UTF-8 (native symbols): replaced, never a reason to fail.
  return j.dump(-1, ' ', false, Json::error_handler_t::replace);
}

template <typename T, typename Each>
void list(std::string &o, const std::vector<T> &items, Each each) {
  o += '[';
  for (size_t i = 0; i < items.size(); ++i) {
    if (i) o += ',';
    each(items[i]);
  }
  o += ']';
}

std::string folder_json(const FolderData &f, const std::set<size_t> &featured) {
  const auto &k = f.kernels;
  std::string o = "{\"x\":";
  list(o, k, [&](const KernelPoint &p) { format::append_json_integer(o, p.x); });
  o += ",\"name\":[";
  for (size_t i = 0; i < k.size(); ++i)
    o += (i ? "," : "") + std::to_string(k[i].stem) + "," + std::to_string(k[i].tail);
  o += ']';
  const std::array<std::pair<const char *, std::optional<double> KernelPoint::*>, 3> series = {
      {{"norm", &KernelPoint::norm}, {"max", &KernelPoint::max}, {"min", &KernelPoint::min}}};
  for (const auto &[key, member] : series) {
    o += ",\"" + std::string(key) + "\":";
    list(o, k, [&](const KernelPoint &p) {
      if (p.*member)
        append_page_number(o, *(p.*member));
      else
        o += "null";
    });
  }
  o += ",\"flags\":";
  list(o, k, [&](const KernelPoint &p) { o += std::to_string(p.flags); });
  o += ",\"stack\":";
  list(o, k, [&](const KernelPoint &p) { o += std::to_string(p.stack); });
  o += ",\"tensors\":{";
  bool first = true;
  for (size_t i = 0; i < k.size(); ++i) {
    if (k.size() > kDetailsForAll && !featured.count(i)) continue;
    o += (first ? "\"" : ",\"") + std::to_string(i) + "\":" + k[i].tensors;
    first = false;
  }
  o += '}';
  if (!f.diffs.empty()) {
    o += ",\"rel\":";
    list(o, f.diffs, [&](const KernelDiff &d) {
      if (d.rel)
        append_page_number(o, *d.rel);
      else
        o += "null";
    });
    o += ",\"where\":";
    list(o, f.diffs, [&](const KernelDiff &d) { format::append_json_string(o, d.where); });
    o += ",\"matched\":";
    list(o, f.diffs, [&](const KernelDiff &d) { o += d.matched ? '1' : '0'; });
  }
  return o + "}";
}

// JSON inside <script>: a '<' can only stand in a string, where \u003c says the same without ever closing the element.
std::string script_safe(std::string json) {
  std::string o;
  o.reserve(json.size());
  for (char c : json) {
    if (c == '<')
      o += "\\u003c";
    else
      o += c;
  }
  return o;
}

// JavaScript inside <script>: "</script" could only stand in a string or a regular expression, where "<\/script"
// means the same.
std::string script_text(std::string_view js) {
  std::string o(js);
  for (size_t at = 0; (at = o.find("</script", at)) != std::string::npos; at += 2) o.replace(at, 2, "<\\/");
  return o;
}

std::string html_escape(std::string_view s) {
  std::string o;
  for (char c : s) {
    switch (c) {
      case '<': o += "&lt;"; break;
      case '>': o += "&gt;"; break;
      case '&': o += "&amp;"; break;
      case '"': o += "&quot;"; break;
      default: o += c;
    }
  }
  return o;
}

}  // namespace

std::string page_html(const Report &r) {
  const std::vector<TopDiff> top = top_diffs(r);
  const std::vector<std::set<size_t>> feat = featured(r, top);
  std::string data =
      "<script id=\"report-data\" type=\"application/json\">" + script_safe(main_json(r, top)) + "</script>\n";
  for (size_t f = 0; f < r.folders.size(); ++f)
    data += "<script id=\"folder-" + std::to_string(f) + "\" type=\"application/json\">" +
            script_safe(folder_json(r.folders[f], feat[f])) + "</script>\n";
  const std::array<std::pair<std::string_view, std::string>, 5> parts = {{
      {"{{TITLE}}", html_escape("msprobe-inspect report: " + r.root.string())},
      {"/*{{CSS}}*/", std::string(page_css())},
      {"<!--{{DATA}}-->", std::move(data)},
      {"/*{{CHART_JS}}*/", script_text(chart_js())},
      {"/*{{PAGE_JS}}*/", script_text(page_js())},
  }};
  // Each marker once, in the template's order; the text put in is never searched again.
  const std::string_view tpl = page_html_template();
  std::string out;
  size_t from = 0;
  for (const auto &[marker, text] : parts) {
    const size_t at = tpl.find(marker, from);
    if (at == std::string_view::npos) throw std::logic_error("report.html lacks " + std::string(marker));
    out.append(tpl.substr(from, at - from));
    out += text;
    from = at + marker.size();
  }
  out.append(tpl.substr(from));
  return out;
}

}  // namespace msprobe::tools::report
