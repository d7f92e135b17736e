#include "worker/collective/comm_memory.h"

#include <algorithm>
#include <atomic>

namespace shardline {
namespace {

std::atomic<int64_t> live_bytes{0};
std::atomic<int64_t> peak_bytes{0};

}  // namespace

void AddCommMemory(int64_t bytes) {
  const int64_t now = live_bytes.fetch_add(bytes) + bytes;
  int64_t peak = peak_bytes.load();
  while (now > peak && !peak_bytes.compare_exchange_weak(peak, now)) {
  }
}

int64_t TakePeakCommMemory() {
  // The live count is read first: a message arriving in between raises the
  // peak, which the exchange then returns, so nothing is lost.
  const int64_t live = live_bytes.load();
  return std::max(peak_bytes.exchange(live), live);
}

CommMemoryCharge& CommMemoryCharge::operator=(CommMemoryCharge&& other) noexcept {
  if (this != &other) {
    Reset(0);
    bytes_ = other.bytes_;
    other.bytes_ = 0;
  }
  return *this;
}

void CommMemoryCharge::Reset(size_t bytes) {
  AddCommMemory(static_cast<int64_t>(bytes) - static_cast<int64_t>(bytes_));
  bytes_ = bytes;
}

}  // namespace shardline
