// Test helper: a suite that trains on the real Fashion-MNIST data set
// (Debian's dataset-fashion-mnist), loaded once per suite, with short
// versions of the default job.
//
//   class MyTest : public FashionMnistSuite {};
//   TEST_F(MyTest, X) { RunTraining(ShortJob(8, 4, 4, {"data.global_batch_size=96"}), *data_, ...); }
#ifndef SHARDLINE_TESTS_WORKER_TRAIN_FMNIST_SUITE_H_
#define SHARDLINE_TESTS_WORKER_TRAIN_FMNIST_SUITE_H_

#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "common/job/config.h"
#include "common/platform/env.h"
#include "worker/data/dataset.h"
#include "worker/model/gemm.h"

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

  inline static TrainingData* data_ = nullptr;
};

}  // namespace shardline

#endif  // SHARDLINE_TESTS_WORKER_TRAIN_FMNIST_SUITE_H_
