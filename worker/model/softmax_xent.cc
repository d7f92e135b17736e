#include "worker/model/softmax_xent.h"

#include <cmath>


namespace shardline {

BatchStats SoftmaxCrossEntropy(float* logits, const int32_t* y, int n, int classes) {
  BatchStats stats;
  stats.count = n;
  for (int i = 0; i < n; ++i) {
    float* row = logits + static_cast<size_t>(i) * classes;
    int argmax = 0;
    for (int j = 1; j < classes; ++j) {
      if (row[j] > row[argmax]) argmax = j;
    }
    const float max = row[argmax];
    const float label_logit = row[y[i]];
    float sum = 0;
    for (int j = 0; j < classes; ++j) {
      row[j] = std::exp(row[j] - max);
      sum += row[j];
    }
    const float inv = 1.0f / sum;
    for (int j = 0; j < classes; ++j) row[j] *= inv;
    stats.loss_sum += static_cast<double>(std::log(sum) - (label_logit - max));
    stats.correct += argmax == y[i] ? 1 : 0;
  }
  return stats;
}

void SoftmaxCrossEntropyGrad(const float* probs, const int32_t* y, int n, int classes, float grad_scale,
                             float* delta) {
  for (int i = 0; i < n; ++i) {
    const float* p = probs + static_cast<size_t>(i) * classes;
    float* d = delta + static_cast<size_t>(i) * classes;
    for (int j = 0; j < classes; ++j) d[j] = p[j] * grad_scale;
    d[y[i]] -= grad_scale;
  }
}

}  // namespace shardline
