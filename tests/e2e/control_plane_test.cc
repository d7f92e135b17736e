// The coordinator's cost does not grow with threads per worker: a real
// shardline-coordinator under 16, then 256 simulated workers
// (bench/drivers/control_plane_load.cc: registration with the job token,
// heartbeats at 10 per second, a silent worker, a dead one, an "eval now"
// and a stop, then the job's end), every phase completing, and the
// coordinator's thread count the same within a few threads. (The old
// service held two threads per heartbeat stream: over 500 at 256.)
#include <gtest/gtest.h>

#include <cmath>
#include <map>
#include <string>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "common/checkpoint/checkpoint_dir.h"
#include "common/platform/env.h"
#include "tests/e2e/e2e_util.h"
#include "tests/e2e/subprocess.h"

namespace shardline {
namespace {

// The load generator's JSON line of `phase`, or "".
std::string Phase(const std::string& output, const std::string& phase) {
  for (absl::string_view line : absl::StrSplit(output, '\n')) {
    if (absl::StrContains(line, absl::StrCat("\"phase\":\"", phase, "\""))) return std::string(line);
  }
  return "";
}

TEST(ControlPlaneTest, ThreadsStayFlatFrom16To256WorkersAndEveryPhaseCompletes) {
  const std::string token = "control-plane-test-token-0123456789abcdef";
  std::map<int, double> threads;
  for (int n : {16, 256}) {
    SCOPED_TRACE(absl::StrCat(n, " simulated workers"));
    const std::string dir = FreshDir(absl::StrCat("control_plane_", n));
    Subprocess coordinator({BinPath("shardline-coordinator"), "--config", DefaultConfig(), "--listen", "127.0.0.1:0",
                            "--workdir", dir, "--heartbeat_timeout_ms", "3000", "--progress_every_seconds", "0",
                            "--set", absl::StrCat("runtime.num_workers=", n), "--set",
                            absl::StrCat("data.global_batch_size=", n * 8), "--set", "train.total_steps=1000000",
                            "--set", "checkpoint.every_steps=0", "--set", "checkpoint.save_final=false"},
                           {"SHARDLINE_TOKEN=" + token});
    ASSERT_TRUE(WaitForText(dir + "/coordinator.address", "", absl::Seconds(60))) << coordinator.Output();
    Subprocess load({BinPath("control_plane_load"), "--coordinator", ReadAll(dir + "/coordinator.address"),
                     "--coordinator_pid", std::to_string(coordinator.pid()), "--workers", std::to_string(n),
                     "--heartbeat_timeout_ms", "3000", "--silences", "1", "--commands", "1", "--steady_seconds", "2",
                     "--checkpoints", "1"},
                    {"SHARDLINE_TOKEN=" + token});
    ASSERT_EQ(load.Wait(absl::Seconds(240)), 0) << load.Output();
    const std::string out = load.Output();
    for (const char* phase : {"formation", "steady", "silence", "death", "checkpoint", "commands"}) {
      EXPECT_FALSE(Phase(out, phase).empty()) << "no " << phase << " phase:\n" << out;
    }
    // The simulated workers' shards were committed: n of them, checked by
    // the coordinator on disk.
    absl::StatusOr<std::vector<int64_t>> committed = CommittedSteps(Env::Default(), dir + "/checkpoints");
    ASSERT_TRUE(committed.ok()) << committed.status();
    const std::vector<int64_t>& steps = *committed;
    ASSERT_EQ(steps.size(), 1u) << ReadAll(dir + "/logs/coordinator.log") + coordinator.Output();
    EXPECT_TRUE(absl::StrContains(ReadAll(dir + "/logs/coordinator.log") + coordinator.Output(),
                                  absl::StrCat("committed checkpoint at step ", steps[0], " (", n, " shards)")));
    threads[n] = JsonField(Phase(out, "steady"), "threads");
    ASSERT_FALSE(std::isnan(threads[n])) << out;
    // The stop reached every worker, they reported finished, the job ended.
    EXPECT_EQ(coordinator.Wait(absl::Seconds(60)), 0) << coordinator.Output();
    EXPECT_TRUE(absl::StrContains(ReadAll(dir + "/logs/coordinator.log") + coordinator.Output(), "job finished"));
  }
  EXPECT_LE(threads[256], threads[16] + 4) << "the coordinator's threads grew with its workers: " << threads[16]
                                           << " at 16, " << threads[256] << " at 256";
}

}  // namespace
}  // namespace shardline
