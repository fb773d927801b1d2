// How the processes of one msprobe-inspect run talk (first-nan / first-diff, docs/inspect.md). One process alone is
// the default; msprobe-inspect-mpi (tools/mpi/) installs an MPI transport when mpirun started it. The commands use
// only these four calls, so the same code runs alone or as P processes and gives the same answer.
#pragma once
#include <string>
#include <vector>

namespace msprobe::tools {

class Transport {
 public:
  virtual ~Transport() = default;
  virtual int rank() const = 0;  // this process, 0..size-1
  virtual int size() const = 0;
  // Every process's `mine`, in process order, on every process.
  virtual std::vector<std::string> all_gather(const std::string &mine) = 0;
  // Every process's `mine`, in process order, on process 0 (empty elsewhere).
  virtual std::vector<std::string> gather(const std::string &mine) = 0;
  // Process 0's `v` on every process.
  virtual int broadcast(int v) = 0;
};

// The transport of this process (one process alone unless set_transport() installed another).
Transport &transport();
void set_transport(Transport *t);

}  // namespace msprobe::tools
