// The deterministic input pipeline. Every step's global batch is a pure
// function of (shuffle_seed, step): epoch e = step / steps_per_epoch uses the
// permutation Shuffle(shuffle_seed, e) of all examples, and step s takes the
// (s mod steps_per_epoch)-th run of global_batch_size entries of it (the
// remainder of each epoch is dropped). A rank's slice of the global batch is
// a pure function of (shuffle_seed, step, rank, world): positions
// [rank*B/world, (rank+1)*B/world) of it. So a resumed run, or a run on a
// different number of workers, sees exactly the same global batches.
//
// Two permutations, by what an example costs. kStored (images: hundreds of
// bytes an example) draws a Fisher-Yates shuffle and holds it: 4 bytes per
// example. kHashed (text and token shards, whose examples start at every
// byte or token: a held permutation would be 4 times the corpus) holds
// nothing: position i of epoch e is a keyed bijection of [0, n) computed
// when asked (a balanced Feistel network over the smallest even power of
// two >= n, cycle-walked into [0, n)), so memory does not grow with the
// corpus.
//
//   BatchPipeline pipe(train.num_examples, cfg.data().global_batch_size(), seed);
//   pipe.RankSlice(step, rank, world, &indices);
//   GatherBatch(train, indices, &batch);
#ifndef SHARDLINE_WORKER_DATA_PIPELINE_H_
#define SHARDLINE_WORKER_DATA_PIPELINE_H_

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/types/span.h"
#include "proto/train_state.pb.h"
#include "worker/data/dataset.h"

namespace shardline {

enum class Permutation { kStored, kHashed };

class BatchPipeline {
 public:
  // Requires 0 < global_batch_size <= num_examples, and num_examples < 2^31
  // for kStored.
  BatchPipeline(int64_t num_examples, int global_batch_size, uint64_t shuffle_seed,
                Permutation permutation = Permutation::kStored);

  int64_t steps_per_epoch() const { return steps_per_epoch_; }
  int global_batch_size() const { return global_batch_size_; }

  // Example indices of the global batch of `step` (>= 0), in batch order.
  void GlobalBatch(int64_t step, std::vector<int64_t>* indices);

  // This rank's part of the global batch of `step`: positions
  // [rank*B/world, (rank+1)*B/world), so the ranks' slices are contiguous,
  // cover the batch exactly and differ in size by at most one - any world
  // size trains the same global batches. Requires 0 <= rank < world.
  void RankSlice(int64_t step, int rank, int world, std::vector<int64_t>* indices);

  // The pipeline position before reading `next_step`'s batch.
  state::DataPosition Position(int64_t next_step) const;

  // Checks a saved position belongs to this pipeline (same seed, data set
  // size, batch size, tokenizer and permutation) and returns the step to
  // read next.
  absl::StatusOr<int64_t> Restore(const state::DataPosition& position) const;

  // The permutation of epoch `epoch`: a pure function of (shuffle_seed, epoch).
  static std::vector<int32_t> Shuffle(uint64_t shuffle_seed, int64_t epoch, int64_t n);
  // The same into *out, reusing its memory.
  static void ShuffleInto(uint64_t shuffle_seed, int64_t epoch, int64_t n, std::vector<int32_t>* out);
  // Position i of kHashed's permutation of epoch `epoch` over [0, n): a
  // pure function of (shuffle_seed, epoch, n, i). Requires 0 <= i < n < 2^62.
  static int64_t HashedIndex(uint64_t shuffle_seed, int64_t epoch, int64_t n, int64_t i);

  Permutation permutation() const { return permutation_kind_; }
  // Token shards: the tokenizer that made them, saved in every Position and
  // checked by Restore.
  void set_tokenizer_sha256(std::string sha256) { tokenizer_sha256_ = std::move(sha256); }

 private:
  const std::vector<int32_t>& Stored(int64_t epoch);

  int64_t num_examples_;
  int global_batch_size_;
  uint64_t shuffle_seed_;
  int64_t steps_per_epoch_;
  Permutation permutation_kind_;
  std::string tokenizer_sha256_;
  int64_t cached_epoch_ = -1;
  std::vector<int32_t> permutation_;
};

// The permutation a training split is shuffled with: kHashed for text and
// token shards (held, it would be 4 bytes per byte or token of the
// corpus), kStored for images.
inline Permutation PermutationFor(const Dataset& train) {
  return train.is_text() ? Permutation::kHashed : Permutation::kStored;
}

// Copies the examples `indices` of `data` into `out` (growing its vectors
// as needed; images fill x and y, text tokens and y). Fails only for token
// shards: DataLoss naming the shard of a token outside the vocabulary.
absl::Status GatherBatch(const Dataset& data, absl::Span<const int64_t> indices, BatchData* out);

// Copies examples [first, first + count) of `data` into `out`.
absl::Status GatherRange(const Dataset& data, int64_t first, int count, BatchData* out);

}  // namespace shardline

#endif  // SHARDLINE_WORKER_DATA_PIPELINE_H_
