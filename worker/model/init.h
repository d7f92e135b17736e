// Initialisation shared by the model families: weights He-uniform
// U(-sqrt(6/fan_in), sqrt(6/fan_in)), biases (rank-1 tensors) zero, each
// element a pure function of (seed, tensor, element), so any worker can
// initialise exactly its own shard.
#ifndef SHARDLINE_WORKER_MODEL_INIT_H_
#define SHARDLINE_WORKER_MODEL_INIT_H_

#include <cstdint>
#include <functional>

#include "common/job/shard.h"
#include "worker/model/flat_layout.h"

namespace shardline {

// Writes the initial values of flat elements [range.begin, range.end) of
// `layout` to out[0 .. range.size()). fan_in(tensor) gives a weight
// tensor's fan-in (for an MLP's [in, out] its first dimension; for PyTorch's
// [out, in, ...] the product of the others).
void InitHeUniform(const FlatLayout& layout, uint64_t seed, Range range, float* out,
                   const std::function<int64_t(const TensorInfo&)>& fan_in);

// How InitByTensor fills one tensor.
struct TensorInit {
  enum Kind { kZero, kOne, kNormal } kind = kZero;
  float std = 0;  // kNormal's standard deviation (mean 0)
};

// Writes the initial values of flat elements [range.begin, range.end) of
// `layout` to out[0 .. range.size()), each tensor as rule(tensor) says;
// normal draws by Box-Muller from two uniforms of the counter-based stream
// of (seed, tensor), a pure function of (seed, tensor, element).
void InitByTensor(const FlatLayout& layout, uint64_t seed, Range range, float* out,
                  const std::function<TensorInit(const TensorInfo&)>& rule);

}  // namespace shardline

#endif  // SHARDLINE_WORKER_MODEL_INIT_H_
