// The ViT: every gradient against finite differences with either pooling,
// the layer hooks' contract, and its tensors.
#include "worker/model/vit.h"

#include <cstring>
#include <memory>
#include <vector>

#include <gtest/gtest.h>

#include "absl/strings/match.h"
#include "tests/worker/model/model_test_util.h"

namespace shardline {
namespace {

VitSpec Tiny(bool class_token) {
  VitSpec s;
  s.input = InputShape{1, 4, 6, 3};
  s.patch = 2;
  s.layers = 2;
  s.d_model = 8;
  s.heads = 2;
  s.mlp_ratio = 2;
  s.class_token = class_token;
  return s;
}

class VitTest : public testing::TestWithParam<bool> {};

TEST_P(VitTest, EveryGradientMatchesFiniteDifferences) {
  absl::StatusOr<std::unique_ptr<Model>> vit = Vit::Create(Tiny(GetParam()));
  ASSERT_TRUE(vit.ok()) << vit.status();
  std::vector<float> params = InitParams(**vit, 2);
  for (float& p : params) p *= 10.0f;
  const Problem prob = RandomProblem(3, 24, 3, 1);
  EXPECT_EQ(CheckGradients(**vit, prob, params, GetParam() ? "vit cls" : "vit mean", 1e9, 1e9), params.size());
}

TEST_P(VitTest, LayerHooksAnnounceEveryLayerInOrder) {
  absl::StatusOr<std::unique_ptr<Model>> vit = Vit::Create(Tiny(GetParam()));
  ASSERT_TRUE(vit.ok());
  CheckLayerHooks(**vit, RandomProblem(2, 24, 3, 3), InitParams(**vit, 4));
}

TEST_P(VitTest, RematReadsOnlyWhatItAnnouncesAndGivesTheSameBits) {
  VitSpec spec = Tiny(GetParam());
  absl::StatusOr<std::unique_ptr<Model>> plain = Vit::Create(spec);
  spec.remat = true;
  absl::StatusOr<std::unique_ptr<Model>> remat = Vit::Create(spec);
  ASSERT_TRUE(plain.ok() && remat.ok());
  const std::vector<float> params = InitParams(**plain, 4);
  CheckLayerHooks(**remat, RandomProblem(2, 24, 3, 3), params);
  CheckRematGivesTheSameBits(**plain, **remat, RandomProblem(3, 24, 3, 9), params);
}

TEST_P(VitTest, Bfloat16IsNearFloat32AndKeepsTheHooksContractAndRematsBits) {
  SHARDLINE_REQUIRE_BF16();
  VitSpec spec = Tiny(GetParam());
  spec.d_model = 32;
  spec.heads = 4;
  CheckBfloatTransformer(
      [&](Precision precision, bool remat) {
        VitSpec s = spec;
        s.precision = precision;
        s.remat = remat;
        return Vit::Create(s);
      },
      RandomProblem(4, 24, 3, 9), RandomProblem(2, 24, 3, 3));
}

INSTANTIATE_TEST_SUITE_P(ClassTokenAndMean, VitTest, testing::Bool());

TEST(VitShapeTest, PatchesTokensAndBadSpecs) {
  VitSpec spec = Tiny(true);
  spec.input = InputShape{1, 28, 28, 10};
  spec.patch = 4;
  absl::StatusOr<std::unique_ptr<Model>> vit = Vit::Create(spec);
  ASSERT_TRUE(vit.ok());
  const FlatLayout& layout = (*vit)->layout();
  EXPECT_EQ(layout.tensor(0).name, "patch_embed.proj.weight");
  EXPECT_EQ(layout.tensor(0).shape, (std::vector<int64_t>{8, 16}));
  EXPECT_EQ(layout.tensor(3).name, "pos_embed");
  EXPECT_EQ(layout.tensor(3).shape, (std::vector<int64_t>{50, 8}));  // 49 patches + the class token
  EXPECT_EQ(layout.tensors().back().name, "head.bias");
  spec.patch = 5;
  EXPECT_TRUE(absl::StrContains(Vit::Create(spec).status().message(), "model.vit.patch"));
  spec.patch = 4;
  spec.heads = 3;
  EXPECT_TRUE(absl::StrContains(Vit::Create(spec).status().message(), "model.vit.heads"));
}

}  // namespace
}  // namespace shardline
