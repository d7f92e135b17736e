#include "coordinator/disk_writer.h"

#include <gtest/gtest.h>

#include <vector>

#include "common/platform/mutex.h"

namespace shardline {
namespace {

TEST(DiskWriterTest, RunsTasksInOrderOnItsOwnThreadAndDrainWaitsForThem) {
  DiskWriter writer({});
  Mutex mu;
  std::vector<int> ran;
  bool on_writer = true;
  for (int i = 0; i < 100; ++i) {
    ASSERT_TRUE(writer.Submit([&, i] {
      MutexLock lock(&mu);
      on_writer = on_writer && writer.OnWriterThread();
      ran.push_back(i);
    }));
  }
  writer.Drain();
  MutexLock lock(&mu);
  ASSERT_EQ(ran.size(), 100u);
  for (int i = 0; i < 100; ++i) EXPECT_EQ(ran[static_cast<size_t>(i)], i);
  EXPECT_TRUE(on_writer);
  EXPECT_FALSE(writer.OnWriterThread());
}

TEST(DiskWriterTest, AFullQueueRefusesAndTheDestructorRunsWhatIsQueued) {
  Notification release, started;
  int done = 0;
  {
    DiskWriter writer({/*max_queued=*/2});
    ASSERT_TRUE(writer.Submit([&] {
      started.Notify();
      release.WaitForNotification();  // a stalled disk
      ++done;
    }));
    started.WaitForNotification();
    EXPECT_TRUE(writer.Submit([&] { ++done; }));
    EXPECT_TRUE(writer.Submit([&] { ++done; }));
    EXPECT_FALSE(writer.Submit([&] { ++done; })) << "a third task queued behind a stalled one";
    release.Notify();
  }
  EXPECT_EQ(done, 3);
}

}  // namespace
}  // namespace shardline
