#include "worker/train/audit.h"

#include <algorithm>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "common/job/float_hash.h"
#include "common/platform/status_macros.h"
#include "worker/collective/peer_fault.h"
#include "worker/train/param_agreement.h"

namespace shardline {
namespace {

std::string Hex(uint64_t h) { return absl::StrFormat("%016x", h); }

constexpr int kSlotsPerRank = 6;  // own, audited and the fingerprint, two halves each

AuditVerdict Named(int rank, std::string reason) {
  AuditVerdict v;
  v.kind = AuditVerdict::Kind::kNamed;
  v.named = rank;
  v.reason = std::move(reason);
  return v;
}

AuditVerdict Unresolved(std::string reason) {
  AuditVerdict v;
  v.kind = AuditVerdict::Kind::kUnresolved;
  v.reason = std::move(reason);
  return v;
}

}  // namespace

bool AuditDue(const config::JobConfig& config, int world, int64_t step) {
  const int every = config.audit().every_steps();
  if (every <= 0 || world < 2 || config.collective().zero_stage() == 3) return false;
  return (step + 1) % every == 0;
}

int AuditTarget(uint64_t seed, int64_t step, int every_steps, int rank, int world) {
  if (world < 2) return rank;
  // Consecutive audits step k through 1..world-1 from a seeded start, so
  // world - 1 audits in a row check every pair once.
  const int64_t audit = every_steps > 0 ? step / every_steps : step;
  const uint64_t start = SplitMix64(seed) % static_cast<uint64_t>(world - 1);
  const int k = 1 + static_cast<int>((start + static_cast<uint64_t>(audit)) % static_cast<uint64_t>(world - 1));
  return (rank + k) % world;
}

bool AuditRound::Comparable(int a, int b) const {
  if (static_cast<size_t>(std::max(a, b)) >= numerics.size()) return true;
  const uint64_t x = numerics[static_cast<size_t>(a)], y = numerics[static_cast<size_t>(b)];
  return x == 0 || y == 0 || x == y;
}

int Arbiter(const AuditRound& round, int auditor, int target) {
  for (int r = 0; r < static_cast<int>(round.own.size()); ++r) {
    if (r != auditor && r != target && round.Comparable(r, target) && round.Comparable(r, auditor)) return r;
  }
  return -1;
}

std::vector<int> Mismatches(const AuditRound& round, absl::Span<const int> targets) {
  std::vector<int> out;
  for (size_t a = 0; a < targets.size() && a < round.audited.size(); ++a) {
    const int t = targets[a];
    if (t < 0 || static_cast<size_t>(t) >= round.own.size()) continue;
    if (!round.Comparable(static_cast<int>(a), t)) continue;
    if (round.audited[a] != round.own[static_cast<size_t>(t)]) out.push_back(static_cast<int>(a));
  }
  return out;
}

AuditVerdict Arbitrate(const AuditRound& round, int auditor, int target, int arbiter, uint64_t arbiter_hash) {
  const uint64_t own = round.own[static_cast<size_t>(target)];
  const uint64_t audited = round.audited[static_cast<size_t>(auditor)];
  const std::string hashes = absl::StrCat("rank ", target, "'s own ", Hex(own), ", rank ", auditor, "'s ",
                                          Hex(audited), ", rank ", arbiter, "'s ", Hex(arbiter_hash));
  if (arbiter_hash == own && arbiter_hash != audited) {
    return Named(auditor, absl::StrCat("rank ", auditor, " recomputed rank ", target,
                                       "'s first micro-batch and got another gradient than rank ", target,
                                       " and the arbiter rank ", arbiter, " (", hashes, ")"));
  }
  if (arbiter_hash == audited && arbiter_hash != own) {
    return Named(target, absl::StrCat("rank ", target, "'s gradient of its first micro-batch differs from what rank ",
                                      auditor, " and the arbiter rank ", arbiter, " recomputed (", hashes, ")"));
  }
  return Unresolved(absl::StrCat("ranks ", target, ", ", auditor, " and ", arbiter, " computed rank ", target,
                                 "'s first micro-batch three ways (", hashes, ")"));
}

AuditVerdict JudgeReplay(const AuditRound& first, const AuditRound& replay, absl::Span<const int> targets) {
  // A rank whose own result or recomputation changed when replayed computes
  // inconsistently: named, the lowest first.
  for (size_t r = 0; r < first.own.size(); ++r) {
    const bool audited_changed =
        first.Comparable(static_cast<int>(r), targets[r]) && replay.audited[r] != first.audited[r];
    if (replay.own[r] != first.own[r] || audited_changed) {
      return Named(static_cast<int>(r),
                   absl::StrCat("rank ", r, " computed the same micro-batch twice and got different gradients (its own ",
                                Hex(first.own[r]), " then ", Hex(replay.own[r]), "; rank ", targets[r], "'s ",
                                Hex(first.audited[r]), " then ", Hex(replay.audited[r]), ")"));
    }
  }
  if (Mismatches(replay, targets).empty()) {
    return Unresolved("the mismatch did not come back when the step was replayed");
  }
  const int a = Mismatches(replay, targets).front(), t = targets[static_cast<size_t>(a)];
  return Unresolved(absl::StrCat("ranks ", t, " and ", a, " each compute the same way every time, but rank ", a,
                                 " computes rank ", t, "'s micro-batch differently (", Hex(first.own[t]), " against ",
                                 Hex(first.audited[a]), ") and no third rank on the same kernels can say which is "
                                 "right"));
}

absl::Status AuditStatus(const AuditVerdict& v, int64_t step, absl::Span<const int> worker_ranks) {
  auto worker = [&](int i) { return static_cast<size_t>(i) < worker_ranks.size() ? worker_ranks[i] : i; };
  switch (v.kind) {
    case AuditVerdict::Kind::kPass:
      return absl::OkStatus();
    case AuditVerdict::Kind::kNamed:
      return PeerFaultError(
          worker(v.named),
          absl::StrCat("replay audit of step ", step, " names rank ", worker(v.named), ": ", v.reason,
                       worker_ranks.empty() ? "" : " (ranks of the island's ring)",
                       "; a faulty core or memory computes wrong there: the step is not applied and the world "
                       "restarts from its newest restore point; test that host (shardline numerics) or take it "
                       "out of the job"));
    case AuditVerdict::Kind::kUnresolved:
      return UnresolvedMismatchError(absl::StrCat("replay audit of step ", step, " found a mismatch it cannot pin on one "
                                              "rank: ", v.reason, "; the step is not applied and the world restarts "
                                              "from its newest restore point"));
  }
  return absl::InternalError("unknown audit verdict");
}

absl::StatusOr<AuditRound> ExchangeAuditHashes(Collectives& comm, uint64_t own, uint64_t audited, uint64_t numerics) {
  const int world = comm.world_size();
  std::vector<double> all(static_cast<size_t>(world) * kSlotsPerRank, 0.0);
  double* slot = all.data() + static_cast<size_t>(comm.rank()) * kSlotsPerRank;
  slot[0] = HashHigh(own);
  slot[1] = HashLow(own);
  slot[2] = HashHigh(audited);
  slot[3] = HashLow(audited);
  slot[4] = HashHigh(numerics);
  slot[5] = HashLow(numerics);
  RETURN_IF_ERROR(comm.AllReduceScalars(absl::MakeSpan(all), ReduceOp::kSum));
  AuditRound round;
  for (int r = 0; r < world; ++r) {
    const double* f = all.data() + static_cast<size_t>(r) * kSlotsPerRank;
    for (int i = 0; i < kSlotsPerRank; ++i) {
      if (!IsHashHalf(f[i])) return PeerFaultError(r, absl::StrCat("rank ", r, " sent an audit hash out of range"));
    }
    round.own.push_back(HashFromHalves(f[0], f[1]));
    round.audited.push_back(HashFromHalves(f[2], f[3]));
    round.numerics.push_back(HashFromHalves(f[4], f[5]));
  }
  return round;
}

}  // namespace shardline
