// The transport of a process alone (transport.h).
#include "tools/inspect/transport.h"

namespace msprobe::tools {

namespace {

class Alone final : public Transport {
 public:
  int rank() const override { return 0; }
  int size() const override { return 1; }
  std::vector<std::string> all_gather(const std::string &mine) override { return {mine}; }
  std::vector<std::string> gather(const std::string &mine) override { return {mine}; }
  int broadcast(int v) override { return v; }
};

Alone g_alone;
Transport *g_transport = &g_alone;

}  // namespace

Transport &transport() { return *g_transport; }
void set_transport(Transport *t) { g_transport = t ? t : &g_alone; }

}  // namespace msprobe::tools
