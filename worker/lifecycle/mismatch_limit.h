// When a worker stops rejoining worlds that fail on other bits: a pure
// decision on the generations this process saw end so.
//
//   at.push_back(world.start_step());
//   if (absl::Status s = MismatchLimit(at, named, status); !s.ok()) ... leave with s
#ifndef SHARDLINE_WORKER_LIFECYCLE_MISMATCH_LIMIT_H_
#define SHARDLINE_WORKER_LIFECYCLE_MISMATCH_LIMIT_H_

#include <cstddef>
#include <cstdint>
#include <vector>

#include "absl/status/status.h"

namespace shardline {

// A worker named this many times, or in a world that disagreed this many
// times without naming anyone, leaves the job (a fatal error naming the
// steps): a core or memory that keeps computing wrong, or kernels that
// differ, would otherwise make the world restore and fail again without
// end. Quarantine and a replacement worker are to come (issue 63).
constexpr size_t kNamedLimit = 3;

// The fatal error once `at` (the generations' start steps) reaches the limit;
// OK before.
absl::Status MismatchLimit(const std::vector<int64_t>& at, bool named, const absl::Status& last);

}  // namespace shardline

#endif  // SHARDLINE_WORKER_LIFECYCLE_MISMATCH_LIMIT_H_
