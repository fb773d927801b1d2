// msprobe-inspect-mpi: msprobe-inspect's first-nan and first-diff as one MPI job (Open MPI's C API). msprobe-inspect
// execs it when mpirun started it (tools/inspect/main.cpp), so users type `mpirun -n P msprobe-inspect first-nan
// ROOT`; it can also be run directly. Every process reads the rank folders it owns, process 0 gathers the digests
// and answers (tools/inspect/cmd_ranks.cpp). Built only when CMake finds MPI (option MSPROBE_MPI), never packed in
// the wheel: it needs libmpi on every node.
#include <mpi.h>

#include <algorithm>
#include <cstdio>
#include <cstring>
#include <exception>
#include <string>
#include <vector>

#include "tools/inspect/commands.h"
#include "tools/inspect/transport.h"

namespace {

using msprobe::tools::Transport;

class MpiTransport final : public Transport {
 public:
  MpiTransport() {
    MPI_Comm_rank(MPI_COMM_WORLD, &rank_);
    MPI_Comm_size(MPI_COMM_WORLD, &size_);
  }
  int rank() const override { return rank_; }
  int size() const override { return size_; }

  std::vector<std::string> all_gather(const std::string &mine) override { return collect(mine, true); }
  std::vector<std::string> gather(const std::string &mine) override { return collect(mine, false); }

  int broadcast(int v) override {
    MPI_Bcast(&v, 1, MPI_INT, 0, MPI_COMM_WORLD);
    return v;
  }

 private:
  // Lengths first (64-bit: a digest list can pass 2 GiB only in theory, but MPI counts are int), then the bytes in
  // chunks that fit an int count.
  std::vector<std::string> collect(const std::string &mine, bool everywhere) {
    unsigned long long n = mine.size();
    std::vector<unsigned long long> lengths(static_cast<size_t>(size_));
    if (everywhere)
      MPI_Allgather(&n, 1, MPI_UNSIGNED_LONG_LONG, lengths.data(), 1, MPI_UNSIGNED_LONG_LONG, MPI_COMM_WORLD);
    else
      MPI_Gather(&n, 1, MPI_UNSIGNED_LONG_LONG, lengths.data(), 1, MPI_UNSIGNED_LONG_LONG, 0, MPI_COMM_WORLD);
    const bool receive = everywhere || rank_ == 0;
    std::vector<std::string> out(receive ? static_cast<size_t>(size_) : 0);
    if (receive)
      for (int p = 0; p < size_; ++p) out[static_cast<size_t>(p)].resize(lengths[static_cast<size_t>(p)]);
    unsigned long long longest = 0;
    if (receive)
      for (unsigned long long l : lengths) longest = std::max(longest, l);
    MPI_Bcast(&longest, 1, MPI_UNSIGNED_LONG_LONG, 0, MPI_COMM_WORLD);
    constexpr unsigned long long kChunk = 1ull << 30;
    std::vector<int> counts(static_cast<size_t>(size_)), displs(static_cast<size_t>(size_));
    std::string buffer;
    for (unsigned long long at = 0; at < longest || at == 0; at += kChunk) {
      const int mine_count = static_cast<int>(n > at ? std::min(kChunk, n - at) : 0);
      int total = 0;
      if (receive)
        for (int p = 0; p < size_; ++p) {
          const unsigned long long l = lengths[static_cast<size_t>(p)];
          counts[static_cast<size_t>(p)] = static_cast<int>(l > at ? std::min(kChunk, l - at) : 0);
          displs[static_cast<size_t>(p)] = total;
          total += counts[static_cast<size_t>(p)];
        }
      buffer.resize(static_cast<size_t>(total));
      const char *send = mine.data() + std::min<unsigned long long>(at, n);
      if (everywhere)
        MPI_Allgatherv(send, mine_count, MPI_CHAR, buffer.data(), counts.data(), displs.data(), MPI_CHAR,
                       MPI_COMM_WORLD);
      else
        MPI_Gatherv(send, mine_count, MPI_CHAR, buffer.data(), counts.data(), displs.data(), MPI_CHAR, 0,
                    MPI_COMM_WORLD);
      if (receive)
        for (int p = 0; p < size_; ++p)
          std::memcpy(out[static_cast<size_t>(p)].data() + at, buffer.data() + displs[static_cast<size_t>(p)],
                      static_cast<size_t>(counts[static_cast<size_t>(p)]));
      if (longest == 0) break;
    }
    return out;
  }

  int rank_ = 0, size_ = 1;
};

}  // namespace

int main(int argc, char **argv) {
  MPI_Init(&argc, &argv);
  int code = 2;
  {
    MpiTransport t;
    msprobe::tools::set_transport(&t);
    if (argc > 1 && std::strcmp(argv[1], "first-nan") != 0 && std::strcmp(argv[1], "first-diff") != 0 &&
        std::strcmp(argv[1], "--help") != 0 && std::strcmp(argv[1], "help") != 0) {
      if (t.rank() == 0)
        std::fprintf(stderr, "msprobe-inspect-mpi: only first-nan and first-diff run under MPI, not '%s'\n", argv[1]);
    } else {
      try {
        code = msprobe::tools::inspect_main(argc, argv);
      } catch (const std::exception &e) {  // a process that cannot go on must not leave the others waiting
        std::fprintf(stderr, "msprobe-inspect-mpi: process %d: %s\n", t.rank(), e.what());
        MPI_Abort(MPI_COMM_WORLD, 2);
      }
    }
    msprobe::tools::set_transport(nullptr);
  }
  MPI_Finalize();
  return code;
}
