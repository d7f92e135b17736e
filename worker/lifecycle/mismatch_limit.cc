#include "worker/lifecycle/mismatch_limit.h"

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"

namespace shardline {

absl::Status MismatchLimit(const std::vector<int64_t>& at, bool named, const absl::Status& last) {
  if (at.size() < kNamedLimit) return absl::OkStatus();
  return absl::FailedPreconditionError(absl::StrCat(
      named ? "this worker was named " : "the ranks held or computed other bits, and nobody could be named, ",
      at.size(), named ? " times as the one that held or computed other bits than its peers" : " times",
      " (generations starting at steps ", absl::StrJoin(at, ", "), "; the last: ", last.message(), "): ",
      named ? "its host's core or memory computes wrong, so it leaves the job; test the host (shardline numerics "
              "against a good one) before running on it again"
            : "a host computes wrong or the hosts' kernels differ; compare every host's `shardline numerics` "
              "and take out the one that differs"));
}

}  // namespace shardline
