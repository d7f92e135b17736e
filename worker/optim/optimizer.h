// Optimizers that own some pieces of the flat parameter buffer (a rank's
// ZeRO shard: its chunk of every bucket, common/job/shard.h) and keep their
// state (SGD momentum; AdamW m and v) packed: the pieces' elements one
// after the other. Every update is elementwise, so updating a buffer in
// any pieces gives bitwise the same result as updating it whole: that is
// what lets each worker update only its shard.
//
//   ASSIGN_OR_RETURN(auto opt, Optimizer::Create(cfg.optimizer(), layout, pieces));
//   double update_sq = opt->Update(UpdateStep{t, lr, clip_scale}, params.data(), grads.data(),
//                                  /*want_update_sq=*/true);
#ifndef SHARDLINE_WORKER_OPTIM_OPTIMIZER_H_
#define SHARDLINE_WORKER_OPTIM_OPTIMIZER_H_

#include <cstdint>
#include <climits>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "common/job/shard.h"
#include "proto/config.pb.h"
#include "worker/model/flat_layout.h"

namespace shardline {

// One named state buffer: PiecesSize(pieces()) floats, packed.
struct StateBuffer {
  std::string name;  // kMomentumBuffer, kAdamMBuffer, kAdamVBuffer (common/checkpoint/buffer_names.h)
  std::vector<float> values;
};

// Which update an optimizer applies: number t (1-based), with learning rate
// lr, to grad_scale times the gradients (grad_scale carries clipping).
struct UpdateStep {
  int64_t t = 1;
  float lr = 0;
  float grad_scale = 1;
};

class Optimizer {
 public:
  virtual ~Optimizer() = default;

  // An optimizer for the flat elements in `pieces` (ascending, disjoint,
  // inside the layout) of `layout`. Weight decay applies to tensors of
  // rank >= 2 (weights), not biases.
  static absl::StatusOr<std::unique_ptr<Optimizer>> Create(const config::OptimizerConfig& config,
                                                           const FlatLayout& layout, std::vector<Range> pieces);

  const std::vector<Range>& pieces() const { return pieces_; }
  // Elements owned: PiecesSize(pieces()).
  int64_t size() const { return size_; }

  // Applies update number step.t (1-based) with learning rate step.lr to
  // the owned elements inside flat range `within` (all of them by default;
  // a bucket for an update bucket by bucket). `params` and `grads` are
  // whole flat buffers; the gradient used is step.grad_scale * grads
  // (grad_scale carries clipping). Returns the sum of squares of the
  // parameter change if `want_update_sq`, else 0 (the sum keeps the loop
  // from vectorising, so it is computed only when asked).
  double Update(const UpdateStep& step, float* params, const float* grads, bool want_update_sq = true,
                Range within = Range{0, INT64_MAX});

  // The state buffers, for checkpoints and memory accounting.
  virtual std::vector<StateBuffer*> state() = 0;

 protected:
  Optimizer(const FlatLayout& layout, std::vector<Range> pieces);

  // The owned elements cut at tensor boundaries: `size` elements from flat
  // index `flat`, whose state is at packed offset `packed`.
  struct Segment {
    int64_t flat;
    int64_t packed;
    int64_t size;
    bool decay;
  };
  // Updates the segments [first, last) of segments_.
  virtual double UpdateSegments(const UpdateStep& step, float* params, const float* grads, bool want_update_sq,
                                size_t first, size_t last) = 0;

  std::vector<Segment> segments_;  // ascending
  std::vector<Range> pieces_;
  int64_t size_ = 0;
};

}  // namespace shardline

#endif  // SHARDLINE_WORKER_OPTIM_OPTIMIZER_H_
