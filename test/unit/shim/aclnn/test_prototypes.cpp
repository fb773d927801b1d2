// shim/prototypes: parsing aclnn phase-1 declarations out of CANN-style headers and indexing them.
// Expectations are written by hand from the CANN prototypes (reference/cann_abi.md §4.6), and for the
// stand-in's generated headers cross-checked against test/fake_cann/aclnn_ops.spec read independently here.
#include <gtest/gtest.h>
#include <stdlib.h>

#include <algorithm>
#include <cctype>
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <map>
#include <random>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "shim/aclnn/prototypes.h"

namespace fs = std::filesystem;
using namespace msprobe::shim;

namespace {

const std::string kFixtures = MSPROBE_PROTO_FIXTURES;

struct Expect {
  std::string name;
  ParamKind kind;
  Direction dir;
  bool optional = false;
};

const Expect kWs{"workspaceSize", ParamKind::WorkspaceSizeOut, Direction::None};
const Expect kEx{"executor", ParamKind::ExecutorOut, Direction::None};

std::string describe(const OpPrototype &p) {
  std::ostringstream s;
  s << p.op << "(";
  for (const auto &q : p.params)
    s << "[" << q.type_text << "|" << q.name << "|" << to_string(q.kind) << "|" << to_string(q.dir)
      << (q.optional ? "|opt" : "") << "] ";
  s << ")";
  return s.str();
}

void expect_params(const OpPrototype *p, const std::vector<Expect> &want) {
  ASSERT_NE(p, nullptr);
  SCOPED_TRACE(describe(*p));
  ASSERT_EQ(p->params.size(), want.size());
  for (size_t i = 0; i < want.size(); ++i) {
    SCOPED_TRACE("param " + std::to_string(i));
    EXPECT_EQ(p->params[i].name, want[i].name);
    EXPECT_STREQ(to_string(p->params[i].kind), to_string(want[i].kind));
    EXPECT_STREQ(to_string(p->params[i].dir), to_string(want[i].dir));
    EXPECT_EQ(p->params[i].optional, want[i].optional);
  }
}

std::string read_text(const std::string &path) {
  std::ifstream f(path, std::ios::binary);
  std::stringstream s;
  s << f.rdbuf();
  return s.str();
}

bool ends_with(const std::string &s, const std::string &suffix) {
  return s.size() >= suffix.size() && s.compare(s.size() - suffix.size(), suffix.size(), suffix) == 0;
}

PrototypeIndex fixture_index() { return PrototypeIndex({kFixtures + "/aclnnop"}); }

// ------------------------------------------------------------------------------------------------------------
// Real-style headers.

TEST(Prototypes, AddFamilyFromOneHeader) {
  auto idx = fixture_index();
  const OpPrototype *add = idx.find("Add");
  expect_params(add, {{"self", ParamKind::Tensor, Direction::Input},
                      {"other", ParamKind::Tensor, Direction::Input},
                      {"alpha", ParamKind::Scalar, Direction::Input},
                      {"out", ParamKind::Tensor, Direction::Output},
                      kWs,
                      kEx});
  EXPECT_EQ(add->op, "Add");
  EXPECT_TRUE(ends_with(add->header_path, "/aclnnop/aclnn_add.h")) << add->header_path;
  EXPECT_EQ(add->params[0].type_text, "const aclTensor *");
  EXPECT_EQ(add->params[3].type_text, "aclTensor *");
  EXPECT_EQ(add->params[4].type_text, "uint64_t *");
  EXPECT_EQ(add->params[5].type_text, "aclOpExecutor **");

  expect_params(idx.find("Adds"), {{"self", ParamKind::Tensor, Direction::Input},
                                   {"other", ParamKind::Scalar, Direction::Input},
                                   {"alpha", ParamKind::Scalar, Direction::Input},
                                   {"out", ParamKind::Tensor, Direction::Output},
                                   kWs,
                                   kEx});
  // Declared `const aclTensor *selfRef`: the Ref suffix wins over const and over the doxygen [in].
  expect_params(idx.find("InplaceAdd"), {{"selfRef", ParamKind::Tensor, Direction::InOut},
                                         {"other", ParamKind::Tensor, Direction::Input},
                                         {"alpha", ParamKind::Scalar, Direction::Input},
                                         kWs,
                                         kEx});
  // The three came from aclnn_add.h, found by its name: nothing else was read.
  EXPECT_EQ(idx.headers_read(), 1u);
  // Cached: the same object every time.
  EXPECT_EQ(idx.find("Add"), add);
}

TEST(Prototypes, MatmulInt8AndSpelledOutVisibility) {
  auto idx = fixture_index();
  const OpPrototype *p = idx.find("Matmul");
  expect_params(p, {{"self", ParamKind::Tensor, Direction::Input},
                    {"mat2", ParamKind::Tensor, Direction::Input},
                    {"out", ParamKind::Tensor, Direction::Output},
                    {"cubeMathType", ParamKind::Int8, Direction::Input},
                    kWs,
                    kEx});
  EXPECT_EQ(p->params[3].type_text, "int8_t");
  EXPECT_FALSE(p->params[3].is_floating());
}

TEST(Prototypes, LayerNormDoubleAndOptionalOutputs) {
  auto idx = fixture_index();
  const OpPrototype *p = idx.find("LayerNorm");
  expect_params(p, {{"input", ParamKind::Tensor, Direction::Input},
                    {"normalizedShape", ParamKind::IntArray, Direction::Input},
                    {"weightOptional", ParamKind::Tensor, Direction::Input, true},
                    {"biasOptional", ParamKind::Tensor, Direction::Input, true},
                    {"eps", ParamKind::Double, Direction::Input},
                    {"out", ParamKind::Tensor, Direction::Output},
                    {"meanOutOptional", ParamKind::Tensor, Direction::Output, true},
                    {"rstdOutOptional", ParamKind::Tensor, Direction::Output, true},
                    kWs,
                    kEx});
  EXPECT_TRUE(p->params[4].is_floating());
  EXPECT_EQ(p->params[1].type_text, "const aclIntArray *");
}

TEST(Prototypes, ConstDeclaredOutputs) {
  auto idx = fixture_index();
  expect_params(idx.find("RmsNorm"), {{"x", ParamKind::Tensor, Direction::Input},
                                      {"gamma", ParamKind::Tensor, Direction::Input},
                                      {"epsilon", ParamKind::Double, Direction::Input},
                                      {"yOut", ParamKind::Tensor, Direction::Output},
                                      {"rstdOut", ParamKind::Tensor, Direction::Output},
                                      kWs,
                                      kEx});
  EXPECT_EQ(idx.find("RmsNorm")->params[3].type_text, "const aclTensor *");
  expect_params(
      idx.find("Relu"),
      {{"self", ParamKind::Tensor, Direction::Input}, {"out", ParamKind::Tensor, Direction::Output}, kWs, kEx});
  expect_params(idx.find("InplaceRelu"), {{"selfRef", ParamKind::Tensor, Direction::InOut}, kWs, kEx});
  // gradInput by name; gradInputV (V2) only by its doxygen `@param[out]`.
  expect_params(idx.find("GeluBackward"), {{"gradOutput", ParamKind::Tensor, Direction::Input},
                                           {"self", ParamKind::Tensor, Direction::Input},
                                           {"gradInput", ParamKind::Tensor, Direction::Output},
                                           kWs,
                                           kEx});
  expect_params(idx.find("GeluBackwardV2"), {{"gradOutput", ParamKind::Tensor, Direction::Input},
                                             {"self", ParamKind::Tensor, Direction::Input},
                                             {"approximate", ParamKind::CString, Direction::Input},
                                             {"gradInputV", ParamKind::Tensor, Direction::Output},
                                             kWs,
                                             kEx});
  // gradOut ends in "Out" but is the incoming gradient.
  expect_params(idx.find("LayerNormBackward"), {{"gradOut", ParamKind::Tensor, Direction::Input},
                                                {"input", ParamKind::Tensor, Direction::Input},
                                                {"normalizedShape", ParamKind::IntArray, Direction::Input},
                                                {"mean", ParamKind::Tensor, Direction::Input},
                                                {"rstd", ParamKind::Tensor, Direction::Input},
                                                {"weightOptional", ParamKind::Tensor, Direction::Input, true},
                                                {"biasOptional", ParamKind::Tensor, Direction::Input, true},
                                                {"outputMask", ParamKind::BoolArray, Direction::Input},
                                                {"gradInputOut", ParamKind::Tensor, Direction::Output},
                                                {"gradWeightOut", ParamKind::Tensor, Direction::Output},
                                                {"gradBiasOut", ParamKind::Tensor, Direction::Output},
                                                kWs,
                                                kEx});
}

TEST(Prototypes, CastCatDropoutAdamW) {
  auto idx = fixture_index();
  const OpPrototype *cast = idx.find("Cast");
  expect_params(cast, {{"self", ParamKind::Tensor, Direction::Input},
                       {"dtype", ParamKind::DataType, Direction::Input},
                       {"out", ParamKind::Tensor, Direction::Output},
                       kWs,
                       kEx});
  EXPECT_EQ(cast->params[1].type_text, "const aclDataType");

  const OpPrototype *cat = idx.find("Cat");
  expect_params(cat, {{"tensors", ParamKind::TensorList, Direction::Input},
                      {"dim", ParamKind::Int64, Direction::Input},
                      {"out", ParamKind::Tensor, Direction::Output},
                      kWs,
                      kEx});
  EXPECT_EQ(cat->params[0].type_text, "const aclTensorList *");

  expect_params(idx.find("Dropout"), {{"input", ParamKind::Tensor, Direction::Input},
                                      {"p", ParamKind::Double, Direction::Input},
                                      {"train", ParamKind::Bool, Direction::Input},
                                      {"seed", ParamKind::Int64, Direction::Input},
                                      {"offset", ParamKind::Int64, Direction::Input},
                                      {"out", ParamKind::Tensor, Direction::Output},
                                      {"maskOut", ParamKind::Tensor, Direction::Output},
                                      kWs,
                                      kEx});

  const OpPrototype *adam = idx.find("ApplyAdamWV2");
  expect_params(adam, {{"varRef", ParamKind::Tensor, Direction::InOut},
                       {"mRef", ParamKind::Tensor, Direction::InOut},
                       {"vRef", ParamKind::Tensor, Direction::InOut},
                       {"maxGradNormOptionalRef", ParamKind::Tensor, Direction::InOut, true},
                       {"grad", ParamKind::Tensor, Direction::Input},
                       {"step", ParamKind::Tensor, Direction::Input},
                       {"lr", ParamKind::Float, Direction::Input},
                       {"beta1", ParamKind::Float, Direction::Input},
                       {"beta2", ParamKind::Float, Direction::Input},
                       {"weightDecay", ParamKind::Float, Direction::Input},
                       {"eps", ParamKind::Float, Direction::Input},
                       {"amsgrad", ParamKind::Bool, Direction::Input},
                       {"maximize", ParamKind::Bool, Direction::Input},
                       kWs,
                       kEx});
  EXPECT_TRUE(adam->params[6].is_floating());
  EXPECT_TRUE(ends_with(adam->header_path, "aclnn_apply_adam_w_v2.h"));
}

TEST(Prototypes, HeaderNamedOtherwiseFoundByOneFullScan) {
  auto idx = fixture_index();
  const OpPrototype *p = idx.find("ScatterThing");
  expect_params(p, {{"x", ParamKind::Tensor, Direction::Input},
                    {"out", ParamKind::Tensor, Direction::Output},
                    {"scales", ParamKind::ScalarList, Direction::Input},
                    {"weights", ParamKind::FloatArray, Direction::Input},
                    {"mode", ParamKind::CString, Direction::Input},
                    {"axis", ParamKind::Int32, Direction::Input},
                    {"flags", ParamKind::UInt32, Direction::Input},
                    kWs,
                    kEx});
  EXPECT_EQ(p->params[0].type_text, "const aclTensor *const");
  EXPECT_EQ(p->params[1].type_text, "aclTensor *const");  // the pointer is const, the tensor is written
  EXPECT_EQ(p->params[4].type_text, "char *");
  const size_t all = idx.headers_read();
  EXPECT_EQ(all, 13u);  // every fixture header under aclnnop/, including level2/, read once

  // Unnamed parameters: classified by type alone.
  expect_params(idx.find("UnnamedParams"), {{"", ParamKind::Tensor, Direction::Input},
                                            {"", ParamKind::Tensor, Direction::Output},
                                            {"", ParamKind::Int64, Direction::Input},
                                            {"", ParamKind::WorkspaceSizeOut, Direction::None},
                                            {"", ParamKind::ExecutorOut, Direction::None}});
  expect_params(
      idx.find("OldStyle"),
      {{"self", ParamKind::Tensor, Direction::Input}, {"out", ParamKind::Tensor, Direction::Output}, kWs, kEx});
  // Nothing more is read after the full scan, whatever is asked.
  EXPECT_EQ(idx.find("NoSuchOp"), nullptr);
  EXPECT_EQ(idx.find("NoSuchOp"), nullptr);
  EXPECT_EQ(idx.headers_read(), all);
}

TEST(Prototypes, UnknownAndInvalidNames) {
  auto idx = fixture_index();
  EXPECT_EQ(idx.find(""), nullptr);
  EXPECT_EQ(idx.find("Add Sub"), nullptr);
  EXPECT_EQ(idx.find("../Add"), nullptr);
  EXPECT_EQ(idx.find("1Add"), nullptr);
  EXPECT_EQ(idx.find(std::string(300, 'A')), nullptr);
  EXPECT_EQ(idx.find("Ad"), nullptr);  // a prefix of a declared op is not that op
  EXPECT_EQ(idx.find("AddGetWorkspaceSize"), nullptr);
  PrototypeIndex nowhere({"/nonexistent/msprobe/aclnnop", ""});
  EXPECT_EQ(nowhere.find("Add"), nullptr);
}

std::function<const char *(const char *)> env_of(const std::map<std::string, std::string> &vars) {
  return [vars](const char *name) -> const char * {
    auto it = vars.find(name);
    return it == vars.end() ? nullptr : it->second.c_str();
  };
}

TEST(Prototypes, EnvironmentRootsAndCustomVendors) {
  const std::string opp = kFixtures + "/opp";
  auto idx = PrototypeIndex::from_environment(env_of({{"ASCEND_HOME_PATH", "/nonexistent/home/"},
                                                      {"ASCEND_TOOLKIT_HOME", "/nonexistent/tk"},
                                                      {"ASCEND_OPP_PATH", opp},
                                                      {"ASCEND_CUSTOM_OPP_PATH", "/nonexistent/c1:/nonexistent/c2"}}),
                                              {kFixtures + "/aclnnop"});
  const std::vector<std::string> want = {
      "/nonexistent/home/include/aclnnop",       "/nonexistent/tk/include/aclnnop",
      "/nonexistent/tk/latest/include/aclnnop",  opp + "/built-in/op_impl/ai_core/tbe/op_api/include/aclnnop",
      "/nonexistent/c1/op_api/include",          "/nonexistent/c2/op_api/include",
      opp + "/vendors/customize/op_api/include",  // config.ini: load_priority=customize,acme
      opp + "/vendors/acme/op_api/include",      kFixtures + "/aclnnop",
  };
  EXPECT_EQ(idx.roots(), want);

  const OpPrototype *custom = idx.find("AddCustom");
  expect_params(custom, {{"x", ParamKind::Tensor, Direction::Input},
                         {"y", ParamKind::Tensor, Direction::Input},
                         {"alpha", ParamKind::Double, Direction::Input},
                         {"zOut", ParamKind::Tensor, Direction::Output},
                         kWs,
                         kEx});
  EXPECT_TRUE(ends_with(custom->header_path, "vendors/customize/op_api/include/aclnn_add_custom.h"));
  // Declared by both vendors: the one CANN loads first wins.
  const OpPrototype *shared = idx.find("SharedOp");
  ASSERT_NE(shared, nullptr);
  EXPECT_EQ(shared->params[0].name, "fromCustomize");
  expect_params(idx.find("AcmeOnly"), {{"valuesRef", ParamKind::TensorList, Direction::InOut},
                                       {"keys", ParamKind::TensorList, Direction::Input},
                                       {"outOptional", ParamKind::TensorList, Direction::Output, true},
                                       kWs,
                                       kEx});
  // Built-in ops are still found through the extra root.
  EXPECT_NE(idx.find("Add"), nullptr);

  // ASCEND_OPP_PATH defaults to the home's opp/; with nothing set there are no roots.
  const std::vector<std::string> home_only = {"/nonexistent/h/include/aclnnop",
                                              "/nonexistent/h/opp/built-in/op_impl/ai_core/tbe/op_api/include/aclnnop"};
  EXPECT_EQ(PrototypeIndex::from_environment(env_of({{"ASCEND_HOME_PATH", "/nonexistent/h"}})).roots(), home_only);
  EXPECT_TRUE(PrototypeIndex::from_environment(env_of({})).roots().empty());
  EXPECT_TRUE(PrototypeIndex::from_environment(nullptr).roots().empty());
}

// ------------------------------------------------------------------------------------------------------------
// Directions in the shapes the census of CANN's headers found (docs/prototypes.md, "Census"): headers written for
// these tests in each shape, under fixtures/cann_shapes.

struct WantTensor {
  std::string name;
  Direction dir;
  DirectionRule rule;
  ParamKind kind = ParamKind::Tensor;
};

// The tensor parameters, in order, with their direction and the rule that decided it.
void expect_tensors(const OpPrototype *p, const std::vector<WantTensor> &want) {
  ASSERT_NE(p, nullptr);
  SCOPED_TRACE(describe(*p));
  std::vector<const Param *> tensors;
  for (const auto &q : p->params) {
    const bool tensor = q.kind == ParamKind::Tensor || q.kind == ParamKind::TensorList;
    if (tensor) {
      tensors.push_back(&q);
    } else {
      EXPECT_STREQ(to_string(q.dir_rule), "None") << q.name;
    }
  }
  ASSERT_EQ(tensors.size(), want.size());
  for (size_t i = 0; i < want.size(); ++i) {
    SCOPED_TRACE("tensor " + want[i].name);
    EXPECT_EQ(tensors[i]->name, want[i].name);
    EXPECT_STREQ(to_string(tensors[i]->kind), to_string(want[i].kind));
    EXPECT_STREQ(to_string(tensors[i]->dir), to_string(want[i].dir));
    EXPECT_STREQ(to_string(tensors[i]->dir_rule), to_string(want[i].rule));
  }
}

PrototypeIndex shapes_index() { return PrototypeIndex({kFixtures + "/cann_shapes"}); }

using D = Direction;
using R = DirectionRule;
constexpr ParamKind kList = ParamKind::TensorList;

TEST(CannShapes, TemplateTagsAndTheWordsOfTheDescription) {
  auto idx = shapes_index();
  // Every tag [in], the output included; "<op>计算的出参" / "<op>计算的入参" say which is which.
  expect_tensors(idx.find("QuantLike"), {{"x", D::Input, R::Doc},
                                         {"scale", D::Input, R::Const},
                                         {"offset", D::Input, R::Const},
                                         {"y", D::Output, R::Doc}});
  // Leading words after a full-width colon; an output named like an optional input, stated an output.
  expect_tensors(idx.find("QuantScaleLike"), {{"self", D::Input, R::Doc},
                                              {"inputScaleOptional", D::Input, R::Name},
                                              {"y", D::Output, R::Doc},
                                              {"outScaleOptional", D::Output, R::Doc}});
  EXPECT_TRUE(idx.find("QuantScaleLike")->params[3].optional);
  // The words win over const-ness: a writable tensor described as an input is one.
  expect_tensors(idx.find("RankLike"), {{"rank", D::Input, R::Doc}, {"out", D::Output, R::Doc}});
  // Tags and words say nothing: y after the last optional input is the output.
  expect_tensors(idx.find("WqbmmLike"), {{"x", D::Input, R::Const},
                                         {"weight", D::Input, R::Const},
                                         {"antiquantScale", D::Input, R::Const},
                                         {"antiquantOffsetOptional", D::Input, R::Name},
                                         {"biasOptional", D::Input, R::Name},
                                         {"y", D::Output, R::Position}});
}

TEST(CannShapes, TagsStateDirectionsWhenSomeTensorIsTaggedOut) {
  auto idx = shapes_index();
  // [out] on gradInput makes this block's [in] tags mean input: over the Out suffix, `y` and a writable type.
  expect_tensors(idx.find("DeformLikeBackward"), {{"input", D::Input, R::Doc},
                                                  {"gradOutput", D::Input, R::Doc},
                                                  {"offsetOut", D::Input, R::Doc},
                                                  {"totalWeight", D::Input, R::Doc},
                                                  {"y", D::Input, R::Doc},
                                                  {"gradInput", D::Output, R::Doc},
                                                  {"gradOffset", D::Output, R::Doc},
                                                  {"cache", D::InOut, R::Doc}});
  // `* param [in] query : required` without '@'; an untagged tensor after the tagged output is an output too.
  expect_tensors(idx.find("SparseAttnLike"), {{"query", D::Input, R::Doc},
                                              {"key", D::Input, R::Doc},
                                              {"maskOptional", D::Input, R::Doc},
                                              {"output", D::Output, R::Doc},
                                              {"topKOutput", D::Output, R::Position}});
}

TEST(CannShapes, OutputsComeAfterInputs) {
  auto idx = shapes_index();
  expect_tensors(idx.find("MulLike"),
                 {{"x", D::Input, R::Const}, {"y", D::Input, R::Const}, {"z", D::Output, R::Position}});
  expect_tensors(idx.find("DimMapLike"), {{"x", D::Input, R::Const}, {"y", D::Output, R::Position}});
  expect_tensors(idx.find("QuantMaxLike"), {{"x", D::Input, R::Const},
                                            {"scale", D::Input, R::Const},
                                            {"y", D::Output, R::Position},
                                            {"amax", D::Output, R::Position}});
  // The letter rule only speaks when nothing else marks an output.
  expect_tensors(idx.find("GradLike"),
                 {{"y", D::Input, R::Const}, {"dy", D::Input, R::Const}, {"z", D::Output, R::Writable}});
  expect_tensors(idx.find("GruLikeBackward"), {{"input", D::Input, R::Const},
                                               {"hx", D::Input, R::Const},
                                               {"r", D::Input, R::Const, kList},
                                               {"z", D::Input, R::Const, kList},
                                               {"batchSizes", D::Input, R::Const},
                                               {"dxOut", D::Output, R::Name},
                                               {"dparamsOut", D::Output, R::Name, kList}});
  expect_tensors(idx.find("GroupLike"), {{"x", D::Input, R::Const, kList},
                                         {"weight", D::Input, R::Const, kList},
                                         {"groupListOptional", D::Input, R::Name},
                                         {"y", D::Output, R::Position, kList}});
  expect_tensors(idx.find("AttnLike"), {{"query", D::Input, R::Const},
                                        {"key", D::Input, R::Const, kList},
                                        {"pseShift", D::Input, R::Const},
                                        {"attentionOut", D::Output, R::Name},
                                        {"softmaxLse", D::Output, R::Position}});
  // attentionOut is the forward's output, read here: taken for an output (captured after the kernel, unchanged),
  // but the optional input after it keeps the tensors in between inputs.
  expect_tensors(idx.find("AttnLikeGrad"), {{"query", D::Input, R::Const},
                                            {"attentionOut", D::Output, R::Name},
                                            {"attentionOutGrad", D::Input, R::Const},
                                            {"softmaxMax", D::Input, R::Const},
                                            {"attenMaskOptional", D::Input, R::Name},
                                            {"dqOut", D::Output, R::Name},
                                            {"dkOut", D::Output, R::Name}});
  expect_tensors(idx.find("ViewCopyLike"),
                 {{"dst", D::Input, R::Const}, {"src", D::Input, R::Const}, {"dst_out", D::Output, R::Name}});
  expect_tensors(idx.find("ModulateLikeBackward"), {{"grad_output", D::Input, R::Const},
                                                    {"input", D::Input, R::Const},
                                                    {"scale", D::Input, R::Const},
                                                    {"grad_input", D::Output, R::Name},
                                                    {"grad_scale", D::Output, R::Position}});
}

TEST(CannShapes, EveryOpWritesSomethingAndNoTensorLessOpIsGivenOne) {
  auto idx = shapes_index();
  expect_tensors(idx.find("AtanLikeGrad"),
                 {{"x", D::Input, R::Const}, {"dy", D::Input, R::Const}, {"dx", D::Output, R::LastTensor}});
  expect_tensors(idx.find("SpaceLike"), {{"result", D::Output, R::LastTensor}});
  const OpPrototype *sleep = idx.find("SleepLike");
  expect_tensors(sleep, {});
  EXPECT_STREQ(to_string(sleep->params[0].dir), "Input");
}

TEST(CannShapes, InplaceOpsWriteTheirFirstTensor) {
  auto idx = shapes_index();
  expect_tensors(idx.find("InplaceHardLike"), {{"self", D::InOut, R::Inplace}});
  expect_tensors(idx.find("InplacePowLike"), {{"self", D::InOut, R::Inplace}});
  expect_tensors(idx.find("InplaceScatterLike"),
                 {{"data", D::InOut, R::Inplace}, {"indices", D::Input, R::Const}, {"updates", D::Input, R::Const}});
  // The first parameter is a scalar (named selfRef, as CANN does): the first tensor is written.
  const OpPrototype *v3 = idx.find("InplaceAddLikeV3");
  expect_tensors(v3, {{"other", D::InOut, R::Inplace}});
  EXPECT_STREQ(to_string(v3->params[0].kind), "Scalar");
  EXPECT_STREQ(to_string(v3->params[0].dir), "Input");
  expect_tensors(idx.find("ForeachAddLikeInplace"),
                 {{"x1", D::InOut, R::Inplace, kList}, {"x2", D::Input, R::Const, kList}});
  expect_tensors(idx.find("InplaceIndexCopyLike"),
                 {{"selfRef", D::InOut, R::Ref}, {"index", D::Input, R::Const}, {"source", D::Input, R::Const}});
}

// A comment block of any size costs a bounded amount: only its first 512 parameter entries are read.
TEST(CannShapes, LongCommentBlocksAreBounded) {
  std::string text = "/**\n";
  for (int i = 0; i < 1500; ++i) text += " * @param [out] p" + std::to_string(i) + ": 计算的出参\n";
  text += " * @param [in] y: 计算的入参\n */\n";
  text +=
      "aclnnStatus aclnnFooGetWorkspaceSize(const aclTensor *x, const aclTensor *y, aclTensor *out, uint64_t *ws, "
      "aclOpExecutor **e);";
  const auto t0 = std::chrono::steady_clock::now();
  auto p = parse_prototype(text, "Foo");
  const double ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
  std::printf("declaration after %zu bytes of comment entries: %.2f ms\n", text.size(), ms);
  ASSERT_TRUE(p.has_value());
  // y's entry is the 1501st: not read.
  expect_tensors(&*p, {{"x", D::Input, R::Const}, {"y", D::Input, R::Const}, {"out", D::Output, R::Name}});
  // Within the bound it is read.
  auto short_block = parse_prototype("/**\n" + text.substr(text.find(" * @param [out] p1000")), "Foo");
  ASSERT_TRUE(short_block.has_value());
  expect_tensors(&*short_block, {{"x", D::Input, R::Const}, {"y", D::Input, R::Doc}, {"out", D::Output, R::Name}});
}

// What the census checks over CANN's headers, checked over every header here and the stand-in's: each op with a
// tensor writes one, every *Ref tensor and every Inplace op's first tensor is in/out, every tensor has a rule.
TEST(CannShapes, InvariantsOverEveryFixtureAndTheStandIn) {
  std::vector<std::string> dirs = {kFixtures};
  if (const char *home = getenv("ASCEND_HOME_PATH"); home && *home) dirs.push_back(std::string(home) + "/include");
  size_t ops = 0;
  for (const auto &dir : dirs) {
    if (!fs::is_directory(dir)) continue;
    for (const auto &e : fs::recursive_directory_iterator(dir)) {
      if (!e.is_regular_file() || e.path().extension() != ".h") continue;
      const std::string text = read_text(e.path().string());
      for (const auto &op : declared_ops(text)) {
        auto p = parse_prototype(text, op);
        if (!p) continue;
        SCOPED_TRACE(e.path().string() + ": " + describe(*p));
        std::vector<const Param *> t;
        for (const auto &q : p->params)
          if (q.kind == ParamKind::Tensor || q.kind == ParamKind::TensorList) t.push_back(&q);
        const bool writes = std::any_of(t.begin(), t.end(), [](const Param *q) {
          return q->dir == Direction::Output || q->dir == Direction::InOut;
        });
        EXPECT_EQ(writes, !t.empty());
        for (const Param *q : t) {
          EXPECT_STRNE(to_string(q->dir_rule), "None") << q->name;
          if (ends_with(q->name, "Ref")) {
            EXPECT_EQ(q->dir, Direction::InOut) << q->name;
          }
        }
        const bool inplace = op.rfind("Inplace", 0) == 0 || ends_with(op, "Inplace");
        if (inplace && !t.empty()) {
          EXPECT_EQ(t[0]->dir, Direction::InOut);
        }
        ++ops;
      }
    }
  }
  std::printf("direction invariants checked on %zu ops\n", ops);
  EXPECT_GT(ops, 60u);
}

// ------------------------------------------------------------------------------------------------------------
// The pure parser on inline text.

std::optional<OpPrototype> parse(const std::string &text, const char *op = "Foo") { return parse_prototype(text, op); }

TEST(ParsePrototype, SpellingsOfTypes) {
  auto p = parse(
      "aclnnStatus aclnnFooGetWorkspaceSize(unsigned long long a, short b, unsigned char c, long d,\n"
      "    signed char e, unsigned f, uint16_t g, int16_t h, enum MyMode i, aclFormat j, aclrtStream k,\n"
      "    const int64_t dims[], void (*callback)(void *, int), const char *const name, int64_t dim = 0,\n"
      "    const aclTensor * __attribute__((unused)) t, aclTensor const *u, struct aclTensor *v, size_t w,\n"
      "    int x, uint8_t y, long int z, aclTensor **pp, void *raw,\n"
      "    unsigned long *workspaceSize, aclOpExecutor **executor);");
  ASSERT_TRUE(p.has_value());
  expect_params(&*p, {{"a", ParamKind::UInt64, Direction::Input},
                      {"b", ParamKind::Int16, Direction::Input},
                      {"c", ParamKind::UInt8, Direction::Input},
                      {"d", ParamKind::Int64, Direction::Input},
                      {"e", ParamKind::Int8, Direction::Input},
                      {"f", ParamKind::UInt32, Direction::Input},
                      {"g", ParamKind::UInt16, Direction::Input},
                      {"h", ParamKind::Int16, Direction::Input},
                      {"i", ParamKind::OtherEnum, Direction::Input},
                      {"j", ParamKind::OtherEnum, Direction::Input},
                      {"k", ParamKind::OtherPointer, Direction::None},
                      {"dims", ParamKind::OtherPointer, Direction::None},
                      {"callback", ParamKind::OtherPointer, Direction::None},
                      {"name", ParamKind::CString, Direction::Input},
                      {"dim", ParamKind::Int64, Direction::Input},
                      {"t", ParamKind::Tensor, Direction::Input},
                      {"u", ParamKind::Tensor, Direction::Input},
                      {"v", ParamKind::Tensor, Direction::Output},
                      {"w", ParamKind::UInt64, Direction::Input},
                      {"x", ParamKind::Int32, Direction::Input},
                      {"y", ParamKind::UInt8, Direction::Input},
                      {"z", ParamKind::Int64, Direction::Input},
                      {"pp", ParamKind::OtherPointer, Direction::None},
                      {"raw", ParamKind::OtherPointer, Direction::None},
                      kWs,
                      kEx});
  EXPECT_EQ(p->params[0].type_text, "unsigned long long");
  EXPECT_EQ(p->params[8].type_text, "enum MyMode");
  EXPECT_EQ(p->params[11].type_text, "const int64_t *");
  EXPECT_EQ(p->params[13].type_text, "const char *const");
  EXPECT_EQ(p->params[16].type_text, "aclTensor const *");
  EXPECT_EQ(p->params[17].type_text, "struct aclTensor *");
  EXPECT_TRUE(p->header_path.empty());
}

TEST(ParsePrototype, DeclarationsAmongOtherText) {
  // A definition in a .cpp parses like a declaration.
  EXPECT_TRUE(parse("aclnnStatus aclnnFooGetWorkspaceSize(const aclTensor *self, aclTensor *out,\n"
                    "                                     uint64_t *workspaceSize, aclOpExecutor **executor) {\n"
                    "  return 0;\n}\n")
                  .has_value());
  // CRLF line endings, comments inside the list, a macro continuation line before.
  auto crlf = parse(
      "#define FOO_API \\\r\n  __attribute__((visibility(\"default\")))\r\n"
      "FOO_API aclnnStatus aclnnFooGetWorkspaceSize(const aclTensor *self, /* in */\r\n"
      "    aclTensor *out, // out\r\n    uint64_t *workspaceSize, aclOpExecutor **executor);\r\n");
  ASSERT_TRUE(crlf.has_value());
  EXPECT_EQ(crlf->params.size(), 4u);
  // Calls, assignments, macros and comments are not declarations; a later real declaration is found.
  auto later = parse(
      "// aclnnStatus aclnnFooGetWorkspaceSize(int bogus, uint64_t *workspaceSize, aclOpExecutor **executor);\n"
      "/* aclnnStatus aclnnFooGetWorkspaceSize(int bogus, uint64_t *workspaceSize, aclOpExecutor **executor); */\n"
      "#define CALL aclnnStatus aclnnFooGetWorkspaceSize(int bogus, uint64_t *ws, aclOpExecutor **ex)\n"
      "void f() { aclnnStatus ret = aclnnFooGetWorkspaceSize(a, b, &ws, &ex); return aclnnFooGetWorkspaceSize(a); }\n"
      "const char *s = \"aclnnStatus aclnnFooGetWorkspaceSize(int bogus, uint64_t *ws, aclOpExecutor **ex);\";\n"
      "aclnnStatus aclnnFooGetWorkspaceSizeV2(int64_t other, uint64_t *ws, aclOpExecutor **ex);\n"
      "aclnnStatus aclnnFooGetWorkspaceSize(double real, uint64_t *workspaceSize, aclOpExecutor **executor);\n");
  ASSERT_TRUE(later.has_value());
  ASSERT_EQ(later->params.size(), 3u);
  EXPECT_EQ(later->params[0].name, "real");
  EXPECT_EQ(later->params[0].kind, ParamKind::Double);
  // Another op's declaration is not this op's.
  EXPECT_FALSE(parse("aclnnStatus aclnnFoosGetWorkspaceSize(uint64_t *w, aclOpExecutor **e);").has_value());
  EXPECT_FALSE(parse("aclnnStatus my_aclnnFooGetWorkspaceSize(uint64_t *w, aclOpExecutor **e);").has_value());
}

TEST(ParsePrototype, RejectsWhatCannotBeForwardedSafely) {
  const char *bad[] = {
      // trailer missing, swapped, or mistyped
      "aclnnStatus aclnnFooGetWorkspaceSize(const aclTensor *self, aclTensor *out);",
      "aclnnStatus aclnnFooGetWorkspaceSize(aclOpExecutor **executor, uint64_t *workspaceSize);",
      "aclnnStatus aclnnFooGetWorkspaceSize(const aclTensor *self, uint32_t *ws, aclOpExecutor **executor);",
      "aclnnStatus aclnnFooGetWorkspaceSize(const aclTensor *self, uint64_t *ws, aclOpExecutor *executor);",
      "aclnnStatus aclnnFooGetWorkspaceSize(void);",
      "aclnnStatus aclnnFooGetWorkspaceSize();",
      // by-value types whose size and register class we do not know
      "aclnnStatus aclnnFooGetWorkspaceSize(MyStruct s, uint64_t *ws, aclOpExecutor **ex);",
      "aclnnStatus aclnnFooGetWorkspaceSize(long double x, uint64_t *ws, aclOpExecutor **ex);",
      "aclnnStatus aclnnFooGetWorkspaceSize(aclTensor t, uint64_t *ws, aclOpExecutor **ex);",
      "aclnnStatus aclnnFooGetWorkspaceSize(void v, uint64_t *ws, aclOpExecutor **ex);",
      // not C
      "aclnnStatus aclnnFooGetWorkspaceSize(const aclTensor &t, uint64_t *ws, aclOpExecutor **ex);",
      "aclnnStatus aclnnFooGetWorkspaceSize(std::vector<int> v, uint64_t *ws, aclOpExecutor **ex);",
      "aclnnStatus aclnnFooGetWorkspaceSize(int64_t n, ..., uint64_t *ws, aclOpExecutor **ex);",
      "aclnnStatus aclnnFooGetWorkspaceSize(MACRO aclTensor *t, uint64_t *ws, aclOpExecutor **ex);",
      "aclnnStatus aclnnFooGetWorkspaceSize(const aclTensor *, , uint64_t *ws, aclOpExecutor **ex);",
      // no aclnnStatus return type
      "int aclnnFooGetWorkspaceSize(uint64_t *ws, aclOpExecutor **ex);",
      // unbalanced / truncated
      "aclnnStatus aclnnFooGetWorkspaceSize(uint64_t *ws, aclOpExecutor **ex;",
      "aclnnStatus aclnnFooGetWorkspaceSize(uint64_t *ws, aclOpExecutor **ex",
      "aclnnStatus aclnnFooGetWorkspaceSize(uint64_t *ws, aclOpExecutor **ex]);",
      "aclnnStatus aclnnFooGetWorkspaceSize((uint64_t *ws, aclOpExecutor **ex);",
      "aclnnStatus aclnnFooGetWorkspaceSize",
      "/* aclnnStatus aclnnFooGetWorkspaceSize(uint64_t *ws, aclOpExecutor **ex);",
      "",
  };
  for (const char *text : bad) EXPECT_FALSE(parse(text).has_value()) << text;
  EXPECT_FALSE(parse_prototype("aclnnStatus aclnnGetWorkspaceSize(uint64_t *w, aclOpExecutor **e);", "").has_value());
}

// ------------------------------------------------------------------------------------------------------------
// Garbage never crashes or hangs.

std::vector<std::string> fixture_files() {
  std::vector<std::string> files;
  for (const auto &e : fs::recursive_directory_iterator(kFixtures))
    if (e.is_regular_file() && e.path().extension() == ".h") files.push_back(e.path().string());
  std::sort(files.begin(), files.end());
  return files;
}

TEST(ParsePrototypeRobustness, EveryTruncationOfEveryFixture) {
  for (const auto &file : fixture_files()) {
    const std::string text = read_text(file);
    for (const auto &op : declared_ops(text)) {
      auto full = parse_prototype(text, op);
      ASSERT_TRUE(full.has_value()) << file << " " << op;
      // Prefixes fail until the declaration's ')' is in, then all parse to the same parameters.
      bool seen = false;
      for (size_t cut = 0; cut <= text.size(); ++cut) {
        auto p = parse_prototype(std::string_view(text).substr(0, cut), op);
        if (!seen && p) {
          seen = true;
          EXPECT_EQ(text[cut - 1], ')') << file << " " << op << " first parses at " << cut;
        }
        if (seen) {
          ASSERT_TRUE(p.has_value()) << file << " " << op << " cut " << cut;
          ASSERT_EQ(describe(*p), describe(*full)) << file << " cut " << cut;
        }
      }
      EXPECT_TRUE(seen);
    }
  }
}

TEST(ParsePrototypeRobustness, RandomMutations) {
  std::mt19937 rng(12345);
  const auto files = fixture_files();
  const char specials[] = "(){}[];,*/\\\"'#\n \t=&<>:.0aZ_";
  size_t parsed = 0, iterations = 0;
  const auto t0 = std::chrono::steady_clock::now();
  for (const auto &file : files) {
    const std::string text = read_text(file);
    const auto ops = declared_ops(text);
    for (int round = 0; round < 400; ++round) {
      std::string m = text;
      const int edits = 1 + static_cast<int>(rng() % 8);
      for (int e = 0; e < edits && !m.empty(); ++e) {
        const size_t at = rng() % m.size();
        switch (rng() % 4) {
          case 0: m[at] = specials[rng() % (sizeof(specials) - 1)]; break;
          case 1: m.insert(at, 1, specials[rng() % (sizeof(specials) - 1)]); break;
          case 2: m.erase(at, 1 + rng() % 16); break;
          default: m[at] = static_cast<char>(rng() & 0xff); break;
        }
      }
      for (const auto &op : ops) parsed += parse_prototype(m, op).has_value();
      declared_ops(m);
      ++iterations;
    }
  }
  const double ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
  std::printf("random mutations: %zu texts, %zu declarations still parsed, %.1f ms\n", iterations, parsed, ms);
  EXPECT_GT(parsed, 0u);
}

TEST(ParsePrototypeRobustness, PathologicalInputsAreBounded) {
  std::vector<std::string> inputs;
  inputs.push_back("aclnnStatus aclnnFooGetWorkspaceSize" + std::string(1 << 20, '('));
  inputs.push_back("aclnnStatus aclnnFooGetWorkspaceSize(" + std::string(1 << 20, '(') + std::string(1 << 20, ')'));
  std::string rep;
  for (int i = 0; i < 40000; ++i) rep += "aclnnStatus aclnnFooGetWorkspaceSize(const aclTensor *x, ";
  inputs.push_back(rep);
  std::string commas = "aclnnStatus aclnnFooGetWorkspaceSize(";
  commas += std::string(1 << 20, ',');
  commas += "uint64_t *ws, aclOpExecutor **ex);";
  inputs.push_back(commas);
  inputs.push_back(std::string(1 << 20, '/') + "*");
  inputs.push_back("/*" + std::string(1 << 20, '*'));
  inputs.push_back(std::string(1 << 20, '"'));
  inputs.push_back(std::string(1 << 20, '#'));
  inputs.push_back(std::string(1 << 20, 'a') + "GetWorkspaceSize(");
  std::string ident;
  for (int i = 0; i < 50000; ++i) ident += "GetWorkspaceSize";
  inputs.push_back(ident + "(");
  std::string many_params = "aclnnStatus aclnnFooGetWorkspaceSize(";
  for (int i = 0; i < 1000; ++i) many_params += "int64_t a" + std::to_string(i) + ", ";
  inputs.push_back(many_params + "uint64_t *ws, aclOpExecutor **ex);");
  std::string big_prefix = std::string(200000, ' ') + "aclnnStatus" + std::string(200000, ' ');
  inputs.push_back(big_prefix + "aclnnFooGetWorkspaceSize(uint64_t *ws, aclOpExecutor **ex);");
  for (size_t i = 0; i < inputs.size(); ++i) {
    const auto t0 = std::chrono::steady_clock::now();
    auto p = parse_prototype(inputs[i], "Foo");
    const auto ops = declared_ops(inputs[i]);
    const double ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
    std::printf("pathological input %zu (%zu bytes): %s, %zu op names, %.1f ms\n", i, inputs[i].size(),
                p ? "parsed" : "rejected", ops.size(), ms);
    EXPECT_FALSE(p.has_value()) << i;  // none is a valid declaration (too many params, too far, malformed)
  }
}

// ------------------------------------------------------------------------------------------------------------
// The stand-in's generated headers: every phase 1 parses, and agrees with aclnn_ops.spec.

// Independent reading of the spec: "[header]" lines, "Op(params)" lines continued by a trailing backslash.
std::map<std::string, std::vector<std::string>> read_spec(const std::string &path) {
  std::map<std::string, std::vector<std::string>> ops;
  std::ifstream f(path);
  std::string line, pending;
  while (std::getline(f, line)) {
    line = line.substr(0, line.find('#'));
    while (!line.empty() && isspace(static_cast<unsigned char>(line.back()))) line.pop_back();
    if (!line.empty() && line.back() == '\\') {
      pending += line.substr(0, line.size() - 1) + " ";
      continue;
    }
    line = pending + line;
    pending.clear();
    const size_t open = line.find('(');
    if (line.empty() || line[0] == '[' || open == std::string::npos) continue;
    std::string op = line.substr(0, open);
    op.erase(0, op.find_first_not_of(" \t"));
    std::string list = line.substr(open + 1, line.rfind(')') - open - 1);
    std::vector<std::string> params;
    std::stringstream ss(list);
    std::string item;
    while (std::getline(ss, item, ',')) {
      std::stringstream words(item);
      std::string w, norm;
      while (words >> w) norm += (norm.empty() ? "" : " ") + w;
      params.push_back(norm);
    }
    ops[op] = params;
  }
  return ops;
}

TEST(StandInHeaders, EveryPhase1ParsesAndMatchesTheSpec) {
  const char *home = getenv("ASCEND_HOME_PATH");
  if (home == nullptr || !*home) GTEST_SKIP() << "ASCEND_HOME_PATH not set";
  const std::string dir = std::string(home) + "/include/aclnnop";
  ASSERT_TRUE(fs::is_directory(dir)) << dir;
  const auto spec = read_spec(MSPROBE_ACLNN_SPEC);
  ASSERT_GE(spec.size(), 30u);

  auto idx = PrototypeIndex::from_environment([](const char *n) { return getenv(n); });
  size_t checked = 0;
  for (const auto &e : fs::directory_iterator(dir)) {
    if (e.path().extension() != ".h") continue;
    const std::string text = read_text(e.path().string());
    for (const auto &op : declared_ops(text)) {
      SCOPED_TRACE(e.path().string() + ": " + op);
      auto direct = parse_prototype(text, op);
      ASSERT_TRUE(direct.has_value());
      const OpPrototype *indexed = idx.find(op);
      ASSERT_NE(indexed, nullptr);
      EXPECT_EQ(indexed->params.size(), direct->params.size());
      auto it = spec.find(op);
      ASSERT_NE(it, spec.end()) << "op not in aclnn_ops.spec";
      ASSERT_EQ(direct->params.size(), it->second.size() + 2);
      for (size_t i = 0; i < it->second.size(); ++i) {
        const Param &p = direct->params[i];
        const std::string rebuilt = p.type_text + (p.type_text.back() == '*' ? "" : " ") + p.name;
        EXPECT_EQ(rebuilt, it->second[i]);
      }
      ++checked;
    }
  }
  std::printf("stand-in headers under %s: %zu phase-1 declarations parsed and matched\n", dir.c_str(), checked);
  EXPECT_EQ(checked, spec.size());

  // The stand-in's tricky directions (const-declared outputs, Ref, gradOut/output inputs).
  auto dir_of = [&](const char *op, const char *name) {
    const OpPrototype *p = idx.find(op);
    if (!p) return std::string("no prototype");
    for (const auto &q : p->params)
      if (q.name == name) return std::string(to_string(q.dir));
    return std::string("no param");
  };
  EXPECT_EQ(dir_of("Relu", "out"), "Output");
  EXPECT_EQ(dir_of("Embedding", "out"), "Output");
  EXPECT_EQ(dir_of("EmbeddingDenseBackward", "out"), "Output");
  EXPECT_EQ(dir_of("GeluBackward", "gradInput"), "Output");
  EXPECT_EQ(dir_of("RmsNorm", "yOut"), "Output");
  EXPECT_EQ(dir_of("RmsNorm", "rstdOut"), "Output");
  EXPECT_EQ(dir_of("LayerNormBackward", "gradOut"), "Input");
  EXPECT_EQ(dir_of("SoftmaxBackward", "gradOutput"), "Input");
  EXPECT_EQ(dir_of("SoftmaxBackward", "output"), "Input");
  EXPECT_EQ(dir_of("InplaceCopy", "selfRef"), "InOut");
  EXPECT_EQ(dir_of("InplaceZero", "selfRef"), "InOut");
  EXPECT_EQ(dir_of("ApplyAdamWV2", "maxGradNormOptionalRef"), "InOut");
  EXPECT_EQ(dir_of("Mean", "dtype"), "Input");
  EXPECT_EQ(idx.find("ReduceSum")->params[3].kind, ParamKind::DataType);
  EXPECT_EQ(idx.find("EmbeddingDenseBackward")->params[2].kind, ParamKind::UInt64);
}

// ------------------------------------------------------------------------------------------------------------
// Scale and threads.

struct TempDir {
  std::string path;
  TempDir() {
    std::string tmpl = (fs::temp_directory_path() / "msprobe_proto_XXXXXX").string();
    if (mkdtemp(tmpl.data()) != nullptr) path = tmpl;
  }
  ~TempDir() {
    std::error_code ec;
    if (!path.empty()) fs::remove_all(path, ec);
  }
};

// A CANN-sized header: license, doxygen, two ops (Op and InplaceOp) of a dozen parameters.
std::string generated_header(int i) {
  std::ostringstream h;
  h << "/**\n * Copyright (c) generated test header " << i << ".\n";
  for (int l = 0; l < 12; ++l) h << " * License text line " << l << " that only pads the file like the real ones.\n";
  h << " */\n#ifndef OP_API_INC_GEN_OP_" << i << "_H_\n#define OP_API_INC_GEN_OP_" << i
    << "_H_\n#include \"aclnn/aclnn_base.h\"\n#ifdef __cplusplus\nextern \"C\" {\n#endif\n\n";
  for (const char *prefix : {"", "Inplace"}) {
    h << "/**\n * @brief first phase of aclnn" << prefix << "GenOp" << i << ".\n";
    for (int l = 0; l < 10; ++l)
      h << " * @param [in] arg" << l << ": description of the argument, its dtypes and formats.\n";
    h << " */\nACLNN_API aclnnStatus aclnn" << prefix << "GenOp" << i << "GetWorkspaceSize(\n";
    for (int l = 0; l < 10; ++l) h << "    const aclTensor *arg" << l << ",\n";
    h << "    double eps, int64_t dim, aclTensor *out,\n    uint64_t *workspaceSize, aclOpExecutor **executor);\n";
    h << "ACLNN_API aclnnStatus aclnn" << prefix << "GenOp" << i
      << "(void *workspace, uint64_t workspaceSize, aclOpExecutor *executor, aclrtStream stream);\n\n";
  }
  h << "#ifdef __cplusplus\n}\n#endif\n#endif\n";
  return h.str();
}

TEST(PrototypeIndexScale, FifteenHundredHeaders) {
  TempDir tmp;
  ASSERT_FALSE(tmp.path.empty());
  const std::string root = tmp.path + "/aclnnop";
  fs::create_directories(root);
  constexpr int kHeaders = 1500;
  size_t bytes = 0;
  for (int i = 0; i < kHeaders; ++i) {
    const std::string text = generated_header(i);
    bytes += text.size();
    std::ofstream(root + "/aclnn_gen_op_" + std::to_string(i) + ".h") << text;
  }
  // One op whose header is named after something else: only the full scan finds it.
  std::ofstream(root + "/aclnn_zz_misc.h")
      << "aclnnStatus aclnnHiddenOpGetWorkspaceSize(const aclTensor *x, aclTensor *y, uint64_t *workspaceSize,\n"
         "                                          aclOpExecutor **executor);\n";

  using clock = std::chrono::steady_clock;
  auto ms_since = [](clock::time_point t) {
    return std::chrono::duration<double, std::milli>(clock::now() - t).count();
  };
  PrototypeIndex idx({root});
  auto t0 = clock::now();
  const OpPrototype *first = idx.find("GenOp777");
  const double first_ms = ms_since(t0);
  ASSERT_NE(first, nullptr);
  EXPECT_EQ(first->params.size(), 15u);
  EXPECT_EQ(idx.headers_read(), 1u);  // found by its file name: one header read

  t0 = clock::now();
  ASSERT_NE(idx.find("InplaceGenOp1234"), nullptr);
  const double second_ms = ms_since(t0);

  t0 = clock::now();
  const OpPrototype *hidden = idx.find("HiddenOp");
  const double scan_ms = ms_since(t0);
  ASSERT_NE(hidden, nullptr);
  EXPECT_EQ(idx.headers_read(), static_cast<size_t>(kHeaders) + 1);

  t0 = clock::now();
  constexpr int kRepeats = 200000;
  size_t hits = 0;
  for (int r = 0; r < kRepeats; ++r) hits += idx.find(r % 2 ? "GenOp777" : "HiddenOp") != nullptr;
  const double cached_ns = ms_since(t0) * 1e6 / kRepeats;
  EXPECT_EQ(hits, static_cast<size_t>(kRepeats));

  t0 = clock::now();
  EXPECT_EQ(idx.find("NotThereAtAll"), nullptr);
  const double miss_ms = ms_since(t0);

  std::printf(
      "index over %d headers (%.1f MB): first lookup %.2f ms (listing + 1 header), next new op %.2f ms, "
      "op found only by the full scan %.2f ms, unknown op after the scan %.3f ms, cached lookup %.0f ns\n",
      kHeaders + 1, bytes / 1e6, first_ms, second_ms, scan_ms, miss_ms, cached_ns);
}

TEST(PrototypeIndexThreads, ConcurrentLookupsAgree) {
  const std::vector<std::string> ops = {"Add",  "Adds", "InplaceAdd", "Matmul",       "LayerNorm",    "RmsNorm", "Relu",
                                        "Cast", "Cat",  "Dropout",    "ApplyAdamWV2", "ScatterThing", "Missing"};
  auto reference = fixture_index();
  std::vector<const OpPrototype *> want;
  for (const auto &op : ops) want.push_back(reference.find(op));

  auto idx = fixture_index();
  constexpr size_t kThreads = 8;
  std::vector<std::vector<const OpPrototype *>> got(kThreads, std::vector<const OpPrototype *>(ops.size()));
  std::vector<char> changed(kThreads, 0);  // a thread saw two different answers for one op
  std::vector<std::thread> threads;
  for (size_t t = 0; t < kThreads; ++t) {
    threads.emplace_back([&, t] {
      for (int round = 0; round < 200; ++round)
        for (size_t k = 0; k < ops.size(); ++k) {
          const size_t i = (k + t) % ops.size();  // threads start on different ops
          const OpPrototype *p = idx.find(ops[i]);
          if (round == 0)
            got[t][i] = p;
          else if (got[t][i] != p)
            changed[t] = 1;
        }
    });
  }
  for (auto &th : threads) th.join();
  for (size_t t = 0; t < kThreads; ++t) {
    EXPECT_FALSE(changed[t]) << "thread " << t;
    for (size_t i = 0; i < ops.size(); ++i) {
      const OpPrototype *p = got[t][i];
      EXPECT_EQ(p == nullptr, want[i] == nullptr) << ops[i];
      if (p && want[i]) {
        EXPECT_EQ(describe(*p), describe(*want[i]));
      }
      EXPECT_EQ(p, got[0][i]) << ops[i];  // one cached object for everyone
    }
  }
}

}  // namespace
