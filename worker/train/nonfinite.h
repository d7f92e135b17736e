// Non-finite numbers in a data-parallel step, and whose fault they are.
//
// A NaN or an infinity either comes out of a rank's own arithmetic on
// numbers every rank agreed on - the run diverged, and would again: stop - or
// it arrived from a peer that computed or corrupted it - a peer fault: the
// world restarts from the last checkpoint, and the error names that rank.
//
// Non-finite input makes everything computed from it non-finite, so only
// the first thing a rank sees is evidence. Each rank notes it, in the order
// a step runs (the first two belong to the previous step):
//   kOwnUpdate        its optimizer update produced a non-finite parameter
//   kGatheredFromPeer the all-gather brought one from prev
//   kOwnGradients     its loss or gradients (of agreed parameters) are non-finite
//   kReducedFromPeer  the reduce-scatter brought one from prev
// The step's scalar all-reduce carries one flag (did any rank note
// something?). Only when it is set do ranks exchange their observations
// (ExchangeObservations) and reach, all of them, the same verdict (Judge):
//   - some rank's own arithmetic went non-finite: the run diverged (the
//     lowest such rank is named);
//   - otherwise the values came from a peer: its origin is a sender whose
//     own observation is clean (its successors only passed them on).
// A rank that lies about itself can be blamed wrongly or not at all; this
// catches faulty hosts and corrupted memory, not a malicious member (the job
// token and member secrets keep non-members out; docs/security.md).
#ifndef SHARDLINE_WORKER_TRAIN_NONFINITE_H_
#define SHARDLINE_WORKER_TRAIN_NONFINITE_H_

#include <cstdint>
#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/types/span.h"
#include "worker/collective/collectives.h"

namespace shardline {

enum class NonFiniteSource : int {
  kNone = 0,
  kOwnUpdate = 1,
  kGatheredFromPeer = 2,
  kOwnGradients = 3,
  kReducedFromPeer = 4,
};

// What one rank saw first.
struct NonFiniteObservation {
  NonFiniteSource source = NonFiniteSource::kNone;
  int peer = -1;       // the sender, for the *FromPeer sources
  int64_t step = -1;   // the step in which it was seen

  bool seen() const { return source != NonFiniteSource::kNone; }
  // Records (source, peer, step) unless something was seen already.
  void Note(NonFiniteSource s, int from, int64_t at);
};

struct NonFiniteVerdict {
  enum class Kind { kClean, kDiverged, kPeerFault };
  Kind kind = Kind::kClean;
  int rank = -1;        // the diverged rank, or the faulty peer
  NonFiniteObservation evidence;  // what `rank` (or its receiver) saw
};

// The verdict from every rank's observation (observations[r] is rank r's).
// Deterministic: every rank that calls it with the same vector gets the
// same verdict.
NonFiniteVerdict Judge(absl::Span<const NonFiniteObservation> observations);

// Every rank calls it (the same number of times, in step with the others)
// after agreeing that some rank saw something; returns the verdict on
// everyone's observations. Fails only if the collective does.
absl::StatusOr<NonFiniteVerdict> ExchangeObservations(Collectives& comm, const NonFiniteObservation& mine);

// The agreement and the exchange in one, for the points between steps (a
// scalar all-reduce of the flag, then the exchange if it is set). OK when
// no rank saw anything; kFailedPrecondition naming the rank for a
// divergence; PeerFaultError naming the peer for a peer fault.
absl::Status SettleNonFinite(Collectives& comm, const NonFiniteObservation& mine);

// The error for a verdict (OK for kClean): "rank 1's loss or gradients
// became non-finite at step 37" (kFailedPrecondition) or "rank 2 sent
// non-finite values in the reduce-scatter of step 37 (...)" (PeerFaultError).
absl::Status VerdictStatus(const NonFiniteVerdict& verdict);

// "loss or gradients", "optimizer update", ...: what a source names.
std::string DescribeSource(NonFiniteSource source);

}  // namespace shardline

#endif  // SHARDLINE_WORKER_TRAIN_NONFINITE_H_
