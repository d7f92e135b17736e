// The numerics fingerprint: what a worker computes with, checked against
// the job's at the door (runtime.numerics; coordinator/decide/numerics.h).
// Bit for bit holds only while every worker runs the same kernels: another
// OpenBLAS core type, another vector ISA, another thread count, or a core
// that computes wrong gives other bits from the same inputs. A canary run
// through the job's code paths finds that before its state is committed.
//
//   ASSIGN_OR_RETURN(NumericsFingerprint n, ComputeNumerics(config, InputOf(data.train)));
//   ... n.fingerprint goes to the coordinator in the generation's first report ...
#ifndef SHARDLINE_WORKER_TRAIN_NUMERICS_H_
#define SHARDLINE_WORKER_TRAIN_NUMERICS_H_

#include <cstdint>
#include <optional>
#include <string>

#include "absl/status/statusor.h"
#include "proto/config.pb.h"
#include "worker/model/model.h"

namespace shardline {

struct NumericsFingerprint {
  uint64_t fingerprint = 0;
  std::string kernels;  // KernelDescription: for people, not compared
  double seconds = 0;   // what computing it took (set by the caller that timed it); 0: computed before
};

// The kernels this process computes `config`'s job with: "OpenBLAS
// Haswell kernels; matrix-product ISA avx2; FP32 products; 1 BLAS thread"
// ("BF16 products (oneDNN avx512_core_bf16)" or "BF16 products (widened to
// float32, OpenBLAS Haswell sgemm)" in BF16).
std::string KernelDescription(const config::JobConfig& config);

// The canary: the job's model family at its shapes (a transformer cut to
// one block), in its precision, forward and backward on a micro-batch of
// fixed synthetic examples of `input`'s shape from fixed parameters, then
// one update of the job's optimizer; the fingerprint hashes the loss, the
// gradients and the updated parameters (FNV-1a, 64 bits). The micro-batch
// is the job's at its full world (runtime.num_workers), whatever world runs
// now: an elastic world of another size computes the same fingerprint. A
// pure function of (config, input, the process's kernels): the same on
// every host whose kernels compute alike, another wherever one does not.
absl::StatusOr<NumericsFingerprint> ComputeNumerics(const config::JobConfig& config, const InputShape& input);

// A process's fingerprint of one job, computed once: a process's kernels
// do not change, so the worlds it joins again (a re-formed generation, an
// elastic one) report the one it computed first, without running the
// canary again (100-200 ms of every restart's path to its first step).
// Another job (another config or input) computes anew. Not thread-safe.
class NumericsMemo {
 public:
  // ComputeNumerics(config, input), or its result for the same arguments
  // before; *computed says which.
  absl::StatusOr<NumericsFingerprint> Get(const config::JobConfig& config, const InputShape& input, bool* computed);

 private:
  std::string key_;  // what value_ was computed for
  std::optional<NumericsFingerprint> value_;
};

}  // namespace shardline

#endif  // SHARDLINE_WORKER_TRAIN_NUMERICS_H_
