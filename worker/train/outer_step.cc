#include "worker/train/outer_step.h"

#include <cmath>

#include "absl/strings/str_cat.h"
#include "common/checkpoint/buffer_names.h"
#include "common/faults/corruption.h"
#include "common/faults/fault_injection.h"
#include "common/platform/status_macros.h"
#include "worker/train/outer_wire.h"
#include "worker/train/param_agreement.h"
#include "worker/train/step_scalars.h"
#include "worker/train/train_step.h"

namespace shardline {
namespace {

// Each island's `values` encoded once and passed round the ring whole
// (K - 1 hops); then values := the K decodings added in island order 0..K-1,
// the same bits on every island. Returns the bytes this rank sent.
absl::StatusOr<int64_t> SumEncoded(Collectives& across, config::DilocoConfig::Wire wire, absl::Span<float> values) {
  const int k = across.world_size(), me = across.rank();
  std::vector<std::string> from(static_cast<size_t>(k));  // by island
  from[static_cast<size_t>(me)] = EncodeOuterWire(wire, values);
  const int next = (me + 1) % k, prev = (me + k - 1) % k;
  int64_t sent = 0;
  for (int hop = 0; hop + 1 < k; ++hop) {
    // Hop h passes on island (me - h)'s bytes and brings island (me - h - 1)'s.
    const std::string& out = from[static_cast<size_t>((me - hop + k) % k)];
    ASSIGN_OR_RETURN(from[static_cast<size_t>((me - hop - 1 + k) % k)], across.SendRecv(next, out, prev));
    sent += static_cast<int64_t>(out.size());
  }
  std::fill(values.begin(), values.end(), 0.0f);
  for (int island = 0; island < k; ++island) {
    const absl::Status added = AddDecodedOuterWire(wire, from[static_cast<size_t>(island)], values);
    if (!added.ok()) {
      return absl::DataLossError(absl::StrCat("island ", island, "'s pseudo-gradient: ", added.message()));
    }
  }
  return sent;
}

// The outer state's hashes disagreed across islands (`when` the update):
// every island's hash exchanged, and the verdict as a status naming the
// worker ranks (island k's: k * island size + this rank's place in it).
absl::Status NameDisagreement(const OuterStepArgs& a, uint64_t mine, absl::string_view when) {
  const int islands = a.across->world_size();
  ASSIGN_OR_RETURN(const AgreementVerdict verdict, ExchangeParamHashes(*a.across, mine));
  std::vector<int> workers(static_cast<size_t>(islands));
  for (int k = 0; k < islands; ++k) workers[static_cast<size_t>(k)] = k * a.island->world_size() + a.island->rank();
  RETURN_IF_ERROR(AgreementStatus(verdict, absl::StrCat("the outer parameters and momentum ", when, " the outer update"),
                                  a.step, workers));
  return absl::InternalError(absl::StrCat("the outer state's hash halves disagreed at step ", a.step,
                                          " but every island's hash is the same"));
}

}  // namespace

absl::StatusOr<OuterResult> OuterStep(const OuterStepArgs& a) {
  OuterOptimizer& opt = *a.optimizer;
  Collectives& across = *a.across;
  const int islands = across.world_size();
  std::vector<float> delta(static_cast<size_t>(opt.size()));
  const double own_sq = opt.PseudoGradient(a.params->data(), absl::MakeSpan(delta));
  // 1. One scalar all-reduce across islands: requests, finiteness, the
  // pseudo-gradients' squares (this rank's pieces of each island's), and the
  // hash of the outer state every island holds alike (agreed after the last
  // outer update: a difference here arose in memory since).
  StepScalars mine;
  mine.grad_sq = std::isfinite(own_sq) ? own_sq : 0.0;
  mine.nonfinite_seen = !std::isfinite(own_sq);
  mine.stop_vote = a.held.stop;
  mine.checkpoint_vote = a.held.checkpoint;
  mine.eval_vote = a.held.eval;
  mine.param_hash = opt.SharedStateHash();
  std::array<double, StepScalars::kCount> packed = mine.Pack();
  CrashPoint("outer_exchange", a.step);
  RETURN_IF_ERROR(across.AllReduceScalars(absl::MakeSpan(packed), StepScalars::kOps));
  const StepScalars agreed = StepScalars::Unpack(packed);
  if (!agreed.params_agree) RETURN_IF_ERROR(NameDisagreement(a, mine.param_hash, "before"));
  if (agreed.nonfinite_seen) {
    return absl::FailedPreconditionError(absl::StrCat("an island's pseudo-gradient became non-finite at step ", a.step,
                                                      " (its parameters diverged in the inner steps)"));
  }
  OuterResult out;
  out.agreed = AgreedRequests{agreed.stop_vote, agreed.checkpoint_vote, agreed.eval_vote};
  // 2. The sum over islands, the same bits in each.
  if (a.wire == config::DilocoConfig::FP32) {
    RETURN_IF_ERROR(across.ReduceScatter(absl::MakeSpan(delta)));
    RETURN_IF_ERROR(across.AllGather(absl::MakeSpan(delta)));
    // Each op sends (K-1)/K of the buffer (ring.h).
    out.bytes_sent = 2 * (static_cast<int64_t>(delta.size()) * static_cast<int64_t>(sizeof(float))) * (islands - 1) /
                     islands;
  } else {
    ASSIGN_OR_RETURN(out.bytes_sent, SumEncoded(across, a.wire, absl::MakeSpan(delta)));
  }
  // 3. The outer update of this rank's pieces.
  const double averaged_sq = opt.OuterUpdate(delta, islands, a.params->data());
  CrashPoint("outer_updated", a.step);
  for (StateBuffer* b : opt.state()) {
    if (b->name != kOuterParamsBuffer || b->values.empty()) continue;
    MaybeCorrupt(CorruptSite::kOuter, across.rank() * a.island->world_size() + a.island->rank(), a.step,
                 b->values.data(), 0);
  }
  // The new outer state agreed across islands before anything keeps it (a
  // snapshot, a checkpoint) or computes from it.
  const uint64_t updated = opt.SharedStateHash();
  std::array<double, 4> halves = {HashHigh(updated), HashHigh(updated), HashLow(updated), HashLow(updated)};
  static constexpr ReduceOp kHalvesOps[4] = {ReduceOp::kMin, ReduceOp::kMax, ReduceOp::kMin, ReduceOp::kMax};
  RETURN_IF_ERROR(across.AllReduceScalars(absl::MakeSpan(halves), kHalvesOps));
  if (halves[0] != halves[1] || halves[2] != halves[3]) RETURN_IF_ERROR(NameDisagreement(a, updated, "after"));
  // The norms over the whole model: summed over the island's ranks.
  std::array<double, 2> sums = {agreed.grad_sq, averaged_sq};
  RETURN_IF_ERROR(a.island->AllReduceScalars(absl::MakeSpan(sums), ReduceOp::kSum));
  out.pseudo_gradient_norm = std::sqrt(sums[0] / islands);
  out.averaged_norm = std::sqrt(sums[1]);
  // 4. Stage 2: whole again in the island.
  if (a.gather_params) {
    for (const Range& b : *a.buckets) {
      RETURN_IF_ERROR(a.island->AllGather(absl::MakeSpan(a.params->data() + b.begin, static_cast<size_t>(b.size()))));
    }
  }
  return out;
}

}  // namespace shardline
