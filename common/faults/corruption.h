// Silent data corruption on demand, to prove the numerics checks catch it
// (docs/operations.md, "Failure modes"). With the environment variable
//   SHARDLINE_CORRUPT=<rank>:<step>:<site>:<bit>[:<marker file>]
// the worker of that rank flips bit <bit> (0-31 of a float32: 0-22 the
// mantissa, 23-30 the exponent, 31 the sign) of one value at <site> in step
// <step>, once: once per process, and with a marker file once per job (the
// first process to create it flips; restarted ones go on). <step> "*":
// every step, every time (a core that keeps computing wrong; no marker).
// Sites, in the
// order a step meets them:
//   gathered  a value of another rank's pieces as this rank received it
//             (the first layer the step's forward gathers that holds one)
//   gradient  the first gradient of the step's backward, before it is sent
//   reduced   the first value of this rank's reduced gradient chunk
//   param     the first parameter of this rank's first bucket, updated and
//             not yet gathered
//   moment    the first value of the optimizer's first state buffer, updated
//   outer     islands: the first of this rank's outer parameters, just set
//             by the outer step at <step> (the island's parameters are not)
// Off unless the variable is set; a set variable that does not parse stops
// the worker at start (CorruptionFromEnv), naming it.
#ifndef SHARDLINE_COMMON_FAULTS_CORRUPTION_H_
#define SHARDLINE_COMMON_FAULTS_CORRUPTION_H_

#include <cstdint>
#include <optional>
#include <string>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace shardline {

enum class CorruptSite { kGathered, kGradient, kReduced, kParam, kMoment, kOuter };

inline constexpr int64_t kEveryStep = -1;

struct CorruptionSpec {
  int rank = 0;
  int64_t step = 0;     // kEveryStep: "*"
  CorruptSite site = CorruptSite::kGathered;
  int bit = 0;
  std::string marker;  // empty: once per process
};

absl::string_view CorruptSiteName(CorruptSite site);

// Pure: the spec `text` means, or an error naming SHARDLINE_CORRUPT and the
// part that is wrong.
absl::StatusOr<CorruptionSpec> ParseCorruption(absl::string_view text);

// SHARDLINE_CORRUPT as this process found it: nullopt when unset; an error
// when it does not parse.
absl::StatusOr<std::optional<CorruptionSpec>> CorruptionFromEnv();

// True once: the first time this process asks for the spec's (site, rank,
// step) (and, with a marker, the first in the job to create it); with step
// "*", every time it asks for (site, rank). Unset or unparsable: never.
bool CorruptionDue(CorruptSite site, int rank, int64_t step);

// *v with bit `bit` of its float32 representation flipped.
void FlipFloatBit(float* v, int bit);

// If CorruptionDue(site, rank, step): flips the armed bit of *v, says so on
// stderr (what, where) and returns true.
bool MaybeCorrupt(CorruptSite site, int rank, int64_t step, float* v, int64_t index);

}  // namespace shardline

#endif  // SHARDLINE_COMMON_FAULTS_CORRUPTION_H_
