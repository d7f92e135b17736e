// Text splits: windows and their targets, validation tiling, the batch of a
// step as a pure function of (seed, step) for every rank's slice, and every
// bad input named.
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "common/job/config.h"
#include "common/platform/env.h"
#include "worker/data/dataset.h"
#include "worker/data/pipeline.h"

namespace shardline {
namespace {

std::string Dir(const std::string& name) {
  const std::string dir = ::testing::TempDir() + "/text_data_" + name;
  EXPECT_TRUE(Env::Default()->DeleteRecursively(dir).ok());
  EXPECT_TRUE(Env::Default()->CreateDirs(dir).ok());
  return dir;
}

std::string Write(const std::string& dir, const std::string& name, const std::string& bytes) {
  const std::string path = dir + "/" + name;
  EXPECT_TRUE(WriteFileAtomically(Env::Default(), path, bytes).ok());
  return path;
}

TEST(TextDataTest, TrainingWindowsStartAtEveryOffsetAndValidationWindowsTile) {
  const std::string dir = Dir("windows");
  const std::string train = Write(dir, "train.txt", "abcdefghij");  // 10 bytes
  const std::string val = Write(dir, "val.txt", std::string("\x00\xff" "xyz12", 7));
  absl::StatusOr<TrainingData> data = LoadTextSplits(Env::Default(), train, val, /*context=*/3);
  ASSERT_TRUE(data.ok()) << data.status();
  EXPECT_EQ(data->train.num_examples, 7);  // windows of 4 bytes at offsets 0..6
  EXPECT_EQ(data->test.num_examples, 2);   // (7 - 1) / 3: offsets 0 and 3
  EXPECT_EQ(data->train.num_classes, 256);
  EXPECT_EQ(data->train.targets_per_example(), 3);
  BatchData b;
  const std::vector<int64_t> rows = {6, 0};
  ASSERT_TRUE(GatherBatch(data->train, rows, &b).ok());
  EXPECT_EQ(b.tokens, (std::vector<int32_t>{'g', 'h', 'i', 'a', 'b', 'c'}));
  EXPECT_EQ(b.y, (std::vector<int32_t>{'h', 'i', 'j', 'b', 'c', 'd'}));
  ASSERT_TRUE(GatherRange(data->test, 0, 2, &b).ok());
  // Bytes are tokens 0..255 (no sign extension), every byte predicted once.
  EXPECT_EQ(b.tokens, (std::vector<int32_t>{0, 255, 'x', 'y', 'z', '1'}));
  EXPECT_EQ(b.y, (std::vector<int32_t>{255, 'x', 'y', 'z', '1', '2'}));
}

// docs/models.md: whole windows only; the first byte and the last
// (S - 1) mod context are never predicted. The source names the file.
TEST(TextDataTest, ValidationScoresWholeWindowsOnlyAndNamesItsFile) {
  const std::string dir = Dir("whole_windows");
  const std::string train = Write(dir, "train.txt", "abcdefghij");
  for (const int size : {7, 8, 9, 10}) {
    const std::string val = Write(dir, "val.txt", std::string(static_cast<size_t>(size), 'v'));
    absl::StatusOr<TrainingData> data = LoadTextSplits(Env::Default(), train, val, /*context=*/3);
    ASSERT_TRUE(data.ok()) << data.status();
    const int64_t targets = data->test.num_examples * data->test.targets_per_example();
    EXPECT_EQ(targets, (size - 1) - (size - 1) % 3) << size;
    EXPECT_TRUE(absl::StrContains(data->test.source, "data.text.val_path " + val)) << data->test.source;
    EXPECT_TRUE(absl::StrContains(data->train.source, "data.text.train_path " + train)) << data->train.source;
  }
}

TEST(TextDataTest, TheBatchOfAStepIsAPureFunctionOfSeedAndStepForEveryRanksSlice) {
  const std::string dir = Dir("pure");
  std::string text;
  for (int i = 0; i < 5000; ++i) text.push_back(static_cast<char>('a' + (i * 7919) % 26));
  const std::string path = Write(dir, "t.txt", text);
  absl::StatusOr<TrainingData> data = LoadTextSplits(Env::Default(), path, path, 16);
  ASSERT_TRUE(data.ok());
  BatchPipeline one(data->train.num_examples, 12, 42), again(data->train.num_examples, 12, 42);
  std::vector<int64_t> whole, rank0, rank1, rank2, replay;
  for (int64_t step : {0, 1, 400, 401}) {
    one.GlobalBatch(step, &whole);
    again.GlobalBatch(step, &replay);
    EXPECT_EQ(whole, replay) << step;
    one.RankSlice(step, 0, 3, &rank0);
    one.RankSlice(step, 1, 3, &rank1);
    one.RankSlice(step, 2, 3, &rank2);
    std::vector<int64_t> joined = rank0;
    joined.insert(joined.end(), rank1.begin(), rank1.end());
    joined.insert(joined.end(), rank2.begin(), rank2.end());
    EXPECT_EQ(joined, whole) << step;
  }
  BatchPipeline other_seed(data->train.num_examples, 12, 43);
  other_seed.GlobalBatch(0, &replay);
  one.GlobalBatch(0, &whole);
  EXPECT_NE(whole, replay);
}

TEST(TextDataTest, AMissingEmptyOrShortFileIsNamed) {
  const std::string dir = Dir("bad");
  const std::string good = Write(dir, "good.txt", std::string(100, 'x'));
  const std::string empty = Write(dir, "empty.txt", "");
  const std::string short_one = Write(dir, "short.txt", "abc");
  struct Bad {
    std::string train, val, says;
  };
  for (const Bad& c : std::vector<Bad>{{dir + "/missing.txt", good, "missing.txt"},
                                       {good, dir + "/missing.txt", "data.text.val_path"},
                                       {empty, good, "is empty"},
                                       {good, short_one, "has 3 bytes"}}) {
    absl::StatusOr<TrainingData> data = LoadTextSplits(Env::Default(), c.train, c.val, 8);
    ASSERT_FALSE(data.ok()) << c.says;
    EXPECT_TRUE(absl::StrContains(data.status().message(), c.says)) << data.status();
  }
  absl::StatusOr<TrainingData> data = LoadTextSplits(Env::Default(), empty, good, 8);
  EXPECT_TRUE(absl::StrContains(data.status().message(), empty)) << data.status();
}

TEST(TextDataTest, TextNeedsAGptAndAGptNeedsText) {
  absl::StatusOr<config::JobConfig> text_mlp = ParseConfigText(
      "model { mlp { hidden_sizes: 8 } } data { text { train_path: 'a' val_path: 'b' } }", "t");
  ASSERT_TRUE(text_mlp.ok()) << text_mlp.status();
  absl::Status s = ValidateConfig(*text_mlp);
  EXPECT_TRUE(absl::StrContains(s.message(), "data.text")) << s;
  absl::StatusOr<config::JobConfig> gpt_images = ParseConfigText("model { gpt { } }", "t");
  ASSERT_TRUE(gpt_images.ok());
  s = ValidateConfig(*gpt_images);
  EXPECT_TRUE(absl::StrContains(s.message(), "model.gpt")) << s;
  absl::StatusOr<config::JobConfig> bad_heads =
      ParseConfigText("model { gpt { d_model: 10 heads: 4 } } data { text { train_path: 'a' val_path: 'b' } }", "t");
  ASSERT_TRUE(bad_heads.ok());
  s = ValidateConfig(*bad_heads);
  EXPECT_TRUE(absl::StrContains(s.message(), "model.gpt.heads")) << s;
  absl::StatusOr<config::JobConfig> fine =
      ParseConfigText("model { gpt { } } data { text { train_path: 'a' val_path: 'b' } } train { total_steps: 10 }", "t");
  ASSERT_TRUE(fine.ok());
  EXPECT_TRUE(ValidateConfig(*fine).ok()) << ValidateConfig(*fine).message();
}

}  // namespace
}  // namespace shardline
