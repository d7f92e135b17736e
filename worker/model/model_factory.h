// Builds the model a config names (model.mlp, cnn, gpt or vit) for the data
// set's input shape.
#ifndef SHARDLINE_WORKER_MODEL_MODEL_FACTORY_H_
#define SHARDLINE_WORKER_MODEL_MODEL_FACTORY_H_

#include <memory>

#include "absl/status/statusor.h"
#include "proto/config.pb.h"
#include "worker/model/gemm.h"
#include "worker/model/model.h"

namespace shardline {

// How a model runs, beside what it is.
struct ModelOptions {
  // Transformers: recompute each block's activations in backward (config
  // train.remat). The same bits.
  bool remat = false;
  // The matrix products' precision (config train.precision); the
  // parameters and everything else stay float32.
  Precision precision = Precision::kFloat32;
};

// The options config.train sets: remat and precision.
ModelOptions ModelOptionsOf(const config::TrainConfig& train);

// kInvalidArgument naming the config field when no family is set or the
// layers do not fit `input` (e.g. pooling an odd-sized image).
absl::StatusOr<std::unique_ptr<Model>> CreateModel(const config::ModelConfig& config, const InputShape& input,
                                                   const ModelOptions& options = {});

}  // namespace shardline

#endif  // SHARDLINE_WORKER_MODEL_MODEL_FACTORY_H_
