#include "coordinator/job_store.h"

#include <unistd.h>

#include <gtest/gtest.h>

#include <cstdlib>

#include "absl/cleanup/cleanup.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"

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

// Issue 62: a full disk ended the coordinator with INTERNAL from its store
// and no advice. On a 4 MiB tmpfs this test mounts (root only; removed
// after), filling the disk gives RESOURCE_EXHAUSTED naming the store and
// saying how to resume.
TEST(JobStoreTest, AFullDiskIsNamedWithWhatToDo) {
  if (geteuid() != 0) GTEST_SKIP() << "mounting a small tmpfs needs root";
  const std::string dir = FreshDir("full");
  ASSERT_EQ(std::system(("mkdir -p '" + dir + "' && mount -t tmpfs -o size=4m tmpfs '" + dir + "'").c_str()), 0);
  // Lazily: the store left open after its failed write holds files there until exit.
  auto unmount = absl::MakeCleanup([&] { std::system(("umount -l '" + dir + "'").c_str()); });
  absl::Status failed;
  {
    auto store = JobStore::Open(Env::Default(), dir + "/db");
    ASSERT_TRUE(store.ok()) << store.status();
    const std::string value(256 << 10, 'x');
    for (int i = 0; i < 100 && failed.ok(); ++i) failed = (*store)->Put(absl::StrCat("k", i), value, /*sync=*/true);
  }
  ASSERT_FALSE(failed.ok()) << "4 MiB held 25 MiB";
  EXPECT_EQ(failed.code(), absl::StatusCode::kResourceExhausted) << failed;
  EXPECT_TRUE(absl::StrContains(failed.message(), "the disk holding " + dir + "/db is full")) << failed;
  EXPECT_TRUE(absl::StrContains(failed.message(), "run the coordinator (or `shardline launch`) again")) << failed;
}

}  // namespace
}  // namespace shardline
