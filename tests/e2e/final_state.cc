#include "tests/e2e/final_state.h"

#include <gtest/gtest.h>

#include <cstring>

#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "common/checkpoint/checkpoint_dir.h"
#include "common/checkpoint/shard_file.h"
#include "common/platform/env.h"

namespace shardline {

absl::StatusOr<std::vector<float>> ReadCheckpointState(const std::string& workdir, int64_t step, int world) {
  std::vector<float> out;
  for (int r = 0; r < world; ++r) {
    const std::string path = StepDir(workdir + "/checkpoints", step) + "/" + ShardFileName(r, world);
    absl::StatusOr<ShardContents> c = ReadShard(Env::Default(), path);
    if (!c.ok()) return absl::Status(c.status().code(), absl::StrCat(path, ": ", c.status().message()));
    for (const ShardBuffer& b : c->buffers) out.insert(out.end(), b.values.begin(), b.values.end());
  }
  return out;
}

std::vector<float> FinalState(const std::string& workdir, int64_t step, int world) {
  absl::StatusOr<std::vector<float>> state = ReadCheckpointState(workdir, step, world);
  EXPECT_TRUE(state.ok()) << state.status();
  return state.ok() ? *std::move(state) : std::vector<float>{};
}

bool SameBits(const std::vector<float>& a, const std::vector<float>& b) {
  return a.size() == b.size() && std::memcmp(a.data(), b.data(), a.size() * sizeof(float)) == 0;
}

}  // namespace shardline
