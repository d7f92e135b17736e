#include "worker/data/inflate_cache.h"

#include <gtest/gtest.h>
#include <zlib.h>

#include <cstdlib>

#include "absl/strings/match.h"
#include "tests/util/fault_env.h"
#include "worker/data/dataset.h"

namespace shardline {
namespace {


std::string Fresh(const std::string& name) {
  const std::string dir = ::testing::TempDir() + "/inflate_cache_" + name;
  std::system(("rm -rf '" + dir + "'").c_str());
  return dir;
}

void WriteGzip(const std::string& path, const std::string& raw) {
  gzFile gz = gzopen(path.c_str(), "wb");
  ASSERT_NE(gz, nullptr);
  ASSERT_EQ(gzwrite(gz, raw.data(), static_cast<unsigned>(raw.size())), static_cast<int>(raw.size()));
  gzclose(gz);
}

std::vector<std::string> Children(const std::string& dir) {
  absl::StatusOr<std::vector<std::string>> c = Env::Default()->GetChildren(dir);
  return c.ok() ? *c : std::vector<std::string>{};
}

TEST(InflateCacheTest, TheSecondReadComesFromTheCopyAndADamagedCopyIsNeverUsed) {
  const std::string dir = Fresh("copy");
  ASSERT_TRUE(Env::Default()->CreateDirs(dir).ok());
  std::string raw;
  for (int i = 0; i < 100000; ++i) raw.push_back(static_cast<char>(i * 7));
  const std::string gz = dir + "/data.bin.gz";
  WriteGzip(gz, raw);
  const std::string cache = dir + "/cache";

  FaultEnv env;
  env.CountReadsOf(gz);
  absl::StatusOr<std::string> first = InflateCached(&env, gz, cache);
  ASSERT_TRUE(first.ok()) << first.status();
  EXPECT_EQ(*first, raw);
  const std::vector<std::string> copies = Children(cache);
  ASSERT_EQ(copies.size(), 1u) << "one copy, no temporary left";
  EXPECT_TRUE(absl::StartsWith(copies[0], "data.bin.")) << copies[0];

  EXPECT_EQ(env.reads(), 1);
  // Read from the copy: the same bytes. The source is read to checksum it
  // (a few ms), not inflated.
  absl::StatusOr<std::string> second = InflateCached(&env, gz, cache);
  ASSERT_TRUE(second.ok());
  EXPECT_EQ(*second, raw);
  EXPECT_EQ(env.reads(), 2);
  EXPECT_EQ(Children(cache).size(), 1u);

  // A flipped bit in the copy: not used; inflated again and rewritten.
  const std::string copy_path = cache + "/" + copies[0];
  std::string bytes = *Env::Default()->ReadFile(copy_path, kMaxDataFileBytes);
  bytes[bytes.size() / 2] ^= 1;
  ASSERT_TRUE(WriteFileAtomically(Env::Default(), copy_path, bytes).ok());
  absl::StatusOr<std::string> third = InflateCached(&env, gz, cache);
  ASSERT_TRUE(third.ok());
  EXPECT_EQ(*third, raw);
  EXPECT_NE(*Env::Default()->ReadFile(copy_path, kMaxDataFileBytes), bytes) << "the damaged copy was not replaced";

  // A changed source never matches the old copy.
  std::string other = raw;
  other[10] ^= 1;
  WriteGzip(gz, other);
  absl::StatusOr<std::string> changed = InflateCached(&env, gz, cache);
  ASSERT_TRUE(changed.ok());
  EXPECT_EQ(*changed, other);
  EXPECT_EQ(Children(cache).size(), 2u);
}

// Issue 34, finding 4: the copy was named by the source's size and gzip
// trailer only, so a source with one byte flipped inside it (same size,
// same trailer) trained silently from the good copy, while without the
// cache it fails. Now the copy is keyed by all the source's bytes: a
// damaged source fails the same way, cached or not.
TEST(InflateCacheTest, ASourceWithAByteFlippedInsideIsNeverServedFromTheCopy) {
  const std::string dir = Fresh("flipped");
  ASSERT_TRUE(Env::Default()->CreateDirs(dir).ok());
  std::string raw;
  for (int i = 0; i < 100000; ++i) raw.push_back(static_cast<char>((i * 131) ^ (i >> 5)));
  const std::string gz = dir + "/data.bin.gz";
  WriteGzip(gz, raw);
  const std::string cache = dir + "/cache";
  ASSERT_TRUE(InflateCached(Env::Default(), gz, cache).ok());
  std::string bytes = *Env::Default()->ReadFile(gz, kMaxDataFileBytes);
  bytes[bytes.size() / 2] ^= 0x10;  // the size and the trailer stay as they were
  ASSERT_TRUE(WriteFileAtomically(Env::Default(), gz, bytes).ok());
  for (const std::string& c : {std::string(), cache}) {
    absl::StatusOr<std::string> got = InflateCached(Env::Default(), gz, c);
    EXPECT_FALSE(got.ok() && *got == raw) << (c.empty() ? "uncached" : "cached") << ": the damaged source trained";
    if (!got.ok()) {
      EXPECT_TRUE(absl::StrContains(got.status().message(), gz)) << got.status();
    }
  }
}

TEST(InflateCacheTest, AnUnwritableCacheOnlyCostsTheInflateAndErrorsNameTheSource) {
  const std::string dir = Fresh("unwritable");
  ASSERT_TRUE(Env::Default()->CreateDirs(dir).ok());
  const std::string gz = dir + "/x.gz";
  WriteGzip(gz, "hello");
  // The cache "directory" is a file: no copy, same bytes.
  ASSERT_TRUE(WriteFileAtomically(Env::Default(), dir + "/file", "not a dir").ok());
  absl::StatusOr<std::string> got = InflateCached(Env::Default(), gz, dir + "/file");
  ASSERT_TRUE(got.ok()) << got.status();
  EXPECT_EQ(*got, "hello");
  // Not gzip: the error names the source, cached or not.
  ASSERT_TRUE(WriteFileAtomically(Env::Default(), dir + "/bad.gz", "plain text").ok());
  for (const std::string& cache : {std::string(), dir + "/cache"}) {
    absl::StatusOr<std::string> bad = InflateCached(Env::Default(), dir + "/bad.gz", cache);
    ASSERT_FALSE(bad.ok());
    EXPECT_TRUE(absl::StrContains(bad.status().message(), dir + "/bad.gz")) << bad.status();
  }
  config::DataConfig data;
  data.set_cache_dir("/x");
  EXPECT_EQ(InflateCacheDir(data), "/x");
  data.set_keep_inflated(false);
  EXPECT_EQ(InflateCacheDir(data), "");
}

TEST(InflateCacheTest, FashionMnistFromTheCopiesIsTheSameDataSet) {
  const std::string cache = Fresh("fmnist");
  const std::string data = "/usr/share/datasets/fashion-mnist";
  absl::StatusOr<TrainingData> plain = LoadFashionMnist(Env::Default(), data);
  absl::StatusOr<TrainingData> filling = LoadFashionMnist(Env::Default(), data, cache);
  absl::StatusOr<TrainingData> cached = LoadFashionMnist(Env::Default(), data, cache);
  ASSERT_TRUE(plain.ok() && filling.ok() && cached.ok());
  EXPECT_EQ(Children(cache).size(), 4u);
  EXPECT_EQ(cached->train.pixels, plain->train.pixels);
  EXPECT_EQ(cached->train.labels, plain->train.labels);
  EXPECT_EQ(cached->test.pixels, plain->test.pixels);
  EXPECT_EQ(cached->test.labels, plain->test.labels);
}

}  // namespace
}  // namespace shardline
