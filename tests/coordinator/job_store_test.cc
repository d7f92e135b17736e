#include "coordinator/job_store.h"

#include <gtest/gtest.h>

#include <cstdlib>

#include "absl/strings/match.h"

namespace shardline {
namespace {

std::string FreshDir(const std::string& name) {
  const std::string dir = ::testing::TempDir() + "/job_store_" + name;
  std::system(("rm -rf '" + dir + "'").c_str());
  return dir;
}

TEST(JobStoreTest, SyncedWritesSurviveReopen) {
  const std::string dir = FreshDir("reopen");
  {
    auto store = JobStore::Open(Env::Default(), dir);
    ASSERT_TRUE(store.ok()) << store.status();
    ASSERT_TRUE((*store)->Put("generation", "7", /*sync=*/true).ok());
    ASSERT_TRUE((*store)->Put("gone", "x", true).ok());
    ASSERT_TRUE((*store)->Delete("gone", true).ok());
  }
  auto store = JobStore::Open(Env::Default(), dir);
  ASSERT_TRUE(store.ok()) << store.status();
  auto gen = (*store)->Get("generation");
  ASSERT_TRUE(gen.ok());
  ASSERT_TRUE(gen->has_value());
  EXPECT_EQ(**gen, "7");
  auto gone = (*store)->Get("gone");
  ASSERT_TRUE(gone.ok());
  EXPECT_FALSE(gone->has_value());
}

TEST(JobStoreTest, SecondOpenerIsRefusedNamingTheDirectory) {
  const std::string dir = FreshDir("locked");
  auto first = JobStore::Open(Env::Default(), dir);
  ASSERT_TRUE(first.ok());
  auto second = JobStore::Open(Env::Default(), dir);
  ASSERT_FALSE(second.ok());
  EXPECT_EQ(second.status().code(), absl::StatusCode::kFailedPrecondition) << second.status();
  EXPECT_TRUE(absl::StrContains(second.status().message(), dir)) << second.status();
}

}  // namespace
}  // namespace shardline
