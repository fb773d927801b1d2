// The files the report's page is made of, carried inside msprobe-inspect: Chart.js (Debian's libjs-chart.js, its UMD
// build, read when msprobe-inspect is built) and the page's own report.html, report.js and report.css
// (tools/inspect/report_page/). cmake/embed_files.cmake writes their definitions into the build tree, so a report
// written anywhere msprobe-inspect runs (a wheel on a machine without the Debian package) has them all.
#pragma once
#include <string_view>

namespace msprobe::tools::report {

std::string_view chart_js();
std::string_view page_html_template();
std::string_view page_js();
std::string_view page_css();

}  // namespace msprobe::tools::report
