// What the coordinator does with a worker's numerics fingerprint
// (runtime.numerics; worker/train/numerics.h computes it): a pure step, the
// job's history and the report in, the verdict out. No lock, clock or I/O;
// the Job applies the verdict under its lock (records it, persists it, or
// fails the job with its reason).
//
//   const NumericsVerdict v = JudgeNumerics(history_, report.numerics(), where, config.runtime().numerics());
//   if (v.action == NumericsVerdict::kRefuse) Fail(...v.reason...);
#ifndef SHARDLINE_COORDINATOR_DECIDE_NUMERICS_H_
#define SHARDLINE_COORDINATOR_DECIDE_NUMERICS_H_

#include <cstdint>
#include <string>

#include "proto/config.pb.h"
#include "proto/coordinator.pb.h"

namespace shardline {

// Where a report came from: what a record keeps beside the fingerprint.
struct NumericsSource {
  int rank = 0;
  std::string host;  // of the worker's transport address
  int64_t step = 0;  // the step its generation started from
  uint64_t generation = 0;
  double unix_seconds = 0;
};

struct NumericsVerdict {
  enum Action {
    kAccept,        // the job's fingerprint, or one RELAXED admitted before: nothing to do
    kRecordJobs,    // the first reported: it becomes the job's
    kRecordChange,  // RELAXED: another one, admitted; from its step the bits are not comparable
    kRefuse,        // STRICT: another one; the job fails with `reason`
  };
  Action action = kAccept;
  coordinator::NumericsRecord record;  // kRecordJobs and kRecordChange: what to keep
  std::string reason;                  // for people: every action but kAccept
};

// The verdict on `reported` from `source`, against `history`'s numerics
// (the job's: absent until the first report) and its changes.
NumericsVerdict JudgeNumerics(const coordinator::WorldHistory& history, const coordinator::Numerics& reported,
                              const NumericsSource& source, config::NumericsMode mode);

// "0x" and 16 hex digits: a fingerprint as logs and the status show it.
std::string FingerprintHex(uint64_t fingerprint);

}  // namespace shardline

#endif  // SHARDLINE_COORDINATOR_DECIDE_NUMERICS_H_
