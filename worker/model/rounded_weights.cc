#include "worker/model/rounded_weights.h"

#include "common/encoding/bf16.h"

namespace shardline {

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
  RoundToBf16(absl::MakeConstSpan(w, n), use->h.data());  // contiguous: RoundMatrix's bits
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

}  // namespace shardline
