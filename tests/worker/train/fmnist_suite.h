// Test helper: a suite that trains on the real Fashion-MNIST data set
// (Debian's dataset-fashion-mnist), loaded once per suite, with short
// versions of the default job.
//
//   class MyTest : public FashionMnistSuite {};
//   TEST_F(MyTest, X) { RunTraining(ShortJob(8, 4, 4, {"data.global_batch_size=96"}), *data_, ...); }
#ifndef SHARDLINE_TESTS_WORKER_TRAIN_FMNIST_SUITE_H_
#define SHARDLINE_TESTS_WORKER_TRAIN_FMNIST_SUITE_H_

#include <gtest/gtest.h>

#include <functional>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "common/job/config.h"
#include "common/platform/env.h"
#include "worker/collective/local_transport.h"
#include "worker/collective/ring.h"
#include "worker/data/dataset.h"
#include "worker/model/gemm.h"
#include "worker/train/train_loop.h"

namespace shardline {

class FashionMnistSuite : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    SetBlasThreads(1);
    data_ = new TrainingData(*LoadFashionMnist(Env::Default(), "/usr/share/datasets/fashion-mnist"));
  }
  static void TearDownTestSuite() {
    delete data_;
    data_ = nullptr;
  }

  // The default job (deploy/configs/fmnist_mlp.textproto) cut to `steps`
  // steps, logging every `log_every` and evaluating every `eval_every`,
  // then `overrides` ("a.b=value") in order; each must apply and the result
  // validate, or the test fails.
  static config::JobConfig ShortJob(int steps, int log_every, int eval_every,
                                    const std::vector<std::string>& overrides) {
    config::JobConfig c =
        *LoadConfig(Env::Default(), SHARDLINE_SOURCE_DIR "/deploy/configs/fmnist_mlp.textproto", {});
    c.mutable_train()->set_total_steps(steps);
    c.mutable_train()->set_log_every(log_every);
    c.mutable_train()->set_eval_every(eval_every);
    for (const std::string& o : overrides) EXPECT_TRUE(ApplyOverride(o, &c).ok()) << o;
    EXPECT_TRUE(ValidateConfig(c).ok()) << ValidateConfig(c);
    return c;
  }

  // Trains `c` on `world` ranks in this process, each over its own ring of
  // an in-process fabric; `wrap(rank, ring)` may put a Collectives in front
  // of a rank's ring (null, or returning null: the ring itself). Every
  // rank's result, by rank.
  using Wrap = std::function<std::unique_ptr<Collectives>(int rank, Collectives* ring)>;
  static std::vector<absl::StatusOr<TrainResult>> TrainRanks(const config::JobConfig& c, int world,
                                                             const Wrap& wrap = nullptr) {
    LocalFabric fabric(world);
    std::vector<std::unique_ptr<Transport>> transports;
    for (int r = 0; r < world; ++r) transports.push_back(fabric.Connect(r));
    std::vector<absl::StatusOr<TrainResult>> results(static_cast<size_t>(world));
    std::vector<std::thread> threads;
    for (int r = 0; r < world; ++r) {
      threads.emplace_back([&, r] {
        CollectiveOptions o;
        o.env = Env::Default();
        o.timeout = absl::Seconds(60);
        RingCollectives ring(transports[static_cast<size_t>(r)].get(), o);
        std::unique_ptr<Collectives> front = wrap ? wrap(r, &ring) : nullptr;
        TrainOptions options;
        options.env = Env::Default();
        options.show_progress = false;
        results[static_cast<size_t>(r)] = RunTraining(c, *data_, front ? *front : ring, options);
      });
    }
    for (std::thread& t : threads) t.join();
    return results;
  }

  inline static TrainingData* data_ = nullptr;
};

}  // namespace shardline

#endif  // SHARDLINE_TESTS_WORKER_TRAIN_FMNIST_SUITE_H_
