// Softmax cross-entropy over rows of logits, shared by every model's head.
#ifndef SHARDLINE_WORKER_MODEL_SOFTMAX_XENT_H_
#define SHARDLINE_WORKER_MODEL_SOFTMAX_XENT_H_

#include <cstdint>

#include "worker/model/model.h"

namespace shardline {

// In place: logits [n, classes] become softmax probabilities. Returns the
// sums of the cross-entropy against labels y and of argmax hits.
BatchStats SoftmaxCrossEntropy(float* logits, const int32_t* y, int n, int classes);

// d(loss)/d(logits) * grad_scale = (probs - onehot(y)) * grad_scale, into
// delta [n, classes].
void SoftmaxCrossEntropyGrad(const float* probs, const int32_t* y, int n, int classes, float grad_scale,
                             float* delta);

// He-uniform U(-sqrt(6/fan_in), sqrt(6/fan_in)) for the flat elements
// [overlap.begin, overlap.end) of tensor `t` (which starts at `tensor_offset`),
// written to dst; a pure function of (seed, t, element).
void HeUniform(uint64_t seed, int t, int64_t tensor_offset, int64_t fan_in, Range overlap, float* dst);

}  // namespace shardline

#endif  // SHARDLINE_WORKER_MODEL_SOFTMAX_XENT_H_
