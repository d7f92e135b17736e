// The process's communication memory: every byte the collectives hold
// beyond the caller's buffers - received messages waiting for or being
// consumed by their receive (Payload), the copies of outgoing payloads gRPC
// holds until it has written them (grpc_frame.cc), and a ring's bf16 wire
// buffer (ring.h). Process-wide, because a worker's worlds (the training
// thread's and the overlap's) share one process and one memory budget.
// Thread-safe; lock-free.
//
//   CommMemoryCharge staging(n);   // counted from here until destroyed
//   ... = TakePeakCommMemory();    // the most held at once since the last call
#ifndef SHARDLINE_WORKER_COLLECTIVE_COMM_MEMORY_H_
#define SHARDLINE_WORKER_COLLECTIVE_COMM_MEMORY_H_

#include <cstddef>
#include <cstdint>

namespace shardline {

// Adds `bytes` (negative: gives them back) to the live count and raises the
// peak if the live count passes it.
void AddCommMemory(int64_t bytes);

// The most bytes held at once since the last call (or the process start),
// at least what is held now; the next period starts from what is held now.
int64_t TakePeakCommMemory();

// `bytes` counted as held for this object's lifetime. Move-only; Reset
// changes the count in place (a buffer that grew or shrank).
class CommMemoryCharge {
 public:
  CommMemoryCharge() = default;
  explicit CommMemoryCharge(size_t bytes) { Reset(bytes); }
  ~CommMemoryCharge() { Reset(0); }
  CommMemoryCharge(CommMemoryCharge&& other) noexcept : bytes_(other.bytes_) { other.bytes_ = 0; }
  CommMemoryCharge& operator=(CommMemoryCharge&& other) noexcept;
  CommMemoryCharge(const CommMemoryCharge&) = delete;
  CommMemoryCharge& operator=(const CommMemoryCharge&) = delete;

  void Reset(size_t bytes);
  size_t bytes() const { return bytes_; }

 private:
  size_t bytes_ = 0;
};

}  // namespace shardline

#endif  // SHARDLINE_WORKER_COLLECTIVE_COMM_MEMORY_H_
