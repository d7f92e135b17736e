// 2x2 max pooling with stride 2 and its backward, fused with the ReLU that
// precedes it in the CNN (cnn.h). Both run over `planes` planes of h x w
// (h and w even), laid out one after the other.
//
// On x86-64 CPUs with AVX2 the rows are done 8 (or 4) windows at a time;
// elsewhere, and for rows of fewer than 4 windows, one window at a time.
// Both paths compare and select only, so their results are bitwise equal.
#ifndef SHARDLINE_WORKER_MODEL_POOL_H_
#define SHARDLINE_WORKER_MODEL_POOL_H_

#include <cstdint>

namespace shardline {

// out [planes, h/2, w/2] gets each window's maximum, and argmax the
// winner's position in its window (0..3, row-major). Of equal values the
// first wins, as std::max would pick it.
void MaxPool2x2(int64_t planes, int h, int w, const float* in, float* out, uint8_t* argmax);

// The backward of a ReLU followed by that pooling, given the pooling's
// output `pooled` (so after the ReLU) and argmax: din [planes, h, w] gets
// dout at each window's winner where the winner was positive (the ReLU let
// it through), and +0 elsewhere. Every element of din is written.
void ReluMaxPool2x2Backward(int64_t planes, int h, int w, const float* dout, const float* pooled,
                            const uint8_t* argmax, float* din);

}  // namespace shardline

#endif  // SHARDLINE_WORKER_MODEL_POOL_H_
