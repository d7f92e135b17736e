// Weights rounded to bfloat16 once and reused (train.precision BF16): a
// training step's products read each weight matrix several times (the
// forward, remat's recomputed forward, the backward's input gradients, every
// micro-batch of the step), and its parameters do not change within the
// step. A RoundedWeights made active on a thread for the step's passes
// keeps the rounding of each weight from its first product on; without
// one, every product rounds its weight again (the evaluator, sampling).
// The bits are the same either way: a rounding is a pure function of the
// floats (FloatToBf16).
//
//   RoundedWeights rounded;
//   {
//     ActiveRoundedWeights active(&rounded);  // this thread's products use it
//     model.Forward(...); model.Backward(...);
//   }
//   rounded.Clear();  // before the parameters change
#ifndef SHARDLINE_WORKER_MODEL_ROUNDED_WEIGHTS_H_
#define SHARDLINE_WORKER_MODEL_ROUNDED_WEIGHTS_H_

#include <cstddef>
#include <cstdint>
#include <vector>

#include "worker/model/gemm.h"

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

// While alive, the BF16 products of this thread (Gemm with a weight
// operand, LinearForward / LinearBackward) read weights through `rounded`
// (null: round at each product, as without one). Scopes nest; the inner
// one wins until it ends.
class ActiveRoundedWeights {
 public:
  explicit ActiveRoundedWeights(RoundedWeights* rounded);
  ~ActiveRoundedWeights();
  ActiveRoundedWeights(const ActiveRoundedWeights&) = delete;
  ActiveRoundedWeights& operator=(const ActiveRoundedWeights&) = delete;

 private:
  RoundedWeights* const previous_;
};

// The rounding of the weight at w (rows x cols, contiguous): the active
// RoundedWeights' if there is one, else made now in `scratch`.
const Bf16* RoundedWeight(const float* w, int rows, int cols, std::vector<Bf16>* scratch);

// Gemm (gemm.h) where one operand is a weight: `weight_is_a` says which.
// In kBfloat16 the weight's rounding is RoundedWeight's (when the weight is
// stored contiguously: its leading dimension its stored row's length) and
// the other operand is rounded here; the same bits as Gemm.
void GemmWithWeight(Precision p, bool weight_is_a, bool trans_a, bool trans_b, int m, int n, int k, float alpha,
                    const float* a, int lda, const float* b, int ldb, float beta, float* c, int ldc);

}  // namespace shardline

#endif  // SHARDLINE_WORKER_MODEL_ROUNDED_WEIGHTS_H_
