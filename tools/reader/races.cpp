#include "tools/reader/races.h"

#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <stdexcept>
#include <system_error>

#include "format/dump_json.h"
#include "format/format.h"
#include "format/io.h"
#include "tools/reader/json_reader.h"

namespace msprobe::tools {
namespace {

constexpr size_t kMaxRacesBytes = size_t{256} << 20;

uint64_t address(const Json &v) { return std::stoull(v.get<std::string>(), nullptr, 16); }

RaceSide side_of(const Json &j) {
  RaceSide s;
  s.kernel = j.at("kernel").get<std::string>();
  s.access = j.at("access").get<std::string>();
  if (j.at("stream_id").is_number_integer()) s.stream_id = j.at("stream_id").get<uint64_t>();  // else "host"
  s.tensors = j.at("tensors").get<std::vector<std::string>>();
  s.stack = j.at("stack").get<std::vector<std::string>>();
  return s;
}

}  // namespace

std::optional<std::vector<RaceEntry>> read_races(const RankDir &dir) {
  const fs::path path = dir.path / format::kRacesJson;
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) {
    if (errno == ENOENT) return std::nullopt;
    throw std::system_error(errno, std::generic_category(), "open " + path.string());
  }
  std::string text;
  const bool ok = format::read_to_end(fd, &text, kMaxRacesBytes);
  ::close(fd);
  if (!ok) throw std::runtime_error("cannot read " + path.string());
  if (!is_valid_json(text))  // a run killed in the middle of an append: the races before it
    if (auto repaired = format::repair_journal_text(text, format::kRacesJsonSuffix)) text = std::move(*repaired);
  std::vector<RaceEntry> out;
  try {
    const Json doc = parse_json(text);  // kept: a range-for over a temporary's member would outlive it
    for (const auto &[key, r] : doc.at("races").items()) {
      RaceEntry e;
      e.kind = r.at("kind").get<std::string>();
      e.begin = address(r.at("bytes").at(0));
      e.end = address(r.at("bytes").at(1));
      e.count = r.at("count").get<uint64_t>();
      e.first = side_of(r.at("first"));
      e.second = side_of(r.at("second"));
      out.push_back(std::move(e));
    }
  } catch (const std::exception &ex) {
    throw std::runtime_error(path.string() + " is not a races.json: " + ex.what());
  }
  return out;
}

}  // namespace msprobe::tools
