#include "format/stack_text.h"

#include <charconv>

namespace msprobe::format {

namespace {

bool is_space(char c) { return c == ' ' || c == '\t' || c == '\n' || c == '\r'; }

std::string_view folder_of(std::string_view file) {
  const size_t slash = file.rfind('/');
  return slash == std::string_view::npos ? std::string_view() : file.substr(0, slash);
}

// A file the user did not write: the standard library, installed packages, frozen modules, the shim's own code.
bool library_file(std::string_view file) {
  if (file.empty() || file.front() == '<') return true;
  for (std::string_view part : {"/site-packages/", "/dist-packages/", "/msprobe_shim/"})
    if (file.find(part) != std::string_view::npos) return true;
  // lib/pythonX.Y/ (or lib64/, pythonXY.zip) outside its site-packages, checked above
  for (size_t at = file.find("/python"); at != std::string_view::npos; at = file.find("/python", at + 1)) {
    const size_t d = at + 7;
    if (d < file.size() && file[d] >= '0' && file[d] <= '9' &&
        (file.substr(0, at).ends_with("/lib") || file.substr(0, at).ends_with("/lib64")))
      return true;
    if (file.substr(at).find(".zip/") != std::string_view::npos) return true;
  }
  return false;
}

}  // namespace

std::string frame_line(std::string_view frame) {
  std::string out;
  out.reserve(frame.size());
  for (size_t i = 0; i < frame.size();) {
    if (!is_space(frame[i])) {
      out += frame[i++];
      continue;
    }
    size_t j = i;
    bool breaks = false;
    for (; j < frame.size() && is_space(frame[j]); ++j) breaks = breaks || frame[j] == '\n' || frame[j] == '\r';
    if (breaks)
      out += ' ';
    else
      out.append(frame.substr(i, j - i));
    i = j;
  }
  while (!out.empty() && is_space(out.back())) out.pop_back();
  // A Python frame without a source line ("in <module>, \n "): the separator's comma goes too.
  if (const size_t nl = frame.find('\n'); nl != std::string_view::npos && !out.empty() && out.back() == ',' &&
                                          frame.find_first_not_of(" \t\r\n", nl) == std::string_view::npos)
    out.pop_back();
  return out;
}

std::optional<PythonFrame> python_frame(std::string_view frame) {
  constexpr std::string_view kFile = "File ", kLine = ", line ", kIn = ", in ";
  if (!frame.starts_with(kFile)) return std::nullopt;
  const size_t line_at = frame.find(kLine);
  if (line_at == std::string_view::npos) return std::nullopt;
  PythonFrame p;
  p.file = frame.substr(kFile.size(), line_at - kFile.size());
  const char *digits = frame.data() + line_at + kLine.size();
  const auto [end, ec] = std::from_chars(digits, frame.data() + frame.size(), p.line);
  if (ec != std::errc()) return std::nullopt;
  const std::string_view rest = frame.substr(static_cast<size_t>(end - frame.data()));
  if (!rest.starts_with(kIn)) return std::nullopt;
  std::string_view fn = rest.substr(kIn.size());
  fn = fn.substr(0, fn.find(", \n"));
  if (const size_t nl = fn.find('\n'); nl != std::string_view::npos) fn = fn.substr(0, nl);
  while (!fn.empty() && (is_space(fn.back()) || fn.back() == ',')) fn.remove_suffix(1);
  p.function = fn;
  return p;
}

std::optional<size_t> user_frame(std::span<const std::string> frames) {
  if (frames.empty()) return std::nullopt;
  std::optional<std::string_view> home;  // the main script's folder
  for (size_t i = frames.size(); i-- > 0;) {
    const std::optional<PythonFrame> p = python_frame(frames[i]);
    if (p && !library_file(p->file)) {
      home = folder_of(p->file);
      break;
    }
  }
  if (!home) {
    for (size_t i = 0; i < frames.size(); ++i)
      if (python_frame(frames[i])) return i;  // Python frames, all of them library code: the innermost
    return 0;
  }
  for (size_t i = 0; i < frames.size(); ++i) {
    const std::optional<PythonFrame> p = python_frame(frames[i]);
    if (p && !library_file(p->file) && folder_of(p->file) == *home) return i;
  }
  return 0;  // not reached: the main script's own frame is in its folder
}

std::string stack_text(std::span<const std::string> frames, std::string_view indent) {
  std::string out;
  for (const std::string &f : frames) {
    out += indent;
    out += frame_line(f);
    out += '\n';
  }
  return out;
}

}  // namespace msprobe::format
