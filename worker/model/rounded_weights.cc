#include "worker/model/rounded_weights.h"

namespace shardline {
namespace {

thread_local RoundedWeights* g_active = nullptr;

}  // namespace

const Bf16* RoundedWeights::Get(const float* w, int rows, int cols) {
  const size_t n = static_cast<size_t>(rows) * cols;
  Entry* use = nullptr;
  for (Entry& e : entries_) {
    if (e.w == w && e.n == n) {
      if (e.fresh) return e.h.data();
      use = &e;
      break;
    }
  }
  if (use == nullptr) {  // the smallest stale buffer that holds it, else a new one
    for (Entry& e : entries_) {
      if (!e.fresh && e.h.capacity() >= n && (use == nullptr || e.h.capacity() < use->h.capacity())) use = &e;
    }
  }
  if (use == nullptr) use = &entries_.emplace_back();
  use->w = w;
  use->n = n;
  use->fresh = true;
  use->h.resize(n);
  RoundToBfloat16(w, rows, cols, cols, use->h.data(), cols);
  ++roundings_;
  return use->h.data();
}

void RoundedWeights::Clear() {
  for (Entry& e : entries_) e.fresh = false;
}

int64_t RoundedWeights::bytes() const {
  int64_t sum = 0;
  for (const Entry& e : entries_) sum += static_cast<int64_t>(e.h.capacity() * sizeof(Bf16));
  return sum;
}

ActiveRoundedWeights::ActiveRoundedWeights(RoundedWeights* rounded) : previous_(g_active) { g_active = rounded; }

ActiveRoundedWeights::~ActiveRoundedWeights() { g_active = previous_; }

const Bf16* RoundedWeight(const float* w, int rows, int cols, std::vector<Bf16>* scratch) {
  if (g_active != nullptr) return g_active->Get(w, rows, cols);
  scratch->resize(static_cast<size_t>(rows) * cols);
  RoundToBfloat16(w, rows, cols, cols, scratch->data(), cols);
  return scratch->data();
}

void GemmWithWeight(Precision p, bool weight_is_a, bool trans_a, bool trans_b, int m, int n, int k, float alpha,
                    const float* a, int lda, const float* b, int ldb, float beta, float* c, int ldc) {
  // As stored: A is m x k (k x m transposed), B is k x n (n x k transposed).
  const int a_rows = trans_a ? k : m, a_cols = trans_a ? m : k;
  const int b_rows = trans_b ? n : k, b_cols = trans_b ? k : n;
  const bool contiguous = weight_is_a ? lda == a_cols : ldb == b_cols;
  if (p != Precision::kBfloat16 || m == 0 || n == 0 || k == 0 || !contiguous) {
    Gemm(p, trans_a, trans_b, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc);
    return;
  }
  thread_local std::vector<Bf16> weight_scratch, other;
  const float* other_f = weight_is_a ? b : a;
  const int other_rows = weight_is_a ? b_rows : a_rows, other_cols = weight_is_a ? b_cols : a_cols;
  other.resize(static_cast<size_t>(other_rows) * other_cols);
  RoundToBfloat16(other_f, other_rows, other_cols, weight_is_a ? ldb : lda, other.data(), other_cols);
  const Bf16* w = weight_is_a ? RoundedWeight(a, a_rows, a_cols, &weight_scratch)
                              : RoundedWeight(b, b_rows, b_cols, &weight_scratch);
  if (weight_is_a) {
    GemmBf16(trans_a, trans_b, m, n, k, alpha, w, a_cols, other.data(), b_cols, beta, c, ldc);
  } else {
    GemmBf16(trans_a, trans_b, m, n, k, alpha, other.data(), a_cols, w, b_cols, beta, c, ldc);
  }
}

}  // namespace shardline
