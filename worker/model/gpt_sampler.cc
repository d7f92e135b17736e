#include "worker/model/gpt_sampler.h"

#include <algorithm>
#include <cmath>
#include <numeric>

#include "absl/strings/str_cat.h"
#include "common/job/rng.h"

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
