// msprobe-inspect: the post-run tool for msprobe-shim dumps (docs/inspect.md).
//
// It links no MPI library (the wheel allows only libc, libm, libdl, libpthread and the loader in DT_NEEDED). When
// mpirun (Open MPI) started it for first-nan or first-diff, it hands the process over to its sibling
// msprobe-inspect-mpi, built beside it against Open MPI when that was found (tools/mpi/), so that
// `mpirun -n P msprobe-inspect first-nan ROOT` runs as one job. Without the sibling, process 0 does the work alone
// over the folders it sees and says so; the other processes stop at once.
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <string>
#include <system_error>
#include <tuple>

#include "tools/inspect/commands.h"

namespace {

bool distributed_command(int argc, char **argv) {
  return argc > 1 && (std::strcmp(argv[1], "first-nan") == 0 || std::strcmp(argv[1], "first-diff") == 0);
}

// The process's rank and size in the MPI job that started it: Open MPI's variables, else MPICH/Hydra's (PMI_*);
// -1 when no MPI launcher started it.
int launcher_rank(const char **family) {
  for (auto [rank, size, name] : {std::tuple{"OMPI_COMM_WORLD_RANK", "OMPI_COMM_WORLD_SIZE", "Open MPI"},
                                  std::tuple{"PMI_RANK", "PMI_SIZE", "MPICH"}}) {
    const char *r = std::getenv(rank), *s = std::getenv(size);
    if (r && s) {
      *family = name;
      return std::atoi(r);
    }
  }
  return -1;
}

}  // namespace

int main(int argc, char **argv) {
  const char *family = "";
  const int rank =
      distributed_command(argc, argv) && !std::getenv("MSPROBE_INSPECT_ALONE") ? launcher_rank(&family) : -1;
  if (rank >= 0) {
    std::error_code ec;
    const std::filesystem::path self = std::filesystem::read_symlink("/proc/self/exe", ec);
    const std::filesystem::path sibling = self.parent_path() / "msprobe-inspect-mpi";
    if (!ec && std::strcmp(family, "Open MPI") == 0 && ::access(sibling.c_str(), X_OK) == 0) {
      std::string path = sibling.string();
      argv[0] = path.data();
      ::execv(path.c_str(), argv);
      std::fprintf(stderr, "msprobe-inspect: cannot run %s: %s\n", path.c_str(), std::strerror(errno));
    }
    if (rank != 0) return 0;
    std::fprintf(stderr,
                 "msprobe-inspect %s: this build has no MPI driver for %s (no %s): process 0 reads every rank folder "
                 "it sees alone, the other processes do nothing\n",
                 argv[1], family, sibling.string().c_str());
  }
  return msprobe::tools::inspect_main(argc, argv);
}
