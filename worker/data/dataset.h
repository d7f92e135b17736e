// An in-memory classification data set, and the loader for Fashion-MNIST's
// four IDX files. Features are converted to float once at load and
// standardised, so batches are gathered with row copies only.
//
//   ASSIGN_OR_RETURN(FashionMnist data, LoadFashionMnist(env, cfg.data().dir()));
//   // data.train.num_examples == 60000, data.test.num_examples == 10000
#ifndef SHARDLINE_WORKER_DATA_DATASET_H_
#define SHARDLINE_WORKER_DATA_DATASET_H_

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "common/env.h"

namespace shardline {

struct Dataset {
  int64_t num_examples = 0;
  int feature_dim = 0;
  int num_classes = 0;
  std::vector<float> features;  // [num_examples, feature_dim], row-major
  std::vector<int32_t> labels;  // [num_examples], each in [0, num_classes)
};

struct FashionMnist {
  Dataset train;
  Dataset test;
};

// Fashion-MNIST pixel statistics (over the training split, in [0, 1]); every
// pixel p becomes (p / 255 - kMean) / kStd.
inline constexpr float kFashionMnistMean = 0.2860f;
inline constexpr float kFashionMnistStd = 0.3530f;

// Reads an images file (N x rows x cols) and a labels file (N) and checks
// they agree: same N, labels below `num_classes`.
absl::StatusOr<Dataset> LoadIdxSplit(Env* env, const std::string& images_path,
                                     const std::string& labels_path, int num_classes);

// Loads {train,t10k}-{images-idx3,labels-idx1}-ubyte.gz from `dir`.
absl::StatusOr<FashionMnist> LoadFashionMnist(Env* env, const std::string& dir);

}  // namespace shardline

#endif  // SHARDLINE_WORKER_DATA_DATASET_H_
