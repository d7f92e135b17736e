// Islands (collective.islands, collective.diloco) in process: K islands of
// M ranks over one LocalFabric world. The outer step is the paper's
// (checked against synchronous SGD where the two must agree), a run is bit
// for bit reproducible, every rank ends with the same parameters, and a
// resume from a checkpoint of islands ends with the uninterrupted bits.
#include <gtest/gtest.h>

#include <atomic>
#include <cmath>
#include <cstdlib>
#include <functional>
#include <algorithm>
#include <map>

#include "absl/strings/str_cat.h"
#include "common/checkpoint/checkpoint_dir.h"
#include "common/checkpoint/verify.h"
#include "common/job/config.h"
#include "common/job/shard.h"
#include "common/platform/mutex.h"
#include "tests/worker/collective/world.h"
#include "tests/worker/train/fmnist_suite.h"
#include "worker/collective/island_rings.h"
#include "worker/train/train_loop.h"

namespace shardline {
namespace {

// Commits a step once every rank's shard is in (the coordinator's part).
class WorldCommitter : public CheckpointSink {
 public:
  WorldCommitter(std::string root, int world) : root_(std::move(root)), world_(world) {}
  absl::Status ShardSaved(int64_t step, int rank, int world, const WrittenShard& shard) override {
    MutexLock lock(&mu_);
    state::CheckpointManifest& m = pending_[step];
    m.set_step(step);
    m.set_world_size(world);
    m.set_job_id("test");
    state::ShardEntry* e = m.add_shards();
    e->set_rank(rank);
    e->set_file(shard.path.substr(shard.path.rfind('/') + 1));
    e->set_size(shard.size);
    e->set_crc32c(shard.crc32c);
    if (m.shards_size() < world_) return absl::OkStatus();
    std::sort(m.mutable_shards()->begin(), m.mutable_shards()->end(),
              [](const state::ShardEntry& a, const state::ShardEntry& b) { return a.rank() < b.rank(); });
    return WriteCommitted(Env::Default(), StepDir(root_, step), m);
  }

 private:
  const std::string root_;
  const int world_;
  Mutex mu_;
  std::map<int64_t, state::CheckpointManifest> pending_;
};

class IslandsTest : public FashionMnistSuite {
 protected:
  static config::JobConfig Config(int workers, const std::vector<std::string>& overrides) {
    std::vector<std::string> sets = {"train.eval_every=0", "checkpoint.memory_every_steps=0",
                                     "runtime.num_workers=" + std::to_string(workers)};
    sets.insert(sets.end(), overrides.begin(), overrides.end());
    return ShortJob(40, 10, 0, sets);
  }

  // Trains `c` on n in-process ranks cut into c's islands; each rank's
  // result, in rank order. setup(rank, &options) adds to the quiet options.
  static std::vector<absl::StatusOr<TrainResult>> RunIslands(
      const config::JobConfig& c, int n, const std::function<void(int, TrainOptions*)>& setup = nullptr) {
    std::vector<absl::StatusOr<TrainResult>> results(static_cast<size_t>(n));
    across_sent_.assign(static_cast<size_t>(n), 0);
    TestWorld world(TransportKind::kLocal, n);
    world.Run([&](int rank, Transport* t) {
      absl::StatusOr<IslandRings> rings =
          IslandRings::Create(t, ShapeIslands(c, n), CollectiveOptions{Env::Default()});
      if (!rings.ok()) return rings.status();
      TrainOptions o;
      o.env = Env::Default();
      o.show_progress = false;
      o.keep_params = true;
      o.island_rings = &*rings;
      if (setup) setup(rank, &o);
      results[static_cast<size_t>(rank)] = RunTraining(c, *data_, *rings->island, o);
      across_sent_[static_cast<size_t>(rank)] = rings->across->bytes_sent();
      return results[static_cast<size_t>(rank)].status();
    });
    return results;
  }

  // Every rank's result ok and its parameters rank 0's; rank 0's.
  static std::vector<float> Agreed(const std::vector<absl::StatusOr<TrainResult>>& results) {
    for (size_t r = 0; r < results.size(); ++r) {
      EXPECT_TRUE(results[r].ok()) << "rank " << r << ": " << results[r].status();
      if (!results[r].ok()) return {};
    }
    for (size_t r = 1; r < results.size(); ++r) EXPECT_EQ(results[r]->params, results[0]->params) << "rank " << r;
    return results[0]->params;
  }

  // Bytes each rank's ring across islands sent in the last RunIslands.
  inline static std::vector<int64_t> across_sent_;

  static double MaxDiff(const std::vector<float>& a, const std::vector<float>& b) {
    EXPECT_EQ(a.size(), b.size());
    double worst = 0;
    for (size_t i = 0; i < std::min(a.size(), b.size()); ++i) worst = std::max(worst, std::abs(double{a[i]} - b[i]));
    return worst;
  }
};

// With one inner step of plain SGD, an outer learning rate of 1 and no
// outer momentum, the outer step averages the islands' parameters: the
// mean of p - lr * g_i is p - lr * mean(g_i), which is synchronous SGD on
// the whole batch. Up to rounding: the two sum in other orders.
TEST_F(IslandsTest, OneInnerStepOfSgdWithAPlainOuterStepIsSynchronousTraining) {
  const std::vector<std::string> sgd = {"optimizer.sgd={momentum: 0}", "train.total_steps=20"};
  const config::JobConfig sync = Config(1, sgd);
  LocalCollectives one;
  TrainOptions o;
  o.env = Env::Default();
  o.show_progress = false;
  o.keep_params = true;
  absl::StatusOr<TrainResult> want = RunTraining(sync, *data_, one, o);
  ASSERT_TRUE(want.ok()) << want.status();
  for (const auto& [n, k] : std::vector<std::pair<int, int>>{{2, 2}, {4, 2}}) {
    SCOPED_TRACE(absl::StrCat(n, " workers in ", k, " islands"));
    std::vector<std::string> sets = sgd;
    sets.insert(sets.end(), {"collective.islands=" + std::to_string(k), "collective.diloco.inner_steps=1",
                             "collective.diloco.outer_lr=1", "collective.diloco.outer_momentum=0"});
    const std::vector<float> got = Agreed(RunIslands(Config(n, sets), n));
    ASSERT_FALSE(got.empty());
    EXPECT_LT(MaxDiff(got, want->params), 1e-5);
  }
}

// The paper's outer step (H = 10, lr 0.7, Nesterov 0.9) over AdamW: the
// same bits twice, at stage 2 and 3 alike, every rank ending with the same
// parameters; and not synchronous training's.
TEST_F(IslandsTest, DilocoIsBitForBitAndTheSameAtStageTwoAndThree) {
  const std::vector<std::string> sets = {"optimizer.adamw={}", "schedule.base_lr=0.003", "collective.islands=2",
                                         "collective.diloco.inner_steps=10", "collective.bucket_cap_mb=0.1"};
  const config::JobConfig c = Config(4, sets);
  const std::vector<float> a = Agreed(RunIslands(c, 4));
  ASSERT_FALSE(a.empty());
  EXPECT_EQ(Agreed(RunIslands(c, 4)), a) << "not deterministic";
  config::JobConfig stage3 = c;
  stage3.mutable_collective()->set_zero_stage(3);
  stage3.mutable_train()->set_total_steps(40);
  std::vector<absl::StatusOr<TrainResult>> s3 = RunIslands(stage3, 4, [](int, TrainOptions* o) {
    o->keep_params = false;  // a stage-3 rank holds its pieces only
  });
  for (const auto& r : s3) ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(s3[0]->losses, RunIslands(c, 4)[0]->losses);
  config::JobConfig momentum = c;
  momentum.mutable_collective()->mutable_diloco()->set_outer_momentum(0.5f);
  EXPECT_NE(Agreed(RunIslands(momentum, 4)), a) << "the outer momentum changes nothing";
}

// Hears the outer steps (what Prometheus gets: worker_metrics.h).
class OuterSteps : public StepObserver {
 public:
  void OnStart(const RunInfo&) override {}
  void OnStep(const StepResult&, double) override {}
  void OnOverhead(Overhead, double) override {}
  void OnTrace(int64_t, const std::vector<PhaseSpan>&) override {}
  void OnOuterStep(const OuterStepReport& r) override { reports.push_back(r); }
  std::vector<OuterStepReport> reports;
};

// An outer step every H steps and after the last (35 = 3 * 10 + 5); each
// sends 2 (K-1)/K of the rank's pieces across islands; the islands do walk
// apart between them.
TEST_F(IslandsTest, OuterStepsComeEveryHStepsAndAfterTheLastAndSayWhatTheySent) {
  const config::JobConfig c = Config(4, {"optimizer.adamw={}", "collective.islands=2", "train.total_steps=35",
                                         "collective.diloco.inner_steps=10"});
  std::vector<OuterSteps> seen(4);
  std::vector<absl::StatusOr<TrainResult>> results =
      RunIslands(c, 4, [&](int rank, TrainOptions* o) { o->observer = &seen[static_cast<size_t>(rank)]; });
  ASSERT_FALSE(Agreed(results).empty());
  for (int rank = 0; rank < 4; ++rank) {
    const std::vector<OuterStepReport>& r = seen[static_cast<size_t>(rank)].reports;
    ASSERT_EQ(r.size(), 4u) << "rank " << rank;
    EXPECT_EQ(r[0].step, 10);
    EXPECT_EQ(r[3].step, 35);
    int64_t owned = 0;
    for (const Range& p : OwnedPieces(GradientBuckets(c, data_->train).value(), rank % 2, 2)) owned += p.size();
    EXPECT_EQ(r[0].bytes_sent, 2 * owned * 4 / 2) << "rank " << rank;  // 2 (K-1)/K of its pieces, K = 2
    EXPECT_EQ(results[static_cast<size_t>(rank)]->outer_bytes_sent, 4 * r[0].bytes_sent);
    // What the ring across islands handed its transport: the outer steps'
    // pseudo-gradients and their one scalar all-reduce each.
    EXPECT_GE(across_sent_[static_cast<size_t>(rank)], 4 * r[0].bytes_sent);
    EXPECT_LE(across_sent_[static_cast<size_t>(rank)], 4 * r[0].bytes_sent + 4 * 1024);
    EXPECT_GT(r[0].pseudo_gradient_norm, 0);
    EXPECT_EQ(r[0].pseudo_gradient_norm, seen[0].reports[0].pseudo_gradient_norm) << "ranks disagree";
  }
}

// The pseudo-gradient in bfloat16 or int8 across 3 islands: bit for bit
// twice, every rank the same, near the float32 run, and a quarter (int8) or
// half (bfloat16) of the bytes a value per hop.
TEST_F(IslandsTest, PseudoGradientsInBf16AndInt8AreBitForBitAndNearFloat32) {
  const std::vector<std::string> sets = {"optimizer.adamw={}", "schedule.base_lr=0.003", "collective.islands=3",
                                         "train.total_steps=30", "collective.diloco.inner_steps=10"};
  std::vector<OuterSteps> fp32_seen(3);
  const std::vector<absl::StatusOr<TrainResult>> fp32 = RunIslands(
      Config(3, sets), 3, [&](int rank, TrainOptions* o) { o->observer = &fp32_seen[static_cast<size_t>(rank)]; });
  const std::vector<float> want = Agreed(fp32);
  ASSERT_FALSE(want.empty());
  for (const char* wire : {"BF16", "INT8"}) {
    SCOPED_TRACE(wire);
    std::vector<std::string> with = sets;
    with.push_back(std::string("collective.diloco.wire=") + wire);
    const config::JobConfig c = Config(3, with);
    std::vector<OuterSteps> seen(3);
    const std::vector<absl::StatusOr<TrainResult>> results =
        RunIslands(c, 3, [&](int rank, TrainOptions* o) { o->observer = &seen[static_cast<size_t>(rank)]; });
    const std::vector<float> got = Agreed(results);
    ASSERT_FALSE(got.empty());
    EXPECT_EQ(Agreed(RunIslands(c, 3)), got) << "not deterministic";
    EXPECT_NE(got, want);
    EXPECT_LT(MaxDiff(got, want), 2e-3);
    EXPECT_NEAR(results[0]->evals.back().loss, fp32[0]->evals.back().loss, 0.01);
    // FP32: 2 (K-1)/K of 4 bytes a value = 16/3; bf16 (K-1) * 2 = 4, int8 about (K-1) * 1 = 2.
    const double per_value = std::string(wire) == "BF16" ? 4.0 : 2.0;
    const double ratio = static_cast<double>(seen[0].reports[0].bytes_sent) / fp32_seen[0].reports[0].bytes_sent;
    EXPECT_NEAR(ratio, per_value / (16.0 / 3), 0.01) << seen[0].reports[0].bytes_sent;
  }
}

// Saved at step 20 (an outer step), stopped there, and resumed: the same
// bits as not stopping, through a checkpoint whose islands hold different
// inner optimizer states.
TEST_F(IslandsTest, ResumingAnIslandsCheckpointIsBitForBit) {
  const std::vector<std::string> sets = {"optimizer.adamw={}", "schedule.base_lr=0.003", "collective.islands=2",
                                         "collective.diloco.inner_steps=10", "checkpoint.every_steps=20"};
  const config::JobConfig c = Config(4, sets);
  const std::vector<float> whole = Agreed(RunIslands(c, 4));
  ASSERT_FALSE(whole.empty());
  const std::string root = ::testing::TempDir() + "/islands_resume";
  std::system(("rm -rf '" + root + "'").c_str());
  WorldCommitter committer(root, 4);
  std::atomic<int64_t> stop{15};  // a stop between outer steps waits for the next one
  std::vector<absl::StatusOr<TrainResult>> first = RunIslands(c, 4, [&](int, TrainOptions* o) {
    o->checkpoint_root = root;
    o->checkpoint_sink = &committer;
    o->stop_request = &stop;
  });
  for (const auto& r : first) ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(first[0]->steps, 20);
  absl::StatusOr<VerifiedCheckpoint> v = VerifyCheckpoint(Env::Default(), StepDir(root, 20));
  ASSERT_TRUE(v.ok()) << v.status();
  EXPECT_EQ(v->headers[3].islands(), 2);
  const std::vector<float> resumed = Agreed(RunIslands(c, 4, [&](int, TrainOptions* o) {
    o->restore_dir = StepDir(root, 20);
  }));
  EXPECT_EQ(resumed, whole) << "the resume is not the uninterrupted run's bits";

  // A world of other islands restores it (runtime.min_islands shrinks and
  // grows a world by islands): island j reads the checkpoint's island j
  // mod 2, whose parameters are every island's at an outer step. Four
  // islands of one, and one island of two (collective.diloco set on one
  // island: what a world of islands shrunk to one runs), each agreed.
  const config::JobConfig four =
      Config(4, {"optimizer.adamw={}", "collective.islands=4", "collective.diloco.inner_steps=10"});
  EXPECT_FALSE(Agreed(RunIslands(four, 4, [&](int, TrainOptions* o) { o->restore_dir = StepDir(root, 20); })).empty());
  const config::JobConfig one =
      Config(2, {"optimizer.adamw={}", "collective.islands=1", "collective.diloco.inner_steps=10"});
  const std::vector<float> shrunk =
      Agreed(RunIslands(one, 2, [&](int, TrainOptions* o) { o->restore_dir = StepDir(root, 20); }));
  ASSERT_FALSE(shrunk.empty());
  EXPECT_EQ(shrunk, Agreed(RunIslands(one, 2, [&](int, TrainOptions* o) { o->restore_dir = StepDir(root, 20); })))
      << "a restore into fewer islands is not reproducible";
  EXPECT_NE(shrunk, whole);

  // A job without outer steps refuses it, naming both island counts.
  const config::JobConfig plain = Config(4, {"optimizer.adamw={}"});
  TestWorld world(TransportKind::kLocal, 4);
  std::vector<absl::Status> refused(4);
  world.Run([&](int rank, Transport* t) {
    RingCollectives ring(t, CollectiveOptions{Env::Default()});
    TrainOptions o;
    o.env = Env::Default();
    o.show_progress = false;
    o.restore_dir = StepDir(root, 20);
    refused[static_cast<size_t>(rank)] = RunTraining(plain, *data_, ring, o).status();
    return absl::OkStatus();
  });
  EXPECT_EQ(refused[0].code(), absl::StatusCode::kFailedPrecondition) << refused[0];
  EXPECT_NE(refused[0].message().find("2 islands"), std::string::npos) << refused[0];
}

TEST(IslandsConfigTest, EverythingTheWorldDoesAtOnceIsOnOuterSteps) {
  auto problems = [](const std::vector<std::string>& sets) {
    config::JobConfig c =
        *LoadConfig(Env::Default(), SHARDLINE_SOURCE_DIR "/deploy/configs/fmnist_mlp.textproto", {});
    for (const std::string& s : sets) EXPECT_TRUE(ApplyOverride(s, &c).ok()) << s;
    return std::string(ValidateConfig(c).message());
  };
  const std::vector<std::string> ok = {"runtime.num_workers=4", "collective.islands=2",
                                       "checkpoint.memory_every_steps=0", "collective.diloco.inner_steps=10",
                                       "train.eval_every=20", "checkpoint.every_steps=25"};
  EXPECT_NE(problems(ok).find("checkpoint.every_steps"), std::string::npos);
  EXPECT_EQ(problems(ok).find("train.eval_every"), std::string::npos);
  EXPECT_NE(problems({"runtime.num_workers=4", "collective.islands=3"}).find("collective.islands"), std::string::npos);
  // In-memory snapshots too are taken at outer steps only.
  EXPECT_NE(problems({"runtime.num_workers=4", "collective.islands=2", "collective.diloco.inner_steps=30"})
                .find("checkpoint.memory_every_steps"),
            std::string::npos);
  EXPECT_EQ(problems({"runtime.num_workers=4", "collective.islands=2", "collective.diloco.inner_steps=20",
                      "checkpoint.memory_every_steps=100", "train.eval_every=0", "checkpoint.every_steps=0"}),
            "");
  // collective.diloco on one island: the outer step alone (Lookahead),
  // with the same rules.
  EXPECT_NE(problems({"collective.diloco.inner_steps=5"}).find("train.eval_every"), std::string::npos);
  EXPECT_EQ(problems({"collective.diloco.inner_steps=5", "checkpoint.memory_every_steps=0", "train.eval_every=0",
                      "checkpoint.every_steps=0"}),
            "");
  // runtime.min_islands: whole islands, of a job of islands; min_workers not.
  const std::vector<std::string> two = {"runtime.num_workers=4", "collective.islands=2",
                                        "checkpoint.memory_every_steps=0"};
  auto with = [&](const std::string& set) {
    std::vector<std::string> sets = two;
    sets.push_back(set);
    return problems(sets);
  };
  EXPECT_EQ(with("runtime.min_islands=1").find("runtime.min_islands"), std::string::npos);
  EXPECT_NE(with("runtime.min_islands=3").find("runtime.min_islands"), std::string::npos);
  EXPECT_NE(with("runtime.min_workers=2").find("runtime.min_islands"), std::string::npos);
  EXPECT_NE(problems({"runtime.min_islands=1"}).find("runtime.min_islands"), std::string::npos);
  EXPECT_NE(problems({"runtime.num_workers=4", "collective.islands=2", "checkpoint.memory_every_steps=0",
                      "collective.diloco.outer_momentum=1"})
                .find("collective.diloco.outer_momentum"),
            std::string::npos);
}

}  // namespace
}  // namespace shardline
