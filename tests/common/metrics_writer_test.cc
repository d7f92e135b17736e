#include "common/metrics_writer.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstdlib>

namespace shardline {
namespace {

TEST(JsonLineTest, FormatsKeysInOrderAndEscapesStrings) {
  const std::string s = JsonLine()
                            .Int("step", 12)
                            .Str("split", "tr\"ain\n")
                            .Num("loss", 0.5)
                            .Num("nan", std::nan(""))
                            .ToString();
  EXPECT_EQ(s, "{\"step\":12,\"split\":\"tr\\\"ain\\n\",\"loss\":0.5,\"nan\":null}");
}

TEST(JsonLineTest, FloatsRoundTripExactly) {
  const float v = 0.1234567f;
  const std::string s = JsonLine().Num("x", v).ToString();
  const float back = std::strtof(s.c_str() + 5, nullptr);
  EXPECT_EQ(back, v);
}

TEST(MetricsWriterTest, AppendsLinesAcrossOpens) {
  const std::string path = ::testing::TempDir() + "/metrics_writer_test.jsonl";
  std::remove(path.c_str());
  Env* env = Env::Default();
  {
    auto w = MetricsWriter::Open(env, path);
    ASSERT_TRUE(w.ok());
    ASSERT_TRUE((*w)->Write(JsonLine().Int("step", 1)).ok());
  }
  {
    auto w = MetricsWriter::Open(env, path);
    ASSERT_TRUE(w.ok());
    ASSERT_TRUE((*w)->Write(JsonLine().Int("step", 2)).ok());
  }
  EXPECT_EQ(*env->ReadFile(path), "{\"step\":1}\n{\"step\":2}\n");
}

TEST(MetricsWriterTest, UnwritablePathIsAnErrorNamingIt) {
  auto w = MetricsWriter::Open(Env::Default(), "/nonexistent-dir/metrics.jsonl");
  ASSERT_FALSE(w.ok());
  EXPECT_NE(w.status().message().find("/nonexistent-dir/metrics.jsonl"), absl::string_view::npos);
}

}  // namespace
}  // namespace shardline
