// Replay audits: a core that computes wrong, caught by recomputing its work
// (issue 63, "Replay audit"; docs/operations.md, "Silent data corruption").
//
// A micro-batch's gradient is a pure function of the parameters, its
// examples and the kernels, and every rank of a ring holds the same
// parameters (param_agreement.h) and kernels (numerics.h). So at every
// audit step (AuditDue) each rank, before its own work, recomputes the
// first micro-batch of one other rank (AuditTarget: a permutation of the
// ranks, rotating with the step so that over world - 1 audits each rank
// checks every other) and hashes its gradient as that rank's backward
// finished it, part by part; each rank hashes its own first micro-batch the
// same way. The step's audit all-reduce carries both hashes of every rank
// (AuditRound). Every auditor's hash equal to its target's: the step goes
// on. Otherwise the step is not applied and the lowest mismatched pair is
// arbitrated:
//   - 3 or more ranks: a third rank (Arbiter) recomputes the same
//     micro-batch; the two that agree name the third (Arbitrate);
//   - 2 ranks: both replay what they computed (their own and their
//     target's); a rank whose result changes is named, and if neither
//     changes nobody can be named from the hashes (JudgeReplay).
// Every decision here is a pure function of hashes and ranks, kept with its
// reason (AuditVerdict::reason). ZeRO stage 2 (stage 3 holds no whole
// parameters to recompute with; its steps are not audited yet).
#ifndef SHARDLINE_WORKER_TRAIN_AUDIT_H_
#define SHARDLINE_WORKER_TRAIN_AUDIT_H_

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/types/span.h"
#include "common/job/config.h"
#include "worker/collective/collectives.h"

namespace shardline {

// Whether `step` is audited under `config` (audit.every_steps > 0, stage 2,
// a ring of at least 2 ranks): every every_steps-th step, the first
// every_steps - 1 steps not (a world's first steps are its warm-up).
bool AuditDue(const config::JobConfig& config, int world, int64_t step);

// The rank that `rank` audits at `step`: (rank + k) mod world with k in
// [1, world - 1] from the seed and the step, the same k for every rank (a
// permutation: each rank is audited by exactly one other).
int AuditTarget(uint64_t seed, int64_t step, int every_steps, int rank, int world);

// What every rank published in an audit step, by rank.
struct AuditRound {
  std::vector<uint64_t> own;       // the hash of its own first micro-batch's gradient
  std::vector<uint64_t> audited;   // the hash of its recomputation of its target's
  std::vector<uint64_t> numerics;  // its numerics fingerprint (numerics.h); empty or 0: unknown
  // Whether ranks a and b compute alike: the same fingerprint, or either
  // unknown. Ranks on other kernels (runtime.numerics RELAXED) compute
  // other bits by right: they are never compared.
  bool Comparable(int a, int b) const;
};

// The rank that arbitrates a mismatch between `auditor` and `target`: the
// lowest rank that is neither and computes alike (round.Comparable); -1
// when there is none (the mismatch is then settled by a replay).
int Arbiter(const AuditRound& round, int auditor, int target);

struct AuditVerdict {
  enum class Kind { kPass, kNamed, kUnresolved };
  Kind kind = Kind::kPass;
  int named = -1;       // kNamed: the rank that computed wrong
  std::string reason;   // kNamed / kUnresolved: why, for people
};

// The auditors whose hash differs from their target's own, of the pairs
// that compute alike, ascending.
std::vector<int> Mismatches(const AuditRound& round, absl::Span<const int> targets);

// Pure: the arbiter's recomputation `arbiter_hash` of `target`'s
// micro-batch against the target's own hash and the auditor's.
AuditVerdict Arbitrate(const AuditRound& round, int auditor, int target, int arbiter, uint64_t arbiter_hash);

// Pure, two ranks: `replay` is the same round computed again.
AuditVerdict JudgeReplay(const AuditRound& first, const AuditRound& replay, absl::Span<const int> targets);

// OK for kPass; for kNamed a PeerFaultError naming the rank (its message
// the reason, the step and the fix); for kUnresolved an
// UnresolvedMismatchError (peer_fault.h). Ranks are
// named as worker_ranks[i] where given (an island's ring).
absl::Status AuditStatus(const AuditVerdict& v, int64_t step, absl::Span<const int> worker_ranks = {});

// One all-reduce: every rank's (own, audited) pair and fingerprint, as AuditRound.
absl::StatusOr<AuditRound> ExchangeAuditHashes(Collectives& comm, uint64_t own, uint64_t audited, uint64_t numerics);

}  // namespace shardline

#endif  // SHARDLINE_WORKER_TRAIN_AUDIT_H_
