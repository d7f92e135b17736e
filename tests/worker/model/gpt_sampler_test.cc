// The KV-cache sampler: one position at a time gives what the whole-sequence
// forward gives, the same arguments give the same bytes, and the options
// mean what they say.
#include "worker/model/gpt_sampler.h"

#include <cmath>
#include <memory>
#include <vector>

#include <gtest/gtest.h>

#include "tests/worker/model/model_test_util.h"

namespace shardline {
namespace {

std::unique_ptr<Model> SmallGpt() {
  GptSpec s;
  s.vocab = 256;
  s.context = 12;
  s.layers = 2;
  s.d_model = 16;
  s.heads = 4;
  s.mlp_ratio = 2;
  return *Gpt::Create(s);
}

std::vector<float> Params(const Model& m) {
  std::vector<float> p(static_cast<size_t>(m.layout().total_size()));
  m.InitRange(3, Range{0, m.layout().total_size()}, p.data());
  for (float& v : p) v *= 20.0f;  // far from uniform next-byte distributions
  return p;
}

TEST(GptSamplerTest, TheCacheGivesTheWholeSequenceForwardsDistributionAtEveryPosition) {
  const std::unique_ptr<Model> model = SmallGpt();
  const Gpt& gpt = static_cast<const Gpt&>(*model);
  const std::vector<float> params = Params(gpt);
  const Problem seq = RandomSequences(1, 12, 256, 5);
  std::unique_ptr<ModelWorkspace> ws = gpt.NewWorkspace();
  gpt.Forward(params.data(), seq.examples(), ws.get());
  const std::vector<float>& probs = static_cast<GptWorkspace*>(ws.get())->probs;  // softmax rows
  GptSampler sampler(gpt, params.data());
  for (int t = 0; t < 12; ++t) {
    const std::vector<float>& logits = sampler.Push(seq.tokens[t]);
    double max = -1e30, sum = 0;
    for (float l : logits) max = std::max<double>(max, l);
    for (float l : logits) sum += std::exp(l - max);
    for (int v = 0; v < 256; ++v) {
      const double p = std::exp(logits[v] - max) / sum;
      EXPECT_NEAR(p, probs[t * 256 + v], 1e-5 + 1e-4 * p) << "position " << t << " byte " << v;
    }
  }
  EXPECT_EQ(sampler.position(), 12);
}

TEST(GptSamplerTest, TheSameArgumentsGiveTheSameBytesAndTheOptionsMeanWhatTheySay) {
  const std::unique_ptr<Model> model = SmallGpt();
  const Gpt& gpt = static_cast<const Gpt&>(*model);
  const std::vector<float> params = Params(gpt);
  GptSampler a(gpt, params.data()), b(gpt, params.data());
  SampleOptions o;
  o.tokens = 50;  // past the context of 12: the cache refills
  o.seed = 7;
  const absl::StatusOr<std::string> one = a.Generate("It is a truth", o);
  ASSERT_TRUE(one.ok()) << one.status();
  EXPECT_EQ(one->size(), 50u);
  EXPECT_EQ(*one, *b.Generate("It is a truth", o));
  EXPECT_EQ(*one, *a.Generate("It is a truth", o));  // the sampler holds no state between calls
  o.seed = 8;
  EXPECT_NE(*one, *a.Generate("It is a truth", o));
  // Temperature 0 and top_k 1 both take the most likely byte, whatever the seed.
  SampleOptions greedy;
  greedy.tokens = 30;
  greedy.temperature = 0;
  SampleOptions top1;
  top1.tokens = 30;
  top1.top_k = 1;
  top1.seed = 99;
  EXPECT_EQ(*a.Generate("x", greedy), *a.Generate("x", top1));
  // top_k 3 draws only among each position's three most likely bytes.
  SampleOptions top3;
  top3.tokens = 1;
  top3.top_k = 3;
  GptSampler probe(gpt, params.data());
  const std::vector<float> logits = probe.Push('q');
  std::vector<int> order(256);
  for (int i = 0; i < 256; ++i) order[i] = i;
  std::sort(order.begin(), order.end(), [&](int x, int y) { return logits[x] > logits[y]; });
  for (uint64_t seed = 0; seed < 20; ++seed) {
    top3.seed = seed;
    const unsigned char c = static_cast<unsigned char>((*a.Generate("q", top3))[0]);
    EXPECT_TRUE(c == order[0] || c == order[1] || c == order[2]) << "seed " << seed << " drew " << int{c};
  }
  SampleOptions bad;
  bad.temperature = -1;
  EXPECT_FALSE(a.Generate("x", bad).ok());
}

}  // namespace
}  // namespace shardline
