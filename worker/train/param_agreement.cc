#include "worker/train/param_agreement.h"

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "common/platform/status_macros.h"
#include "worker/collective/peer_fault.h"

namespace shardline {
namespace {

std::string Hex(uint64_t h) { return absl::StrFormat("%016x", h); }

constexpr int kSlotsPerRank = 2;  // the hash's high and low halves

}  // namespace

AgreementVerdict JudgeAgreement(absl::Span<const uint64_t> hashes) {
  AgreementVerdict v;
  v.hashes.assign(hashes.begin(), hashes.end());
  if (hashes.empty()) return v;
  // The most common hash (the lowest rank's on ties) and how many hold it.
  int best = 0, best_count = 0;
  for (size_t r = 0; r < hashes.size(); ++r) {
    int count = 0;
    for (uint64_t h : hashes) count += h == hashes[r] ? 1 : 0;
    if (count > best_count) {
      best = static_cast<int>(r);
      best_count = count;
    }
  }
  v.majority = hashes[static_cast<size_t>(best)];
  if (best_count == static_cast<int>(hashes.size())) return v;  // kAgree
  if (2 * best_count <= static_cast<int>(hashes.size())) {
    v.kind = AgreementVerdict::Kind::kSplit;
    return v;
  }
  v.kind = AgreementVerdict::Kind::kNamed;
  for (size_t r = 0; r < hashes.size(); ++r) {
    if (hashes[r] != v.majority) v.named.push_back(static_cast<int>(r));
  }
  return v;
}

absl::Status AgreementStatus(const AgreementVerdict& v, const std::string& what, int64_t step,
                             absl::Span<const int> worker_ranks) {
  auto worker = [&](int i) {
    return static_cast<size_t>(i) < worker_ranks.size() ? worker_ranks[static_cast<size_t>(i)] : i;
  };
  std::vector<std::string> all;
  for (size_t r = 0; r < v.hashes.size(); ++r) {
    all.push_back(absl::StrCat("rank ", worker(static_cast<int>(r)), " ", Hex(v.hashes[r])));
  }
  std::vector<int> named;
  for (int r : v.named) named.push_back(worker(r));
  switch (v.kind) {
    case AgreementVerdict::Kind::kAgree:
      return absl::OkStatus();
    case AgreementVerdict::Kind::kNamed:
      return PeerFaultError(
          named.front(),
          absl::StrCat("parameter agreement failed at step ", step, ": rank", named.size() > 1 ? "s " : " ",
                       absl::StrJoin(named, ", "), " held other bits of ", what, " than the ",
                       v.hashes.size() - v.named.size(), " others (", absl::StrJoin(all, "; "),
                       "): a received chunk or the memory of that host went bad (faulty core or memory); the "
                       "step is not applied and the world restarts from its newest restore point"));
    case AgreementVerdict::Kind::kSplit:
      return UnresolvedMismatchError(absl::StrCat(
          "parameter agreement failed at step ", step, ": the ranks hold other bits of ", what, " (",
          absl::StrJoin(all, "; "),
          ") and no majority names one; the step is not applied and the world restarts from its newest restore "
          "point (with 3 or more workers a disagreeing rank is named)"));
  }
  return absl::InternalError("unknown agreement verdict");
}

absl::StatusOr<AgreementVerdict> ExchangeParamHashes(Collectives& comm, uint64_t mine) {
  const int world = comm.world_size();
  std::vector<double> all(static_cast<size_t>(world) * kSlotsPerRank, 0.0);
  double* slot = all.data() + static_cast<size_t>(comm.rank()) * kSlotsPerRank;
  slot[0] = HashHigh(mine);
  slot[1] = HashLow(mine);
  RETURN_IF_ERROR(comm.AllReduceScalars(absl::MakeSpan(all), ReduceOp::kSum));
  std::vector<uint64_t> hashes(static_cast<size_t>(world));
  for (int r = 0; r < world; ++r) {
    const double* f = all.data() + static_cast<size_t>(r) * kSlotsPerRank;
    // Each half is an integer below 2^32 (the sum adds zeros to it only).
    if (!IsHashHalf(f[0]) || !IsHashHalf(f[1])) {
      return PeerFaultError(r, absl::StrCat("rank ", r, " sent a parameter hash out of range"));
    }
    hashes[static_cast<size_t>(r)] = HashFromHalves(f[0], f[1]);
  }
  return JudgeAgreement(hashes);
}

}  // namespace shardline
