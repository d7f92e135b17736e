// Ring collectives over a Transport (Patarasuk & Yuan's bandwidth-optimal
// ring, pipelined as in Gloo).
//
// The buffer of `size` floats is cut into N chunks, chunk c being
// ShardRange(size, c, N), and each chunk into segments of at most
// max_segment_bytes. Rank r sends to next = r+1 and receives from
// prev = r-1 (mod N).
//
// Reduce-scatter: in step k = 0..N-2, rank r sends chunk (r-k-1) and
//   receives chunk (r-k-2), adding the received values into its own. A
//   segment is forwarded as soon as it is reduced, so sending, receiving and
//   reducing of different segments overlap. After N-1 steps rank r holds
//   the full sum of chunk r, accumulated in the fixed order
//   x[r+1] + x[r+2] + ... + x[r]: bitwise the same on every run.
// All-gather: in step k, rank r sends chunk (r-k) and receives chunk
//   (r-k-1) straight into place, forwarding it in the next step.
// All-reduce = reduce-scatter + all-gather, as one pipeline: a segment of
//   rank r's own chunk starts the all-gather as soon as its sum is final.
//   Every rank ends with the owner's bits, so all ranks agree exactly.
// Receives are posted before the first send (Transport::ExpectReceive): the
//   add or copy into place runs on the thread that delivers the segment.
// Broadcast: a segment-pipelined chain root -> root+1 -> ... -> root-1.
// Small messages (the scalar all-reduce, and AllReduce of at most
//   CollectiveOptions::doubling_max_bytes) take recursive doubling instead
//   (doubling_schedule.h): about log2 N message latencies instead of the
//   ring's 2(N-1), which is what a few bytes cost; every rank still gets
//   the same bits, a fixed function of N and the inputs.
//
// Cost per rank (n bytes of buffer, N ranks): reduce-scatter and all-gather
// each take N-1 steps and send (N-1)/N * n bytes (half that for a bf16
// reduce-scatter, CollectiveOptions::bf16_reduce_scatter); all-reduce 2(N-1) steps and
// 2(N-1)/N * n bytes. See docs/collectives.md.
//
//   RingCollectives ring(transport.get(), CollectiveOptions());
//   RETURN_IF_ERROR(ring.AllReduce(absl::MakeSpan(grads)));
#ifndef SHARDLINE_WORKER_COLLECTIVE_RING_H_
#define SHARDLINE_WORKER_COLLECTIVE_RING_H_

#include <atomic>
#include <cstdint>
#include <functional>
#include <memory>
#include <vector>

#include "absl/time/time.h"
#include "common/platform/env.h"
#include "worker/collective/collectives.h"
#include "worker/collective/comm_memory.h"
#include "worker/collective/transport.h"

namespace shardline {

struct CollectiveOptions {
  // Required: the clock of every operation's deadline (Env::Default() where
  // the options are made; a test's own to move time).
  Env* env = nullptr;
  // Every operation finishes within this long or fails, naming the peer
  // that did not deliver.
  absl::Duration timeout = absl::Seconds(30);
  // Upper bound on one segment. Gloo uses 1 MiB; tests use a few bytes so
  // multi-segment paths run with small inputs.
  int64_t max_segment_bytes = 1 << 20;
  // ReduceScatter sends its partial sums as bfloat16 (bf16.h: rounded to
  // nearest even), half the bytes; each rank still adds in float32, and its
  // own contribution is never rounded. Results then differ from float32 in
  // the low bits, but are still the same bits on every run for a fixed N.
  // AllGather, AllReduce, Broadcast and the scalars always send float32.
  bool bf16_reduce_scatter = false;
  // AllReduce of at most this many bytes runs recursive doubling (log-depth,
  // latency-bound) instead of the pipelined ring (bandwidth-optimal), as
  // Gloo and NCCL choose by size. Over gRPC on loopback doubling was faster
  // up to 64 KiB at every N from 2 to 16 (bench/history/2026-11.md, issue 18).
  // Every rank must use the same value.
  int64_t doubling_max_bytes = 64 << 10;
  // The most a peer may announce for a SendRecv: a longer announcement is
  // a faulty peer (DATA_LOSS naming it), not a buffer to allocate. A
  // worker sets it from its model (a shard snapshot holds at most the
  // whole model's parameters and optimizer state).
  uint64_t max_message_bytes = uint64_t{1} << 40;
};

class RingCollectives : public Collectives {
 public:
  // `transport` must outlive this object. Every rank must call the same
  // operations in the same order with buffers of the same size.
  RingCollectives(Transport* transport, CollectiveOptions options);

  int rank() const override { return rank_; }
  // Payload bytes handed to / taken from the transport so far.
  int64_t bytes_sent() const { return bytes_sent_; }
  int64_t bytes_received() const { return bytes_received_; }
  int world_size() const override { return world_; }

  absl::Status ReduceScatter(absl::Span<float> buffer) override;
  absl::Status AllGather(absl::Span<float> buffer) override;
  using Collectives::AllReduceScalars;
  absl::Status AllReduceScalars(absl::Span<double> values, absl::Span<const ReduceOp> ops) override;
  absl::Status AllReduce(absl::Span<float> buffer);
  // After a ReduceScatter, AllGather or AllReduce that received a NaN or an
  // infinity (checked as each segment is added or copied into place): the
  // peer it came from (prev on the ring; the doubling partner for small
  // AllReduces); else -1.
  int nonfinite_source() const override;
  absl::Status Broadcast(absl::Span<float> buffer, int root);
  // A length, then the data in max_segment_bytes segments.
  absl::StatusOr<std::string> SendRecv(int send_to, absl::string_view data, int recv_from) override;

 private:
  // The transport's Send/Receive, counting bytes.
  absl::Status Send(int peer, uint64_t tag, absl::Span<const char> data, absl::Time deadline);
  absl::StatusOr<std::unique_ptr<Payload>> Receive(int peer, uint64_t tag, absl::Time deadline);
  // The transport's ExpectReceive/AwaitReceive, counting bytes.
  absl::Status Expect(int peer, uint64_t tag, std::function<absl::Status(std::unique_ptr<Payload>)> handler);
  absl::Status Await(int peer, uint64_t tag, absl::Time deadline);
  absl::Status RecvInto(int peer, uint64_t tag, absl::Span<char> out, absl::Time deadline);
  // Flushes the transport, then returns `status` (or the flush's error).
  absl::Status Finish(absl::Status status, absl::Time deadline);
  // Posts a handler for every segment the reduce-scatter receives (added
  // into place) or the all-gather receives (copied into place; its steps
  // numbered from `first_step`), so each runs on the thread that delivers
  // it, with the bytes still in cache.
  absl::Status ExpectReduceScatter(absl::Span<float> buffer);
  absl::Status ExpectAllGather(absl::Span<float> buffer, int first_step);
  // The reduce-scatter's sends, and its steps 0..N-2 (awaiting each posted
  // segment and forwarding it). With `then_gather`, each segment of our own
  // chunk is sent on as soon as it is final, as the all-gather's first step.
  absl::Status ReduceScatterSteps(absl::Span<float> buffer, bool then_gather, absl::Time deadline);
  // The all-gather's await-and-forward steps, numbered from `first_step`
  // (its first sends are made by the caller).
  absl::Status AllGatherSteps(absl::Span<float> buffer, int first_step, absl::Time deadline);
  // The chunk rank r handles in step k: (r - k) mod N.
  int Chunk(int k) const;
  // "reduce-scatter, ring hop 1 of 3" for step k = 0 of a world of 4: the
  // ring's hop, in words that cannot be read as a training step.
  std::string Hop(const char* op, int k) const;
  // Calls fn(k, j, begin, len) for each segment j of the chunk received in
  // step k = 0..N-2, chunk Chunk(k + chunk_offset) (2 for the
  // reduce-scatter, 1 for the all-gather), in order; stops at an error.
  absl::Status ForEachReceivedSegment(
      int64_t size, int chunk_offset,
      const std::function<absl::Status(int k, size_t j, int64_t begin, int64_t len)>& fn) const;
  // Sends buffer[begin, begin + len) to next_ under `tag`: by reference, or
  // (wire_bf16_) rounded into wire_ at the same offset and sent from there.
  absl::Status SendFloats(absl::Span<const float> buffer, int64_t begin, int64_t len, uint64_t tag,
                          absl::Time deadline);
  // Sends every segment of `chunk` (SendFloats) as step `step`.
  absl::Status SendChunk(absl::Span<const float> buffer, int chunk, uint64_t step, const char* what,
                         absl::Time deadline);
  absl::Status BroadcastSteps(absl::Span<float> buffer, int root, absl::Time deadline);
  // Recursive doubling over `values` in place (doubling_schedule.h):
  // combine(lower, upper, out) merges two partials elementwise (out may be
  // either input). Each received partial is first shown to inspect(peer,
  // partial), if given. What is sent is kept in *sent until the op's Finish.
  template <typename T>
  absl::Status DoublingSteps(absl::Span<T> values,
                             const std::function<void(absl::Span<const T>, absl::Span<const T>, absl::Span<T>)>& combine,
                             const std::function<void(int, std::vector<T>&)>& inspect,
                             std::vector<std::vector<T>>* sent, const char* what, absl::Time deadline);

  // The unique tag of segment `segment` in step `step` of the current op.
  uint64_t Tag(uint64_t step, uint64_t segment) const;
  // Segments of chunk c: (offset, length) in floats, relative to the buffer.
  std::vector<std::pair<int64_t, int64_t>> Segments(int64_t size, int chunk) const;

  Transport* transport_;
  CollectiveOptions options_;
  int rank_;
  int world_;
  int next_;
  int prev_;
  uint64_t op_ = 0;  // sequence number of the current operation
  // The current op sends bf16 (a bf16_reduce_scatter ReduceScatter) from
  // wire_, which mirrors the buffer and stays put until the op's Finish.
  bool wire_bf16_ = false;
  std::vector<uint16_t> wire_;
  CommMemoryCharge wire_held_;  // wire_, in the process's communication memory
  int64_t bytes_sent_ = 0;
  std::atomic<int64_t> bytes_received_{0};  // also counted on delivering threads
  // The first peer this op received a non-finite float from, or -1; set on
  // delivering threads.
  std::atomic<int> nonfinite_peer_{-1};
};

}  // namespace shardline

#endif  // SHARDLINE_WORKER_COLLECTIVE_RING_H_
