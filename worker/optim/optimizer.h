// Optimizers that own one contiguous range (a shard) of the flat parameter
// buffer and keep their state (SGD momentum; AdamW m and v) in flat buffers
// covering exactly that range. Every update is elementwise, so updating a
// buffer in N ranges gives bitwise the same result as updating it whole:
// that is what lets each worker update only its ZeRO shard.
//
//   ASSIGN_OR_RETURN(auto opt, Optimizer::Create(cfg.optimizer(), layout, shard));
//   double update_sq = opt->Update(t, lr, clip_scale,
//                                  params.data() + shard.begin,
//                                  grads.data() + shard.begin, /*want_update_sq=*/true);
#ifndef SHARDLINE_WORKER_OPTIM_OPTIMIZER_H_
#define SHARDLINE_WORKER_OPTIM_OPTIMIZER_H_

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "common/shard.h"
#include "proto/config.pb.h"
#include "worker/model/flat_layout.h"

namespace shardline {

// One named state buffer, shard.size() floats, aligned with the shard.
struct StateBuffer {
  std::string name;  // kMomentumBuffer, kAdamMBuffer, kAdamVBuffer (common/checkpoint/buffer_names.h)
  std::vector<float> values;
};

class Optimizer {
 public:
  virtual ~Optimizer() = default;

  // An optimizer for flat elements [shard.begin, shard.end) of `layout`.
  // Weight decay applies to tensors of rank >= 2 (weights), not biases.
  static absl::StatusOr<std::unique_ptr<Optimizer>> Create(const config::OptimizerConfig& config,
                                                           const FlatLayout& layout, Range shard);

  Range shard() const { return shard_; }

  // Applies update number t (1-based) with learning rate lr. `params` and
  // `grads` point at flat element shard.begin; the gradient used is
  // grad_scale * grads (grad_scale carries clipping). Returns the sum of
  // squares of the parameter change if `want_update_sq`, else 0 (the sum
  // keeps the loop from vectorising, so it is computed only when asked).
  virtual double Update(int64_t t, float lr, float grad_scale, float* params,
                        const float* grads, bool want_update_sq = true) = 0;

  // The state buffers, for checkpoints and memory accounting.
  virtual std::vector<StateBuffer*> state() = 0;

 protected:
  Optimizer(const FlatLayout& layout, Range shard);

  // Sub-ranges of the shard, relative to shard.begin, each with its decay flag.
  struct Segment {
    int64_t begin;
    int64_t end;
    bool decay;
  };
  std::vector<Segment> segments_;
  Range shard_;
};

}  // namespace shardline

#endif  // SHARDLINE_WORKER_OPTIM_OPTIMIZER_H_
