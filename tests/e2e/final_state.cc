#include "tests/e2e/final_state.h"

#include <gtest/gtest.h>

#include <cstring>

#include "absl/status/statusor.h"
#include "common/checkpoint/checkpoint_dir.h"
#include "common/checkpoint/shard_file.h"
#include "common/env.h"

namespace shardline {

std::vector<float> FinalState(const std::string& workdir, int64_t step, int world) {
  std::vector<float> out;
  for (int r = 0; r < world; ++r) {
    const std::string path = StepDir(workdir + "/checkpoints", step) + "/" + ShardFileName(r, world);
    absl::StatusOr<ShardContents> c = ReadShard(Env::Default(), path);
    EXPECT_TRUE(c.ok()) << path << ": " << c.status();
    if (!c.ok()) return {};
    for (const ShardBuffer& b : c->buffers) out.insert(out.end(), b.values.begin(), b.values.end());
  }
  return out;
}

bool SameBits(const std::vector<float>& a, const std::vector<float>& b) {
  return a.size() == b.size() && std::memcmp(a.data(), b.data(), a.size() * sizeof(float)) == 0;
}

}  // namespace shardline
