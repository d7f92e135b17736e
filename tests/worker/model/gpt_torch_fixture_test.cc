// The GPT against PyTorch on the same weights, as llm.c's test_gpt2 checks
// against its fixture: logits, loss and every gradient of a small model,
// made once by the PyTorch peer (`bench/peers/torch_gpt.py fixture --out
// tests/fixtures/gpt_torch`, python3-torch 1.13) and committed. It pins what
// finite differences cannot: the tanh GELU, LayerNorm's eps, the tied head,
// the causal mask, the position embedding, the mean over targets.
#include <cmath>
#include <cstring>
#include <memory>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "common/platform/env.h"
#include "worker/checkpoint/safetensors.h"
#include "worker/model/gpt.h"

namespace shardline {
namespace {

const std::string kDir = std::string(SHARDLINE_SOURCE_DIR) + "/tests/fixtures/gpt_torch";

// The fixture's model (torch_gpt.py's FIXTURE).
GptSpec FixtureSpec() {
  GptSpec s;
  s.context = 8;
  s.layers = 2;
  s.d_model = 8;
  s.heads = 2;
  s.mlp_ratio = 4;
  return s;
}
constexpr int kBatch = 2;

// A tensor of a safetensors file as raw bytes, checked for dtype and size.
class Tensors {
 public:
  explicit Tensors(const std::string& path) : path_(path) {
    absl::StatusOr<std::string> bytes = Env::Default()->ReadFile(path, kMaxSmallFileBytes);
    EXPECT_TRUE(bytes.ok()) << bytes.status();
    bytes_ = bytes.value_or("");
    absl::StatusOr<SafetensorsHeader> h = ParseSafetensors(bytes_, path);
    EXPECT_TRUE(h.ok()) << h.status();
    header_ = h.value_or(SafetensorsHeader());
  }
  template <typename T>
  std::vector<T> Get(const std::string& name, const char* dtype, size_t count) const {
    auto it = header_.tensors.find(name);
    if (it == header_.tensors.end()) {
      ADD_FAILURE() << path_ << " has no " << name;
      return std::vector<T>(count);
    }
    EXPECT_EQ(it->second.dtype, dtype) << name;
    EXPECT_EQ(it->second.data_end - it->second.data_begin, count * sizeof(T)) << name;
    std::vector<T> out(count);
    std::memcpy(out.data(), bytes_.data() + header_.data_offset + it->second.data_begin,
                std::min<size_t>(count * sizeof(T), it->second.data_end - it->second.data_begin));
    return out;
  }

 private:
  std::string path_;
  std::string bytes_;
  SafetensorsHeader header_;
};

// max |a - b| over max |b|: relative to the tensor's scale, as a value near
// zero has no relative error to speak of.
double ScaledError(const float* a, const float* b, size_t n) {
  double diff = 0, scale = 0;
  for (size_t i = 0; i < n; ++i) {
    diff = std::max(diff, std::fabs(static_cast<double>(a[i]) - b[i]));
    scale = std::max(scale, std::fabs(static_cast<double>(b[i])));
  }
  return scale > 0 ? diff / scale : diff;
}

TEST(GptTorchFixtureTest, LogitsLossAndGradientsMatchPyTorch) {
  absl::StatusOr<std::unique_ptr<Model>> made = Gpt::Create(FixtureSpec());
  ASSERT_TRUE(made.ok()) << made.status();
  const Gpt& gpt = static_cast<const Gpt&>(**made);
  const FlatLayout& layout = gpt.layout();
  std::vector<float> params(static_cast<size_t>(layout.total_size()));
  ASSERT_TRUE(ReadSafetensorsInto(Env::Default(), kDir + "/params.safetensors", layout, params.data()).ok());

  const Tensors batch(kDir + "/batch.safetensors");
  const size_t positions = kBatch * FixtureSpec().context;
  const std::vector<int32_t> tokens = batch.Get<int32_t>("tokens", "I32", positions);
  const std::vector<int32_t> targets = batch.Get<int32_t>("targets", "I32", positions);
  const std::vector<float> want_logits = batch.Get<float>("logits", "F32", positions * 256);
  const float want_loss = batch.Get<float>("loss", "F32", 1)[0];

  GptWorkspace ws(Precision::kFloat32);  // PyTorch's fixture is float32
  ws.keep_logits = true;
  const Examples examples = Sequences(tokens.data(), targets.data(), kBatch);
  const BatchStats stats = gpt.Forward(params.data(), examples, &ws);
  ASSERT_EQ(ws.logits.size(), want_logits.size());
  EXPECT_LT(ScaledError(ws.logits.data(), want_logits.data(), want_logits.size()), 1e-5);
  const double loss = stats.loss_sum / static_cast<double>(stats.count);
  EXPECT_EQ(stats.count, static_cast<int64_t>(positions));
  EXPECT_NEAR(loss, want_loss, 1e-5 * std::fabs(want_loss)) << "PyTorch's mean cross-entropy";

  // PyTorch's gradient is of the mean loss: scale the sum's by 1 / targets.
  std::vector<float> grads(params.size());
  gpt.Backward(params.data(), examples, 1.0f / static_cast<float>(positions), /*accumulate=*/false, grads.data(),
               &ws);
  const Tensors want_grads(kDir + "/grads.safetensors");
  for (const TensorInfo& t : layout.tensors()) {
    const std::vector<float> want = want_grads.Get<float>(t.name, "F32", static_cast<size_t>(t.size));
    EXPECT_LT(ScaledError(grads.data() + t.offset, want.data(), want.size()), 1e-4) << t.name;
  }
}

}  // namespace
}  // namespace shardline
