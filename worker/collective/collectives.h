// The collective operations the train loop needs, over whatever connects the
// ranks. Buffers are cut into chunks with ShardRange(size, r, world)
// (common/job/shard.h), the same cut as ZeRO ownership: after ReduceScatter, rank
// r holds the sum of chunk r, which is exactly the gradient of the parameter
// shard it owns.
//
//   RETURN_IF_ERROR(comm->ReduceScatter(absl::MakeSpan(grads)));
//   ... update my chunk ...
//   RETURN_IF_ERROR(comm->AllGather(absl::MakeSpan(params)));
//
// Errors: a dead or silent peer is kUnavailable / kDeadlineExceeded and names
// the peer rank; the step should then be abandoned (the world restarts). A
// peer that sends non-finite scalars is a PeerFaultError naming it
// (peer_fault.h); non-finite floats in ReduceScatter and AllGather are
// delivered but reported by nonfinite_source(), for the caller to judge.
#ifndef SHARDLINE_WORKER_COLLECTIVE_COLLECTIVES_H_
#define SHARDLINE_WORKER_COLLECTIVE_COLLECTIVES_H_

#include <cmath>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/types/span.h"

namespace shardline {

enum class ReduceOp { kSum, kMax, kMin };

class Collectives {
 public:
  virtual ~Collectives() = default;
  virtual int rank() const = 0;
  virtual int world_size() const = 0;

  // In place: on return chunk rank() of `buffer` holds the elementwise
  // reduction (sum) over ranks of that chunk; other chunks are unspecified.
  // Every rank gets bitwise the same sums.
  virtual absl::Status ReduceScatter(absl::Span<float> buffer) = 0;
  // In place: every rank contributes its chunk rank(); on return every chunk
  // holds its owner's values.
  virtual absl::Status AllGather(absl::Span<float> buffer) = 0;
  // Small reductions of a few doubles (loss sums, squared norms, agreed
  // decisions), values[i] reduced with ops[i]. Every rank gets the same bits.
  // Every value must be finite: a non-finite value from a peer fails the
  // op with PeerFaultError naming the peer; one given on this rank, with
  // kInvalidArgument (callers send a finite stand-in and a flag instead).
  virtual absl::Status AllReduceScalars(absl::Span<double> values,
                                        absl::Span<const ReduceOp> ops) = 0;
  // After a ReduceScatter or AllGather: the rank from which that op received
  // a NaN or an infinity, or -1. Such values are delivered as they came;
  // whether they mean a diverged run or a faulty peer is decided by the
  // caller with every rank (worker/train/nonfinite.h).
  virtual int nonfinite_source() const { return -1; }
  // Point to point, as one op of the sequence every rank runs: sends `data`
  // to rank `send_to` and returns what rank `recv_from` sends this rank in
  // the same op. -1 for either: nothing sent, or nothing received (an empty
  // string comes back). Every rank calls it at the same point of its op
  // sequence, ranks with nothing to move included. Any size. For moving
  // what only some ranks hold (in-memory snapshots and their replicas).
  virtual absl::StatusOr<std::string> SendRecv(int send_to, absl::string_view data, int recv_from) = 0;
  // The same op for every value.
  absl::Status AllReduceScalars(absl::Span<double> values, ReduceOp op) {
    std::vector<ReduceOp> ops(values.size(), op);
    return AllReduceScalars(values, ops);
  }
};

// The world of one: every operation is the identity and touches no network.
class LocalCollectives : public Collectives {
 public:
  int rank() const override { return 0; }
  int world_size() const override { return 1; }
  absl::Status ReduceScatter(absl::Span<float>) override { return absl::OkStatus(); }
  absl::Status AllGather(absl::Span<float>) override { return absl::OkStatus(); }
  absl::Status AllReduceScalars(absl::Span<double> values, absl::Span<const ReduceOp>) override {
    for (double v : values) {
      if (!std::isfinite(v)) return absl::InvalidArgumentError("a scalar all-reduce was given a non-finite value");
    }
    return absl::OkStatus();
  }
  absl::StatusOr<std::string> SendRecv(int send_to, absl::string_view data, int recv_from) override {
    if (send_to > 0 || recv_from > 0 || (send_to == 0) != (recv_from == 0)) {
      return absl::InvalidArgumentError("a world of one sends and receives only to and from rank 0, together");
    }
    return recv_from == 0 ? std::string(data) : std::string();
  }
};

}  // namespace shardline

#endif  // SHARDLINE_WORKER_COLLECTIVE_COLLECTIVES_H_
