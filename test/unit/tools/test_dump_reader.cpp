// Reading a dump: folder layout, dump.json streaming (on a journal the collector's own writer produced), entry
// tensors, stack.json, mapping.csv and kernel selectors.
#include <gtest/gtest.h>
#include <unistd.h>

#include <cmath>
#include <filesystem>
#include <fstream>
#include <limits>

#include "collector/journal.h"
#include "format/dump_json.h"
#include "tools/reader/dump_reader.h"

namespace mt = msprobe::tools;
namespace mc = msprobe::format;
namespace fs = std::filesystem;

namespace {

class TempDir {
 public:
  TempDir() {
    path_ = fs::temp_directory_path() / ("tools_reader_" + std::to_string(::getpid()) + "_" + std::to_string(n_++));
    fs::remove_all(path_);
    fs::create_directories(path_);
  }
  ~TempDir() { fs::remove_all(path_); }
  const fs::path &path() const { return path_; }

 private:
  fs::path path_;
  static inline int n_ = 0;
};

void write(const fs::path &p, std::string_view text) {
  fs::create_directories(p.parent_path());
  std::ofstream(p, std::ios::binary) << text;
}

mc::TensorSummary tensor(mc::DType t, std::vector<int64_t> shape, double max) {
  mc::TensorSummary s;
  s.dtype = t;
  s.shape = std::move(shape);
  s.stats.max = mc::StatValue::of_real(max);
  s.stats.min = mc::StatValue::of_real(-1);
  s.stats.mean = mc::StatValue::of_real(0.5);
  s.stats.norm = mc::StatValue::of_real(3);
  return s;
}

// A dump.json written by the collector's own journal writer.
void write_dump(const fs::path &dir, int kernels, mc::Framework fw = mc::Framework::MindSpore) {
  fs::create_directories(dir);
  msprobe::collector::DumpJsonWriter w;
  mc::DumpHeader h;
  h.task = mc::Task::Statistics;
  h.framework = fw;
  w.begin(dir / mc::kDumpJson, h);
  for (int i = 0; i < kernels; ++i) {
    mc::KernelEntry e;
    e.name = (i % 2 ? "Gelu.Default." : "Add.Default.") + std::to_string(i / 2);
    mc::Arg a, b, list, value, none;
    a.v = tensor(mc::DType::F32, {2, 3}, i == 3 ? std::numeric_limits<double>::quiet_NaN() : 1.0 + i);
    // Not push_back(Arg{...}): there, since ArgValue gained std::vector<TypedScalar>, GCC 12 for aarch64 reports the
    // moved temporary's vector alternative as maybe uninitialized (a false positive, an error with -Werror).
    mc::ArgList inner(2);
    inner[0].v = tensor(mc::DType::BF16, {4}, 2.0);
    inner[1].v = tensor(mc::DType::I64, {}, 7.0);
    list.v = std::move(inner);
    value.v = mc::ValueArg{"float", 2.5};
    e.input_args = mc::ArgList{a, none, list, value};
    b.v = tensor(mc::DType::F16, {2, 3}, 4.0);
    e.output = mc::ArgList{b};
    e.launch_index = 100 - static_cast<uint64_t>(i);  // reverse launch order, to check sorting by it
    w.append(e);
  }
  w.finish();
}

TEST(Layout, StepAndRankFolderNames) {
  EXPECT_EQ(mt::parse_step_dir("step0"), 0u);
  EXPECT_EQ(mt::parse_step_dir("step123"), 123u);
  EXPECT_FALSE(mt::parse_step_dir("step"));
  EXPECT_FALSE(mt::parse_step_dir("step01"));
  EXPECT_FALSE(mt::parse_step_dir("step1a"));
  EXPECT_FALSE(mt::parse_step_dir("Step1"));
  std::optional<uint32_t> r = 5;
  EXPECT_TRUE(mt::parse_rank_dir("rank", &r));
  EXPECT_FALSE(r);
  EXPECT_TRUE(mt::parse_rank_dir("rank7", &r));
  EXPECT_EQ(r, 7u);
  EXPECT_FALSE(mt::parse_rank_dir("rank07", &r));
  EXPECT_FALSE(mt::parse_rank_dir("ranks", &r));
  EXPECT_FALSE(mt::parse_rank_dir("rank-1", &r));
}

TEST(Layout, FindsRankFoldersFromRootStepOrRank) {
  TempDir t;
  for (const char *p : {"step0/rank0", "step0/rank1", "step2/rank0", "step10/rank1", "step1/rank"})
    write_dump(t.path() / p, 1);
  fs::create_directories(t.path() / "step0/rank3");  // no dump.json: skipped
  fs::create_directories(t.path() / "notes");
  const auto all = mt::find_rank_dirs(t.path());
  std::vector<std::string> labels;
  for (const auto &d : all) labels.push_back(d.label());
  EXPECT_EQ(labels,
            (std::vector<std::string>{"step0/rank0", "step0/rank1", "step1/rank", "step2/rank0", "step10/rank1"}));
  const auto step = mt::find_rank_dirs(t.path() / "step0");
  ASSERT_EQ(step.size(), 2u);
  EXPECT_EQ(step[1].label(), "step0/rank1");
  EXPECT_EQ(step[1].step, 0u);
  const auto one = mt::find_rank_dirs(t.path() / "step10/rank1/");
  ASSERT_EQ(one.size(), 1u);
  EXPECT_EQ(one[0].label(), "step10/rank1");
  EXPECT_EQ(one[0].rank, 1u);
  EXPECT_EQ(one[0].step, 10u);

  try {
    (void)mt::find_rank_dirs(t.path() / "notes");
    FAIL();
  } catch (const mt::InputError &e) {
    EXPECT_NE(std::string(e.what()).find("notes: no dump found"), std::string::npos) << e.what();
  }
  EXPECT_THROW((void)mt::find_rank_dirs(t.path() / "absent"), mt::InputError);
  // A file of a rank folder (its dump.json) stands for the folder; any other file is no dump.
  const auto file = mt::find_rank_dirs(t.path() / "step0/rank0/dump.json");
  ASSERT_EQ(file.size(), 1u);
  EXPECT_EQ(file[0].label(), "step0/rank0");
  std::ofstream(t.path() / "notes" / "a.txt") << "x";
  EXPECT_THROW((void)mt::find_rank_dirs(t.path() / "notes" / "a.txt"), mt::InputError);
}

TEST(DumpJson, StreamsTheCollectorsJournal) {
  TempDir t;
  write_dump(t.path(), 6);
  const auto dirs = mt::find_rank_dirs(t.path());
  ASSERT_EQ(dirs.size(), 1u);
  mt::DumpHeaderRead header;
  std::vector<mt::EntryRead> entries;
  mt::DumpCallbacks cb;
  cb.on_header = [&](const mt::DumpHeaderRead &h) { header = h; };
  cb.on_kernel = [&](mt::EntryRead &&k) {
    entries.push_back(std::move(k));
    return true;
  };
  mt::read_dump_json(dirs[0], cb);
  EXPECT_EQ(header.task, "statistics");
  EXPECT_EQ(header.level, "L2");
  EXPECT_EQ(header.framework, "mindspore");
  EXPECT_EQ(header.framework_kind, mc::Framework::MindSpore);
  ASSERT_EQ(entries.size(), 6u);
  EXPECT_EQ(entries[3].name, "Gelu.Default.1");
  EXPECT_EQ(entries[3].launch_index, 97u);

  const auto tensors = mt::entry_tensors(entries[3].entry, header);
  ASSERT_EQ(tensors.size(), 4u);  // the absent optional and the scalar are not tensors
  EXPECT_EQ(tensors[0].row_suffix(), "input.0");
  EXPECT_EQ(tensors[0].dtype, mc::DType::F32);
  EXPECT_EQ(tensors[0].shape, (std::vector<int64_t>{2, 3}));
  EXPECT_TRUE(std::isnan(tensors[0].stats[0].real));
  EXPECT_EQ(tensors[0].stats[1].as_double(), -1.0);
  EXPECT_EQ(tensors[1].row_suffix(), "input.2.0");
  EXPECT_EQ(tensors[1].dtype_text, "BFloat16");
  EXPECT_EQ(tensors[1].dtype, mc::DType::BF16);
  EXPECT_EQ(tensors[2].row_suffix(), "input.2.1");
  EXPECT_TRUE(tensors[2].shape.empty());
  EXPECT_EQ(tensors[2].element_count(), 1u);
  EXPECT_EQ(tensors[3].row_suffix(), "output.0");
  EXPECT_EQ(tensors[3].dtype, mc::DType::F16);
}

TEST(DumpJson, StopsEarlyAndReportsBadJsonWithItsPath) {
  TempDir t;
  write_dump(t.path(), 10);
  const auto dirs = mt::find_rank_dirs(t.path());
  int seen = 0;
  mt::DumpCallbacks cb;
  cb.on_kernel = [&](mt::EntryRead &&) { return ++seen < 3; };
  mt::read_dump_json(dirs[0], cb);
  EXPECT_EQ(seen, 3);

  write(t.path() / "dump.json", "{\"task\": \"tensor\", \"data\": {\"A.B.0\": {\"x\": [1, }}}");
  try {
    mt::read_dump_json(dirs[0], {});
    FAIL();
  } catch (const mt::JsonError &e) {
    EXPECT_NE(std::string(e.what()).find((t.path() / "dump.json").string()), std::string::npos) << e.what();
  }
}

TEST(DumpJson, ReadsPyTorchSpellingsAndMsprobeInputKey) {
  const std::string text =
      R"({"task": "statistics", "level": "L2", "framework": "pytorch", "data": {"Add.Default.0": {"input": [)"
      R"({"type": "torch.Tensor", "dtype": "torch.bfloat16", "shape": [2], "Max": 1, "Min": true, "Mean": null}],)"
      R"( "output": {"type": "torch.Tensor", "dtype": "torch.float32", "shape": [1], "md5": "0badc0de"}}}})";
  mt::DumpHeaderRead h;
  std::vector<mt::TensorInfo> tensors;
  mt::DumpCallbacks cb;
  cb.on_header = [&](const mt::DumpHeaderRead &x) { h = x; };
  cb.on_kernel = [&](mt::EntryRead &&k) {
    tensors = mt::entry_tensors(k.entry, h);
    return true;
  };
  mt::stream_dump_json(text, cb);
  EXPECT_EQ(h.framework_kind, mc::Framework::PyTorch);
  ASSERT_EQ(tensors.size(), 2u);
  EXPECT_EQ(tensors[0].dtype, mc::DType::BF16);
  EXPECT_EQ(tensors[0].stats[0].kind, mc::StatValue::Kind::Integer);
  EXPECT_EQ(tensors[0].stats[1].kind, mc::StatValue::Kind::Bool);
  EXPECT_TRUE(tensors[0].stats[2].is_null());
  EXPECT_TRUE(tensors[0].stats[3].is_null());
  EXPECT_EQ(tensors[1].row_suffix(), "output.0");
  EXPECT_EQ(tensors[1].md5, "0badc0de");
}

// The scanning commands read tensors without building entries; show builds them. Both must see the same tensors.
void expect_same_tensors(const std::vector<mt::TensorInfo> &a, const std::vector<mt::TensorInfo> &b) {
  ASSERT_EQ(a.size(), b.size());
  for (size_t i = 0; i < a.size(); ++i) {
    EXPECT_EQ(a[i].row_suffix(), b[i].row_suffix());
    EXPECT_EQ(a[i].type, b[i].type);
    EXPECT_EQ(a[i].dtype_text, b[i].dtype_text);
    EXPECT_EQ(a[i].dtype, b[i].dtype);
    EXPECT_EQ(a[i].shape, b[i].shape);
    EXPECT_EQ(a[i].shape_ok, b[i].shape_ok);
    EXPECT_EQ(a[i].md5, b[i].md5);
    EXPECT_EQ(a[i].data_name, b[i].data_name);
    for (int k = 0; k < 4; ++k) {
      EXPECT_EQ(a[i].stats[k].kind, b[i].stats[k].kind);
      EXPECT_EQ(mt::stat_text(a[i].stats[k]), mt::stat_text(b[i].stats[k]));
    }
  }
}

// Issue 27: the launch fields in one "launch" object; the old top-level launch_index still reads, and both readers
// (records and entries) agree on each form.
TEST(DumpJson, LaunchIndexFromTheLaunchObjectOrTheOldTopLevelField) {
  const std::string text =
      R"({"task": "statistics", "framework": "mindspore", "data": {)"
      R"("A.x.0.forward": {"input_args": [], "launch": {"index": 7, "task_id": 2, "stream_id": 1, "timestamp": 9}},)"
      R"("B.x.0": {"input_args": [], "launch_index": 8, "task_id": 3},)"
      R"("C.x.0.forward": {"launch": {"task_id": 3}, "flight_note": "n"},)"
      R"("D.x.0.forward": {"launch": 5}}})";
  std::vector<std::optional<uint64_t>> li_entries, li_records;
  mt::DumpCallbacks a;
  a.on_kernel = [&](mt::EntryRead &&k) {
    li_entries.push_back(k.launch_index);
    return true;
  };
  mt::stream_dump_json(text, a);
  mt::DumpCallbacks b;
  b.on_record = [&](mt::KernelRecord &&k) {
    li_records.push_back(k.launch_index);
    if (k.name == "C.x.0.forward") {
      EXPECT_EQ(k.flight.note, "n");
    }
    return true;
  };
  mt::stream_dump_json(text, b);
  const std::vector<std::optional<uint64_t>> want = {7u, 8u, std::nullopt, std::nullopt};
  EXPECT_EQ(li_entries, want);
  EXPECT_EQ(li_records, want);
}

// Issue 30: an HCCL kernel's "comm" object and the launch time stamp, as the scanning reader gives them; a "comm"
// that is not one (a string, a missing size) reads as none.
TEST(DumpJson, CommObjectAndTimestamp) {
  const std::string text =
      R"({"task": "statistics", "framework": "mindspore", "data": {)"
      R"("HcclAllReduce.x.0.forward": {"input_args": [], "launch": {"index": 7, "timestamp": 99},)"
      R"( "comm": {"name": "g_sub_1", "rank": 1, "size": 4, "ranks": [4, 5, 6, 7], "seq": 12}},)"
      R"("HcclSend.x.0.forward": {"launch": {"index": 8}, "comm": {"name": "w", "rank": 0, "size": 2,)"
      R"( "peer": 1, "pair_seq": 3}},)"
      R"("HcclBroadcast.x.0.forward": {"timestamp": 5, "comm": {"name": "w", "rank": 0, "size": 2, "seq": 0, "root": 1}},)"
      R"("A.x.0.forward": {"comm": "not an object"},)"
      R"("B.x.0.forward": {"comm": {"name": "w", "rank": 0}}}})";
  std::vector<mt::KernelRecord> got;
  mt::DumpCallbacks cb;
  cb.on_record = [&](mt::KernelRecord &&k) {
    got.push_back(std::move(k));
    return true;
  };
  mt::stream_dump_json(text, cb);
  ASSERT_EQ(got.size(), 5u);
  ASSERT_TRUE(got[0].comm);
  EXPECT_EQ(got[0].timestamp, 99u);
  msprobe::format::CommInfo want;
  want.name = "g_sub_1";
  want.rank = 1;
  want.size = 4;
  want.ranks = std::vector<uint32_t>{4, 5, 6, 7};
  want.seq = 12;
  EXPECT_EQ(*got[0].comm, want);
  ASSERT_TRUE(got[1].comm);
  EXPECT_EQ(got[1].comm->peer, 1u);
  EXPECT_EQ(got[1].comm->pair_seq, 3u);
  EXPECT_FALSE(got[1].comm->seq);
  EXPECT_FALSE(got[1].timestamp);
  EXPECT_EQ(got[2].comm->root, 1u);
  EXPECT_EQ(got[2].timestamp, 5u);  // the top-level time stamp of dumps before the "launch" object
  EXPECT_FALSE(got[3].comm);
  EXPECT_FALSE(got[4].comm);
}

TEST(DumpJson, RecordsAndEntriesSeeTheSameTensors) {
  const std::string text =
      R"({"task": "tensor", "framework": "pytorch", "data": {)"
      R"("A.x.0": {"output": [{"type": "torch.Tensor", "dtype": "torch.float16", "shape": [3], "Max": NaN,)"
      R"( "data_name": "A.x.0.output.0.npy", "extra": {"nested": [1, {"dtype": 1}]}}],)"
      R"( "input": [null, [{"type": "t", "dtype": "torch.int8", "shape": "bad"}, {"value": 1}], 5],)"
      R"( "input_args": [{"type": "t", "dtype": "torch.bool", "shape": [], "Max": true, "md5": "00000001"}],)"
      R"( "launch_index": 4},)"
      R"("B.x.0": {"input_kwargs": {"alpha": {"type": "float", "value": 2}, "t": {"type": "t", "dtype": 7,)"
      R"( "shape": [1, 2], "Min": -1}}, "input": [{"type": "t", "dtype": "Float32", "shape": [2]}],)"
      R"( "output": {"type": "t", "dtype": "float64", "shape": [1]}, "launch_index": -3},)"
      // Duplicate keys: the first counts in both readers, as a Json lookup finds it.
      R"("C.x.0": {"output": [{"type": 1, "type": "late", "dtype": "float32", "dtype": "int8", "shape": [2],)"
      R"( "shape": [3, "x"], "Max": 1, "Max": 2, "md5": "first", "md5": 5, "data_name": 7, "data_name": "n"}]}}})";
  std::vector<std::vector<mt::TensorInfo>> from_entries, from_records;
  std::vector<std::optional<uint64_t>> li_entries, li_records;
  mt::DumpHeaderRead h;
  mt::DumpCallbacks a;
  a.on_header = [&](const mt::DumpHeaderRead &x) { h = x; };
  a.on_kernel = [&](mt::EntryRead &&k) {
    from_entries.push_back(mt::entry_tensors(k.entry, h));
    li_entries.push_back(k.launch_index);
    return true;
  };
  mt::stream_dump_json(text, a);
  mt::DumpCallbacks b;
  b.on_record = [&](mt::KernelRecord &&k) {
    from_records.push_back(std::move(k.tensors));
    li_records.push_back(k.launch_index);
    return true;
  };
  mt::stream_dump_json(text, b);
  ASSERT_EQ(from_entries.size(), 3u);
  ASSERT_EQ(from_records.size(), 3u);
  EXPECT_EQ(li_entries, li_records);
  EXPECT_EQ(li_records[0], 4u);
  EXPECT_FALSE(li_records[1]);  // negative: not a launch index
  for (int i = 0; i < 3; ++i) expect_same_tensors(from_entries[i], from_records[i]);
  // input_args wins over msprobe's "input"; then kwargs; then output.
  ASSERT_EQ(from_records[0].size(), 2u);
  EXPECT_EQ(from_records[0][0].dtype, mc::DType::Bool);
  EXPECT_EQ(from_records[0][1].row_suffix(), "output.0");
  ASSERT_EQ(from_records[1].size(), 3u);
  EXPECT_EQ(from_records[1][0].row_suffix(), "input.0");
  EXPECT_EQ(from_records[1][1].row_suffix(), "input.t");
  EXPECT_EQ(from_records[1][1].dtype_text, "7");
  EXPECT_FALSE(from_records[1][1].dtype);
  EXPECT_EQ(from_records[1][2].dtype, mc::DType::F64);
  ASSERT_EQ(from_records[2].size(), 1u);
  const mt::TensorInfo &dup = from_records[2][0];
  EXPECT_EQ(dup.type, "");
  EXPECT_EQ(dup.dtype, mc::DType::F32);
  EXPECT_EQ(dup.shape, (std::vector<int64_t>{2}));
  EXPECT_TRUE(dup.shape_ok);
  EXPECT_EQ(mt::stat_text(dup.stats[0]), "1");
  EXPECT_EQ(dup.md5, "first");
  EXPECT_FALSE(dup.data_name);
}

TEST(StackJson, GroupedAndFlat) {
  TempDir t;
  write_dump(t.path(), 1);
  const auto dirs = mt::find_rank_dirs(t.path());
  EXPECT_FALSE(mt::find_stack(dirs[0], "Add.Default.0"));  // no stack.json
  std::vector<mc::StackGroup> groups = {{{"Add.Default.0", "Gelu.Default.0"}, {"frame a", "frame b"}},
                                        {{"Add.Default.1"}, {"frame c"}}};
  write(t.path() / "stack.json", mc::stack_json(groups));
  EXPECT_EQ(mt::find_stack(dirs[0], "Gelu.Default.0"), (std::vector<std::string>{"frame a", "frame b"}));
  EXPECT_EQ(mt::find_stack(dirs[0], "Add.Default.1"), (std::vector<std::string>{"frame c"}));
  EXPECT_FALSE(mt::find_stack(dirs[0], "Add.Default.2"));
  write(t.path() / "stack.json", R"({"Add.Default.0": ["f1", "f2"], "Mul.Default.0": ["g"]})");
  EXPECT_EQ(mt::find_stack(dirs[0], "Mul.Default.0"), (std::vector<std::string>{"g"}));
  write(t.path() / "stack.json", "{\n}\n");
  EXPECT_FALSE(mt::find_stack(dirs[0], "Mul.Default.0"));
}

TEST(MappingCsv, RowsWithLineNumbers) {
  TempDir t;
  EXPECT_TRUE(mt::read_mapping_csv(t.path()).empty());
  write(t.path() / "mapping.csv", "123.npy,long.name.npy\r\n\nbroken\n456.npy,x,y.npy\n");
  const auto rows = mt::read_mapping_csv(t.path());
  ASSERT_EQ(rows.size(), 3u);
  EXPECT_EQ(rows[0].new_name, "123.npy");
  EXPECT_EQ(rows[0].original_name, "long.name.npy");
  EXPECT_EQ(rows[1].line, 3u);
  EXPECT_TRUE(rows[1].original_name.empty());
  EXPECT_EQ(rows[2].original_name, "x,y.npy");
}

TEST(Selector, FullNamePrefixAndOpTypeIndex) {
  // File order is not launch order: OpType#k follows launch_index.
  const std::vector<mt::KernelRef> ks = {{"Gelu.Default.1", 9},         {"Add.Default.0", 1},
                                         {"Gelu.Default.0", 3},         {"Gelu.Default.10", 40},
                                         {"GeluBackward.Default.0", 5}, {"Matmul.fc1_forward.0", 2}};
  auto pick = [&](std::string_view s) { return mt::select_kernel(ks, s); };
  EXPECT_EQ(pick("Gelu.Default.1").name, "Gelu.Default.1");  // exact wins over being a prefix of .10
  EXPECT_EQ(pick("Matmul").name, "Matmul.fc1_forward.0");    // unique prefix
  EXPECT_EQ(pick("Gelu.Default.10").name, "Gelu.Default.10");
  EXPECT_EQ(pick("Gelu#0").name, "Gelu.Default.0");
  EXPECT_EQ(pick("Gelu#1").name, "Gelu.Default.1");
  EXPECT_EQ(pick("Gelu#2").name, "Gelu.Default.10");
  EXPECT_EQ(pick("GeluBackward#0").name, "GeluBackward.Default.0");  // op type is the whole first part

  const auto ambiguous = pick("Gelu");
  EXPECT_FALSE(ambiguous.name);
  EXPECT_NE(ambiguous.error.find("prefix of 4 kernels"), std::string::npos) << ambiguous.error;
  EXPECT_EQ(ambiguous.candidates.front(), "Gelu.Default.0");  // in launch order
  EXPECT_EQ(ambiguous.candidates.size(), 4u);

  const auto out_of_range = pick("Gelu#3");
  EXPECT_FALSE(out_of_range.name);
  EXPECT_NE(out_of_range.error.find("only 3 kernel(s) of op type 'Gelu'"), std::string::npos) << out_of_range.error;
  EXPECT_NE(pick("Conv#0").error.find("no kernel of op type 'Conv'"), std::string::npos);
  EXPECT_NE(pick("Gelu#x").error.find("bad selector"), std::string::npos);
  EXPECT_NE(pick("Gelu#").error.find("bad selector"), std::string::npos);
  EXPECT_NE(pick("#1").error.find("bad selector"), std::string::npos);
  EXPECT_NE(pick("Softmax").error.find("no kernel named or starting with 'Softmax'"), std::string::npos);
  EXPECT_FALSE(pick("").name);
}

// Non-tensor arguments in both forms: sequences as lists of scalar leaves (msprobe's, written since issue 17) and as
// one leaf with a list value (dumps written before). Both read to the same values, and the tensors of an entry are
// the same either way.
TEST(ValueArgs, NewAndOldSequenceForms) {
  auto read = [](std::string_view text) { return mt::read_value_arg(mt::parse_json(text)); };
  const auto now = read(R"([{"type": "int", "value": 64}, {"type": "int", "value": -1}])");
  const auto old = read(R"({"type": "aclIntArray", "value": [64, -1]})");
  ASSERT_TRUE(now && old);
  EXPECT_TRUE(now->is_list && old->is_list);
  EXPECT_EQ(now->type, "int");
  EXPECT_EQ(old->type, "aclIntArray");
  EXPECT_EQ(now->values, old->values);
  EXPECT_EQ(now->values, (std::vector<mt::Json>{64, -1}));

  const auto bools = read(R"([{"type": "bool", "value": true}, {"type": "bool", "value": false}])");
  const auto old_bools = read(R"({"type": "aclBoolArray", "value": [true, false]})");
  ASSERT_TRUE(bools && old_bools);
  EXPECT_EQ(bools->values, old_bools->values);
  // A named list (an aclop attribute) names every leaf; the reader takes the values.
  const auto named = read(R"([{"type": "float", "value": 0.5, "name": "lf"}, {"type": "float", "value": NaN}])");
  ASSERT_TRUE(named);
  EXPECT_EQ(named->values.size(), 2u);
  EXPECT_TRUE(std::isnan(named->values[1].get<double>()));

  const auto scalar = read(R"({"type": "int", "value": 7, "name": "k"})");
  ASSERT_TRUE(scalar);
  EXPECT_FALSE(scalar->is_list);
  EXPECT_EQ(scalar->values, (std::vector<mt::Json>{7}));
  // An array handle the shim did not know: a scalar null leaf that keeps the ACL type.
  const auto unknown = read(R"({"type": "aclIntArray", "value": null})");
  ASSERT_TRUE(unknown);
  EXPECT_FALSE(unknown->is_list);
  EXPECT_EQ(unknown->type, "aclIntArray");
  EXPECT_TRUE(unknown->values.at(0).is_null());
  // An empty list is an empty sequence (or an empty tensor list: the reader cannot tell).
  const auto empty = read("[]");
  ASSERT_TRUE(empty);
  EXPECT_TRUE(empty->is_list && empty->values.empty() && empty->type.empty());
  const auto old_empty = read(R"({"type": "aclIntArray", "value": []})");
  ASSERT_TRUE(old_empty);
  EXPECT_TRUE(old_empty->is_list && old_empty->values.empty());

  // Not values: null, tensors, lists holding tensors or nulls, nested lists, leaves without a value.
  EXPECT_FALSE(read("null"));
  EXPECT_FALSE(read(R"({"type": "mindspore.Tensor", "dtype": "Float32", "shape": [2], "Max": 1.0})"));
  EXPECT_FALSE(
      read(R"([{"type": "mindspore.Tensor", "dtype": "Float32", "shape": [2]}, {"type": "int", "value": 1}])"));
  EXPECT_FALSE(read(R"([null, {"type": "int", "value": 1}])"));
  EXPECT_FALSE(read(R"([[{"type": "int", "value": 1}]])"));
  EXPECT_FALSE(read(R"({"type": "x", "value": [[1]]})"));
  EXPECT_FALSE(read(R"({"type": "x"})"));

  // The entry's tensors (what compare matches) do not depend on the form: same slots, same rows.
  const mt::DumpHeaderRead h;
  const auto with = [&](std::string_view seq) {
    return mt::entry_tensors(
        mt::parse_json(std::string(R"({"input_args": [{"type": "mindspore.Tensor", "dtype": "Float32", "shape": [2],)"
                                   R"( "Max": 1.0, "Min": 0.0, "Mean": 0.5, "Norm": 1.0}, )") +
                       std::string(seq) + R"(, [{"type": "mindspore.Tensor", "dtype": "Int64", "shape": []}]]})"),
        h);
  };
  const auto a = with(R"([{"type": "int", "value": 64}])"), b = with(R"({"type": "aclIntArray", "value": [64]})");
  ASSERT_EQ(a.size(), 2u);
  ASSERT_EQ(b.size(), 2u);
  for (size_t i = 0; i < a.size(); ++i) EXPECT_EQ(a[i].row_suffix(), b[i].row_suffix());
  EXPECT_EQ(a[1].row_suffix(), "input.2.0");
}

TEST(Helpers, Text) {
  EXPECT_EQ(mt::shape_text(std::vector<int64_t>{}), "[]");
  EXPECT_EQ(mt::shape_text(std::vector<int64_t>{2, 3}), "[2, 3]");
  EXPECT_EQ(mt::stat_text(mc::StatValue::null()), "null");
  EXPECT_EQ(mt::stat_text(mc::StatValue::of_real(std::numeric_limits<double>::quiet_NaN())), "NaN");
  EXPECT_EQ(mt::stat_text(mc::StatValue::of_bool(true)), "true");
  EXPECT_EQ(mt::human_bytes(512), "512 B");
  EXPECT_EQ(mt::human_bytes(1536), "1.5 KiB");
  EXPECT_EQ(mt::op_type_of("Add.Default.3"), "Add");
  EXPECT_EQ(mt::op_type_of("NoDots"), "NoDots");
}

}  // namespace
