// Parameter agreement: the values every rank must hold identically, checked
// in every step (issue 63, "parameter agreement every step").
//
// Where ranks hold the same values - stage 2's whole parameters once the
// all-gather is done, stage 3's layers while they are gathered, an island
// world's outer parameters and momentum - each rank hashes what it holds
// (FloatHasher) and the 64-bit hash rides the step's one scalar all-reduce
// as its two 32-bit halves, each reduced with min and with max
// (step_scalars.h). Equal minimum and maximum: every rank holds the same
// bits. Otherwise, and only then, the ranks exchange their hashes
// (ExchangeParamHashes) and each reaches the same verdict (JudgeAgreement):
//   - a strict majority of ranks share one hash: every other rank is named
//     (a received chunk or a copy in its memory went bad);
//   - no strict majority (two ranks, or an even split): nobody can be named
//     from the hashes alone; every rank's hash is listed.
// Either way the step is not applied: the world restarts from its newest
// restore point, whose pieces each owner kept (a rank's own pieces are
// never what a gathered copy disagrees about).
//
//   FloatHasher h;
//   h.Add(params.data() + layer.begin, layer.size());  // as each is whole
//   mine.param_hash = h.Digest();
#ifndef SHARDLINE_WORKER_TRAIN_PARAM_AGREEMENT_H_
#define SHARDLINE_WORKER_TRAIN_PARAM_AGREEMENT_H_

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/types/span.h"
#include "common/job/float_hash.h"
#include "worker/collective/collectives.h"

namespace shardline {



struct AgreementVerdict {
  enum class Kind { kAgree, kNamed, kSplit };
  Kind kind = Kind::kAgree;
  std::vector<int> named;        // kNamed: the ranks outside the majority, ascending
  uint64_t majority = 0;         // kNamed / kAgree: the hash most ranks hold
  std::vector<uint64_t> hashes;  // every rank's, by rank
};

// Pure: the verdict on every rank's hash, by rank.
AgreementVerdict JudgeAgreement(absl::Span<const uint64_t> hashes);

// `what` names the values ("the whole parameters", "the outer parameters
// and momentum"), `step` the step whose hashes they are. kNamed: a
// PeerFaultError naming the lowest named rank (its message names all);
// kSplit: kInternal naming every rank's hash; kAgree: OK. The verdict's
// index i is named as worker rank worker_ranks[i] (an island's ring, or the
// ring across islands, numbers its members its own way); empty: as i.
absl::Status AgreementStatus(const AgreementVerdict& v, const std::string& what, int64_t step,
                             absl::Span<const int> worker_ranks = {});

// Every rank's hash, by one scalar all-reduce (each rank fills its own two
// slots: the sum is every hash exactly), and the verdict on them.
absl::StatusOr<AgreementVerdict> ExchangeParamHashes(Collectives& comm, uint64_t mine);

// The two exact halves a hash travels as in a double all-reduce.
inline double HashHigh(uint64_t h) { return static_cast<double>(h >> 32); }
inline double HashLow(uint64_t h) { return static_cast<double>(h & 0xffffffffu); }
// Whether d is a half as HashHigh/HashLow make them: an integer in [0, 2^32).
inline bool IsHashHalf(double d) { return d >= 0 && d < 4294967296.0 && d == static_cast<double>(static_cast<uint64_t>(d)); }
// The hash of two halves; 0 where one is not a half (a peer's garbage).
inline uint64_t HashFromHalves(double high, double low) {
  if (!IsHashHalf(high) || !IsHashHalf(low)) return 0;
  return (static_cast<uint64_t>(high) << 32) | static_cast<uint64_t>(low);
}

}  // namespace shardline

#endif  // SHARDLINE_WORKER_TRAIN_PARAM_AGREEMENT_H_
