// The outer optimizer of islands (collective.diloco; docs/collectives.md
// "Islands"): an inner optimizer (SGD or AdamW, every step, inside the
// island) together with the outer state of the same pieces - the
// parameters at the last outer step ("outer_params") and the outer
// Nesterov momentum ("outer_momentum"). Its state() is the inner's and
// then those two, so checkpoints, restores and resharding carry the outer
// state exactly as they carry AdamW's moments.
//
// At an outer step, each rank of each island:
//   PseudoGradient(params, delta)       delta = outer_params - params (its pieces)
//   ... delta summed across the islands (the same bits on each) ...
//   OuterUpdate(delta, K, params)       d = delta / K
//                                       m = mu * m + d
//                                       outer_params -= lr * (d + mu * m)
//                                       params = outer_params (its pieces)
// which is PyTorch's SGD(nesterov=True) on the averaged pseudo-gradient,
// as the paper's outer step. Every operation is elementwise over the
// pieces, so it gives the same bits however the pieces are cut.
#ifndef SHARDLINE_WORKER_OPTIM_OUTER_OPTIMIZER_H_
#define SHARDLINE_WORKER_OPTIM_OUTER_OPTIMIZER_H_

#include <memory>
#include <vector>

#include "absl/types/span.h"
#include "proto/config.pb.h"
#include "worker/optim/optimizer.h"

namespace shardline {

class OuterOptimizer : public Optimizer {
 public:
  // `inner` keeps its pieces; the outer state starts at zero (SetAnchor
  // before the first step of a run not restored).
  OuterOptimizer(std::unique_ptr<Optimizer> inner, const FlatLayout& layout, const config::DilocoConfig& config);

  std::vector<StateBuffer*> state() override;
  Optimizer& inner() { return *inner_; }

  // The outer parameters := the pieces of `params` (a whole flat buffer);
  // the momentum zero. For a run that starts rather than resumes.
  void SetAnchor(const float* params);
  // delta (size() floats, packed) := outer parameters - pieces of `params`.
  // Returns the sum of squares of delta.
  double PseudoGradient(const float* params, absl::Span<float> delta) const;
  // The outer step on `delta_sum`, the sum over `islands` islands of their
  // pseudo-gradients; the pieces of `params` set to the new outer
  // parameters. Returns the sum of squares of the averaged pseudo-gradient.
  double OuterUpdate(absl::Span<const float> delta_sum, int islands, float* params);
  // The hash (worker/train/param_agreement.h) of what the same rank of every
  // island holds alike: the outer parameters and momentum of its pieces.
  uint64_t SharedStateHash() const;

 protected:
  double UpdateSegments(const UpdateStep& step, float* params, const float* grads, bool want_update_sq, size_t first,
                        size_t last) override;

 private:
  std::unique_ptr<Optimizer> inner_;
  config::DilocoConfig config_;
  StateBuffer outer_params_;
  StateBuffer momentum_;
};

}  // namespace shardline

#endif  // SHARDLINE_WORKER_OPTIM_OUTER_OPTIMIZER_H_
