#include "common/observability/tensorboard_writer.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstdlib>

#include "absl/strings/match.h"
#include "proto/tensorboard.pb.h"

namespace shardline {
namespace {

TEST(TfRecordTest, FramingMatchesAnIndependentEncoder) {
  // From tests/observability/tensorboard_check.py's own CRC32C and masking.
  const std::string want("\x03\x00\x00\x00\x00\x00\x00\x00\xb0\x99\x49\x0e" "abc" "\x6e\x57\xf1\x21", 19);
  EXPECT_EQ(TfRecord("abc"), want);
}

TEST(TensorBoardWriterTest, WritesAVersionEventThenOneEventPerRecord) {
  const std::string dir = ::testing::TempDir() + "/tb_writer";
  std::system(("rm -rf '" + dir + "'").c_str());
  Env* env = Env::Default();
  auto writer = TensorBoardWriter::Open(env, dir);
  ASSERT_TRUE(writer.ok()) << writer.status();
  metrics::MetricRecord r;
  r.set_step(7);
  r.set_split(metrics::MetricRecord::train);
  r.set_loss(0.25f);
  r.set_lr(std::nanf(""));
  ASSERT_TRUE((*writer)->Write(r).ok());
  auto files = env->GetChildren(dir + "/train");
  ASSERT_TRUE(files.ok());
  ASSERT_EQ(files->size(), 1u);
  auto blob = env->ReadFile(dir + "/train/" + (*files)[0], kMaxDataFileBytes);
  ASSERT_TRUE(blob.ok());
  // Two records: the version event, then step 7.
  std::vector<tensorboard::Event> events;
  size_t at = 0;
  while (at < blob->size()) {
    uint64_t n = 0;
    for (int i = 7; i >= 0; --i) n = (n << 8) | static_cast<unsigned char>((*blob)[at + i]);
    tensorboard::Event e;
    ASSERT_TRUE(e.ParseFromString(blob->substr(at + 12, n)));
    events.push_back(e);
    at += 16 + n;
  }
  ASSERT_EQ(events.size(), 2u);
  EXPECT_EQ(events[0].file_version(), "brain.Event:2");
  EXPECT_EQ(events[1].step(), 7);
  ASSERT_EQ(events[1].summary().value_size(), 2);
  EXPECT_EQ(events[1].summary().value(0).tag(), "loss");
  EXPECT_EQ(events[1].summary().value(0).simple_value(), 0.25f);
  EXPECT_EQ(events[1].summary().value(1).tag(), "lr");
  EXPECT_TRUE(std::isnan(events[1].summary().value(1).simple_value()));
}

TEST(CsvMetricsWriterTest, HeaderOnceThenRowsWithEmptyCellsForUnsetFields) {
  const std::string path = ::testing::TempDir() + "/metrics_test.csv";
  std::remove(path.c_str());
  metrics::MetricRecord r;
  r.set_step(3);
  r.set_split(metrics::MetricRecord::eval);
  r.set_accuracy(0.5f);
  r.set_loss(INFINITY);
  for (int i = 0; i < 2; ++i) {  // a second writer (a restart) appends without a header
    auto w = CsvMetricsWriter::Open(Env::Default(), path);
    ASSERT_TRUE(w.ok());
    ASSERT_TRUE((*w)->Write(r).ok());
  }
  auto text = Env::Default()->ReadFile(path, kMaxDataFileBytes);
  ASSERT_TRUE(text.ok());
  // 9 cells set, one empty cell after each of the other fields.
  const int fields = metrics::MetricRecord::descriptor()->field_count();
  const std::string row = "3,eval,inf,,,,,,0.5" + std::string(static_cast<size_t>(fields - 9), ',') + "\n";
  EXPECT_EQ(*text, CsvMetricsWriter::Header() + "\n" + row + row);
}

// A numerics line's text and truth cells: as they are, a text quoted when
// it holds a comma or a quote.
TEST(CsvMetricsWriterTest, TextAndTruthCellsAreWrittenAndQuotedWhereNeeded) {
  const std::string path = ::testing::TempDir() + "/metrics_numerics_test.csv";
  std::remove(path.c_str());
  metrics::MetricRecord r;
  r.set_step(60);
  r.set_split(metrics::MetricRecord::numerics);
  r.set_fingerprint("0x00000000000000ab");
  r.set_kernels("OpenBLAS \"Haswell\" kernels, 1 thread");
  r.set_admitted(true);
  auto w = CsvMetricsWriter::Open(Env::Default(), path);
  ASSERT_TRUE(w.ok());
  ASSERT_TRUE((*w)->Write(r).ok());
  auto text = Env::Default()->ReadFile(path, kMaxDataFileBytes);
  ASSERT_TRUE(text.ok());
  EXPECT_TRUE(absl::StrContains(*text, ",0x00000000000000ab,\"OpenBLAS \"\"Haswell\"\" kernels, 1 thread\",,true\n"))
      << *text;
}

}  // namespace
}  // namespace shardline
