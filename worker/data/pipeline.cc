#include "worker/data/pipeline.h"

#include "common/job/shard.h"

#include <algorithm>
#include <cstring>
#include <numeric>

#include "absl/strings/str_cat.h"
#include "common/platform/logging.h"
#include "common/platform/status_macros.h"
#include "common/job/rng.h"

namespace shardline {

BatchPipeline::BatchPipeline(int64_t num_examples, int global_batch_size, uint64_t shuffle_seed,
                             Permutation permutation)
    : num_examples_(num_examples),
      global_batch_size_(global_batch_size),
      shuffle_seed_(shuffle_seed),
      steps_per_epoch_(num_examples / global_batch_size),
      permutation_kind_(permutation) {
  SCHECK(global_batch_size > 0 && global_batch_size <= num_examples)
      << "batch " << global_batch_size << " of " << num_examples << " examples";
  SCHECK(permutation == Permutation::kHashed || num_examples <= INT32_MAX) << num_examples << " examples";
  SCHECK(num_examples < (int64_t{1} << 62)) << num_examples << " examples";
}

int64_t BatchPipeline::HashedIndex(uint64_t shuffle_seed, int64_t epoch, int64_t n, int64_t i) {
  SCHECK(0 <= i && i < n && n < (int64_t{1} << 62));
  int bits = 2;
  while ((int64_t{1} << bits) < n) ++bits;
  bits += bits & 1;  // balanced: two halves of equal width
  const int half = bits / 2;
  const uint64_t mask = (uint64_t{1} << half) - 1;
  // rank 1: apart from kStored's draws (rank 0) of the same epoch.
  const RandomStream rng(shuffle_seed, Purpose::kShuffle, static_cast<uint64_t>(epoch), /*rank=*/1);
  constexpr int kRounds = 6;
  auto x = static_cast<uint64_t>(i);
  do {  // cycle-walk: at most 4n / n expected rounds trips over [0, 2^bits)
    uint64_t left = x >> half, right = x & mask;
    for (uint64_t r = 0; r < kRounds; ++r) {
      const uint64_t f = rng.Bits64((r << 40) | right) & mask;
      const uint64_t next = left ^ f;
      left = right;
      right = next;
    }
    x = (left << half) | right;
  } while (x >= static_cast<uint64_t>(n));
  return static_cast<int64_t>(x);
}

std::vector<int32_t> BatchPipeline::Shuffle(uint64_t shuffle_seed, int64_t epoch, int64_t n) {
  std::vector<int32_t> perm;
  ShuffleInto(shuffle_seed, epoch, n, &perm);
  return perm;
}

void BatchPipeline::ShuffleInto(uint64_t shuffle_seed, int64_t epoch, int64_t n, std::vector<int32_t>* out) {
  std::vector<int32_t>& perm = *out;
  perm.resize(static_cast<size_t>(n));
  std::iota(perm.begin(), perm.end(), 0);
  const RandomStream rng(shuffle_seed, Purpose::kShuffle, static_cast<uint64_t>(epoch), 0);
  for (int64_t i = n - 1; i > 0; --i) {  // Fisher-Yates; draw i picks j in [0, i]
    const int64_t j = static_cast<int64_t>(rng.UniformInt(static_cast<uint64_t>(i),
                                                           static_cast<uint64_t>(i + 1)));
    std::swap(perm[i], perm[j]);
  }
}

const std::vector<int32_t>& BatchPipeline::Stored(int64_t epoch) {
  if (epoch != cached_epoch_) {
    ShuffleInto(shuffle_seed_, epoch, num_examples_, &permutation_);  // in place: one permutation held, not two
    cached_epoch_ = epoch;
  }
  return permutation_;
}

void BatchPipeline::GlobalBatch(int64_t step, std::vector<int64_t>* indices) {
  RankSlice(step, 0, 1, indices);
}

void BatchPipeline::RankSlice(int64_t step, int rank, int world, std::vector<int64_t>* indices) {
  SCHECK(step >= 0 && world > 0 && rank >= 0 && rank < world);
  const int64_t epoch = step / steps_per_epoch_;
  const Range mine = ShardRange(global_batch_size_, rank, world);
  const int64_t first = (step % steps_per_epoch_) * global_batch_size_ + mine.begin;
  if (permutation_kind_ == Permutation::kStored) {
    const std::vector<int32_t>& perm = Stored(epoch);
    indices->assign(perm.begin() + first, perm.begin() + first + mine.size());
    return;
  }
  indices->resize(static_cast<size_t>(mine.size()));
  for (int64_t k = 0; k < mine.size(); ++k) {
    (*indices)[static_cast<size_t>(k)] = HashedIndex(shuffle_seed_, epoch, num_examples_, first + k);
  }
}

state::DataPosition BatchPipeline::Position(int64_t next_step) const {
  state::DataPosition pos;
  pos.set_shuffle_seed(shuffle_seed_);
  pos.set_next_step(next_step);
  pos.set_num_examples(num_examples_);
  pos.set_global_batch_size(global_batch_size_);
  if (!tokenizer_sha256_.empty()) pos.set_tokenizer_sha256(tokenizer_sha256_);
  pos.set_permutation(permutation_kind_ == Permutation::kHashed ? state::DataPosition::HASHED
                                                                 : state::DataPosition::STORED);
  return pos;
}

absl::StatusOr<int64_t> BatchPipeline::Restore(const state::DataPosition& pos) const {
  if (pos.tokenizer_sha256() != tokenizer_sha256_) {
    auto name = [](const std::string& sha) { return sha.empty() ? std::string("bytes (no tokenizer)") : "tokenizer " + sha; };
    return absl::FailedPreconditionError(absl::StrCat("saved data position was trained on ", name(pos.tokenizer_sha256()),
                                                      "; this run reads ", name(tokenizer_sha256_)));
  }
  if (pos.shuffle_seed() != shuffle_seed_ || pos.num_examples() != num_examples_ ||
      pos.global_batch_size() != global_batch_size_) {
    return absl::FailedPreconditionError(absl::StrCat(
        "saved data position (shuffle_seed ", pos.shuffle_seed(), ", ", pos.num_examples(),
        " examples, global batch ", pos.global_batch_size(),
        ") does not match this run (shuffle_seed ", shuffle_seed_, ", ", num_examples_,
        " examples, global batch ", global_batch_size_, ")"));
  }
  // Positions written before the permutation was recorded: token shards
  // were hashed, everything else stored (byte-level text too).
  const bool saved_hashed = pos.has_permutation() ? pos.permutation() == state::DataPosition::HASHED
                                                  : !pos.tokenizer_sha256().empty();
  if (saved_hashed != (permutation_kind_ == Permutation::kHashed)) {
    auto name = [](bool hashed) { return hashed ? "hashed (text, token shards)" : "stored (images; text before 2026-11-29)"; };
    return absl::FailedPreconditionError(absl::StrCat(
        "saved data position was shuffled by the ", name(saved_hashed), " permutation; this run shuffles by the ",
        name(permutation_kind_ == Permutation::kHashed),
        " one (worker/data/pipeline.h): resume it with the shardline that wrote it, or start afresh"));
  }
  if (pos.next_step() < 0) {
    return absl::DataLossError(absl::StrCat("saved data position has negative step ",
                                            pos.next_step()));
  }
  return pos.next_step();
}

namespace {

// Example `row` of `data` into position i of `out` (sized by the caller).
absl::Status CopyExample(const Dataset& data, int64_t row, size_t i, BatchData* out) {
  if (!data.is_text()) {
    data.CopyRows(row, 1, out->x.data() + i * static_cast<size_t>(data.feature_dim));
    out->y[i] = data.labels[static_cast<size_t>(row)];
    return absl::OkStatus();
  }
  const size_t ctx = static_cast<size_t>(data.context);
  if (data.tokens != nullptr) {  // the window's ctx + 1 tokens: inputs [0, ctx), targets [1, ctx]
    int32_t* targets = out->y.data() + i * ctx;
    int32_t* tokens = out->tokens.data() + i * ctx;
    RETURN_IF_ERROR(data.tokens->Read(row * data.stride, static_cast<int64_t>(ctx), tokens));
    std::copy(tokens + 1, tokens + ctx, targets);
    return data.tokens->Read(row * data.stride + static_cast<int64_t>(ctx), 1, targets + ctx - 1);
  }
  const auto* window = reinterpret_cast<const unsigned char*>(data.text.data()) + row * data.stride;
  int32_t* tokens = out->tokens.data() + i * ctx;
  int32_t* targets = out->y.data() + i * ctx;
  for (size_t j = 0; j < ctx; ++j) {
    tokens[j] = window[j];
    targets[j] = window[j + 1];
  }
  return absl::OkStatus();
}

void Size(const Dataset& data, size_t n, BatchData* out) {
  const size_t per = static_cast<size_t>(data.targets_per_example());
  if (data.is_text()) {
    out->tokens.resize(n * static_cast<size_t>(data.context));
  } else {
    out->x.resize(n * static_cast<size_t>(data.feature_dim));
  }
  out->y.resize(n * per);
}

}  // namespace

absl::Status GatherBatch(const Dataset& data, absl::Span<const int64_t> indices, BatchData* out) {
  Size(data, indices.size(), out);
  for (size_t i = 0; i < indices.size(); ++i) RETURN_IF_ERROR(CopyExample(data, indices[i], i, out));
  return absl::OkStatus();
}

absl::Status GatherRange(const Dataset& data, int64_t first, int count, BatchData* out) {
  Size(data, static_cast<size_t>(count), out);
  for (int i = 0; i < count; ++i) RETURN_IF_ERROR(CopyExample(data, first + i, static_cast<size_t>(i), out));
  return absl::OkStatus();
}

}  // namespace shardline
