// shim/graph without the stand-in: hand-built protobuf bytes (every wire type, unknown fields, packed and unpacked
// dims) through decode_dump_file, every error path of the wire reader and the file layout, the file and path names,
// ChunkAssembler's header checks, offsets and bounds, and the stats CSV in both header forms.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <string>
#include <vector>

#include "shim/graph/chunk_assembler.h"
#include "shim/graph/dump_file.h"
#include "shim/graph/proto_wire.h"
#include "shim/graph/stats_csv.h"
#include "test/unit/shim/graph/pb_writer.h"

using namespace msprobe::shim::graph;
using msprobe::format::DType;
using msprobe::format::IoKind;
using pb_test::Buf;
using pb_test::Pb;

namespace {

Pb shape(const std::vector<uint64_t> &dims, bool packed = true) {
  Pb m, p;
  if (!packed) {
    for (uint64_t d : dims) m.u64(1, d);
    return m;
  }
  for (uint64_t d : dims) p.varint(d);
  return m.bytes(1, p.b);
}

// OpInput/OpOutput: dtype, format, shape, size, original_shape.
Pb tensor(bool output, int dtype, int fmt, const std::vector<uint64_t> &dims, uint64_t size,
          const std::vector<uint64_t> &orig = {}) {
  Pb t;
  t.u64(1, dtype).u64(2, fmt).msg(3, shape(dims)).u64(output ? 6 : 5, size);
  if (!orig.empty()) t.msg(output ? 7 : 6, shape(orig));
  return t;
}

Buf file_of(const Pb &header, const Buf &data) {
  Buf f(8);
  const uint64_t h = header.b.size();
  std::memcpy(f.data(), &h, 8);
  f.insert(f.end(), header.b.begin(), header.b.end());
  f.insert(f.end(), data.begin(), data.end());
  return f;
}

Buf floats(std::initializer_list<float> v) {
  Buf b(v.size() * 4);
  std::memcpy(b.data(), std::data(v), b.size());
  return b;
}

const std::string kPath = "/d/20260101120000/0/toy/1/7/Add.block_add.3.2.1760000000000001";

std::string decode_error(const Buf &f, const std::string &path = kPath) {
  std::string error;
  EXPECT_FALSE(decode_dump_file(path, std::span<const unsigned char>(f), &error).has_value());
  EXPECT_FALSE(error.empty());
  return error;
}

// An Add dump: inputs x, y [2] FLOAT ND, output [2].
Pb add_header() {
  Pb h;
  h.str(1, "2.0").u64(2, 1760000000000001).msg(3, tensor(true, 1, 2, {2}, 8)).msg(4, tensor(false, 1, 2, {2}, 8));
  h.msg(4, tensor(false, 1, 2, {2}, 8)).str(6, "block/add");
  return h;
}

}  // namespace

TEST(GraphDumpFile, DecodesHeaderTensorsAndNames) {
  Buf data = floats({1, 2});
  for (const Buf &b : {floats({10, 20}), floats({11, 22}), Buf{0xAA, 0xBB}})
    data.insert(data.end(), b.begin(), b.end());
  std::string error;
  auto f = decode_dump_file(kPath, std::span<const unsigned char>(file_of(add_header(), data)), &error);
  ASSERT_TRUE(f) << error;
  EXPECT_EQ(f->name.op_type, "Add");
  EXPECT_EQ(f->name.op_name, "block_add");
  EXPECT_EQ(f->name.task_id, 3u);
  EXPECT_EQ(f->name.stream_id, 2u);
  EXPECT_EQ(f->name.timestamp, 1760000000000001u);
  EXPECT_EQ(f->place.time, "20260101120000");
  EXPECT_EQ(f->place.device_id, 0u);
  EXPECT_EQ(f->place.model_name, "toy");
  EXPECT_EQ(f->place.model_id, 1u);
  EXPECT_EQ(f->place.dump_number, 7u);
  EXPECT_EQ(f->version, "2.0");
  EXPECT_EQ(f->dump_time, 1760000000000001u);
  EXPECT_EQ(f->op_name, "block/add");
  ASSERT_EQ(f->inputs.size(), 2u);
  ASSERT_EQ(f->outputs.size(), 1u);
  EXPECT_EQ(f->trailing_bytes, 2u);
  EXPECT_EQ(Buf(f->inputs[1].bytes.begin(), f->inputs[1].bytes.end()), floats({10, 20}));
  EXPECT_EQ(Buf(f->outputs[0].bytes.begin(), f->outputs[0].bytes.end()), floats({11, 22}));
  const DumpTensor &o = f->outputs[0];
  EXPECT_EQ(o.io, IoKind::Output);
  EXPECT_EQ(o.dtype, DType::F32);
  EXPECT_EQ(o.dtype_name, "DT_FLOAT");
  EXPECT_EQ(o.format_name, "ND");
  EXPECT_EQ(o.shape, std::vector<int64_t>{2});
  EXPECT_TRUE(o.decodable) << o.note;
  EXPECT_EQ(f->inputs[1].index, 1u);
}

TEST(GraphDumpFile, EveryWireTypeUnknownFieldsAndShapes) {
  Pb out = tensor(true, 27, 0, {}, 2 * 3 * 2);  // BF16 NCHW, shape from unpacked dims below
  out.msg(3, shape({2, 3}, false));             // a second Shape merges: dims append
  out.fixed(20, 0x1122334455667788, 8).fixed(21, 7, 4).str(22, "x").u64(23, 5);
  out.fixed(1, 9, 4);                                        // a known field with another wire type is skipped
  out.u64(8, static_cast<uint64_t>(-1)).u64(9, 0xdeadbeef);  // sub_format -1 (10-byte varint), address
  Pb h;
  h.fixed(50, 1, 8).str(9, "dfx").msg(3, out).fixed(51, 2, 4).u64(52, 1).msg(5, Pb().u64(3, 4)).str(6, "n");
  Buf data(12, 0x5A);
  std::string error;
  auto f = decode_dump_file(kPath, std::span<const unsigned char>(file_of(h, data)), &error);
  ASSERT_TRUE(f) << error;
  ASSERT_EQ(f->outputs.size(), 1u);
  const DumpTensor &t = f->outputs[0];
  EXPECT_EQ(t.dtype, DType::BF16);
  EXPECT_EQ(t.device_shape, (std::vector<int64_t>{2, 3}));
  EXPECT_EQ(t.sub_format, -1);
  EXPECT_TRUE(t.decodable) << t.note;
  EXPECT_EQ(f->op_name, "n");
}

TEST(GraphDumpFile, TensorProblemsMarkOnlyThatTensor) {
  Pb h;
  h.msg(4, tensor(false, 1, 2, {2, 3}, 20));                    // size mismatch
  h.msg(4, tensor(false, 16, 2, {2}, 16));                      // DT_COMPLEX64: raw
  h.msg(4, tensor(false, 2, 29, {1, 1, 16, 16}, 512, {3, 5}));  // FRACTAL_NZ, original shape [3, 5]
  h.msg(4, tensor(false, 1, 77, {1}, 4));                       // unknown format
  h.msg(4, tensor(false, -1, 2, {1}, 1));                       // negative dtype
  h.msg(3, tensor(true, 1, 0, {1, 2, 1, 1}, 8, {2}));           // original [2] over device [1,2,1,1]: same count
  std::string error;
  auto f = decode_dump_file(kPath, std::span<const unsigned char>(file_of(h, Buf(20 + 16 + 512 + 4 + 1 + 8))), &error);
  ASSERT_TRUE(f) << error;
  ASSERT_EQ(f->inputs.size(), 5u);
  EXPECT_FALSE(f->inputs[0].decodable);
  EXPECT_NE(f->inputs[0].note.find("size 20 does not match"), std::string::npos) << f->inputs[0].note;
  EXPECT_EQ(f->inputs[1].dtype, DType::Raw);
  EXPECT_EQ(f->inputs[1].dtype_name, "DT_COMPLEX64");
  EXPECT_FALSE(f->inputs[1].decodable);
  EXPECT_EQ(f->inputs[2].format_name, "FRACTAL_NZ");
  EXPECT_EQ(f->inputs[2].shape, (std::vector<int64_t>{3, 5}));
  EXPECT_EQ(f->inputs[2].device_shape, (std::vector<int64_t>{1, 1, 16, 16}));
  EXPECT_FALSE(f->inputs[2].decodable);
  EXPECT_EQ(f->inputs[3].format_name, "FORMAT_77");
  EXPECT_EQ(f->inputs[4].dtype_name, "DT_-1");
  EXPECT_TRUE(f->outputs[0].decodable) << f->outputs[0].note;
  EXPECT_EQ(f->outputs[0].shape, std::vector<int64_t>{2});
  EXPECT_EQ(f->outputs[0].format_name, "NCHW");
}

TEST(GraphDumpFile, DtypeAndFormatTables) {
  const std::pair<int, DType> known[] = {{1, DType::F32},  {2, DType::F16},  {3, DType::I8},    {4, DType::U8},
                                         {5, DType::I16},  {6, DType::U16},  {7, DType::I32},   {8, DType::I64},
                                         {9, DType::U32},  {10, DType::U64}, {11, DType::Bool}, {12, DType::F64},
                                         {27, DType::BF16}};
  for (auto [v, d] : known) EXPECT_EQ(proto_dtype(v), d) << v;
  for (int v : {0, 13, 16, 17, 28, 32, 35, 42, 43, 1000}) EXPECT_EQ(proto_dtype(v), DType::Raw) << v;
  EXPECT_EQ(proto_dtype_name(35), "DT_FLOAT8_E4M3FN");
  EXPECT_EQ(proto_dtype_name(43), "DT_43");
  EXPECT_EQ(proto_dtype_value("DT_BF16"), 27);
  EXPECT_FALSE(proto_dtype_value("float32"));
  EXPECT_EQ(proto_format_name(0), "NCHW");
  EXPECT_EQ(proto_format_name(29), "FRACTAL_NZ");
  EXPECT_EQ(proto_format_name(47), "NCL");
  EXPECT_EQ(proto_format_name(49), "C1HWC0");
  EXPECT_EQ(proto_format_name(255), "MAX");
  EXPECT_EQ(proto_format_name(50), "FORMAT_50");
}

TEST(GraphDumpFile, FileErrors) {
  const Buf data(24);
  EXPECT_NE(decode_error(Buf{1, 0, 0}).find("shorter than its 8-byte header length"), std::string::npos);
  Buf past = file_of(add_header(), data);
  past[0] = 0xff;
  EXPECT_NE(decode_error(past).find("past the end"), std::string::npos);
  EXPECT_NE(decode_error(file_of(add_header(), Buf(23))).find("output 0 (8 bytes) ends past"), std::string::npos);
  Pb big;
  big.msg(4, tensor(false, 1, 2, {2}, ~uint64_t{0})).msg(4, tensor(false, 1, 2, {2}, 8));
  EXPECT_NE(decode_error(file_of(big, data)).find("input 0"), std::string::npos);
  EXPECT_NE(decode_error(file_of(add_header(), data), "/d/Add.x.1.2.csv").find("statistics CSV"), std::string::npos);
  for (std::string bad :
       {"Add.x.1.2", "Add.x.1.2.3.4.5", ".x.1.2.3", "Add.x.a.2.3", "Add.x.1.2.99999999999999999999999"})
    EXPECT_NE(decode_error(file_of(add_header(), data), "/d/" + bad).find(bad), std::string::npos) << bad;
}

TEST(GraphDumpFile, WireErrors) {
  const Buf data(24);
  auto wire_error = [&](const Buf &raw) { return decode_error(file_of(Pb().raw(raw), data)); };
  const Buf overlong = {0x10, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x01};
  EXPECT_NE(wire_error(overlong).find("overlong varint"), std::string::npos);
  EXPECT_NE(wire_error({0x10, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x02}).find("overlong"),
            std::string::npos);
  EXPECT_NE(wire_error({0x10, 0x80}).find("truncated"), std::string::npos);
  EXPECT_NE(wire_error({0x0a, 0x05, 'a'}).find("length past the end"), std::string::npos);
  EXPECT_NE(wire_error({0x09, 1, 2, 3}).find("truncated fixed-width"), std::string::npos);
  EXPECT_NE(wire_error({0x0d, 1}).find("truncated fixed-width"), std::string::npos);
  EXPECT_NE(wire_error({0x0b}).find("group"), std::string::npos);
  EXPECT_NE(wire_error({0x0c}).find("group"), std::string::npos);
  EXPECT_NE(wire_error({0x0e}).find("invalid wire type"), std::string::npos);
  EXPECT_NE(wire_error({0x0f}).find("invalid wire type"), std::string::npos);
  EXPECT_NE(wire_error({0x00, 0x00}).find("invalid field number"), std::string::npos);
  // Nested: an OpInput whose Shape holds a truncated packed dim, and an OpOutput with a bad wire type.
  EXPECT_NE(wire_error(Pb().msg(4, Pb().bytes(3, Pb().bytes(1, {0x80}).b)).b).find("Shape: truncated"),
            std::string::npos);
  EXPECT_NE(wire_error(Pb().msg(3, Pb().raw({0x0b})).b).find("OpOutput: group"), std::string::npos);
  std::string e;
  EXPECT_FALSE(decode_dump_file(kPath, std::shared_ptr<const Buf>(), &e));
  EXPECT_FALSE(decode_dump_file(kPath, std::span<const unsigned char>(), nullptr));  // error may be null
}

TEST(GraphDumpFile, NamesAndPlaces) {
  std::string e;
  auto six = parse_dump_name("Add.a.4.3.2.1760000000000000", &e);
  ASSERT_TRUE(six) << e;
  EXPECT_EQ(six->name_dump_number, 4u);
  EXPECT_EQ(six->task_id, 3u);
  auto ffts = parse_dump_name("Add.a.3.2.1760000000000000.FFTSPLUS.5.6.7", &e);
  ASSERT_TRUE(ffts) << e;
  EXPECT_EQ(ffts->ffts->task_type, "FFTSPLUS");
  EXPECT_EQ(ffts->ffts->device_id, 7u);
  EXPECT_TRUE(parse_dump_name("Add.a.4.3.2.1760000000000000.2.5.6.7", &e));
  EXPECT_FALSE(parse_dump_name("Add.a.3.2.1760000000000000..5.6.7", &e));
  DumpPlace nostep = parse_dump_place("/x/20260101120000/1/m/2/Add.a.3.2.1");
  EXPECT_EQ(nostep.model_name, "m");
  EXPECT_EQ(nostep.model_id, 2u);
  EXPECT_FALSE(nostep.dump_number);
  DumpPlace op = parse_dump_place("20260101120000/3/Add.a.3.2.1");
  EXPECT_EQ(op.device_id, 3u);
  EXPECT_TRUE(op.model_name.empty());
  DumpPlace bare = parse_dump_place("Add.a.3.2.1");
  EXPECT_TRUE(bare.time.empty());
  EXPECT_FALSE(bare.device_id);
}

namespace {

// A chunk as the callback receives it: 4120 + n bytes, payload at 4116.
Buf chunk(const std::string &name, const std::string &payload, bool last, int64_t offset = -1) {
  Buf c(kChunkHeaderBytes + payload.size(), 0);
  std::memcpy(c.data(), name.data(), name.size());
  const uint32_t n = static_cast<uint32_t>(payload.size()), l = last ? 1 : 0;
  std::memcpy(&c[kChunkBufLenOffset], &n, 4);
  std::memcpy(&c[kChunkIsLastOffset], &l, 4);
  std::memcpy(&c[kChunkOffsetOffset], &offset, 8);
  std::memcpy(&c[kChunkPayloadOffset], payload.data(), payload.size());
  return c;
}

ChunkResult feed(ChunkAssembler &a, const Buf &c) { return a.feed(c.data(), static_cast<int32_t>(c.size())); }

std::string text(const AssembledFile &f) { return std::string(f.bytes.begin(), f.bytes.end()); }

}  // namespace

TEST(GraphChunks, InterleavedFilesAndOffsets) {
  ChunkAssembler a;
  EXPECT_EQ(feed(a, chunk("/a", "he", false)).error, "");
  EXPECT_EQ(feed(a, chunk("/b", "wo", false, 0)).error, "");
  EXPECT_EQ(a.pending(), (std::vector<std::string>{"/a", "/b"}));
  EXPECT_EQ(a.buffered_bytes(), 4u);
  EXPECT_FALSE(feed(a, chunk("/a", "ll", false, 2)).file);  // offset == size: accepted
  ChunkResult b = feed(a, chunk("/b", "rld", true));
  ASSERT_TRUE(b.file);
  EXPECT_EQ(b.file->name, "/b");
  EXPECT_EQ(text(*b.file), "world");
  ChunkResult r = feed(a, chunk("/a", "", true));  // an empty last chunk closes the file
  ASSERT_TRUE(r.file) << r.error;
  EXPECT_EQ(text(*r.file), "hell");
  EXPECT_TRUE(a.pending().empty());
  EXPECT_EQ(a.buffered_bytes(), 0u);
}

TEST(GraphChunks, AbandonedFilesAreReportedOnceAndTheirLateChunksSkipped) {
  ChunkAssembler a;
  feed(a, chunk("/a", "abc", false));
  feed(a, chunk("/b", "de", false));
  EXPECT_EQ(a.abandon_pending(), (std::vector<std::string>{"/a", "/b"}));
  EXPECT_TRUE(a.pending().empty());
  EXPECT_TRUE(a.abandon_pending().empty());  // a second close of the dump reports nothing again
  EXPECT_EQ(a.buffered_bytes(), 0u);
  ChunkResult r = feed(a, chunk("/a", "late", true, 3));  // the rest of an abandoned file is not a file
  EXPECT_FALSE(r.file);
  EXPECT_EQ(r.error, "");
  r = feed(a, chunk("/c", "new", true));
  ASSERT_TRUE(r.file);
  EXPECT_EQ(text(*r.file), "new");
}

TEST(GraphChunks, OutOfOrderOffsetDropsTheFileUntilItsLastChunk) {
  ChunkAssembler a;
  feed(a, chunk("/a", "abc", false));
  ChunkResult r = feed(a, chunk("/a", "x", false, 7));
  EXPECT_NE(r.error.find("offset 7 is not the end of the 3 bytes"), std::string::npos) << r.error;
  EXPECT_NE(r.error.find("file dropped"), std::string::npos);
  EXPECT_TRUE(a.pending().empty());
  EXPECT_EQ(a.buffered_bytes(), 0u);
  r = feed(a, chunk("/a", "more", false));  // the rest of the dropped file: silently skipped
  EXPECT_EQ(r.error, "");
  EXPECT_FALSE(feed(a, chunk("/a", "end", true)).file);
  r = feed(a, chunk("/a\nb", "x", true, 3));  // errors are one line, even for a name with a newline
  EXPECT_EQ(r.error.find('\n'), std::string::npos) << r.error;
  EXPECT_NE(r.error.find("/a?b"), std::string::npos) << r.error;
  r = feed(a, chunk("/a", "new", true));  // the name is free again
  ASSERT_TRUE(r.file);
  EXPECT_EQ(text(*r.file), "new");
}

TEST(GraphChunks, BadHeaders) {
  ChunkAssembler a;
  Buf c = chunk("/a", "abcd", false);
  EXPECT_NE(a.feed(c.data(), 4115).error.find("shorter than its 4116-byte header"), std::string::npos);
  EXPECT_NE(a.feed(nullptr, 5000).error.find("shorter"), std::string::npos);
  EXPECT_NE(a.feed(c.data(), -1).error.find("shorter"), std::string::npos);
  // len = 4116 + bufLen (the payload's true end) is not what CANN passes: rejected.
  EXPECT_NE(a.feed(c.data(), 4116 + 4).error.find("len 4120 != 4120 + bufLen 4"), std::string::npos);
  Buf noname = chunk("", "abcd", false);
  EXPECT_NE(feed(a, noname).error.find("empty fileName"), std::string::npos);
  Buf unterminated = chunk("/a", "abcd", false);
  std::memset(unterminated.data(), 'x', kChunkFileNameBytes);
  EXPECT_NE(feed(a, unterminated).error.find("not NUL-terminated"), std::string::npos);
  EXPECT_NE(feed(a, chunk("/e", "", false)).error.find("empty chunk"), std::string::npos);
  EXPECT_TRUE(a.pending().empty());
  Buf wrong_len = chunk("/f", "abcd", false);
  const uint32_t huge = 0xffffffff;
  std::memcpy(&wrong_len[kChunkBufLenOffset], &huge, 4);
  EXPECT_NE(feed(a, wrong_len).error.find("bufLen 4294967295"), std::string::npos);
}

TEST(GraphChunks, Bounds) {
  ChunkAssembler a(ChunkLimits{2, 10, 15});
  feed(a, chunk("/1", "12345", false));
  feed(a, chunk("/2", "12345", false));
  ChunkResult r = feed(a, chunk("/3", "x", false));
  EXPECT_NE(r.error.find("more than 2 dump files open at once"), std::string::npos) << r.error;
  EXPECT_EQ(a.pending().size(), 2u);
  r = feed(a, chunk("/1", "123456", false));
  EXPECT_NE(r.error.find("file larger than 10 bytes"), std::string::npos) << r.error;
  EXPECT_EQ(a.buffered_bytes(), 5u);
  feed(a, chunk("/4", "123456789", false));
  r = feed(a, chunk("/2", "12", false));
  EXPECT_NE(r.error.find("budget of 15 bytes"), std::string::npos) << r.error;
  EXPECT_EQ(a.pending(), std::vector<std::string>{"/4"});
  EXPECT_EQ(a.buffered_bytes(), 9u);
  // Dropped names are remembered boundedly (max_open_files = 2): /3, the oldest of /3 /1 /2, is forgotten.
  EXPECT_FALSE(feed(a, chunk("/1", "late", true)).file) << "still known as dropped";
  r = feed(a, chunk("/3", "late", true));
  ASSERT_TRUE(r.file) << "forgotten as dropped: a one-chunk file";
}

TEST(GraphStatsCsv, CompatibleHeaderAndNul) {
  const std::string csv =
      "Input/Output,Index,Data Size,Data Type,Format,Shape,Max Value,Min Value,Avg Value,Count,Nan Count,"
      "Negative Inf Count,Positive Inf Count\n"
      "Input,0,24,DT_FLOAT,ND,2x3,1.5,-2,0.25,6,0,1,2\n"
      "Output,1,8,DT_INT64,ND,-,9,-9,0,1,0,0,0\n";
  std::string e;
  auto f = decode_stats_csv("/d/20260101120000/0/toy/1/0/Relu.relu.2.1.1760000000000000.csv",
                            std::string_view(csv.c_str(), csv.size() + 1), &e);
  ASSERT_TRUE(f) << e;
  EXPECT_EQ(f->name.op_type, "Relu");
  EXPECT_EQ(f->place.dump_number, 0u);
  ASSERT_EQ(f->rows.size(), 2u);
  const StatsRow &r = f->rows[0];
  EXPECT_EQ(r.io, IoKind::Input);
  EXPECT_EQ(r.dtype, DType::F32);
  EXPECT_EQ(r.format_name, "ND");
  EXPECT_EQ(r.shape, (std::vector<int64_t>{2, 3}));
  EXPECT_EQ(r.count, 6u);
  EXPECT_EQ(r.max, 1.5);
  EXPECT_EQ(r.min, -2.0);
  EXPECT_EQ(r.avg, 0.25);
  EXPECT_EQ(r.neg_inf, 1);
  EXPECT_EQ(r.pos_inf, 2);
  EXPECT_FALSE(r.l2norm);
  EXPECT_EQ(f->rows[1].io, IoKind::Output);
  EXPECT_EQ(f->rows[1].index, 1u);
  EXPECT_EQ(f->rows[1].dtype, DType::I64);
  EXPECT_TRUE(f->rows[1].shape.empty());
}

TEST(GraphStatsCsv, SelectedColumnsPiecesAndNa) {
  const std::string path = "/d/Mul.m.1.1.1760000000000000.csv";
  const std::string first =
      "Input/Output,Index,Data Size,Data Type,Format,Shape,Count,Max "
      "Value,l2norm\nInput,0,4,DT_COMPLEX64,ND,1,1,NA,NA\n";
  const std::string second = std::string("Output,0,4,DT_FLOAT,ND,1,1,inf,3.5\n") + '\0';
  std::string e;
  EXPECT_FALSE(decode_stats_csv(path, second, &e));
  EXPECT_NE(e.find("without header"), std::string::npos) << e;
  StatsAssembler s;
  auto a = s.feed(path, first, &e);
  ASSERT_TRUE(a) << e;
  EXPECT_EQ(a->rows[0].dtype, DType::Raw);
  EXPECT_EQ(a->rows[0].dtype_name, "DT_COMPLEX64");
  EXPECT_FALSE(a->rows[0].max);
  EXPECT_FALSE(a->rows[0].l2norm);
  EXPECT_FALSE(a->rows[0].avg);
  auto b = s.feed(path, second, &e);
  ASSERT_TRUE(b) << e;
  EXPECT_FALSE(b->had_header);
  EXPECT_EQ(b->rows[0].l2norm, 3.5);
  EXPECT_TRUE(std::isinf(*b->rows[0].max));
  EXPECT_FALSE(b->rows[0].nan);
}

TEST(GraphStatsCsv, Errors) {
  const std::string head = "Input/Output,Index,Data Size,Data Type,Format,Shape,Count\n";
  std::string e;
  for (const std::string &bad : {head + "Input,0,4,DT_FLOAT,ND,1\n", head + "Side,0,4,DT_FLOAT,ND,1,1\n",
                                 head + "Input,x,4,DT_FLOAT,ND,1,1\n", head + "Input,0,4,DT_FLOAT,ND,2y3,1\n",
                                 head + "Input,0,4,DT_FLOAT,ND,1,+1\n", head + "Input,0,4,DT_FLOAT,ND,1,1,\n"}) {
    EXPECT_FALSE(decode_stats_csv("/d/A.a.1.1.1.csv", bad, &e)) << bad;
    EXPECT_NE(e.find("line 2"), std::string::npos) << e;
  }
  EXPECT_FALSE(decode_stats_csv("/d/A.a.1.1.1.csv", "Input/Output,Index\n", &e));
  EXPECT_NE(e.find("malformed header"), std::string::npos);
  EXPECT_FALSE(decode_stats_csv("/d/A.a.1.1.1.csv", std::string("Inp\0ut", 6), &e));
  EXPECT_NE(e.find("NUL inside"), std::string::npos);
  EXPECT_FALSE(decode_stats_csv("/d/A.a.csv", head, &e));
  auto empty = decode_stats_csv("/d/A.a.1.1.1.csv", std::string(1, '\0'), &e);
  ASSERT_TRUE(empty);
  EXPECT_TRUE(empty->rows.empty());
}
