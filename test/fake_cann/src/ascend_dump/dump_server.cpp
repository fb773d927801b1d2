// The record side of the data dump (adump's AdxDumpRecord, cann_dump.md §1.5-§1.8): one thread pops the
// queued chunks in order and hands each to the registered callback (len = sizeof(acldumpChunk) + bufLen),
// or, without one, appends it to its file. Statistics records (`.bin` of sizeof(OpStatsResult)) become CSV.
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <condition_variable>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <deque>
#include <map>
#include <mutex>
#include <sstream>
#include <thread>

#include "acl/acl_dump.h"
#include "fakecann/dump.h"

namespace fakecann::dump {
namespace {

using Callback = DumpCallback;

struct Chunk {
  std::string file;
  std::vector<uint8_t> data;
  bool last;
};

struct Server {
  std::mutex mu;
  std::condition_variable work, space;
  std::deque<Chunk> queue;
  uint64_t queued_bytes = 0;
  bool running = false, stopping = false;
  std::thread thread;
  std::string cwd;
  std::deque<std::string> csv_names;  // the last 10 CSV files that got their header
};

Server &server() {
  static Server *s = new Server;  // leaked: a worker may still push during static destruction
  return *s;
}

std::mutex g_cb_mu;
Callback g_callback = nullptr;

uint64_t queue_limit() { return std::max<uint64_t>(2 * chunk_limit(), 256u << 20); }

std::string cell_float(int64_t slot) {
  uint32_t bits = (uint32_t)slot;
  float f;
  std::memcpy(&f, &bits, 4);
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.9g", f);
  return buf;
}

std::string cell_value(const TensorStatsResult &t, int64_t slot) {
  if (t.dType == 1 || t.dType == 2 || t.dType == 27) return cell_float(slot);  // DT_FLOAT, DT_FLOAT16, DT_BF16
  if (t.dType == 8) return std::to_string(slot);                               // DT_INT64
  return std::to_string((int32_t)(uint32_t)slot);
}

std::string shape_cell(const TensorStatsResult &t, int64_t *count) {
  std::string s;
  *count = 1;
  for (int i = 0; i < t.shapeSize; ++i) {
    s += (i ? "x" : "") + std::to_string(t.shape[i]);
    *count *= t.shape[i];
  }
  return s.empty() ? "-" : s;
}

// Creates the parent directories of `path`.
void make_parents(const std::string &path) {
  for (size_t i = path.find('/', 1); i != std::string::npos; i = path.find('/', i + 1))
    mkdir(path.substr(0, i).c_str(), 0750);
}

void write_to_disk(const Server &s, const std::string &name, const std::vector<uint8_t> &data) {
  std::string path = name.empty() || name[0] == '/' ? name : s.cwd + "/" + name;
  make_parents(path);
  int fd = open(path.c_str(), O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0640);
  bool ok = fd >= 0;
  for (size_t done = 0; ok && done < data.size();) {
    ssize_t n = write(fd, data.data() + done, data.size() - done);
    ok = n > 0;
    done += ok ? (size_t)n : 0;
  }
  if (fd >= 0) close(fd);
  if (!ok) {
    std::fprintf(stderr, "[fake_cann] dump: cannot write %s\n", path.c_str());
    unlink(path.c_str());
  }
}

void to_callback(Callback cb, const std::string &name, const std::vector<uint8_t> &data, bool last,
                 uint32_t overstate = 0) {
  // The payload starts at byte 4116, inside the struct's tail padding.
  const size_t head = offsetof(acldumpChunk, dataBuf);
  std::vector<uint64_t> storage((std::max(sizeof(acldumpChunk), head + data.size()) + 7) / 8);
  auto *c = reinterpret_cast<acldumpChunk *>(storage.data());
  std::strncpy(c->fileName, name.c_str(), ACL_DUMP_MAX_FILE_PATH_LENGTH - 1);
  c->bufLen = (uint32_t)data.size() + overstate;
  c->isLastChunk = last ? 1 : 0;
  c->offset = -1;
  c->flag = 0;
  if (!data.empty()) std::memcpy(reinterpret_cast<uint8_t *>(c) + head, data.data(), data.size());
  int32_t rc = cb(c, (int32_t)(sizeof(acldumpChunk) + data.size()));
  if (rc != 0) std::fprintf(stderr, "[fake_cann] dump: callback returned %d for %s\n", rc, name.c_str());
}

// A statistics record becomes CSV text under the `.csv` name; the header only for a name not seen lately.
bool convert_stats(Server &s, std::string &name, std::vector<uint8_t> &data, bool with_nul) {
  const std::string bin = ".bin";
  if (data.size() != sizeof(OpStatsResult) || name.size() < bin.size() ||
      name.compare(name.size() - bin.size(), bin.size(), bin) != 0)
    return false;
  OpStatsResult r;
  std::memcpy(&r, data.data(), sizeof r);
  name.replace(name.size() - bin.size(), bin.size(), ".csv");
  bool seen = std::find(s.csv_names.begin(), s.csv_names.end(), name) != s.csv_names.end();
  if (!seen) {
    s.csv_names.push_back(name);
    if (s.csv_names.size() > 10) s.csv_names.pop_front();
  }
  std::string text = stats_csv(r, !seen);
  data.assign(text.begin(), text.end());
  if (with_nul) data.push_back(0);
  return true;
}

// Test-only fault injection on the callback path: FAKE_CANN_DUMP_FAULT=<kind>:<k>[,<kind>:<k>...] damages the
// k-th file (from 1, counted as files first reach the callback) the way a broken delivery would:
//   corrupt   its protobuf's first bytes (after the u64 header length) are 0xff: the DumpData cannot be read
//   truncate  its last chunk never comes (of a one-chunk file, the first half comes without isLastChunk): the file
//             never ends; later files are delivered normally
//   cut       its last chunk loses its final half but still says isLastChunk: the tensors end early
//   header    its first chunk's bufLen says more bytes than the callback's len holds
struct Fault {
  std::string kind;
  uint64_t file;
};

const std::vector<Fault> &faults() {
  static const std::vector<Fault> list = [] {
    std::vector<Fault> out;
    const char *env = std::getenv("FAKE_CANN_DUMP_FAULT");
    std::stringstream ss(env ? env : "");
    for (std::string item; std::getline(ss, item, ',');) {
      size_t colon = item.find(':');
      uint64_t k = colon == std::string::npos ? 0 : std::strtoull(item.c_str() + colon + 1, nullptr, 10);
      std::string kind = item.substr(0, colon);
      if (k == 0 || (kind != "corrupt" && kind != "truncate" && kind != "cut" && kind != "header")) {
        std::fprintf(stderr, "[fake_cann] FAKE_CANN_DUMP_FAULT: '%s' is not <corrupt|truncate|cut|header>:<k>\n",
                     item.c_str());
        continue;
      }
      out.push_back({kind, k});
    }
    return out;
  }();
  return list;
}

// The fault planted on the file of this chunk, or "", and whether the chunk is its file's first. Chunks of one file
// come in order, files may interleave (several streams). Runs on the record thread only.
std::string fault_for(const std::string &file, bool last, bool *first) {
  static uint64_t files = 0;
  static std::map<std::string, uint64_t> open;  // file -> its number, until its last chunk
  *first = false;
  if (faults().empty()) return "";
  auto it = open.find(file);
  *first = it == open.end();
  const uint64_t k = *first ? ++files : it->second;
  if (last) {
    if (!*first) open.erase(it);
  } else if (*first) {
    open.emplace(file, k);
  }
  for (const Fault &f : faults())
    if (f.file == k) return f.kind;
  return "";
}

void deliver(Server &s, Chunk &c) {
  Callback cb;
  {
    std::lock_guard<std::mutex> lk(g_cb_mu);
    cb = g_callback;
  }
  bool stats = convert_stats(s, c.file, c.data, cb != nullptr);
  if (cb == nullptr) return write_to_disk(s, c.file, c.data);
  const bool last = c.last || stats;
  bool first;
  const std::string fault = fault_for(c.file, last, &first);
  if (fault == "truncate" && last) {
    if (!first) return;
    c.data.resize(c.data.size() / 2);  // a file of one chunk: its first half, then nothing
    return to_callback(cb, c.file, c.data, false);
  }
  if (fault == "cut" && last) c.data.resize(c.data.size() / 2);
  if (fault == "corrupt" && first)
    for (size_t i = 8; i < std::min<size_t>(c.data.size(), 24); ++i) c.data[i] = 0xff;
  if (fault == "header" && first) return to_callback(cb, c.file, c.data, last, /*overstate=*/4096);
  to_callback(cb, c.file, c.data, last);
}

void record_loop(Server *s) {
  for (;;) {
    Chunk c;
    {
      std::unique_lock<std::mutex> lk(s->mu);
      s->work.wait(lk, [s] { return s->stopping || !s->queue.empty(); });
      if (s->queue.empty()) return;  // stopping, and everything delivered
      c = std::move(s->queue.front());
      s->queue.pop_front();
      s->queued_bytes -= c.data.size();
    }
    s->space.notify_all();
    deliver(*s, c);
  }
}

}  // namespace

std::string stats_csv(const OpStatsResult &r, bool header) {
  static const std::pair<uint64_t, const char *> cols[] = {{kMax, "Max Value"},
                                                           {kMin, "Min Value"},
                                                           {kAvg, "Avg Value"},
                                                           {kNan, "Nan Count"},
                                                           {kNegInf, "Negative Inf Count"},
                                                           {kPosInf, "Positive Inf Count"},
                                                           {kL2norm, "l2norm"}};
  const bool compatible = r.statItem == kCompatibleStats;
  std::ostringstream os;
  if (header) {
    os << "Input/Output,Index,Data Size,Data Type,Format,Shape";
    if (compatible) {
      os << ",Max Value,Min Value,Avg Value,Count,Nan Count,Negative Inf Count,Positive Inf Count";
    } else {
      os << ",Count";
      for (const auto &[bit, name] : cols)
        if (r.statItem & bit) os << "," << name;
    }
    os << "\n";
  }
  for (int i = 0; i < std::min(r.tensorNum, kMaxStatsResultNum); ++i) {
    const TensorStatsResult &t = r.stat[i];
    int64_t count;
    std::string shape = shape_cell(t, &count);
    os << (t.io == 0 ? "Input" : "Output") << "," << t.index << "," << t.size << "," << proto_dtype_name(t.dType) << ","
       << proto_format_name(t.format) << "," << shape;
    // Max/Min by dtype, Avg and l2norm as float, the counts as int32.
    auto value = [&](int k) {
      if (k < 2) return cell_value(t, t.stats[k]);
      if (k == 2 || k == 6) return cell_float(t.stats[k]);
      return std::to_string((int32_t)t.stats[k]);
    };
    if (compatible) {
      os << "," << value(0) << "," << value(1) << "," << value(2) << "," << count << "," << value(3) << "," << value(4)
         << "," << value(5);
    } else {
      os << "," << count;
      for (int k = 0; k < 7; ++k)
        if (r.statItem & cols[k].first) os << "," << (t.result ? "NA" : value(k));
    }
    os << "\n";
  }
  return os.str();
}

uint64_t chunk_limit() {
  static const uint64_t limit = [] {
    const char *s = std::getenv("FAKE_CANN_DUMP_CHUNK_BYTES");
    uint64_t v = s ? std::strtoull(s, nullptr, 10) : 0;
    return v > 0 && v <= (128u << 20) ? v : (uint64_t)128 << 20;  // DUMP_SLICE_SIZE
  }();
  return limit;
}

void server_start() {
  Server &s = server();
  std::lock_guard<std::mutex> lk(s.mu);
  if (s.running) return;
  char buf[4096];
  s.cwd = getcwd(buf, sizeof buf) ? buf : ".";
  s.running = true;
  s.stopping = false;
  s.thread = std::thread(record_loop, &s);
}

void server_stop() {
  Server &s = server();
  {
    std::lock_guard<std::mutex> lk(s.mu);
    if (!s.running) return;
    s.stopping = true;
  }
  s.work.notify_all();
  s.space.notify_all();
  if (s.thread.joinable()) s.thread.join();  // the loop drains the queue first
  std::lock_guard<std::mutex> lk(s.mu);
  s.running = false;
}

bool push_chunk(const std::string &file, std::vector<uint8_t> data, bool last) {
  Server &s = server();
  std::unique_lock<std::mutex> lk(s.mu);
  // A full queue back-pressures the producer, as the device retries when the host says "queue full".
  s.space.wait(
      lk, [&] { return !s.running || s.stopping || s.queue.empty() || s.queued_bytes + data.size() <= queue_limit(); });
  if (!s.running || s.stopping) return false;
  s.queued_bytes += data.size();
  s.queue.push_back(Chunk{file, std::move(data), last});
  lk.unlock();
  s.work.notify_one();
  return true;
}

bool register_callback(Callback cb) {
  std::lock_guard<std::mutex> lk(g_cb_mu);
  if (g_callback != nullptr) return false;
  g_callback = cb;
  return true;
}
bool unregister_callback() {
  std::lock_guard<std::mutex> lk(g_cb_mu);
  bool had = g_callback != nullptr;
  g_callback = nullptr;
  return had;
}
}  // namespace fakecann::dump
