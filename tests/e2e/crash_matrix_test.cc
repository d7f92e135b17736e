// Kills at every named edge of a job's life (common/fault_injection.h), as
// RocksDB's and LevelDB's crash tests kill at named points rather than only
// at random times (the random chaos trials missed the window of issue 34,
// finding 1). Each cell runs `shardline launch` with one or two crash points
// armed; every run must end by itself within a bound, exit 0, verify, and
// end with the uninterrupted run's bits (same world schedule: 2 workers).
// The table this prints is in docs/operations.md ("Crash-point matrix").
#include <gtest/gtest.h>

#include <cstdio>
#include <string>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_replace.h"
#include "absl/strings/str_split.h"
#include "absl/time/clock.h"
#include "tests/e2e/e2e_util.h"
#include "tests/e2e/final_state.h"
#include "tests/e2e/subprocess.h"

namespace shardline {
namespace {

struct Cell {
  std::string process;  // who dies there
  std::string points;   // "a" or "a@step,b": each armed once, at that step or any
  std::vector<std::string> sets = {};  // on top of the run's (none changes the math)
};

TEST(CrashMatrixTest, AKillAtEveryNamedEdgeEndsByItselfVerifiedAndBitForBit) {
  const std::vector<std::string> run = {"train.total_steps=400", "checkpoint.every_steps=100", "train.eval_every=400"};
  const std::string clean = FreshDir("crash_matrix_clean");
  Subprocess reference(LaunchArgv(clean, 2, run));
  ASSERT_EQ(reference.Wait(absl::Seconds(120)), 0) << reference.Output();
  const std::vector<float> want = FinalState(clean, 400, 2);
  ASSERT_FALSE(want.empty());

  const std::vector<Cell> cells = {
      {"coordinator", "world_formed"},
      {"coordinator", "after_commit_record"},
      {"coordinator", "after_committed_file"},
      {"coordinator", "every_worker_finished"},
      {"coordinator", "after_finished_record"},
      {"worker", "snapshot_replication"},
      {"worker", "before_shard_rename"},
      // Second faults during the recovery from the first.
      {"worker", "before_shard_rename@200,restored_from_memory"},
      {"coordinator+worker", "after_commit_record@200,restored_from_memory"},
      // One copy of each snapshot: a lost worker's shard is in nobody's
      // memory, so its replacement's world restores from disk.
      {"worker", "before_shard_rename@300,restored_from_disk", {"checkpoint.memory_copies=1"}},
  };
  std::string table = "process | crash points | exit | seconds to end\n";
  for (const Cell& cell : cells) {
    SCOPED_TRACE(cell.points);
    const std::string dir = FreshDir("crash_matrix_" + absl::StrReplaceAll(cell.points, {{",", "_"}, {"@", "_"}}));
    std::vector<std::string> armed;
    std::vector<std::string> names;
    int n = 0;
    for (absl::string_view point : absl::StrSplit(cell.points, ',')) {
      const std::vector<std::string> at = absl::StrSplit(point, absl::MaxSplits('@', 1));
      names.push_back(at[0]);
      armed.push_back(absl::StrCat(at[0], ":", at.size() > 1 ? at[1] : "*", ":", dir, "/crash-marker-", n++));
    }
    std::vector<std::string> sets = run;
    sets.insert(sets.end(), cell.sets.begin(), cell.sets.end());
    std::vector<std::string> argv = LaunchArgv(dir, 2, sets, /*max_restarts=*/3);
    argv.push_back("--max_coordinator_restarts");
    argv.push_back("3");
    const absl::Time start = absl::Now();
    Subprocess launch(argv, {"SHARDLINE_CRASH_AT=" + absl::StrJoin(armed, ",")});
    const int code = launch.Wait(absl::Seconds(180));
    const double seconds = absl::ToDoubleSeconds(absl::Now() - start);
    table += absl::StrFormat("%s | %s | %d | %.1f\n", cell.process, cell.points, code, seconds);
    ASSERT_EQ(code, 0) << launch.Output();
    for (const std::string& point : names) {
      EXPECT_TRUE(absl::StrContains(launch.Output(), absl::StrCat("killing myself at ", point)))
          << "the point was never reached: " << point << "\n" << launch.Output();
    }
    EXPECT_TRUE(SameBits(FinalState(dir, 400, 2), want)) << "not the uninterrupted run's bits";
    Subprocess verify({BinPath("shardline"), "ckpt", "verify", dir});
    EXPECT_EQ(verify.Wait(absl::Seconds(30)), 0) << verify.Output();
  }
  std::fprintf(stderr, "%s", table.c_str());
}

}  // namespace
}  // namespace shardline
