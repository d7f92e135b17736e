// Text from a GPT (gpt.h), one byte at a time with a KV cache: each new
// token runs one position through the model, attending to the cached keys
// and values of the positions before it, instead of the whole prefix again.
// When the cache is full (context positions), it is filled again from the
// last context / 2 bytes, which then sit at positions 0.., and generation
// goes on.
//
// The bytes drawn are a pure function of (parameters, prompt, options):
// draw i uses the counter-based stream of (seed, i).
//
//   GptSampler sampler(gpt, params);
//   ASSIGN_OR_RETURN(std::string text, sampler.Generate("It is a truth", options));
#ifndef SHARDLINE_WORKER_MODEL_GPT_SAMPLER_H_
#define SHARDLINE_WORKER_MODEL_GPT_SAMPLER_H_

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/types/span.h"
#include "worker/model/gpt.h"

namespace shardline {

struct SampleOptions {
  int tokens = 200;          // bytes to generate
  float temperature = 1.0f;  // 0: always the most likely byte
  int top_k = 0;             // > 0: draw among the k most likely bytes only
  uint64_t seed = 0;
};

class GptSampler {
 public:
  // `gpt` and `params` (its full flat parameters) must outlive the sampler.
  GptSampler(const Gpt& gpt, const float* params);

  // The prompt's continuation (without the prompt). The prompt may be empty
  // (generation starts from a newline) or longer than the context (its last
  // context / 2 bytes are read).
  // For a byte-level model (vocabulary 256).
  absl::StatusOr<std::string> Generate(absl::string_view prompt, const SampleOptions& options);
  // The same over token ids (any vocabulary; a tokenizer encodes the prompt
  // and decodes the result): the ids drawn after `prompt` (at least one id,
  // each below the vocabulary).
  absl::StatusOr<std::vector<int32_t>> GenerateTokens(absl::Span<const int32_t> prompt, const SampleOptions& options);

  // Clears the cache; then Push feeds tokens one by one, each at the next
  // position, and returns the logits of the byte after it (valid until the
  // next Push). At most `context` pushes after a Reset.
  void Reset();
  const std::vector<float>& Push(int32_t token);
  int position() const { return position_; }

 private:
  const Gpt& gpt_;
  const float* params_;
  const int context_, vocab_;
  int position_ = 0;
  GptKvCache cache_;
};

}  // namespace shardline

#endif  // SHARDLINE_WORKER_MODEL_GPT_SAMPLER_H_
