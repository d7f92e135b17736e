// Kills at every named edge of a job's life (common/faults/fault_injection.h), as
// RocksDB's and LevelDB's crash tests kill at named points rather than only
// at random times (the random chaos trials missed the window of issue 34,
// finding 1). Each cell runs `shardline launch` with one or two crash points
// armed; every run must end by itself within a bound, exit 0, verify, and
// end with the uninterrupted run's bits (same world schedule: 2 workers).
// The table this prints is in docs/operations.md ("Crash-point matrix").
#include <signal.h>

#include <gtest/gtest.h>

#include <cstdio>
#include <string>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_replace.h"
#include "absl/strings/str_split.h"
#include "absl/time/clock.h"
#include "common/checkpoint/checkpoint_dir.h"
#include "common/platform/env.h"
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

// SHARDLINE_CRASH_AT for `points` ("a" or "a@step,b"), markers in `dir`;
// `names` gets each point's name.
std::string Armed(const std::string& dir, const std::string& points, std::vector<std::string>* names) {
  std::vector<std::string> armed;
  int n = 0;
  for (absl::string_view point : absl::StrSplit(points, ',')) {
    const std::vector<std::string> at = absl::StrSplit(point, absl::MaxSplits('@', 1));
    names->push_back(at[0]);
    armed.push_back(absl::StrCat(at[0], ":", at.size() > 1 ? at[1] : "*", ":", dir, "/crash-marker-", n++));
  }
  return "SHARDLINE_CRASH_AT=" + absl::StrJoin(armed, ",");
}

std::string CellDir(const std::string& prefix, const std::string& points) {
  return FreshDir(absl::StrCat(prefix, absl::StrReplaceAll(points, {{",", "_"}, {"@", "_"}})));
}

void ExpectReached(const std::string& output, const std::vector<std::string>& names) {
  for (const std::string& point : names) {
    EXPECT_TRUE(absl::StrContains(output, absl::StrCat("killing myself at ", point)))
        << "the point was never reached: " << point << "\n" << output;
  }
}

void ExpectVerifies(const std::string& dir) {
  Subprocess verify({BinPath("shardline"), "ckpt", "verify", dir});
  EXPECT_EQ(verify.Wait(absl::Seconds(30)), 0) << verify.Output();
}

std::vector<std::string> WithRestarts(std::vector<std::string> argv, int coordinator_restarts) {
  argv.push_back("--max_coordinator_restarts");
  argv.push_back(std::to_string(coordinator_restarts));
  return argv;
}

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
      // The final commit (the last step's checkpoint), before and after COMMITTED.
      {"coordinator", "after_commit_record@400"},
      {"coordinator", "after_committed_file@400"},
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
    const std::string dir = CellDir("crash_matrix_", cell.points);
    std::vector<std::string> names;
    std::vector<std::string> sets = run;
    sets.insert(sets.end(), cell.sets.begin(), cell.sets.end());
    const absl::Time start = absl::Now();
    Subprocess launch(WithRestarts(LaunchArgv(dir, 2, sets, /*max_restarts=*/3), 3), {Armed(dir, cell.points, &names)});
    const int code = launch.Wait(absl::Seconds(180));
    const double seconds = absl::ToDoubleSeconds(absl::Now() - start);
    table += absl::StrFormat("%s | %s | %d | %.1f\n", cell.process, cell.points, code, seconds);
    ASSERT_EQ(code, 0) << launch.Output();
    ExpectReached(launch.Output(), names);
    EXPECT_TRUE(SameBits(FinalState(dir, 400, 2), want)) << "not the uninterrupted run's bits";
    ExpectVerifies(dir);
  }
  std::fprintf(stderr, "%s", table.c_str());
}


// Islands (collective.islands, docs/collectives.md): 4 workers in 2 islands,
// an outer step every 20 steps. Kills inside the outer step - before its
// exchange across islands, after its update, at the last one, and during
// the recovery from another - end by themselves, verified, with the
// uninterrupted run's bits (each island resumes from its own shards).
TEST(CrashMatrixTest, KillsInsideTheOuterStepOfIslandsEndBitForBit) {
  const std::vector<std::string> run = {"train.total_steps=200", "checkpoint.every_steps=100", "train.eval_every=100",
                                        "collective.diloco.inner_steps=20",
                                        "checkpoint.memory_every_steps=0", "optimizer.adamw={}",
                                        "schedule.base_lr=0.003"};
  // `launch --islands 2`: collective.islands, and each worker told its island.
  auto islands = [](std::vector<std::string> argv) {
    argv.insert(argv.end(), {"--islands", "2"});
    return argv;
  };
  const std::string clean = FreshDir("crash_islands_clean");
  Subprocess reference(islands(LaunchArgv(clean, 4, run)));
  ASSERT_EQ(reference.Wait(absl::Seconds(180)), 0) << reference.Output();
  EXPECT_TRUE(absl::StrContains(reference.Output(), "outer step at step 200")) << reference.Output();
  EXPECT_TRUE(absl::StrContains(reference.Output(), ", island 1;")) << reference.Output();
  const std::vector<float> want = FinalState(clean, 200, 4);
  ASSERT_FALSE(want.empty());

  const std::vector<Cell> cells = {
      {"worker", "outer_exchange@120"},
      {"worker", "outer_updated@140"},
      {"worker", "outer_exchange@200"},  // the last one, before the final save
      {"worker", "outer_exchange@160,restored_from_disk"},  // resumed from step 100, killed again
  };
  std::string table = "process | crash points | exit | seconds to end\n";
  for (const Cell& cell : cells) {
    SCOPED_TRACE(cell.points);
    const std::string dir = CellDir("crash_islands_", cell.points);
    std::vector<std::string> names;
    const absl::Time start = absl::Now();
    Subprocess launch(islands(WithRestarts(LaunchArgv(dir, 4, run, /*max_restarts=*/3), 3)),
                      {Armed(dir, cell.points, &names)});
    const int code = launch.Wait(absl::Seconds(240));
    table += absl::StrFormat("%s | %s | %d | %.1f\n", cell.process, cell.points, code,
                             absl::ToDoubleSeconds(absl::Now() - start));
    ASSERT_EQ(code, 0) << launch.Output();
    ExpectReached(launch.Output(), names);
    EXPECT_TRUE(SameBits(FinalState(dir, 200, 4), want)) << "not the uninterrupted run's bits";
    ExpectVerifies(dir);
  }
  std::fprintf(stderr, "%s", table.c_str());
}

// A graceful stop (SIGTERM to launch once step 200 is logged) with a kill
// inside it: the job still stops by itself, exit 0, and a run again
// resumes from the stop's checkpoint to the uninterrupted run's bits.
TEST(CrashMatrixTest, AKillDuringAGracefulStopStillStopsAndTheResumeIsBitForBit) {
  const std::vector<std::string> run = {"train.total_steps=2000", "train.log_every=50", "checkpoint.every_steps=500",
                                        "train.eval_every=0"};
  const std::string clean = FreshDir("crash_stop_clean");
  Subprocess reference(LaunchArgv(clean, 2, run));
  ASSERT_EQ(reference.Wait(absl::Seconds(180)), 0) << reference.Output();
  const std::vector<float> want = FinalState(clean, 2000, 2);
  ASSERT_FALSE(want.empty());

  // stop_scheduled: the coordinator chose the stop's step and told nobody;
  // stopping: a worker reached it, before its final save;
  // every_worker_finished: every worker stopped, nothing recorded yet.
  const std::vector<Cell> cells = {
      {"coordinator", "stop_scheduled"}, {"worker", "stopping"}, {"coordinator", "every_worker_finished"}};
  std::string table = "process | crash points | exit of the stop | seconds to stop\n";
  for (const Cell& cell : cells) {
    SCOPED_TRACE(cell.points);
    const std::string dir = CellDir("crash_stop_", cell.points);
    std::vector<std::string> names;
    Subprocess launch(WithRestarts(LaunchArgv(dir, 2, run, /*max_restarts=*/3), 3), {Armed(dir, cell.points, &names)});
    ASSERT_TRUE(WaitForStep(dir, 200, absl::Seconds(120))) << launch.Output();
    const absl::Time stop = absl::Now();
    launch.Signal(SIGTERM);
    const int code = launch.Wait(absl::Seconds(180));
    table += absl::StrFormat("%s | %s | %d | %.1f\n", cell.process, cell.points, code,
                             absl::ToDoubleSeconds(absl::Now() - stop));
    ASSERT_EQ(code, 0) << launch.Output();
    ExpectReached(launch.Output(), names);
    EXPECT_TRUE(absl::StrContains(launch.Output(), "(stopped early)")) << launch.Output();
    ExpectVerifies(dir);
    // Run again: it resumes (a stopped job is not a finished one) and ends
    // where the uninterrupted run did.
    Subprocess again(LaunchArgv(dir, 2, run));
    ASSERT_EQ(again.Wait(absl::Seconds(180)), 0) << again.Output();
    EXPECT_FALSE(absl::StrContains(again.Output(), "already finished")) << again.Output();
    EXPECT_TRUE(SameBits(FinalState(dir, 2000, 2), want)) << "not the uninterrupted run's bits";
    ExpectVerifies(dir);
  }
  std::fprintf(stderr, "%s", table.c_str());
}

// The step of the last "the world changed size: A -> B workers at step S"
// in `log`, with B; {-1, 0} if none.
std::pair<int64_t, int> LastWorldChange(const std::string& log) {
  const std::string mark = "the world changed size: ";
  std::pair<int64_t, int> last = {-1, 0};
  for (size_t at = log.find(mark); at != std::string::npos; at = log.find(mark, at + 1)) {
    const size_t arrow = log.find(" -> ", at);
    const size_t steps = log.find(" workers at step ", at);
    if (arrow == std::string::npos || steps == std::string::npos) break;
    const size_t begin = steps + std::string(" workers at step ").size();
    int to = 0;
    int64_t step = -1;
    if (absl::SimpleAtoi(log.substr(arrow + 4, steps - arrow - 4), &to) &&
        absl::SimpleAtoi(log.substr(begin, log.find(' ', begin) - begin), &step)) {
      last = {step, to};
    }
  }
  return last;
}

constexpr int kElasticSteps = 1000;

std::vector<std::string> ElasticRun(int min_workers) {
  return {absl::StrCat("train.total_steps=", kElasticSteps), "train.log_every=50", "train.eval_every=0",
          "checkpoint.every_steps=100", "checkpoint.keep_last=0", "checkpoint.memory_every_steps=100",
          absl::StrCat("runtime.min_workers=", min_workers), "runtime.replace_timeout_seconds=1"};
}

// The elastic run in `dir` ended with the bits of its world schedule: its
// last world, resumed from its own checkpoint of the step where that world
// began, ends with the same bits.
void ExpectBitsOfItsSchedule(const std::string& dir, const std::string& ref_name) {
  const std::string coord = ReadAll(dir + "/logs/coordinator.log");
  const auto [step, world] = LastWorldChange(coord);
  ASSERT_GT(step, 0) << coord;
  ASSERT_TRUE(Env::Default()->FileExists(StepDir(dir + "/checkpoints", step) + "/COMMITTED")) << step;
  const std::vector<float> got = FinalState(dir, kElasticSteps, world);
  ASSERT_FALSE(got.empty());
  std::vector<std::string> resumed = ElasticRun(1);
  resumed.push_back("checkpoint.resume_from=" + dir);
  resumed.push_back(absl::StrCat("checkpoint.resume_step=", step));
  const std::string ref = FreshDir(ref_name);
  Subprocess again(LaunchArgv(ref, world, resumed));
  ASSERT_EQ(again.Wait(absl::Seconds(180)), 0) << again.Output();
  EXPECT_TRUE(SameBits(got, FinalState(ref, kElasticSteps, world)))
      << "not the bits of a " << world << "-worker resume of step " << step;
}

// Kills during an elastic shrink and grow (no worker restarts: a killed
// worker is gone for good, so the world shrinks). Shrink: 4 workers (at
// least 2), slot 1 killed after step 250. Grow: 3 workers, slot 1 killed
// after step 250, then a returning worker started by hand joins at a
// checkpoint; at least 1, since launch counts only its own workers.
TEST(CrashMatrixTest, AKillDuringAShrinkOrAGrowEndsWithTheBitsOfItsWorldSchedule) {
  struct ElasticCell {
    Cell cell;
    int workers;
    int min_workers;
    bool grow;
  };
  const std::vector<ElasticCell> cells = {
      {{"coordinator", "world_shrunk"}, 4, 2, false},
      {{"worker", "restored_after_shrink"}, 4, 2, false},  // a survivor: the world shrinks again
      {{"coordinator", "growing"}, 3, 1, true},
      {{"coordinator", "world_grown"}, 3, 1, true},
      {{"worker", "restored_after_grow"}, 3, 1, true},  // a survivor, after the joiner restored
  };
  std::string table = "process | crash point | workers | exit | seconds to end | last world\n";
  for (const ElasticCell& e : cells) {
    SCOPED_TRACE(e.cell.points);
    const std::string dir = CellDir("crash_elastic_", e.cell.points);
    std::vector<std::string> names;
    const absl::Time start = absl::Now();
    Subprocess launch(WithRestarts(LaunchArgv(dir, e.workers, ElasticRun(e.min_workers), /*max_restarts=*/0), 3),
                      {Armed(dir, e.cell.points, &names)});
    ASSERT_TRUE(WaitForStep(dir, 250, absl::Seconds(120))) << launch.Output();
    ASSERT_TRUE(SignalLaunchedWorker(dir, 1, SIGKILL));
    std::unique_ptr<Subprocess> back;
    if (e.grow) {
      ASSERT_TRUE(WaitForText(dir + "/logs/coordinator.log", "the world changed size: 3 -> 2", absl::Seconds(60)))
          << launch.Output();
      // The same slot returns, as a scheduler would bring it back; it does
      // not inherit the armed points (they are the launched processes').
      back = std::make_unique<Subprocess>(std::vector<std::string>{
          BinPath("shardline-worker"), "--coordinator", ReadAll(dir + "/coordinator.address"), "--listen",
          "127.0.0.1:0", "--rank", "1", "--token_file", dir + "/token", "--connect_timeout_seconds", "60"});
    }
    const int code = launch.Wait(absl::Seconds(240));
    const auto [step, world] = LastWorldChange(ReadAll(dir + "/logs/coordinator.log"));
    table += absl::StrFormat("%s | %s | %d | %d | %.1f | %d from step %d\n", e.cell.process, e.cell.points,
                             e.workers, code, absl::ToDoubleSeconds(absl::Now() - start), world, step);
    ASSERT_EQ(code, 0) << launch.Output();
    if (back != nullptr) {
      EXPECT_EQ(back->Wait(absl::Seconds(60)), 0) << back->Output();
    }
    ExpectReached(launch.Output(), names);
    ExpectVerifies(dir);
    ExpectBitsOfItsSchedule(dir, "crash_elastic_ref");
  }
  std::fprintf(stderr, "%s", table.c_str());
}

}  // namespace
}  // namespace shardline
