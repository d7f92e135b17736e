#include "worker/data/idx.h"

#include <gtest/gtest.h>
#include <zlib.h>

#include "absl/strings/match.h"
#include "worker/data/dataset.h"

namespace shardline {
namespace {

const std::string kDir = "/usr/share/datasets/fashion-mnist";

std::string TempPath(const std::string& name) { return ::testing::TempDir() + "/" + name; }

void WriteFile(const std::string& path, const std::string& bytes) {
  auto f = Env::Default()->NewWritableFile(path);
  ASSERT_TRUE(f.ok());
  ASSERT_TRUE((*f)->Append(bytes).ok());
  ASSERT_TRUE((*f)->Close().ok());
}

void WriteGzip(const std::string& path, const std::string& raw) {
  gzFile gz = gzopen(path.c_str(), "wb");
  ASSERT_NE(gz, nullptr);
  ASSERT_EQ(gzwrite(gz, raw.data(), static_cast<unsigned>(raw.size())), static_cast<int>(raw.size()));
  gzclose(gz);
}

std::string Be32(uint32_t v) {
  return std::string{static_cast<char>(v >> 24), static_cast<char>(v >> 16),
                     static_cast<char>(v >> 8), static_cast<char>(v)};
}

TEST(IdxTest, ReadsTheRealFashionMnist) {
  absl::StatusOr<TrainingData> data = LoadFashionMnist(Env::Default(), kDir);
  ASSERT_TRUE(data.ok()) << data.status();
  EXPECT_EQ(data->train.num_examples, 60000);
  EXPECT_EQ(data->test.num_examples, 10000);
  EXPECT_EQ(data->train.feature_dim, 784);
  EXPECT_EQ(data->train.height, 28);
  EXPECT_EQ(data->train.width, 28);
  EXPECT_EQ(data->train.pixels.size(), 60000u * 784u);
  std::vector<int> per_class(10);
  for (int32_t y : data->train.labels) per_class[static_cast<size_t>(y)]++;
  for (int c : per_class) EXPECT_EQ(c, 6000);  // Fashion-MNIST is balanced
  double mean = 0;
  std::vector<float> row(784);
  for (int64_t r = 0; r < data->train.num_examples; ++r) {
    data->train.CopyRows(r, 1, row.data());
    for (float v : row) mean += v;
  }
  EXPECT_NEAR(mean / static_cast<double>(data->train.pixels.size()), 0.0, 0.01);  // standardised
}

TEST(IdxTest, TruncatedGzipNamesTheFile) {
  std::string bytes = *Env::Default()->ReadFile(kDir + "/train-labels-idx1-ubyte.gz", kMaxDataFileBytes);
  const std::string path = TempPath("truncated-labels.gz");
  WriteFile(path, bytes.substr(0, bytes.size() / 2));
  absl::StatusOr<IdxArray> a = ReadIdxFile(Env::Default(), path);
  ASSERT_FALSE(a.ok());
  EXPECT_EQ(a.status().code(), absl::StatusCode::kDataLoss);
  EXPECT_TRUE(absl::StrContains(a.status().message(), path)) << a.status();
  EXPECT_TRUE(absl::StrContains(a.status().message(), "truncated")) << a.status();
}

// Issue 12 finding 8: a labels file whose magic number says 3 dimensions
// used to be reported as a size mismatch ("trailing bytes").
TEST(IdxTest, AMagicNumberWithTheWrongDimensionsIsReportedAsSuch) {
  std::string raw = *Gunzip(*Env::Default()->ReadFile(kDir + "/train-labels-idx1-ubyte.gz", kMaxDataFileBytes), "labels");
  raw[3] = 3;  // 0x00000801 -> 0x00000803
  absl::StatusOr<IdxArray> a = ParseIdx(raw, "labels.idx", /*want_dims=*/1);
  ASSERT_FALSE(a.ok());
  EXPECT_EQ(a.status().code(), absl::StatusCode::kDataLoss);
  EXPECT_TRUE(absl::StrContains(a.status().message(), "labels.idx: bad IDX magic number 0x00000803 (declares 3 "
                                                      "dimensions; this file must have 1)")) << a.status();
  EXPECT_FALSE(absl::StrContains(a.status().message(), "trailing")) << a.status();
}

TEST(IdxTest, CorruptGzipNamesTheFile) {
  std::string bytes = *Env::Default()->ReadFile(kDir + "/train-labels-idx1-ubyte.gz", kMaxDataFileBytes);
  for (size_t i = 100; i < 200; ++i) bytes[i] = static_cast<char>(bytes[i] ^ 0x5a);
  const std::string path = TempPath("corrupt-labels.gz");
  WriteFile(path, bytes);
  absl::StatusOr<IdxArray> a = ReadIdxFile(Env::Default(), path);
  ASSERT_FALSE(a.ok());
  EXPECT_TRUE(absl::StrContains(a.status().message(), path)) << a.status();
}

TEST(IdxTest, BadMagicNumberIsRejected) {
  const std::string path = TempPath("bad-magic.gz");
  WriteGzip(path, Be32(0x00000D01) + Be32(2) + "ab");  // 0x0D: float, not ubyte
  absl::StatusOr<IdxArray> a = ReadIdxFile(Env::Default(), path);
  ASSERT_FALSE(a.ok());
  EXPECT_TRUE(absl::StrContains(a.status().message(), "bad IDX magic number 0x00000d01"))
      << a.status();
  EXPECT_TRUE(absl::StrContains(a.status().message(), path));
}

TEST(IdxTest, PayloadSizeMustMatchHeader) {
  const std::string path = TempPath("short-payload.gz");
  WriteGzip(path, Be32(0x00000803) + Be32(2) + Be32(2) + Be32(2) + "1234567");  // needs 8
  absl::StatusOr<IdxArray> a = ReadIdxFile(Env::Default(), path);
  ASSERT_FALSE(a.ok());
  EXPECT_TRUE(absl::StrContains(a.status().message(), "7 bytes but the header's dimensions need 8"))
      << a.status();

  WriteGzip(path, Be32(0x00000801) + Be32(3) + "abc");
  a = ReadIdxFile(Env::Default(), path);
  ASSERT_TRUE(a.ok()) << a.status();
  EXPECT_EQ(a->dims, std::vector<int64_t>{3});
  EXPECT_EQ(a->data, "abc");
}

TEST(IdxTest, MismatchedImageAndLabelCountsAreNamed) {
  const std::string images = TempPath("img.gz"), labels = TempPath("lab.gz");
  WriteGzip(images, Be32(0x00000803) + Be32(2) + Be32(1) + Be32(1) + std::string(2, '\0'));
  WriteGzip(labels, Be32(0x00000801) + Be32(3) + std::string(3, '\0'));
  absl::StatusOr<Dataset> d = LoadIdxSplit(Env::Default(), images, labels, 10);
  ASSERT_FALSE(d.ok());
  EXPECT_TRUE(absl::StrContains(d.status().message(), "has 2 images but")) << d.status();
}

TEST(IdxTest, OutOfRangeLabelIsNamed) {
  const std::string images = TempPath("img1.gz"), labels = TempPath("lab1.gz");
  WriteGzip(images, Be32(0x00000803) + Be32(1) + Be32(1) + Be32(1) + std::string(1, '\0'));
  WriteGzip(labels, Be32(0x00000801) + Be32(1) + std::string(1, '\x0c'));
  absl::StatusOr<Dataset> d = LoadIdxSplit(Env::Default(), images, labels, 10);
  ASSERT_FALSE(d.ok());
  EXPECT_TRUE(absl::StrContains(d.status().message(), "label 12 of example 0")) << d.status();
}

TEST(IdxTest, MissingFileIsNotFoundNamingPath) {
  absl::StatusOr<TrainingData> d = LoadFashionMnist(Env::Default(), "/nonexistent/fmnist");
  ASSERT_FALSE(d.ok());
  EXPECT_EQ(d.status().code(), absl::StatusCode::kNotFound);
  EXPECT_TRUE(absl::StrContains(d.status().message(), "/nonexistent/fmnist/train-images-idx3-ubyte.gz"));
}

}  // namespace
}  // namespace shardline
