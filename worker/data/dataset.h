// In-memory data sets: images with classes (Fashion-MNIST's four IDX files)
// and text (any files of bytes, for byte-level language models). Pixels stay bytes (a quarter of the memory of floats, and
// a faster start: nothing to convert at load); a row becomes standardised
// floats, pixel * scale + shift, when it is copied into a batch (vectorised;
// the build's -ffp-contract=off keeps every copy of a pixel the same float).
//
//   ASSIGN_OR_RETURN(TrainingData data, LoadFashionMnist(env, cfg.data().dir()));
//   // data.train.num_examples == 60000, data.test.num_examples == 10000
//   ASSIGN_OR_RETURN(TrainingData text, LoadTextSplits(env, "train.txt", "val.txt", /*context=*/128));
#ifndef SHARDLINE_WORKER_DATA_DATASET_H_
#define SHARDLINE_WORKER_DATA_DATASET_H_

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "common/platform/env.h"
#include "proto/config.pb.h"
#include "worker/data/token_corpus.h"

namespace shardline {

// A split of images with classes, or of text. Example i of a text split is
// the window of context + 1 bytes at offset i * stride: its first context
// bytes are the tokens, its last context the targets (each position's next
// byte). Training text has stride 1 (a window at every offset), validation
// text stride context (whole windows that tile it from its start: each
// byte predicted once except the first and the last (size - 1) mod
// context, which fill no window).
struct Dataset {
  // Where it came from, for errors: "data.text.train_path /d/train.txt" or
  // "data.dir /usr/share/.../train-images-idx3-ubyte.gz".
  std::string source;
  int64_t num_examples = 0;
  int feature_dim = 0;           // height * width
  int height = 0;                // of each image; a flat (non-image) set has height 1
  int width = 0;
  int num_classes = 0;
  std::string pixels;           // [num_examples, feature_dim] bytes, row-major
  float scale = 1;              // feature = pixel * scale + shift
  float shift = 0;
  std::vector<int32_t> labels;  // [num_examples], each in [0, num_classes)
  // Text only (context > 0); num_classes is then 256, the byte values.
  std::string text;
  int context = 0;
  int64_t stride = 1;
  // Token shards only (data.tokens): the split's tokens, mapped, in place of
  // `text`; windows are of tokens, and num_classes is the vocabulary.
  std::shared_ptr<const TokenCorpus> tokens;
  // Bytes of text per token predicted (1 for bytes): bits per byte is the
  // loss per token / ln 2 / this.
  double bytes_per_token = 1;

  bool is_text() const { return context > 0; }
  // Predicted targets per example.
  int targets_per_example() const { return is_text() ? context : 1; }

  // Writes the features of rows [first, first + count) to out
  // (count * feature_dim floats).
  void CopyRows(int64_t first, int64_t count, float* out) const {
    const auto* p = reinterpret_cast<const unsigned char*>(pixels.data()) + first * feature_dim;
    const int64_t n = count * feature_dim;
    const float a = scale, b = shift;
    for (int64_t i = 0; i < n; ++i) out[i] = static_cast<float>(p[i]) * a + b;
  }
};

struct TrainingData {
  Dataset train;
  Dataset test;  // Fashion-MNIST's test split, or the validation text
  // Token shards only: the tokenizer they were made with (checked against
  // the manifest at load) and its SHA-256.
  std::string tokenizer_model;
  std::string tokenizer_sha256;
};

// A batch gathered from a split: images as features x ([n, feature_dim]),
// text as tokens ([n, context]); targets y ([n, targets_per_example]).
struct BatchData {
  std::vector<float> x;
  std::vector<int32_t> tokens;
  std::vector<int32_t> y;
};

// Fashion-MNIST pixel statistics (over the training split, in [0, 1]); every
// pixel p becomes (p / 255 - kMean) / kStd.
inline constexpr float kFashionMnistMean = 0.2860f;
inline constexpr float kFashionMnistStd = 0.3530f;

// Reads an images file (N x rows x cols) and a labels file (N) and checks
// they agree: same N, labels below `num_classes`.
// `cache_dir`: where inflated copies are kept (inflate_cache.h); empty: none.
absl::StatusOr<Dataset> LoadIdxSplit(Env* env, const std::string& images_path,
                                     const std::string& labels_path, int num_classes,
                                     const std::string& cache_dir = "");

// Loads {train,t10k}-{images-idx3,labels-idx1}-ubyte.gz from `dir`.
absl::StatusOr<TrainingData> LoadFashionMnist(Env* env, const std::string& dir, const std::string& cache_dir = "");

// Text splits of windows of context + 1 bytes from two files of any bytes.
// A missing file, an empty one, or one shorter than a window fails naming
// the file.
absl::StatusOr<TrainingData> LoadTextSplits(Env* env, const std::string& train_path, const std::string& val_path,
                                            int context);

// Text splits of windows of context + 1 tokens from the token shards in
// `dir` (token_manifest.h). A missing or damaged shard fails naming it.
absl::StatusOr<TrainingData> LoadTokenSplits(Env* env, const std::string& dir, int context,
                                             const TokenCorpusOptions& options);

// Token shards only: writes the tokenizer they were made with (the bytes
// checked at load) to dir/tokenizer.model (atomically; nothing if it is
// there already), so a
// job's workdir keeps what `shardline sample` and `ckpt export` decode with.
absl::Status KeepTokenizer(Env* env, const TrainingData& data, const std::string& dir);

// The splits a job trains on: data.tokens' shards or data.text's files with
// model.gpt's context, else Fashion-MNIST from data.dir.
absl::StatusOr<TrainingData> LoadTrainingData(Env* env, const config::JobConfig& config);

}  // namespace shardline

#endif  // SHARDLINE_WORKER_DATA_DATASET_H_
