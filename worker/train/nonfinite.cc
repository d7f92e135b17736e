#include "worker/train/nonfinite.h"

#include <tuple>
#include <vector>

#include "absl/strings/str_cat.h"
#include "common/platform/status_macros.h"
#include "worker/collective/peer_fault.h"

namespace shardline {
namespace {

bool FromPeer(NonFiniteSource s) {
  return s == NonFiniteSource::kGatheredFromPeer || s == NonFiniteSource::kReducedFromPeer;
}

// When it happened: earlier steps first, then the order of a step's phases
// (the enum's order).
std::tuple<int64_t, int> When(const NonFiniteObservation& o) {
  return {o.step, static_cast<int>(o.source)};
}

constexpr int kFieldsPerRank = 3;  // source, peer, step

}  // namespace

void NonFiniteObservation::Note(NonFiniteSource s, int from, int64_t at) {
  if (seen()) return;
  source = s;
  peer = from;
  step = at;
}

std::string DescribeSource(NonFiniteSource source) {
  switch (source) {
    case NonFiniteSource::kNone: return "nothing";
    case NonFiniteSource::kOwnUpdate: return "parameters after its optimizer update";
    case NonFiniteSource::kGatheredFromPeer: return "all-gather";
    case NonFiniteSource::kOwnGradients: return "loss or gradients";
    case NonFiniteSource::kReducedFromPeer: return "reduce-scatter";
  }
  return "?";
}

NonFiniteVerdict Judge(absl::Span<const NonFiniteObservation> observations) {
  NonFiniteVerdict v;
  int first = -1;  // the rank with the earliest observation (lowest rank on ties)
  for (int r = 0; r < static_cast<int>(observations.size()); ++r) {
    if (!observations[r].seen()) continue;
    if (first < 0 || When(observations[r]) < When(observations[first])) first = r;
  }
  if (first < 0) return v;
  const NonFiniteObservation& earliest = observations[first];
  if (!FromPeer(earliest.source)) {
    v.kind = NonFiniteVerdict::Kind::kDiverged;
    v.rank = first;
    v.evidence = earliest;
    return v;
  }
  // Values from a peer, first seen at the earliest observation's time. A
  // receiver forwards what it received, so its successor blames it too;
  // the origin is the sender that saw nothing itself by then.
  v.kind = NonFiniteVerdict::Kind::kPeerFault;
  const int world = static_cast<int>(observations.size());
  auto same_time = [&](const NonFiniteObservation& o) { return o.seen() && When(o) == When(earliest); };
  int origin = -1;
  int lowest = -1;
  for (const NonFiniteObservation& o : observations) {
    if (!same_time(o) || o.peer < 0 || o.peer >= world) continue;
    const NonFiniteObservation& sender = observations[o.peer];
    const bool sender_clean = !sender.seen() || When(earliest) < When(sender);
    if (lowest < 0 || o.peer < lowest) lowest = o.peer;
    if (sender_clean && (origin < 0 || o.peer < origin)) origin = o.peer;
  }
  v.rank = origin >= 0 ? origin : lowest;
  for (const NonFiniteObservation& o : observations) {
    if (same_time(o) && o.peer == v.rank) {
      v.evidence = o;
      break;
    }
  }
  return v;
}

absl::Status VerdictStatus(const NonFiniteVerdict& v) {
  switch (v.kind) {
    case NonFiniteVerdict::Kind::kClean:
      return absl::OkStatus();
    case NonFiniteVerdict::Kind::kDiverged:
      return absl::FailedPreconditionError(absl::StrCat(
          "rank ", v.rank, "'s ", DescribeSource(v.evidence.source), " became non-finite at step ",
          v.evidence.step, ": the run diverged; lower schedule.base_lr or set train.grad_clip_norm"));
    case NonFiniteVerdict::Kind::kPeerFault:
      return PeerFaultError(v.rank, absl::StrCat("rank ", v.rank, " sent non-finite values in the ",
                                                 DescribeSource(v.evidence.source), " of step ", v.evidence.step,
                                                 " though nothing it received was non-finite: a peer fault "
                                                 "(faulty host or memory), not a diverged run"));
  }
  return absl::InternalError("unknown verdict");
}

absl::StatusOr<NonFiniteVerdict> ExchangeObservations(Collectives& comm, const NonFiniteObservation& mine) {
  const int world = comm.world_size();
  // Each rank fills its own slots and leaves zeros elsewhere: the sum is
  // everyone's values, exactly (small integers, plus zeros).
  std::vector<double> all(static_cast<size_t>(world) * kFieldsPerRank, 0.0);
  double* slot = all.data() + static_cast<size_t>(comm.rank()) * kFieldsPerRank;
  slot[0] = static_cast<double>(static_cast<int>(mine.source));
  slot[1] = mine.peer;
  slot[2] = static_cast<double>(mine.step);
  RETURN_IF_ERROR(comm.AllReduceScalars(absl::MakeSpan(all), ReduceOp::kSum));
  std::vector<NonFiniteObservation> observations(static_cast<size_t>(world));
  for (int r = 0; r < world; ++r) {
    const double* f = all.data() + static_cast<size_t>(r) * kFieldsPerRank;
    const int source = static_cast<int>(f[0]);
    if (source < 0 || source > static_cast<int>(NonFiniteSource::kReducedFromPeer)) {
      return PeerFaultError(r, absl::StrCat("rank ", r, " sent an observation of unknown kind ", f[0]));
    }
    observations[static_cast<size_t>(r)].source = static_cast<NonFiniteSource>(source);
    observations[static_cast<size_t>(r)].peer = static_cast<int>(f[1]);
    observations[static_cast<size_t>(r)].step = static_cast<int64_t>(f[2]);
  }
  return Judge(observations);
}

absl::Status SettleNonFinite(Collectives& comm, const NonFiniteObservation& mine) {
  double flag = mine.seen() ? 1 : 0;
  RETURN_IF_ERROR(comm.AllReduceScalars(absl::MakeSpan(&flag, 1), ReduceOp::kMax));
  if (flag == 0) return absl::OkStatus();
  ASSIGN_OR_RETURN(const NonFiniteVerdict verdict, ExchangeObservations(comm, mine));
  return VerdictStatus(verdict);
}

}  // namespace shardline
