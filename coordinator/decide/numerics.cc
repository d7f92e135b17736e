#include "coordinator/decide/numerics.h"

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"

namespace shardline {
namespace {

// The same bits on the canary: the kernels' names may differ (OpenBLAS's
// Haswell and Zen kernels compute alike), the fingerprint may not.
bool Same(const coordinator::Numerics& a, const coordinator::Numerics& b) {
  return a.fingerprint() == b.fingerprint();
}

coordinator::NumericsRecord RecordOf(const coordinator::Numerics& reported, const NumericsSource& source) {
  coordinator::NumericsRecord r;
  *r.mutable_numerics() = reported;
  r.set_rank(source.rank);
  r.set_host(source.host);
  r.set_step(source.step);
  r.set_generation(source.generation);
  r.set_unix_seconds(source.unix_seconds);
  return r;
}

// "fingerprint 0x... with kernels [...]".
std::string Described(const coordinator::Numerics& n) {
  return absl::StrCat("fingerprint ", FingerprintHex(n.fingerprint()), " with kernels [", n.kernels(), "]");
}

}  // namespace

std::string FingerprintHex(uint64_t fingerprint) { return absl::StrFormat("0x%016x", fingerprint); }

NumericsVerdict JudgeNumerics(const coordinator::WorldHistory& history, const coordinator::Numerics& reported,
                              const NumericsSource& source, config::NumericsMode mode) {
  NumericsVerdict v;
  const std::string who = absl::StrCat("worker rank ", source.rank, " on host ", source.host);
  if (!history.has_numerics()) {
    v.action = NumericsVerdict::kRecordJobs;
    v.record = RecordOf(reported, source);
    v.reason = absl::StrCat("the job's numerics: ", Described(reported), ", first reported by ", who,
                            " at step ", source.step);
    return v;
  }
  const coordinator::NumericsRecord& job = history.numerics();
  if (Same(job.numerics(), reported)) return v;
  for (const coordinator::NumericsRecord& c : history.numerics_changes()) {
    if (Same(c.numerics(), reported)) return v;  // admitted before (RELAXED)
  }
  const std::string differs =
      absl::StrCat(who, " computes ", Described(reported), ", where the job's is ", Described(job.numerics()),
                   " (first reported by worker rank ", job.rank(), " on host ", job.host(), " at step ", job.step(),
                   ")");
  if (mode == config::RELAXED) {
    v.action = NumericsVerdict::kRecordChange;
    v.record = RecordOf(reported, source);
    v.reason = absl::StrCat(differs, "; admitted (runtime.numerics RELAXED): from step ", source.step,
                            " the job's bits are not comparable with a run on the job's kernels");
    return v;
  }
  v.action = NumericsVerdict::kRefuse;
  v.reason = absl::StrCat(
      differs,
      ": its results would leave the job's trajectory, so it is refused (runtime.numerics STRICT). Give every host "
      "the same kernels (the same OPENBLAS_CORETYPE on every host, e.g. OPENBLAS_CORETYPE=Haswell, the same "
      "ONEDNN_MAX_CPU_ISA and runtime.blas_threads), or set runtime.numerics: RELAXED to admit it and give up "
      "bit-for-bit comparison from that step");
  return v;
}

}  // namespace shardline
