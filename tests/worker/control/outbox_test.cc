#include "worker/control/outbox.h"

#include <thread>
#include <vector>

#include "gtest/gtest.h"

namespace shardline {
namespace {

metrics::MetricRecord Record(int step) {
  metrics::MetricRecord m;
  m.set_step(step);
  m.set_split(metrics::MetricRecord::train);
  return m;
}

TEST(OutboxTest, DrainMovesEverythingQueuedExactlyOnce) {
  Outbox outbox;
  ASSERT_TRUE(outbox.Write(Record(1)).ok());
  WrittenShard shard;
  shard.path = "/ckpt/step_00000002/shard-1-of-2.ckpt";
  shard.size = 123;
  shard.crc32c = 0xabcd;
  shard.best = true;
  shard.best_value = 0.5;
  ASSERT_TRUE(outbox.ShardSaved(2, 1, 2, shard).ok());

  coordinator::WorkerReport first;
  outbox.DrainInto(&first);
  ASSERT_EQ(first.metrics_size(), 1);
  EXPECT_EQ(first.metrics(0).step(), 1);
  ASSERT_EQ(first.saved_size(), 1);
  const coordinator::SavedShard& s = first.saved(0);
  EXPECT_EQ(s.step(), 2);
  EXPECT_EQ(s.world_size(), 2);
  EXPECT_EQ(s.file(), "shard-1-of-2.ckpt");  // the base name only: the coordinator knows the directory
  EXPECT_EQ(s.size(), 123);
  EXPECT_EQ(s.crc32c(), 0xabcdu);
  EXPECT_TRUE(s.best());
  EXPECT_EQ(s.best_value(), 0.5);

  coordinator::WorkerReport second;
  outbox.DrainInto(&second);
  EXPECT_EQ(second.metrics_size(), 0);
  EXPECT_EQ(second.saved_size(), 0);
}

TEST(OutboxTest, ConcurrentWritersAndADrainerLoseNothing) {
  Outbox outbox;
  constexpr int kPerWriter = 2000;
  std::vector<std::thread> writers;
  for (int w = 0; w < 2; ++w) {
    writers.emplace_back([&outbox, w] {
      for (int i = 0; i < kPerWriter; ++i) ASSERT_TRUE(outbox.Write(Record(w * kPerWriter + i)).ok());
    });
  }
  std::vector<int> seen(2 * kPerWriter, 0);
  int total = 0;
  auto drain = [&] {
    coordinator::WorkerReport r;
    outbox.DrainInto(&r);
    for (const metrics::MetricRecord& m : r.metrics()) ++seen[m.step()];
    total += r.metrics_size();
  };
  while (total < 2 * kPerWriter / 2) drain();
  for (std::thread& t : writers) t.join();
  drain();
  EXPECT_EQ(total, 2 * kPerWriter);
  for (int n : seen) EXPECT_EQ(n, 1);
}

}  // namespace
}  // namespace shardline
