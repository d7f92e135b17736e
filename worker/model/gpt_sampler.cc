#include "worker/model/gpt_sampler.h"

#include <algorithm>
#include <cmath>
#include <numeric>

#include "absl/strings/str_cat.h"
#include "common/job/rng.h"
#include "common/platform/status_macros.h"

namespace shardline {

GptSampler::GptSampler(const Gpt& gpt, const float* params)
    : gpt_(gpt), params_(params), context_(gpt.spec().context), vocab_(gpt.spec().vocab), cache_(gpt.NewKvCache()) {}

void GptSampler::Reset() { position_ = 0; }

const std::vector<float>& GptSampler::Push(int32_t token) {
  gpt_.ForwardCached(params_, token, position_, &cache_);
  ++position_;
  return cache_.logits;
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

absl::StatusOr<std::vector<int32_t>> GptSampler::GenerateTokens(absl::Span<const int32_t> prompt,
                                                                 const SampleOptions& o) {
  if (o.tokens < 0) return absl::InvalidArgumentError(absl::StrCat("--tokens: ", o.tokens, " is negative"));
  if (o.temperature < 0 || !std::isfinite(o.temperature)) {
    return absl::InvalidArgumentError(absl::StrCat("--temperature: ", o.temperature, " is not >= 0"));
  }
  if (o.top_k < 0) return absl::InvalidArgumentError(absl::StrCat("--top_k: ", o.top_k, " is negative"));
  if (prompt.empty()) return absl::InvalidArgumentError("a prompt of no tokens");
  for (size_t i = 0; i < prompt.size(); ++i) {
    if (prompt[i] < 0 || prompt[i] >= vocab_) {
      return absl::InvalidArgumentError(absl::StrCat("prompt token ", i, " is ", prompt[i], ", outside the model's ",
                                                     vocab_, " tokens"));
    }
  }
  std::vector<int32_t> history(prompt.begin(), prompt.end());
  const int keep = std::max(1, context_ / 2);
  // Fills the cache from the last `keep` tokens of the history.
  auto refill = [&]() -> const std::vector<float>* {
    Reset();
    const size_t from = history.size() > static_cast<size_t>(keep) ? history.size() - keep : 0;
    const std::vector<float>* logits = nullptr;
    for (size_t i = from; i < history.size(); ++i) logits = &Push(history[i]);
    return logits;
  };
  const std::vector<float>* logits = refill();
  const RandomStream draws(o.seed, Purpose::kSample, /*step=*/0, /*rank=*/0);
  std::vector<int32_t> out;
  out.reserve(static_cast<size_t>(o.tokens));
  for (int i = 0; i < o.tokens; ++i) {
    const std::vector<double> probs = Distribution(*logits, o.temperature, o.top_k);
    const double u = draws.Uniform(static_cast<uint64_t>(i));
    int token = 0;
    double cumulative = 0;
    for (; token < vocab_ - 1; ++token) {
      cumulative += probs[token];
      if (u < cumulative && probs[token] > 0) break;
    }
    while (probs[token] == 0 && token > 0) --token;  // rounding at the end: the last possible token
    out.push_back(token);
    history.push_back(token);
    logits = position_ < context_ ? &Push(token) : refill();
  }
  return out;
}

absl::StatusOr<std::string> GptSampler::Generate(absl::string_view prompt, const SampleOptions& o) {
  const absl::string_view start = prompt.empty() ? absl::string_view("\n") : prompt;
  std::vector<int32_t> ids(start.size());
  for (size_t i = 0; i < start.size(); ++i) ids[i] = static_cast<unsigned char>(start[i]);
  ASSIGN_OR_RETURN(const std::vector<int32_t> drawn, GenerateTokens(ids, o));
  std::string out(drawn.size(), '\0');
  for (size_t i = 0; i < drawn.size(); ++i) out[i] = static_cast<char>(drawn[i]);
  return out;
}

}  // namespace shardline
