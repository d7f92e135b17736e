// Weights rounded to bfloat16 once and reused (train.precision BF16): a
// training step's products read each weight matrix several times (the
// forward, remat's recomputed forward, the backward's input gradients, every
// micro-batch of the step), and its parameters do not change within the
// step. Held by a workspace's Products (products.h), which keeps a weight's
// rounding here while a KeepRoundedWeights scope is alive. The bits are
// those of rounding at every product: a rounding is a pure function of the
// floats (FloatToBf16).
#ifndef SHARDLINE_WORKER_MODEL_ROUNDED_WEIGHTS_H_
#define SHARDLINE_WORKER_MODEL_ROUNDED_WEIGHTS_H_

#include <cstddef>
#include <cstdint>
#include <vector>

#include "worker/model/gemm.h"  // Bf16

namespace shardline {

class RoundedWeights {
 public:
  // The bfloat16 rounding of the rows x cols floats at w (contiguous: row
  // stride cols), made at the first call for w since the last Clear. The
  // caller promises the floats at w have not changed since that call.
  const Bf16* Get(const float* w, int rows, int cols);

  // Every rounding forgotten (the parameters are about to change, or, at
  // ZeRO stage 3, the layer they belong to is given back). Buffers are kept
  // for the next ones.
  void Clear();

  // Bytes held (capacity), live and kept for reuse.
  int64_t bytes() const;
  // Roundings made since construction: what a test counts.
  int64_t roundings() const { return roundings_; }

 private:
  struct Entry {
    const float* w = nullptr;
    size_t n = 0;
    bool fresh = false;  // made since the last Clear
    std::vector<Bf16> h;
  };
  // A weight's entry is reused by the same weight after a Clear (stage 2:
  // the same tensors every step), else a stale one large enough (stage 3:
  // the next layer's tensors), so their number stays that of the most
  // weights rounded between two Clears.
  std::vector<Entry> entries_;
  int64_t roundings_ = 0;
};

}  // namespace shardline

#endif  // SHARDLINE_WORKER_MODEL_ROUNDED_WEIGHTS_H_
