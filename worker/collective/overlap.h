// Collectives that run in the background, in submission order, so the train
// step can compute while buckets go over the network (docs/collectives.md,
// "Overlap").
//
//   OverlapCollectives comm(&ring);
//   Ticket rs = comm.StartReduceScatter(bucket_span);  // returns at once
//   ... more backward ...
//   OpResult done = comm.Wait(rs);                       // status, NaN source
//   comm.AllReduceScalars(...);  // any plain call first waits for all started ops
//
// One thread runs every started op, one after the other, on the wrapped
// Collectives; every rank must start the same ops in the same order (as with
// the plain calls). The plain Collectives calls, made on the caller's thread,
// first wait until every started op has finished, so the wrapped object is
// never used by two threads at once. An op that fails fails every op
// started after it with the same status without running it (the world is
// broken; the caller restarts it): nothing waits longer than the wrapped
// object's own deadlines.
#ifndef SHARDLINE_WORKER_COLLECTIVE_OVERLAP_H_
#define SHARDLINE_WORKER_COLLECTIVE_OVERLAP_H_

#include <cstdint>
#include <deque>
#include <functional>
#include <map>
#include <thread>

#include "common/platform/env.h"
#include "common/platform/mutex.h"
#include "worker/collective/collectives.h"

namespace shardline {

// Names one started op; tickets count up from 1 in submission order.
using Ticket = int64_t;

struct OpResult {
  absl::Status status;
  int nonfinite_source = -1;  // as Collectives::nonfinite_source() after the op
};

class OverlapCollectives : public Collectives {
 public:
  // `inner` must outlive this object and is used only through it.
  // `env` (the clock of busy_seconds) must outlive this.
  OverlapCollectives(Collectives* inner, Env* env);
  // Waits for every started op, then stops the thread.
  ~OverlapCollectives() override;

  Ticket StartReduceScatter(absl::Span<float> buffer);
  Ticket StartAllGather(absl::Span<float> buffer);
  // Blocks until op `ticket` has run (or was failed); its result. The
  // buffer it was given may be read or written again once this returns.
  // Each ticket is waited for at most once (its result is then dropped).
  OpResult Wait(Ticket ticket);
  // Blocks until every started op has run; the first failure, if any.
  absl::Status Drain();
  // Seconds the background thread has spent running ops so far.
  double busy_seconds();

  int rank() const override { return inner_->rank(); }
  int world_size() const override { return inner_->world_size(); }
  absl::Status ReduceScatter(absl::Span<float> buffer) override;
  absl::Status AllGather(absl::Span<float> buffer) override;
  using Collectives::AllReduceScalars;
  absl::Status AllReduceScalars(absl::Span<double> values, absl::Span<const ReduceOp> ops) override;
  int nonfinite_source() const override { return inner_->nonfinite_source(); }
  absl::StatusOr<std::string> SendRecv(int send_to, absl::string_view data, int recv_from) override;

 private:
  Ticket Start(std::function<absl::Status()> op);
  void Loop();

  Collectives* const inner_;
  Env* const env_;
  Mutex mu_;
  std::deque<std::function<absl::Status()>> queue_ ABSL_GUARDED_BY(mu_);
  Ticket started_ ABSL_GUARDED_BY(mu_) = 0;
  Ticket finished_ ABSL_GUARDED_BY(mu_) = 0;
  std::map<Ticket, OpResult> results_ ABSL_GUARDED_BY(mu_);  // of finished ops not yet waited for
  absl::Status failed_ ABSL_GUARDED_BY(mu_);            // the first failure
  bool stopping_ ABSL_GUARDED_BY(mu_) = false;
  double busy_seconds_ ABSL_GUARDED_BY(mu_) = 0;
  std::thread thread_;
};

}  // namespace shardline

#endif  // SHARDLINE_WORKER_COLLECTIVE_OVERLAP_H_
