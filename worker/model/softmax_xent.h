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

}  // namespace shardline

#endif  // SHARDLINE_WORKER_MODEL_SOFTMAX_XENT_H_
