#include "common/job/config.h"

#include <gtest/gtest.h>

#include "absl/strings/match.h"

namespace shardline {
namespace {

constexpr char kDefaultConfig[] = SHARDLINE_SOURCE_DIR "/deploy/configs/fmnist_mlp.textproto";

config::JobConfig Default() {
  absl::StatusOr<config::JobConfig> c = LoadConfig(Env::Default(), kDefaultConfig, {});
  EXPECT_TRUE(c.ok()) << c.status();
  return *c;
}

// Expects `status` to be an error whose message contains every `needle`.
void ExpectError(const absl::Status& status, std::initializer_list<const char*> needles) {
  ASSERT_FALSE(status.ok());
  for (const char* n : needles) {
    EXPECT_TRUE(absl::StrContains(status.message(), n))
        << "message '" << status.message() << "' lacks '" << n << "'";
  }
}

TEST(ConfigTest, DefaultJobLoadsAndValidates) {
  config::JobConfig c = Default();
  EXPECT_EQ(c.model().mlp().hidden_sizes_size(), 2);
  EXPECT_EQ(c.model().mlp().hidden_sizes(0), 256);
  EXPECT_EQ(c.data().global_batch_size(), 128);
  EXPECT_TRUE(c.optimizer().has_sgd());
  EXPECT_EQ(c.train().epochs(), 15);
}

TEST(ConfigTest, UnknownFieldInFileNamesFileLineAndField) {
  absl::StatusOr<config::JobConfig> c =
      ParseConfigText("model {\n  mlp {\n  hidden_sizes: 3\n  widht: 4\n}\n}\n", "my.textproto");
  ExpectError(c.status(), {"my.textproto:4:", "widht"});
}

TEST(ConfigTest, MissingConfigFileIsNotFoundNamingPath) {
  absl::StatusOr<config::JobConfig> c = LoadConfig(Env::Default(), "/nonexistent/job.textproto", {});
  EXPECT_EQ(c.status().code(), absl::StatusCode::kNotFound);
  ExpectError(c.status(), {"/nonexistent/job.textproto"});
}

TEST(ConfigTest, OverridesScalarsListsEnumsAndMessages) {
  config::JobConfig c = Default();
  ASSERT_TRUE(ApplyOverride("data.global_batch_size=256", &c).ok());
  ASSERT_TRUE(ApplyOverride("model.mlp.hidden_sizes=512,64,32", &c).ok());
  ASSERT_TRUE(ApplyOverride("model.mlp.activation=tanh", &c).ok());
  ASSERT_TRUE(ApplyOverride("schedule.base_lr=0.003", &c).ok());
  ASSERT_TRUE(ApplyOverride("data.dir=\"/tmp/data\"", &c).ok());
  EXPECT_EQ(c.data().global_batch_size(), 256);
  ASSERT_EQ(c.model().mlp().hidden_sizes_size(), 3);
  EXPECT_EQ(c.model().mlp().hidden_sizes(2), 32);
  EXPECT_EQ(c.model().mlp().activation(), config::TANH);
  EXPECT_FLOAT_EQ(c.schedule().base_lr(), 0.003f);
  EXPECT_EQ(c.data().dir(), "/tmp/data");

  ASSERT_TRUE(ApplyOverride("model.mlp.hidden_sizes=[8]", &c).ok());
  EXPECT_EQ(c.model().mlp().hidden_sizes_size(), 1);
}

TEST(ConfigTest, OverrideInsideOneofSelectsThatOptimizer) {
  config::JobConfig c = Default();
  ASSERT_TRUE(ApplyOverride("optimizer.adamw.b2=0.99", &c).ok());
  EXPECT_TRUE(c.optimizer().has_adamw());
  EXPECT_FALSE(c.optimizer().has_sgd());
  EXPECT_FLOAT_EQ(c.optimizer().adamw().b2(), 0.99f);

  ASSERT_TRUE(ApplyOverride("optimizer.sgd={momentum: 0.5 nesterov: true}", &c).ok());
  EXPECT_TRUE(c.optimizer().has_sgd());
  EXPECT_TRUE(c.optimizer().sgd().nesterov());
  EXPECT_FLOAT_EQ(c.optimizer().sgd().momentum(), 0.5f);
}

TEST(ConfigTest, BadOverridesNameTheFieldAndProblem) {
  config::JobConfig c = Default();
  ExpectError(ApplyOverride("model.mlp.hiden_sizes=4", &c), {"model.mlp.hiden_sizes", "hiden_sizes", "hidden_sizes"});
  ExpectError(ApplyOverride("data.global_batch_size=big", &c), {"data.global_batch_size", "big", "integer"});
  ExpectError(ApplyOverride("model.mlp.activation=swish", &c), {"model.mlp.activation", "RELU", "TANH"});
  ExpectError(ApplyOverride("seed.x=1", &c), {"seed", "not a message"});
  ExpectError(ApplyOverride("noequals", &c), {"a.b.c=value"});
}

TEST(ConfigTest, ValidationNamesEachBadField) {
  config::JobConfig c = Default();
  c.mutable_data()->set_global_batch_size(-5);
  c.mutable_schedule()->set_base_lr(0);
  ExpectError(ValidateConfig(c), {"data.global_batch_size: must be positive, got -5",
                                  "schedule.base_lr: must be positive"});
}

TEST(ConfigTest, AnyWorldSizeTakesAnyBatchWithAnExampleInEveryMicroBatch) {
  config::JobConfig c = Default();
  c.mutable_runtime()->set_num_workers(3);
  c.mutable_train()->set_grad_accum_steps(2);
  EXPECT_TRUE(ValidateConfig(c).ok());  // 128 over 3 x 2 micro-batches of 21 or 22
  c.mutable_runtime()->set_num_workers(5);
  EXPECT_TRUE(ValidateConfig(c).ok());
  c.mutable_data()->set_global_batch_size(9);
  ExpectError(ValidateConfig(c), {"data.global_batch_size", "9", "5 * 2 = 10", "empty micro-batch"});
  c.mutable_data()->set_global_batch_size(10);
  EXPECT_TRUE(ValidateConfig(c).ok());
}

TEST(ConfigTest, TotalStepsOverrideReplacesEpochs) {
  config::JobConfig c = Default();
  ASSERT_TRUE(ApplyOverride("train.total_steps=100", &c).ok());
  EXPECT_FALSE(c.train().has_epochs());
  EXPECT_EQ(c.train().total_steps(), 100);
  EXPECT_TRUE(ValidateConfig(c).ok());
  c.mutable_train()->clear_total_steps();
  ExpectError(ValidateConfig(c), {"config field train: set total_steps or epochs"});
  c.mutable_train()->set_epochs(-1);
  ExpectError(ValidateConfig(c), {"train.epochs: must be positive"});
}

TEST(ConfigTest, RangesOfOptimizerAndCheckpointFields) {
  config::JobConfig c = Default();
  c.mutable_optimizer()->mutable_adamw()->set_b1(1.0f);
  c.mutable_checkpoint()->set_best_metric("f1");
  c.mutable_model()->mutable_mlp()->add_hidden_sizes(0);
  c.mutable_collective()->set_bucket_cap_mb(-1);
  ExpectError(ValidateConfig(c), {"optimizer.adamw.b1: must be in [0, 1)", "checkpoint.best_metric",
                                  "model.mlp.hidden_sizes[2]", "collective.bucket_cap_mb"});
  c = Default();
  c.mutable_collective()->set_bucket_cap_mb(0);  // one bucket
  EXPECT_TRUE(ValidateConfig(c).ok());
}

TEST(ConfigTest, ModelIsOneFamilyChosenByItsFields) {
  config::JobConfig c = Default();
  ASSERT_TRUE(ApplyOverride("model.cnn.dense_sizes=64", &c).ok());
  EXPECT_TRUE(c.model().has_cnn());
  EXPECT_FALSE(c.model().has_mlp()) << "setting a cnn field replaces the mlp";
  ExpectError(ValidateConfig(c), {"model.cnn.conv: must list at least one"});
  ASSERT_TRUE(ApplyOverride("model.cnn={conv: [{channels: 8}, {channels: 0, kernel_size: 4}]}", &c).ok());
  ExpectError(ValidateConfig(c), {"model.cnn.conv[1].channels: must be positive", "model.cnn.conv[1].kernel_size"});
  c.mutable_model()->clear_kind();
  ExpectError(ValidateConfig(c), {"config field model: set model.mlp, model.cnn, model.gpt or model.vit"});
  absl::StatusOr<config::JobConfig> cnn =
      LoadConfig(Env::Default(), absl::StrCat(SHARDLINE_SOURCE_DIR, "/deploy/configs/fmnist_cnn.textproto"), {});
  ASSERT_TRUE(cnn.ok()) << cnn.status();
  EXPECT_EQ(cnn->model().cnn().conv_size(), 2);
}

// Issue 46: a config asking for absurd sizes ended `shardline sample` with
// bad_alloc; it is a config error naming the field.
TEST(ConfigTest, AbsurdModelSizesAreRefusedNamingTheField) {
  config::JobConfig c = Default();
  ASSERT_TRUE(ApplyOverride("model.gpt={context: 2000000000, layers: 1000, d_model: 1000000, heads: 1}", &c).ok());
  ExpectError(ValidateConfig(c), {"model.gpt.context: 2000000000 is over the largest allowed",
                                  "model.gpt.d_model: 1000000 is over the largest allowed"});
  // Every field in range, the whole too large.
  ASSERT_TRUE(ApplyOverride("model.gpt={context: 256, layers: 4096, d_model: 65536, heads: 8}", &c).ok());
  ExpectError(ValidateConfig(c), {"config field model.gpt: layers 4096 x d_model 65536"});
  ASSERT_TRUE(ApplyOverride("model.vit={patch: 4, layers: 2, d_model: 100000, heads: 1}", &c).ok());
  ExpectError(ValidateConfig(c), {"model.vit.d_model: 100000 is over the largest allowed"});
  ASSERT_TRUE(ApplyOverride("model.mlp={hidden_sizes: [300000], activation: RELU}", &c).ok());
  ExpectError(ValidateConfig(c), {"model.mlp.hidden_sizes[0]: 300000 is over the largest allowed"});
}

TEST(ConfigTest, MissingDataDirectoryIsNamed) {
  config::JobConfig c = Default();
  c.mutable_data()->set_dir("/nonexistent/fmnist");
  absl::Status s = CheckConfigPaths(Env::Default(), c);
  EXPECT_EQ(s.code(), absl::StatusCode::kNotFound);
  ExpectError(s, {"data.dir", "/nonexistent/fmnist"});
  absl::StatusOr<config::JobConfig> loaded =
      LoadConfig(Env::Default(), kDefaultConfig, {"data.dir=/nonexistent/fmnist"});
  ExpectError(loaded.status(), {"data.dir"});
}

// Issue 12 finding 8: a bad value given with --set was blamed on the file.
TEST(ConfigTest, ABadValueFromSetIsBlamedOnTheSetNotTheFile) {
  absl::StatusOr<config::JobConfig> c =
      LoadConfig(Env::Default(), kDefaultConfig, {"train.log_every=7", "data.global_batch_size=-5"});
  ASSERT_FALSE(c.ok());
  ExpectError(c.status(), {"invalid config: --set train.log_every=7 --set data.global_batch_size=-5 on ",
                           "data.global_batch_size: must be positive, got -5"});

  // A file that is itself invalid is still the one named.
  const std::string bad = ::testing::TempDir() + "/bad_job.textproto";
  std::string text = *Env::Default()->ReadFile(kDefaultConfig, kMaxDataFileBytes);
  const size_t at = text.find("global_batch_size:");
  ASSERT_NE(at, std::string::npos);
  text.replace(at, text.find('\n', at) - at, "global_batch_size: -3");
  ASSERT_TRUE(WriteFileAtomically(Env::Default(), bad, text).ok());
  c = LoadConfig(Env::Default(), bad, {"train.log_every=7"});
  ASSERT_FALSE(c.ok());
  const std::string named = "invalid config " + bad;
  ExpectError(c.status(), {named.c_str(), "got -3"});
}

TEST(ConfigTest, TextRoundTrip) {
  config::JobConfig c = Default();
  absl::StatusOr<config::JobConfig> back = ParseConfigText(ConfigToText(c), "roundtrip");
  ASSERT_TRUE(back.ok()) << back.status();
  EXPECT_EQ(back->SerializeAsString(), c.SerializeAsString());
}

}  // namespace
}  // namespace shardline
