// What an end-to-end test compares bit for bit between two runs: the
// parameters and optimizer state of a committed checkpoint.
#ifndef SHARDLINE_TESTS_E2E_FINAL_STATE_H_
#define SHARDLINE_TESTS_E2E_FINAL_STATE_H_

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/statusor.h"

namespace shardline {

// Every buffer of every shard of the checkpoint at `step` in
// <workdir>/checkpoints, saved by `world` ranks, concatenated in rank order;
// an error naming the shard that cannot be read.
absl::StatusOr<std::vector<float>> ReadCheckpointState(const std::string& workdir, int64_t step, int world);

// ReadCheckpointState in a test: empty, and a test failure recorded, if a
// shard cannot be read.
std::vector<float> FinalState(const std::string& workdir, int64_t step, int world);

// True if `a` and `b` hold the same bits (not just equal values: -0 and 0
// differ, NaNs compare by payload).
bool SameBits(const std::vector<float>& a, const std::vector<float>& b);

}  // namespace shardline

#endif  // SHARDLINE_TESTS_E2E_FINAL_STATE_H_
