#include "common/observability/metrics_writer.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstdlib>
#include <fstream>

namespace shardline {
namespace {

metrics::MetricRecord Step(int step) {
  metrics::MetricRecord r;
  r.set_step(step);
  return r;
}

TEST(MetricRecordToJsonTest, KeysInFieldOrderAsTheFileHasAlwaysHadThem) {
  metrics::MetricRecord r;
  r.set_step(12);
  r.set_split(metrics::MetricRecord::train);
  r.set_loss(0.5f);
  r.set_lr(0);  // set fields print even when zero
  r.set_samples_per_second(1024);
  EXPECT_EQ(MetricRecordToJson(r), "{\"step\":12,\"split\":\"train\",\"loss\":0.5,\"lr\":0,\"samples_per_second\":1024}");
  metrics::MetricRecord e;
  e.set_step(30);
  e.set_split(metrics::MetricRecord::eval);
  e.set_loss(0.25f);
  e.set_accuracy(0.75f);
  e.set_train_seconds(2);
  EXPECT_EQ(MetricRecordToJson(e), "{\"step\":30,\"split\":\"eval\",\"loss\":0.25,\"accuracy\":0.75,\"train_seconds\":2}");
}

TEST(MetricRecordToJsonTest, NonFiniteNumbersAreNull) {
  metrics::MetricRecord r;
  r.set_step(1);
  r.set_loss(std::nanf(""));
  r.set_lr(0.5f);
  r.set_grad_norm(-INFINITY);
  EXPECT_EQ(MetricRecordToJson(r), "{\"step\":1,\"loss\":null,\"lr\":0.5,\"grad_norm\":null}");
}

TEST(MetricRecordToJsonTest, FloatsRoundTripExactly) {
  metrics::MetricRecord r;
  r.set_loss(0.1234567f);
  const std::string s = MetricRecordToJson(r);
  EXPECT_EQ(std::strtof(s.c_str() + 8, nullptr), 0.1234567f) << s;
}

TEST(MetricsWriterTest, AppendsLinesAcrossOpens) {
  const std::string path = ::testing::TempDir() + "/metrics_writer_test.jsonl";
  std::remove(path.c_str());
  Env* env = Env::Default();
  {
    auto w = MetricsWriter::Open(env, path);
    ASSERT_TRUE(w.ok());
    ASSERT_TRUE((*w)->Write(Step(1)).ok());
  }
  {
    auto w = MetricsWriter::Open(env, path);
    ASSERT_TRUE(w.ok());
    ASSERT_TRUE((*w)->Write(Step(2)).ok());
  }
  EXPECT_EQ(*env->ReadFile(path, kMaxDataFileBytes), "{\"step\":1}\n{\"step\":2}\n");
}

TEST(MetricsWriterTest, UnwritablePathIsAnErrorNamingIt) {
  auto w = MetricsWriter::Open(Env::Default(), "/nonexistent-dir/metrics.jsonl");
  ASSERT_FALSE(w.ok());
  EXPECT_NE(w.status().message().find("/nonexistent-dir/metrics.jsonl"), absl::string_view::npos);
}

}  // namespace
}  // namespace shardline

namespace shardline {
namespace {

TEST(ReadMetricRecordsTest, SkipsATornLastLineAndNamesAnyOtherBadLine) {
  const std::string path = ::testing::TempDir() + "/read_records.jsonl";
  {
    std::ofstream f(path);
    f << "{\"step\":1,\"split\":\"train\",\"loss\":2}\n{\"step\":2,\"split\":\"eval\",\"accuracy\":0.5}\n{\"step\":3,\"spl";
  }
  auto records = ReadMetricRecords(Env::Default(), path);
  ASSERT_TRUE(records.ok()) << records.status();
  ASSERT_EQ(records->size(), 2u);
  EXPECT_EQ((*records)[1].accuracy(), 0.5f);
  {
    std::ofstream f(path);
    f << "{\"step\":1}\nnot json\n{\"step\":3}\n";
  }
  records = ReadMetricRecords(Env::Default(), path);
  EXPECT_EQ(records.status().code(), absl::StatusCode::kDataLoss);
  EXPECT_NE(std::string(records.status().message()).find(path + ":2"), std::string::npos) << records.status();
}

}  // namespace
}  // namespace shardline
