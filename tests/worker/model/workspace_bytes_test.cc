// Model::WorkspaceBytes, the activations term of the memory plan, is what a
// fresh workspace holds after a forward and backward: for every family,
// several batch sizes, remat on and off, both precisions, and it does not
// grow when an evaluation then runs smaller chunks in the same workspace.
#include <gtest/gtest.h>

#include <memory>
#include <random>
#include <string>
#include <vector>

#include "worker/model/gemm.h"
#include "tests/util/require_bf16.h"
#include "worker/model/cnn.h"
#include "worker/model/gpt.h"
#include "worker/model/mlp.h"
#include "worker/model/vit.h"

namespace shardline {
namespace {

struct Case {
  std::string name;
  std::function<std::unique_ptr<Model>(Precision)> make;
};

InputShape Image(int channels, int h, int w, int classes) {
  InputShape s;
  s.channels = channels;
  s.height = h;
  s.width = w;
  s.num_classes = classes;
  return s;
}

std::vector<Case> Cases() {
  std::vector<Case> out;
  out.push_back({"mlp", [](Precision p) {
                   MlpSpec s;
                   s.input_dim = 20;
                   s.hidden_sizes = {32, 7};
                   s.num_classes = 5;
                   s.precision = p;
                   return std::unique_ptr<Model>(new Mlp(s));
                 }});
  for (bool pool : {true, false}) {
    out.push_back({pool ? "cnn_pooled" : "cnn_two_channels", [pool](Precision p) {
                     CnnSpec s;
                     s.input = pool ? Image(1, 8, 12, 4) : Image(2, 5, 7, 3);
                     s.conv = {{4, 3, pool}, {6, pool ? 3 : 5, pool}};
                     s.dense_sizes = {9};
                     s.precision = p;
                     return std::unique_ptr<Model>(*Cnn::Create(s));
                   }});
  }
  for (bool remat : {false, true}) {
    out.push_back({remat ? "gpt_remat" : "gpt", [remat](Precision p) {
                     GptSpec s;
                     s.vocab = 40;
                     s.context = 8;
                     s.layers = 3;
                     s.d_model = 16;
                     s.heads = 2;
                     s.mlp_ratio = 2;
                     s.remat = remat;
                     s.precision = p;
                     return *Gpt::Create(s);
                   }});
    out.push_back({remat ? "vit_remat_mean" : "vit", [remat](Precision p) {
                     VitSpec s;
                     s.input = Image(2, 8, 8, 6);
                     s.patch = 4;
                     s.layers = 2;
                     s.d_model = 16;
                     s.heads = 2;
                     s.mlp_ratio = 2;
                     s.class_token = !remat;
                     s.remat = remat;
                     s.precision = p;
                     return *Vit::Create(s);
                   }});
  }
  return out;
}

// Random inputs for n examples of `model`.
struct Batch {
  std::vector<float> x;
  std::vector<int32_t> tokens, y;
  Examples examples(const Model& model, int n) {
    std::mt19937 gen(n);
    const InputShape& in = model.input();
    std::uniform_int_distribution<int32_t> cls(0, in.num_classes - 1);
    y.resize(static_cast<size_t>(n) * in.targets());
    for (int32_t& v : y) v = cls(gen);
    if (in.is_sequence()) {
      tokens.resize(static_cast<size_t>(n) * in.sequence);
      for (int32_t& v : tokens) v = cls(gen);
      return Sequences(tokens.data(), y.data(), n);
    }
    x.resize(static_cast<size_t>(n) * in.features());
    std::normal_distribution<float> normal;
    for (float& v : x) v = normal(gen);
    return Images(x.data(), y.data(), n);
  }
};

void Check(const Case& c, Precision precision) {
  const std::unique_ptr<Model> model = c.make(precision);
  std::vector<float> params(static_cast<size_t>(model->layout().total_size()));
  model->InitRange(1, Range{0, model->layout().total_size()}, params.data());
  std::vector<float> grads(params.size());
  for (int n : {1, 3, 8}) {
    std::unique_ptr<ModelWorkspace> ws = model->NewWorkspace();
    Batch b;
    const Examples e = b.examples(*model, n);
    model->ForwardBackward(params.data(), e, 1.0f / n, false, grads.data(), ws.get());
    EXPECT_EQ(ws->bytes(), model->WorkspaceBytes(n)) << c.name << " batch " << n;
    // An evaluation in smaller chunks in the same workspace holds no more.
    model->Evaluate(params.data(), b.examples(*model, 1), ws.get());
    EXPECT_EQ(ws->bytes(), model->WorkspaceBytes(n)) << c.name << " batch " << n << " then an evaluation";
  }
}

// Layers() are what the hooks announce: in order, disjoint, every tensor in one.
TEST(WorkspaceBytesTest, LayersTileTheLayoutInOrder) {
  for (const Case& c : Cases()) {
    const std::unique_ptr<Model> model = c.make(Precision::kFloat32);
    int64_t at = 0;
    for (const Range& l : model->Layers()) {
      EXPECT_EQ(l.begin, at) << c.name;
      EXPECT_GT(l.end, l.begin) << c.name;
      at = l.end;
    }
    EXPECT_EQ(at, model->layout().total_size()) << c.name;
  }
}

TEST(WorkspaceBytesTest, EveryFamilyInFloat32) {
  for (const Case& c : Cases()) Check(c, Precision::kFloat32);
}

TEST(WorkspaceBytesTest, EveryFamilyInBfloat16) {
  SHARDLINE_REQUIRE_BF16();
  for (const Case& c : Cases()) Check(c, Precision::kBfloat16);
}

}  // namespace
}  // namespace shardline
