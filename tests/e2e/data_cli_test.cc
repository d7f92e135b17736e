// `shardline data austen` end to end: the real package file, a missing one,
// and a file that is not the corpus.
#include <string>

#include <gtest/gtest.h>

#include "absl/strings/match.h"
#include "common/platform/env.h"
#include "tests/e2e/e2e_util.h"
#include "tests/e2e/subprocess.h"
#include "tests/worker/data/rdata_writer.h"
#include "worker/data/austen.h"

namespace shardline {
namespace {

TEST(AustenTest, ShardlineDataAustenWritesTheCheckedFilesAndNamesAMissingOne) {
  const std::string dir = FreshDir("data_austen");
  Subprocess ok({BinPath("shardline"), "data", "austen", "--out", dir});
  ASSERT_EQ(ok.Wait(absl::Seconds(60)), 0) << ok.Output();
  EXPECT_TRUE(absl::StrContains(ok.Output(), kAustenTrainSha256)) << ok.Output();
  absl::StatusOr<std::string> val = Env::Default()->ReadFile(dir + "/val.txt", kMaxDataFileBytes);
  ASSERT_TRUE(val.ok());
  EXPECT_EQ(val->size(), 466854u);

  Subprocess missing({BinPath("shardline"), "data", "austen", "--out", dir + "/x", "--rdb", dir + "/nope.rdb"});
  EXPECT_EQ(missing.Wait(absl::Seconds(60)), 1);
  EXPECT_TRUE(absl::StrContains(missing.Output(), dir + "/nope.rdb")) << missing.Output();

  // Another file of character vectors is not the corpus: refused, nothing written.
  ASSERT_TRUE(WriteFileAtomically(Env::Default(), dir + "/other.rdb", Record(SerializeStrings({"EMMA", "x"}))).ok());
  Subprocess other({BinPath("shardline"), "data", "austen", "--out", dir + "/y", "--rdb", dir + "/other.rdb"});
  EXPECT_EQ(other.Wait(absl::Seconds(60)), 1);
  EXPECT_TRUE(absl::StrContains(other.Output(), "no novel titled")) << other.Output();
  EXPECT_FALSE(Env::Default()->FileExists(dir + "/y/train.txt"));
}

}  // namespace
}  // namespace shardline
