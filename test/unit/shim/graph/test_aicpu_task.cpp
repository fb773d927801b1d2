// shim/graph/aicpu_task.h on hand-built AI CPU argument blocks: MindSpore's layout (packed head, io addresses,
// NodeDef), tensors typed from the NodeDef, and every way the block can fail to describe its tensors.
#include <gtest/gtest.h>

#include <cstring>
#include <string>
#include <vector>

#include "shim/graph/aicpu_task.h"
#include "test/unit/shim/graph/pb_writer.h"

using namespace msprobe::shim::graph;
using pb_test::Buf;
using pb_test::Pb;

namespace {

Buf tensor(const std::vector<int64_t> &shape, int32_t dtype) {
  Pb s;
  for (int64_t d : shape) s.bytes(2, Pb().u64(1, (uint64_t)d).b);
  return Pb().bytes(1, s.b).u64(2, (uint64_t)(uint32_t)dtype).str(3, "HBM").b;
}

template <typename T>
void put(Buf &b, T v) {
  const auto *p = reinterpret_cast<const unsigned char *>(&v);
  b.insert(b.end(), p, p + sizeof v);
}

// head {length, ioAddrNum, extInfoLength, extInfoAddr}, io addresses, u32 nodeDefLen, nodeDef.
Buf args(const std::vector<uint64_t> &io, const Buf &node_def) {
  Buf b;
  put<uint32_t>(b, (uint32_t)(20 + 8 * io.size() + 4 + node_def.size()));
  put<uint32_t>(b, (uint32_t)io.size());
  put<uint32_t>(b, 0);
  put<uint64_t>(b, 0);
  for (uint64_t a : io) put<uint64_t>(b, a);
  put<uint32_t>(b, (uint32_t)node_def.size());
  b.insert(b.end(), node_def.begin(), node_def.end());
  return b;
}

Buf gather_def() {
  Pb nd;
  nd.str(2, "GatherV2");
  nd.bytes(3, Pb().str(1, "batch_dims").bytes(2, Pb().u64(3, 0).b).b);  // an attrs map entry: skipped
  nd.bytes(4, tensor({64, 8}, 0)).bytes(4, tensor({8}, 3)).bytes(4, tensor({}, 3));
  nd.bytes(5, tensor({8, 8}, 0));
  return nd.b;
}

TEST(AicpuTask, TypesEveryTensorFromTheNodeDef) {
  Buf b = args({0x1000, 0x2000, 0x3000, 0x4000}, gather_def());
  auto t = parse_aicpu_args(b);
  ASSERT_TRUE(t.has_value());
  EXPECT_EQ(t->op, "GatherV2");
  ASSERT_TRUE(t->described) << t->why_undescribed;
  ASSERT_EQ(t->inputs.size(), 3u);
  ASSERT_EQ(t->outputs.size(), 1u);
  EXPECT_EQ(t->inputs[0].shape, (std::vector<int64_t>{64, 8}));
  EXPECT_EQ(t->inputs[0].dtype, 0);
  EXPECT_EQ(t->inputs[0].addr, 0x1000u);
  EXPECT_EQ(t->inputs[1].dtype, 3);
  EXPECT_TRUE(t->inputs[2].shape.empty());
  EXPECT_EQ(t->inputs[2].addr, 0x3000u);
  EXPECT_EQ(t->outputs[0].shape, (std::vector<int64_t>{8, 8}));
  EXPECT_EQ(t->outputs[0].addr, 0x4000u);
}

TEST(AicpuTask, UndescribedBlocksKeepTheirIoAddresses) {
  // Fewer tensors in the NodeDef than io addresses.
  auto t = parse_aicpu_args(args({1, 2, 3, 4, 5}, gather_def()));
  ASSERT_TRUE(t.has_value());
  EXPECT_FALSE(t->described);
  EXPECT_EQ(t->io_addrs, (std::vector<uint64_t>{1, 2, 3, 4, 5}));
  EXPECT_NE(t->why_undescribed.find("5 io addresses"), std::string::npos) << t->why_undescribed;
  // A NodeDef whose length runs past the block, and one that is not protobuf.
  Buf b = args({1, 2, 3, 4}, gather_def());
  b.resize(b.size() - 1);
  t = parse_aicpu_args(b);
  ASSERT_TRUE(t.has_value());
  EXPECT_FALSE(t->described);
  EXPECT_EQ(t->io_addrs.size(), 4u);
  t = parse_aicpu_args(args({1}, Buf{0xff, 0xff, 0xff}));
  ASSERT_TRUE(t.has_value());
  EXPECT_FALSE(t->described);
  // No room for the NodeDef's length at all.
  Buf head = args({7}, {});
  head.resize(28);
  t = parse_aicpu_args(head);
  ASSERT_TRUE(t.has_value());
  EXPECT_EQ(t->io_addrs, (std::vector<uint64_t>{7}));
  EXPECT_FALSE(t->described);
}

TEST(AicpuTask, NoHeadNoTask) {
  EXPECT_FALSE(parse_aicpu_args(Buf(19, 0)).has_value());
  Buf b = args({1, 2}, gather_def());
  uint32_t huge = 1u << 30;  // ioAddrNum past the block
  std::memcpy(b.data() + 4, &huge, 4);
  EXPECT_FALSE(parse_aicpu_args(b).has_value());
}

TEST(AicpuTask, NeverReadsPastTheBlock) {
  Buf b = args({0x10, 0x20, 0x30, 0x40}, gather_def());
  for (size_t n = 0; n <= b.size(); ++n) {
    Buf cut(b.begin(), b.begin() + (long)n);
    (void)parse_aicpu_args(cut);  // ASan would see a read past `cut`
  }
}

}  // namespace
