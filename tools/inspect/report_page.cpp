// report: the page's data as JSON and the HTML around it. The template (report_page/report.html) holds four markers
// that are replaced by the title, the CSS, the data and the two scripts (Chart.js, then the page's report.js); the
// data is one <script type="application/json"> for the whole dump plus one per folder, which the page parses only
// when that folder is shown.
#include <algorithm>
#include <array>
#include <ctime>
#include <set>
#include <tuple>

#include "format/dump_json.h"
#include "tools/inspect/report.h"
#include "tools/inspect/report_assets.h"

namespace msprobe::tools::report {

namespace {

void str(std::string &o, std::string_view s) { format::append_json_string(o, s); }

void opt_int(std::string &o, const std::optional<uint64_t> &v) {
  if (v)
    format::append_json_integer(o, *v);
  else
    o += "null";
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

void strings(std::string &o, const std::vector<std::string> &items) {
  list(o, items, [&](const std::string &s) { str(o, s); });
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

void marked_json(std::string &o, const Report &r, const MarkedKernel &k) {
  o += "{\"rank\":";
  str(o, k.rank);
  o += ",\"step\":";
  opt_int(o, k.step);
  o += ",\"kernel\":";
  str(o, k.kernel);
  o += ",\"launch_index\":";
  opt_int(o, k.launch_index);
  o += ",\"note\":";
  str(o, k.note);
  const auto at = locate(r, k);
  o += ",\"folder\":" + (at ? std::to_string(at->first) : "null");
  o += ",\"pos\":" + (at ? std::to_string(at->second) : "null") + "}";
}

// A mark as first-nan --json / first-diff --json print it, with where the report holds each kernel.
void mark_json(std::string &o, const Report &r, const std::optional<Mark> &m) {
  if (!m) {
    o += "null";
    return;
  }
  marked_json(o, r, m->at);
  o.pop_back();  // the closing brace: the mark's own fields follow
  o += ",\"stack\":";
  strings(o, m->stack);
  o += ",\"verdict\":";
  str(o, m->verdict);
  o += ",\"spread\":";
  list(o, m->spread, [&](const MarkedKernel &k) { marked_json(o, r, k); });
  o += '}';
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
  for (const FlightRecord &rec : r.flight)
    for (const FlightKernel &k : rec.kernels)
      if (auto it = r.folders[k.folder].by_name.find(k.name); it != r.folders[k.folder].by_name.end())
        out[k.folder].insert(it->second);
  return out;
}

void flight_json(std::string &o, const Report &r, const FlightRecord &rec) {
  o += "{\"rank\":";
  str(o, rec.rank);
  o += ",\"trigger\":";
  str(o, rec.trigger);
  o += ",\"trigger_kernel\":";
  str(o, rec.trigger_kernel);
  o += ",\"trigger_text\":";
  str(o, rec.trigger_text());
  const FlightKernel *t = rec.trigger_entry();
  o += ",\"overflow\":";
  str(o, t ? t->fields.overflow : std::string());
  o += ",\"kernels\":";
  list(o, rec.kernels, [&](const FlightKernel &k) {
    const FolderData &fd = r.folders[k.folder];
    auto it = fd.by_name.find(k.name);
    o += "{\"folder\":" + std::to_string(k.folder) +
         ",\"pos\":" + (it == fd.by_name.end() ? std::string("null") : std::to_string(it->second)) + ",\"name\":";
    str(o, k.name);
    o += ",\"note\":";
    str(o, k.fields.note);
    o += std::string(",\"inputs_finite\":") + (k.inputs_finite ? "true" : "false") +
         ",\"output_non_finite\":" + (k.output_non_finite ? "true" : "false") + "}";
  });
  o += '}';
}

std::string main_json(const Report &r, const std::vector<TopDiff> &top) {
  std::string o = "{\"schema\":1,\"root\":";
  str(o, r.root.string());
  o += ",\"against\":";
  if (r.against)
    str(o, r.against->string());
  else
    o += "null";
  char when[32] = "";
  const std::time_t now = std::time(nullptr);
  std::tm tm{};
  if (localtime_r(&now, &tm)) std::strftime(when, sizeof when, "%Y-%m-%d %H:%M:%S", &tm);
  o += ",\"generated\":";
  str(o, when);
  const std::string_view js = chart_js();
  const size_t v = js.find("Chart.js v");
  o += ",\"chartjs\":";
  str(o, v == std::string_view::npos ? "?" : js.substr(v + 10, js.find_first_of(" \n", v + 10) - v - 10));
  o += ",\"thresholds\":{\"stat_rtol\":";
  append_page_number(o, r.th.stat_rtol);
  o += ",\"atol\":";
  append_page_number(o, r.th.atol);
  o += ",\"cos\":";
  append_page_number(o, r.th.cosine);
  o += "},\"stems\":";
  strings(o, r.strings.stems.items());
  o += ",\"tails\":";
  strings(o, r.strings.tails.items());
  o += ",\"frames\":";
  strings(o, r.strings.frames.items());
  o += ",\"stacks\":";
  list(o, r.strings.stacks,
       [&](const std::vector<uint32_t> &s) { list(o, s, [&](uint32_t id) { o += std::to_string(id); }); });
  o += ",\"folders\":";
  list(o, r.folders, [&](const FolderData &f) {
    o += "{\"label\":";
    str(o, f.dir.label());
    o += ",\"step\":";
    opt_int(o, f.dir.step);
    o += ",\"rank\":";
    str(o, f.dir.rank_label());
    o += ",\"task\":";
    str(o, f.task);
    o += ",\"kernels\":" + std::to_string(f.kernels.size()) + ",\"nan\":" + std::to_string(f.nan) +
         ",\"inf\":" + std::to_string(f.inf) + ",\"first_bad\":";
    if (f.first_bad) {
      o += "{\"pos\":" + std::to_string(*f.first_bad) + ",\"x\":" + std::to_string(f.kernels[*f.first_bad].x) +
           ",\"kernel\":";
      str(o, f.name_of(*f.first_bad, r.strings));
      o += '}';
    } else {
      o += "null";
    }
    o += ",\"against\":";
    if (f.against)
      str(o, *f.against);
    else
      o += "null";
    o += '}';
  });
  o += ",\"first_nan\":";
  mark_json(o, r, r.first_nan);
  o += ",\"first_diff\":";
  mark_json(o, r, r.first_diff);
  o += ",\"top\":";
  list(o, top, [&](const TopDiff &t) {
    const KernelDiff &d = r.folders[t.folder].diffs[t.pos];
    o += "{\"folder\":" + std::to_string(t.folder) + ",\"pos\":" + std::to_string(t.pos) + ",\"rel\":";
    append_page_number(o, t.rel);
    o += ",\"where\":";
    str(o, d.where);
    o += ",\"a\":";
    append_page_stat(o, d.a);
    o += ",\"b\":";
    append_page_stat(o, d.b);
    o += '}';
  });
  o += ",\"only_a\":";
  strings(o, r.only_a);
  o += ",\"only_b\":";
  strings(o, r.only_b);
  o += ",\"kernels_only_a\":" + std::to_string(r.kernels_only_a) +
       ",\"kernels_only_b\":" + std::to_string(r.kernels_only_b) + ",\"flight\":";
  list(o, r.flight, [&](const FlightRecord &rec) { flight_json(o, r, rec); });
  return o + "}";
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
    list(o, f.diffs, [&](const KernelDiff &d) { str(o, d.where); });
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
