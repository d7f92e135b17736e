// The GPT as a whole: every parameter's gradient against finite
// differences, the layer hooks' contract, accumulation, its tensors' names
// and initialisation, and what its loss is at the start.
#include "worker/model/gpt.h"

#include <cmath>
#include <cstring>
#include <memory>
#include <vector>

#include <gtest/gtest.h>

#include "absl/strings/match.h"
#include "tests/worker/model/model_test_util.h"

namespace shardline {
namespace {

GptSpec Tiny() {
  GptSpec s;
  s.vocab = 11;
  s.context = 5;
  s.layers = 2;
  s.d_model = 8;
  s.heads = 2;
  s.mlp_ratio = 2;
  return s;
}

TEST(GptTest, EveryGradientMatchesFiniteDifferences) {
  absl::StatusOr<std::unique_ptr<Model>> gpt = Gpt::Create(Tiny());
  ASSERT_TRUE(gpt.ok()) << gpt.status();
  const Problem prob = RandomSequences(3, 5, 11, 1);
  // Larger than GPT-2's init, so every path carries gradient.
  std::vector<float> params = InitParams(**gpt, 2);
  for (float& p : params) p *= 10.0f;
  const size_t checked = CheckGradients(**gpt, prob, params, "gpt", 1e9, 1e9);
  EXPECT_EQ(checked, params.size());
}

TEST(GptTest, LayerHooksAnnounceEveryLayerInOrderAndFinalGradientsStayFinal) {
  absl::StatusOr<std::unique_ptr<Model>> gpt = Gpt::Create(Tiny());
  ASSERT_TRUE(gpt.ok());
  CheckLayerHooks(**gpt, RandomSequences(2, 5, 11, 3), InitParams(**gpt, 4));
}

TEST(GptTest, RematReadsOnlyWhatItAnnouncesAndGivesTheSameBits) {
  GptSpec spec = Tiny();
  spec.layers = 3;
  absl::StatusOr<std::unique_ptr<Model>> plain = Gpt::Create(spec);
  spec.remat = true;
  absl::StatusOr<std::unique_ptr<Model>> remat = Gpt::Create(spec);
  ASSERT_TRUE(plain.ok() && remat.ok());
  const std::vector<float> params = InitParams(**plain, 4);
  CheckLayerHooks(**remat, RandomSequences(2, 5, 11, 3), params);
  CheckRematGivesTheSameBits(**plain, **remat, RandomSequences(3, 5, 11, 8), params);
}

TEST(GptTest, Bfloat16IsNearFloat32AndKeepsTheHooksContractAndRematsBits) {
  SHARDLINE_REQUIRE_BF16();
  GptSpec spec = Tiny();
  spec.layers = 3;
  spec.d_model = 32;
  spec.context = 40;  // two causal blocks of queries
  spec.vocab = 50;
  CheckBfloatTransformer(
      [&](Precision precision, bool remat) {
        GptSpec s = spec;
        s.precision = precision;
        s.remat = remat;
        return Gpt::Create(s);
      },
      RandomSequences(3, 40, 50, 8), RandomSequences(2, 40, 50, 3));
}

TEST(GptTest, AccumulatingTwoBatchesSumsTheirGradients) {
  absl::StatusOr<std::unique_ptr<Model>> made = Gpt::Create(Tiny());
  ASSERT_TRUE(made.ok());
  const Model& gpt = **made;
  const std::vector<float> params = InitParams(gpt, 5);
  const Problem a = RandomSequences(2, 5, 11, 6), b = RandomSequences(3, 5, 11, 7);
  std::vector<float> ga(params.size()), gb(params.size()), gab(params.size());
  std::unique_ptr<ModelWorkspace> ws = gpt.NewWorkspace();
  gpt.ForwardBackward(params.data(), a.examples(), 0.5f, false, ga.data(), ws.get());
  gpt.ForwardBackward(params.data(), b.examples(), 0.5f, false, gb.data(), ws.get());
  gpt.ForwardBackward(params.data(), a.examples(), 0.5f, false, gab.data(), ws.get());
  gpt.ForwardBackward(params.data(), b.examples(), 0.5f, true, gab.data(), ws.get());
  for (size_t i = 0; i < params.size(); ++i) EXPECT_NEAR(gab[i], ga[i] + gb[i], 1e-6 + 1e-5 * std::fabs(gab[i])) << i;
}

TEST(GptTest, TensorsAreNamedAsNanoGptAndInitialisedAsGpt2) {
  GptSpec spec = Tiny();
  spec.vocab = 256;
  spec.d_model = 64;
  spec.layers = 8;
  absl::StatusOr<std::unique_ptr<Model>> made = Gpt::Create(spec);
  ASSERT_TRUE(made.ok());
  const Model& gpt = **made;
  const FlatLayout& layout = gpt.layout();
  EXPECT_EQ(layout.tensor(0).name, "transformer.wte.weight");
  EXPECT_EQ(layout.tensor(0).shape, (std::vector<int64_t>{256, 64}));
  EXPECT_EQ(layout.tensor(1).name, "transformer.wpe.weight");
  EXPECT_EQ(layout.tensors().back().name, "transformer.ln_f.bias");
  std::vector<float> params(static_cast<size_t>(layout.total_size()));
  gpt.InitRange(9, Range{0, layout.total_size()}, params.data());
  for (const TensorInfo& t : layout.tensors()) {
    double sum = 0, sq = 0;
    for (int64_t i = t.offset; i < t.range().end; ++i) {
      sum += params[i];
      sq += static_cast<double>(params[i]) * params[i];
    }
    const double mean = sum / t.size, std = std::sqrt(sq / t.size - mean * mean);
    if (absl::StrContains(t.name, "ln_") && absl::EndsWith(t.name, ".weight")) {
      EXPECT_EQ(mean, 1.0) << t.name;
    } else if (t.shape.size() == 1) {
      EXPECT_EQ(sq, 0.0) << t.name;
    } else if (absl::EndsWith(t.name, "c_proj.weight") && t.size >= 4096) {
      EXPECT_NEAR(std, 0.02 / std::sqrt(16.0), 0.0008) << t.name;
    } else if (t.size >= 4096) {
      EXPECT_NEAR(std, 0.02, 0.0015) << t.name;
      EXPECT_NEAR(mean, 0.0, 0.002) << t.name;
    }
  }
  // A shard initialised alone equals its part of the whole.
  std::vector<float> part(1000);
  gpt.InitRange(9, Range{5000, 6000}, part.data());
  for (int i = 0; i < 1000; ++i) EXPECT_EQ(part[i], params[5000 + i]);
}

TEST(GptTest, AtInitialisationTheLossIsNearTheLogOfTheVocabulary) {
  GptSpec spec = Tiny();
  spec.vocab = 256;
  spec.context = 16;
  absl::StatusOr<std::unique_ptr<Model>> made = Gpt::Create(spec);
  ASSERT_TRUE(made.ok());
  const Model& gpt = **made;
  std::vector<float> params(static_cast<size_t>(gpt.layout().total_size()));
  gpt.InitRange(1, Range{0, gpt.layout().total_size()}, params.data());
  const Problem prob = RandomSequences(4, 16, 256, 2);
  std::unique_ptr<ModelWorkspace> ws = gpt.NewWorkspace();
  const BatchStats s = gpt.Forward(params.data(), prob.examples(), ws.get());
  EXPECT_EQ(s.count, 4 * 16);
  EXPECT_NEAR(s.loss_sum / s.count, std::log(256.0), 0.05);
  // Evaluate in chunks gives the same sums.
  const BatchStats e = gpt.Evaluate(params.data(), prob.examples(), ws.get());
  EXPECT_EQ(e.count, s.count);
  EXPECT_NEAR(e.loss_sum, s.loss_sum, 1e-9 * std::fabs(s.loss_sum));
}

TEST(GptTest, ASpecThatCannotMakeAModelNamesTheField) {
  GptSpec spec = Tiny();
  spec.heads = 3;
  absl::StatusOr<std::unique_ptr<Model>> made = Gpt::Create(spec);
  ASSERT_FALSE(made.ok());
  EXPECT_TRUE(absl::StrContains(made.status().message(), "model.gpt.heads")) << made.status();
  spec = Tiny();
  spec.layers = 0;
  EXPECT_TRUE(absl::StrContains(Gpt::Create(spec).status().message(), "model.gpt.layers"));
}

}  // namespace
}  // namespace shardline
