#include "worker/model/gpt_sampler.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <numeric>

#include "absl/strings/str_cat.h"
#include "common/job/rng.h"
#include "worker/model/transformer_ops.h"

namespace shardline {

GptSampler::GptSampler(const Gpt& gpt, const float* params) : gpt_(gpt), params_(params) {
  d_ = gpt.spec().d_model;
  heads_ = gpt.spec().heads;
  hidden_ = gpt.block_shape().hidden;
  context_ = gpt.spec().context;
  vocab_ = gpt.spec().vocab;
  keys_.assign(gpt.blocks().size(), std::vector<float>(static_cast<size_t>(context_) * d_));
  values_ = keys_;
  x_.resize(d_);
  ln_.resize(d_);
  qkv_.resize(3 * static_cast<size_t>(d_));
  attn_.resize(d_);
  proj_.resize(d_);
  hidden_act_.resize(hidden_);
  gelu_.resize(hidden_);
  logits_.resize(vocab_);
  scores_.resize(context_);
  mean_.resize(1);
  rstd_.resize(1);
}

void GptSampler::Reset() { position_ = 0; }

const std::vector<float>& GptSampler::Push(int32_t token) {
  const FlatLayout& layout = gpt_.layout();
  auto p = [&](int tensor) { return params_ + layout.tensor(tensor).offset; };
  const int pos = position_;
  const float* e = p(gpt_.wte()) + static_cast<int64_t>(token) * d_;
  const float* w = p(gpt_.wpe()) + static_cast<int64_t>(pos) * d_;
  for (int i = 0; i < d_; ++i) x_[i] = e[i] + w[i];
  const int hd = d_ / heads_;
  const float scale = 1.0f / std::sqrt(static_cast<float>(hd));
  for (size_t l = 0; l < gpt_.blocks().size(); ++l) {
    const BlockTensors& t = gpt_.blocks()[l];
    LayerNormForward(x_.data(), p(t.ln1_w), p(t.ln1_b), 1, d_, ln_.data(), mean_.data(), rstd_.data());
    LinearForward(ln_.data(), p(t.attn_w), p(t.attn_b), 1, d_, 3 * d_, qkv_.data());
    std::copy(qkv_.begin() + d_, qkv_.begin() + 2 * d_, keys_[l].begin() + static_cast<int64_t>(pos) * d_);
    std::copy(qkv_.begin() + 2 * d_, qkv_.end(), values_[l].begin() + static_cast<int64_t>(pos) * d_);
    for (int h = 0; h < heads_; ++h) {
      const float* q = qkv_.data() + h * hd;
      float max = -std::numeric_limits<float>::infinity();
      for (int j = 0; j <= pos; ++j) {
        const float* k = keys_[l].data() + static_cast<int64_t>(j) * d_ + h * hd;
        float s = 0;
        for (int i = 0; i < hd; ++i) s += q[i] * k[i];
        scores_[j] = s * scale;
        max = std::max(max, scores_[j]);
      }
      float sum = 0;
      for (int j = 0; j <= pos; ++j) {
        scores_[j] = std::exp(scores_[j] - max);
        sum += scores_[j];
      }
      float* out = attn_.data() + h * hd;
      std::fill(out, out + hd, 0.0f);
      for (int j = 0; j <= pos; ++j) {
        const float pj = scores_[j] / sum;
        const float* v = values_[l].data() + static_cast<int64_t>(j) * d_ + h * hd;
        for (int i = 0; i < hd; ++i) out[i] += pj * v[i];
      }
    }
    LinearForward(attn_.data(), p(t.proj_w), p(t.proj_b), 1, d_, d_, proj_.data());
    for (int i = 0; i < d_; ++i) x_[i] += proj_[i];
    LayerNormForward(x_.data(), p(t.ln2_w), p(t.ln2_b), 1, d_, ln_.data(), mean_.data(), rstd_.data());
    LinearForward(ln_.data(), p(t.fc_w), p(t.fc_b), 1, d_, hidden_, hidden_act_.data());
    GeluForward(hidden_act_.data(), hidden_, gelu_.data());
    LinearForward(gelu_.data(), p(t.out_w), p(t.out_b), 1, hidden_, d_, proj_.data());
    for (int i = 0; i < d_; ++i) x_[i] += proj_[i];
  }
  LayerNormForward(x_.data(), p(gpt_.ln_f_weight()), p(gpt_.ln_f_bias()), 1, d_, ln_.data(), mean_.data(),
                   rstd_.data());
  LinearForward(ln_.data(), p(gpt_.wte()), nullptr, 1, d_, vocab_, logits_.data());
  ++position_;
  return logits_;
}

namespace {

// Probabilities from logits / temperature over the top_k largest (all if 0).
std::vector<double> Distribution(const std::vector<float>& logits, float temperature, int top_k) {
  const int v = static_cast<int>(logits.size());
  std::vector<int> order(v);
  std::iota(order.begin(), order.end(), 0);
  // By logit, descending; ties by byte value, so the order is total.
  std::stable_sort(order.begin(), order.end(), [&](int a, int b) { return logits[a] > logits[b]; });
  const int keep = top_k > 0 ? std::min(top_k, v) : v;
  std::vector<double> probs(v, 0.0);
  if (temperature <= 0) {
    probs[order[0]] = 1.0;
    return probs;
  }
  const double max = logits[order[0]];
  double sum = 0;
  for (int i = 0; i < keep; ++i) {
    const double e = std::exp((logits[order[i]] - max) / temperature);
    probs[order[i]] = e;
    sum += e;
  }
  for (double& p : probs) p /= sum;
  return probs;
}

}  // namespace

absl::StatusOr<std::string> GptSampler::Generate(absl::string_view prompt, const SampleOptions& o) {
  if (o.tokens < 0) return absl::InvalidArgumentError(absl::StrCat("--tokens: ", o.tokens, " is negative"));
  if (o.temperature < 0 || !std::isfinite(o.temperature)) {
    return absl::InvalidArgumentError(absl::StrCat("--temperature: ", o.temperature, " is not >= 0"));
  }
  if (o.top_k < 0) return absl::InvalidArgumentError(absl::StrCat("--top_k: ", o.top_k, " is negative"));
  std::string history(prompt.empty() ? absl::string_view("\n") : prompt);
  const int keep = std::max(1, context_ / 2);
  // Fills the cache from the last `keep` bytes of the history.
  auto refill = [&]() -> const std::vector<float>* {
    Reset();
    const size_t from = history.size() > static_cast<size_t>(keep) ? history.size() - keep : 0;
    const std::vector<float>* logits = nullptr;
    for (size_t i = from; i < history.size(); ++i) logits = &Push(static_cast<unsigned char>(history[i]));
    return logits;
  };
  const std::vector<float>* logits = refill();
  const RandomStream draws(o.seed, Purpose::kSample, /*step=*/0, /*rank=*/0);
  std::string out;
  out.reserve(static_cast<size_t>(o.tokens));
  for (int i = 0; i < o.tokens; ++i) {
    const std::vector<double> probs = Distribution(*logits, o.temperature, o.top_k);
    const double u = draws.Uniform(static_cast<uint64_t>(i));
    int byte = 0;
    double cumulative = 0;
    for (; byte < vocab_ - 1; ++byte) {
      cumulative += probs[byte];
      if (u < cumulative && probs[byte] > 0) break;
    }
    while (probs[byte] == 0 && byte > 0) --byte;  // rounding at the end: the last possible byte
    out.push_back(static_cast<char>(byte));
    history.push_back(static_cast<char>(byte));
    logits = position_ < context_ ? &Push(byte) : refill();
  }
  return out;
}

}  // namespace shardline
