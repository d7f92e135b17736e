#include "worker/train/train_loop.h"

#include <gtest/gtest.h>

#include <atomic>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <functional>

#include "absl/strings/match.h"
#include "tests/worker/collective/world.h"
#include "worker/collective/ring.h"
#include "common/checkpoint/checkpoint_dir.h"
#include "common/job/config.h"
#include "common/platform/env_wrapper.h"
#include "tests/corruption.h"
#include "tests/util/metric_lines.h"
#include "tests/worker/train/fmnist_suite.h"
#include "worker/model/gemm.h"
#include "worker/train/nan_guard.h"

namespace shardline {
namespace {

class TrainLoopTest : public FashionMnistSuite {
 protected:
  // The default job shortened to 60 steps, then `overrides`.
  static config::JobConfig Config(const std::vector<std::string>& overrides) {
    return ShortJob(60, 20, 30, overrides);
  }

  // An emptied checkpoint root under TempDir.
  static std::string FreshRoot(const std::string& name) {
    const std::string root = ::testing::TempDir() + "/" + name;
    std::system(("rm -rf '" + root + "'").c_str());
    return root;
  }

  // Quiet options that save checkpoints under `root` through `sink`.
  static TrainOptions Saving(const std::string& root, CheckpointSink* sink) {
    TrainOptions o;
    o.env = Env::Default();
    o.show_progress = false;
    o.keep_params = true;
    o.checkpoint_root = root;
    o.checkpoint_sink = sink;
    return o;
  }

  // Trains `c` from scratch, saving under a fresh checkpoint root `name`,
  // which it returns.
  static std::string TrainWithCheckpoints(const config::JobConfig& c, const std::string& name) {
    const std::string root = FreshRoot(name);
    LocalCommitter committer(Env::Default(), root, c.checkpoint(), "test");
    LocalCollectives comm;
    EXPECT_TRUE(RunTraining(c, *data_, comm, Saving(root, &committer)).ok());
    return root;
  }

  // Trains `c` from the checkpoint in `step_dir`, saving nothing.
  static absl::StatusOr<TrainResult> Restore(const config::JobConfig& c, const std::string& step_dir) {
    LocalCollectives comm;
    TrainOptions o;
    o.env = Env::Default();
    o.show_progress = false;
    o.keep_params = true;
    o.restore_dir = step_dir;
    return RunTraining(c, *data_, comm, o);
  }

  static absl::StatusOr<TrainResult> Run(const config::JobConfig& c, MetricsSink* sink = nullptr) {
    LocalCollectives comm;
    TrainOptions options;
    options.env = Env::Default();
    options.metrics = sink;
    options.show_progress = false;
    options.keep_params = true;
    return RunTraining(c, *data_, comm, options);
  }

  // Trains `c` on n in-process ranks (TestWorld over LocalFabric), each
  // with quiet options plus what setup(rank, &options) adds. Each rank's
  // result, in rank order.
  static std::vector<absl::StatusOr<TrainResult>> RunWorld(
      const config::JobConfig& c, int n, const std::function<void(int, TrainOptions*)>& setup = nullptr) {
    std::vector<absl::StatusOr<TrainResult>> results(static_cast<size_t>(n));
    TestWorld world(TransportKind::kLocal, n);
    world.Run([&](int rank, Transport* t) {
      RingCollectives comm(t, CollectiveOptions{Env::Default()});
      TrainOptions o;
      o.env = Env::Default();
      o.show_progress = false;
      o.keep_params = true;
      if (setup) setup(rank, &o);
      results[static_cast<size_t>(rank)] = RunTraining(c, *data_, comm, o);
      return results[static_cast<size_t>(rank)].status();
    });
    return results;
  }
};

using Lines = MetricLines;

TEST_F(TrainLoopTest, SameSeedGivesBitwiseEqualParameters) {
  const config::JobConfig c = Config({});
  absl::StatusOr<TrainResult> a = Run(c), b = Run(c);
  ASSERT_TRUE(a.ok()) << a.status();
  ASSERT_TRUE(b.ok()) << b.status();
  ASSERT_EQ(a->params.size(), b->params.size());
  EXPECT_EQ(std::memcmp(a->params.data(), b->params.data(), a->params.size() * sizeof(float)), 0);
  EXPECT_EQ(a->losses, b->losses);

  absl::StatusOr<TrainResult> other = Run(Config({"seed=1"}));
  ASSERT_TRUE(other.ok());
  EXPECT_NE(std::memcmp(a->params.data(), other->params.data(), a->params.size() * sizeof(float)), 0);
}

TEST_F(TrainLoopTest, LossFallsAndEvalRunsOnSchedule) {
  absl::StatusOr<TrainResult> r = Run(Config({}));
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(r->steps, 60);
  EXPECT_LT(r->losses.back(), r->losses.front() * 0.6);
  ASSERT_EQ(r->evals.size(), 2u);
  EXPECT_EQ(r->evals[0].step, 30);
  EXPECT_EQ(r->evals[1].step, 60);
  EXPECT_GT(r->evals[1].accuracy, 0.6);
}

// The per-phase totals the final log line reports: a world of one computes
// and updates, and its phases fit inside the time it spent in steps.
TEST_F(TrainLoopTest, PhaseTotalsAccountForTheStepTime) {
  absl::StatusOr<TrainResult> r = Run(Config({}));
  ASSERT_TRUE(r.ok()) << r.status();
  const PhaseTimes& t = r->phase_seconds;
  EXPECT_GT(t.compute, 0);
  EXPECT_GT(t.optimizer, 0);
  EXPECT_LE(t.compute + t.reduce_scatter + t.optimizer + t.all_gather, r->train_seconds);
  EXPECT_GT(t.compute, 0.3 * r->train_seconds);
  PhaseTimes two_steps{0.0854, 0.0088, 0.0044, 0.0088};
  EXPECT_EQ(PhasesPerStep(two_steps, 2), "compute 42.7 ms, reduce-scatter 4.4 ms, optimizer 2.2 ms, all-gather 4.4 ms");
}

TEST_F(TrainLoopTest, WritesTrainAndEvalLinesInTheDocumentedFormat) {
  Lines sink;
  ASSERT_TRUE(Run(Config({}), &sink).ok());
  // train at 20, 40, 60; eval at 30, 60.
  ASSERT_EQ(sink.lines.size(), 5u);
  EXPECT_TRUE(absl::StartsWith(sink.lines[0], "{\"step\":20,\"split\":\"train\",\"loss\":"));
  for (const char* key : {"\"lr\":", "\"grad_norm\":", "\"param_norm\":", "\"update_norm\":",
                          "\"samples_per_second\":"}) {
    EXPECT_TRUE(absl::StrContains(sink.lines[0], key)) << key;
  }
  EXPECT_TRUE(absl::StartsWith(sink.lines[1], "{\"step\":30,\"split\":\"eval\",\"loss\":"));
  EXPECT_TRUE(absl::StrContains(sink.lines[1], "\"accuracy\":"));
  EXPECT_FALSE(absl::StrContains(sink.lines[0], "null"));
}

TEST_F(TrainLoopTest, GradientAccumulationComputesTheSameStep) {
  absl::StatusOr<TrainResult> one = Run(Config({"train.total_steps=5"}));
  absl::StatusOr<TrainResult> four = Run(Config({"train.total_steps=5", "train.grad_accum_steps=4"}));
  ASSERT_TRUE(one.ok() && four.ok());
  for (size_t i = 0; i < one->params.size(); ++i) {
    ASSERT_NEAR(one->params[i], four->params[i], 1e-5) << i;
  }
}

TEST_F(TrainLoopTest, ClippingBoundsTheUpdate) {
  Lines clipped, free;
  ASSERT_TRUE(Run(Config({"train.total_steps=1", "train.log_every=1", "train.grad_clip_norm=0.01",
                          "optimizer.sgd.momentum=0", "schedule.warmup_steps=0",
                          "schedule.decay=constant"}),
                  &clipped).ok());
  // With momentum 0 and lr 0.05, one clipped step moves parameters by
  // exactly lr * clip_norm.
  const std::string& line = clipped.lines[0];
  const size_t at = line.find("\"update_norm\":");
  ASSERT_NE(at, std::string::npos);
  EXPECT_NEAR(std::strtod(line.c_str() + at + 14, nullptr), 0.05 * 0.01, 1e-6) << line;
}

TEST_F(TrainLoopTest, StopRequestEndsTheRunAfterThatStepWithAnEval) {
  std::atomic<int64_t> stop{25}, done{0};
  LocalCollectives comm;
  TrainOptions options;
  options.env = Env::Default();
  options.show_progress = false;
  options.keep_params = true;
  options.stop_request = &stop;
  options.steps_done = &done;
  absl::StatusOr<TrainResult> r = RunTraining(Config({}), *data_, comm, options);
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_TRUE(r->stopped_early);
  EXPECT_EQ(r->steps, 25);
  EXPECT_EQ(done.load(), 25);
  EXPECT_EQ(r->evals.back().step, 25);
}

// The checkpoint contract: stopping at a saved step and resuming from it
// ends with bitwise the parameters of an uninterrupted run.
TEST_F(TrainLoopTest, ResumingFromACheckpointIsBitwiseEqualToNotStopping) {
  for (const char* opt : {"optimizer.sgd={momentum: 0.9}", "optimizer.adamw={}"}) {
    SCOPED_TRACE(opt);
    const config::JobConfig c = Config({opt, "checkpoint.every_steps=30", "schedule.base_lr=0.01"});
    const std::string root = FreshRoot("train_loop_resume");
    LocalCommitter committer(Env::Default(), root, c.checkpoint(), "test");
    absl::StatusOr<TrainResult> whole = Run(c);
    ASSERT_TRUE(whole.ok()) << whole.status();

    LocalCollectives comm;
    TrainOptions first = Saving(root, &committer);
    std::atomic<int64_t> stop{30};
    first.stop_request = &stop;
    absl::StatusOr<TrainResult> a = RunTraining(c, *data_, comm, first);
    ASSERT_TRUE(a.ok()) << a.status();
    ASSERT_EQ(a->steps, 30);

    TrainOptions second = first;
    second.stop_request = nullptr;
    second.restore_dir = StepDir(root, 30);
    absl::StatusOr<TrainResult> b = RunTraining(c, *data_, comm, second);
    ASSERT_TRUE(b.ok()) << b.status();
    EXPECT_EQ(b->start_step, 30);
    EXPECT_EQ(b->steps, 60);
    ASSERT_EQ(b->params.size(), whole->params.size());
    EXPECT_EQ(std::memcmp(b->params.data(), whole->params.data(), b->params.size() * sizeof(float)), 0);
    EXPECT_EQ(std::vector<double>(whole->losses.begin() + 30, whole->losses.end()), b->losses);
  }
}

// A clock that moves 100 us each time it is read: the loop's time, made
// independent of how fast this machine runs it (a loaded machine had made
// every step late, so every step saved).
class TickingEnv : public EnvWrapper {
 public:
  explicit TickingEnv(Env* target) : EnvWrapper(target) {}
  int64_t NowMicros() override { return now_ += 100; }

 private:
  std::atomic<int64_t> now_{0};
};

TEST_F(TrainLoopTest, EverySecondsSavesByTheClock) {
  const config::JobConfig c = Config({"train.total_steps=300", "checkpoint.every_seconds=0.02",
                                      "checkpoint.keep_last=0", "checkpoint.save_final=false"});
  const std::string root = FreshRoot("train_loop_every_seconds");
  LocalCommitter committer(Env::Default(), root, c.checkpoint(), "test");
  LocalCollectives comm;
  TickingEnv ticking(Env::Default());
  TrainOptions o = Saving(root, &committer);
  o.env = &ticking;
  absl::StatusOr<TrainResult> r = RunTraining(c, *data_, comm, o);
  ASSERT_TRUE(r.ok()) << r.status();
  const std::vector<int64_t> steps = *CommittedSteps(Env::Default(), root);
  // A save due every 200 reads of the clock: some steps save, not all.
  EXPECT_GE(steps.size(), 3u);
  EXPECT_LT(steps.size(), 300u);
}

TEST_F(TrainLoopTest, CorruptCheckpointIsRefusedNamingTheFile) {
  const config::JobConfig c = Config({"checkpoint.every_steps=20", "train.total_steps=20"});
  const std::string root = TrainWithCheckpoints(c, "train_loop_corrupt");
  const std::string shard = StepDir(root, 20) + "/shard-00000-of-00001.ckpt";
  ASSERT_TRUE(FlipByte(shard, *Env::Default()->GetFileSize(shard) / 2, 0x10).ok());
  absl::StatusOr<TrainResult> r = Restore(c, StepDir(root, 20));
  EXPECT_EQ(r.status().code(), absl::StatusCode::kDataLoss);
  EXPECT_TRUE(absl::StrContains(r.status().message(), shard)) << r.status();
}

// What a restore refuses before reading any payload: a shard that is not
// the one the manifest lists, a checkpoint of another model, and optimizer
// state this run's optimizer does not have.
TEST_F(TrainLoopTest, RestoreRefusesAnotherShardAnotherModelAndAnotherOptimizer) {
  const config::JobConfig c = Config({"checkpoint.every_steps=10", "train.total_steps=20"});
  const std::string root = TrainWithCheckpoints(c, "train_loop_refuse");
  const std::string step20 = StepDir(root, 20);

  absl::StatusOr<TrainResult> r = Restore(Config({"model.mlp.hidden_sizes=64"}), step20);
  EXPECT_EQ(r.status().code(), absl::StatusCode::kFailedPrecondition) << r.status();
  EXPECT_TRUE(absl::StrContains(r.status().message(), "holds a model of")) << r.status();

  r = Restore(Config({"optimizer.adamw={}", "train.total_steps=20"}), step20);
  EXPECT_EQ(r.status().code(), absl::StatusCode::kFailedPrecondition) << r.status();
  EXPECT_TRUE(absl::StrContains(r.status().message(), "which this run's optimizer does not use")) << r.status();

  // Step 10's shard, intact, under step 20's manifest.
  const std::string shard = "/shard-00000-of-00001.ckpt";
  const std::string step10 = *Env::Default()->ReadFile(StepDir(root, 10) + shard, kMaxDataFileBytes);
  ASSERT_TRUE(WriteFileAtomically(Env::Default(), step20 + shard, step10).ok());
  r = Restore(c, step20);
  EXPECT_EQ(r.status().code(), absl::StatusCode::kDataLoss) << r.status();
  EXPECT_TRUE(absl::StrContains(r.status().message(), "checksum does not match the manifest")) << r.status();
}

TEST_F(TrainLoopTest, AdamWTrains) {
  absl::StatusOr<TrainResult> r = Run(Config({"optimizer.adamw={}", "schedule.base_lr=0.001"}));
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_GT(r->evals.back().accuracy, 0.7);
}

TEST_F(TrainLoopTest, DivergenceStopsWithTheStepWindow) {
  absl::StatusOr<TrainResult> r =
      Run(Config({"schedule.base_lr=1e30", "schedule.warmup_steps=0", "schedule.decay=constant"}));
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_TRUE(absl::StrContains(r.status().message(), "became")) << r.status();
  EXPECT_TRUE(absl::StrContains(r.status().message(), "within steps")) << r.status();
}

// Any world size trains the same global batch: 128 examples over 3 or 5
// ranks (slices of 25 or 26, 42 or 43) and over 2 ranks with 3 uneven
// micro-batches, in-process, give one rank's parameters to within float
// reordering, every rank holds the same bits, and the same world twice is
// bit for bit.
TEST_F(TrainLoopTest, AnyWorldSizeTrainsTheSameGlobalBatch) {
  config::JobConfig c = Config({"train.total_steps=30", "train.eval_every=0"});
  absl::StatusOr<TrainResult> one = Run(c);
  ASSERT_TRUE(one.ok()) << one.status();
  auto run_world = [&](int n, const std::vector<std::string>& sets) {
    config::JobConfig cn = c;
    cn.mutable_runtime()->set_num_workers(n);
    for (const std::string& s : sets) EXPECT_TRUE(ApplyOverride(s, &cn).ok()) << s;
    EXPECT_TRUE(ValidateConfig(cn).ok()) << ValidateConfig(cn);
    std::vector<absl::StatusOr<TrainResult>> results = RunWorld(cn, n);
    for (int r = 0; r < n; ++r) {
      EXPECT_TRUE(results[static_cast<size_t>(r)].ok()) << "rank " << r << ": " << results[static_cast<size_t>(r)].status();
    }
    if (!results[0].ok()) return std::vector<float>();
    for (int r = 1; r < n; ++r) {
      if (results[static_cast<size_t>(r)].ok()) {
        EXPECT_EQ(results[static_cast<size_t>(r)]->params, results[0]->params) << "rank " << r;
      }
    }
    return results[0]->params;
  };
  for (const auto& [n, sets] : std::vector<std::pair<int, std::vector<std::string>>>{
           {3, {}}, {5, {}}, {2, {"train.grad_accum_steps=3"}}}) {
    const std::vector<float> got = run_world(n, sets);
    ASSERT_EQ(got.size(), one->params.size()) << "world " << n;
    double worst = 0;
    for (size_t i = 0; i < got.size(); ++i) worst = std::max(worst, std::abs(double{got[i]} - one->params[i]));
    EXPECT_LT(worst, 1e-4) << "world " << n << " drifted from one rank's training by " << worst;
    EXPECT_EQ(run_world(n, sets), got) << "world " << n << " is not deterministic";
  }
}

// A world of 2 keeps in-memory snapshots every 20 steps; rank 1 is then
// "lost": a replacement with an empty store gets shard 1 of step 40 from rank
// 0 (its replica), both restore from memory - rank 0 from its own shard -
// and finish bit for bit where the uninterrupted run did.
TEST_F(TrainLoopTest, ARestoreFromAPeersMemoryReplicaIsBitForBit) {
  const config::JobConfig c =
      Config({"train.total_steps=60", "train.eval_every=0", "checkpoint.memory_every_steps=20"});
  constexpr int kWorld = 2;
  std::vector<std::unique_ptr<MemorySnapshots>> stores;
  for (int r = 0; r < kWorld; ++r) stores.push_back(std::make_unique<MemorySnapshots>(Env::Default()));
  auto run = [&](int64_t restore_step) {
    std::vector<absl::StatusOr<TrainResult>> results = RunWorld(c, kWorld, [&](int r, TrainOptions* o) {
      o->memory = stores[static_cast<size_t>(r)].get();
      o->memory_restore_step = restore_step;
    });
    for (int r = 0; r < kWorld; ++r) {
      const absl::StatusOr<TrainResult>& res = results[static_cast<size_t>(r)];
      EXPECT_TRUE(res.ok()) << "rank " << r << ": " << res.status();
      if (res.ok()) {
        EXPECT_EQ(res->start_step, restore_step) << "rank " << r;
      }
    }
    if (!results[0].ok() || !results[1].ok()) return std::vector<float>();
    EXPECT_EQ(results[0]->params, results[1]->params);
    return results[0]->params;
  };
  const std::vector<float> uninterrupted = run(0);
  ASSERT_FALSE(uninterrupted.empty());
  const SnapshotKey shard1{40, kWorld, 1};
  ASSERT_TRUE(stores[0]->Holds(shard1)) << "rank 0 holds its predecessor's shard";
  absl::StatusOr<std::string> replica = stores[0]->Bytes(shard1);
  ASSERT_TRUE(replica.ok());
  stores[1] = std::make_unique<MemorySnapshots>(Env::Default());  // the replacement process
  ASSERT_TRUE(stores[1]->Put(shard1, *replica).ok());
  EXPECT_EQ(run(40), uninterrupted) << "resumed from memory at step 40, it should end on the same bits";
}

TEST(NanGuardTest, NamesTheWindowAndTheLastFiniteLoss) {
  NanGuard guard;
  EXPECT_TRUE(guard.Check(0, 2.5, -1).ok());
  EXPECT_TRUE(guard.Check(1, 2.0, 1.0).ok());
  absl::Status s = guard.Check(2, std::nan(""), -1);
  ASSERT_FALSE(s.ok());
  EXPECT_TRUE(absl::StrContains(s.message(), "loss became nan at step 2 (within steps (1, 2]"))
      << s;
  EXPECT_TRUE(absl::StrContains(s.message(), "last finite loss 2 at step 1")) << s;
  EXPECT_FALSE(NanGuard().Check(5, 1.0, INFINITY).ok());
}

}  // namespace
}  // namespace shardline
