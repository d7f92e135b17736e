#include "common/platform/memory_limit.h"

#include <gtest/gtest.h>

#include "common/platform/mem_env.h"

namespace shardline {
namespace {

TEST(MemoryLimitTest, FindsTheMemoryControllerInVersionOneAndTwo) {
  int version = 0;
  EXPECT_EQ(MemoryCgroupPath("5:freezer:/\n4:memory:/process_api/fe79\n0::/\n", &version), "/process_api/fe79");
  EXPECT_EQ(version, 1);
  EXPECT_EQ(MemoryCgroupPath("3:cpu,memory:/a/b\n", &version), "/a/b");
  EXPECT_EQ(version, 1);
  EXPECT_EQ(MemoryCgroupPath("0::/user.slice/job\n", &version), "/user.slice/job");
  EXPECT_EQ(version, 2);
  EXPECT_EQ(MemoryCgroupPath("", &version), "");
}

TEST(MemoryLimitTest, ParsesLimitsAndMemAvailable) {
  EXPECT_EQ(ParseMemoryLimit("545259520\n"), 545259520);
  EXPECT_EQ(ParseMemoryLimit("max\n"), -1);
  EXPECT_EQ(ParseMemoryLimit("9223372036854771712\n"), -1);  // v1's "no limit"
  EXPECT_EQ(ParseMemoryLimit("garbage"), -1);
  EXPECT_EQ(ParseMemAvailable("MemTotal: 100 kB\nMemAvailable:   24000 kB\n"), 24000 * 1024);
  EXPECT_EQ(ParseMemAvailable("MemTotal: 100 kB\n"), -1);
}

// The tightest limit on the way up the hierarchy is the one that applies.
TEST(MemoryLimitTest, ReadsTheTightestLimitUpTheHierarchy) {
  MemEnv env(Env::Default());
  env.PutFile("/proc/self/cgroup", "4:memory:/jobs/w1\n");
  env.PutFile("/proc/meminfo", "MemAvailable: 1024 kB\n");
  env.PutFile("/sys/fs/cgroup/memory/memory.limit_in_bytes", "9223372036854771712\n");
  env.PutFile("/sys/fs/cgroup/memory/jobs/memory.limit_in_bytes", "2000000000\n");
  env.PutFile("/sys/fs/cgroup/memory/jobs/w1/memory.limit_in_bytes", "545259520\n");
  MemoryBound b = ReadMemoryBound(&env);
  EXPECT_EQ(b.cgroup_limit, 545259520);
  EXPECT_EQ(b.cgroup, "/sys/fs/cgroup/memory/jobs/w1/memory.limit_in_bytes");
  EXPECT_EQ(b.available, 1024 * 1024);
  env.PutFile("/sys/fs/cgroup/memory/jobs/memory.limit_in_bytes", "100000000\n");
  EXPECT_EQ(ReadMemoryBound(&env).cgroup_limit, 100000000);

  MemEnv v2(Env::Default());
  v2.PutFile("/proc/self/cgroup", "0::/job\n");
  v2.PutFile("/sys/fs/cgroup/job/memory.max", "max\n");
  EXPECT_EQ(ReadMemoryBound(&v2).cgroup_limit, -1);
  v2.PutFile("/sys/fs/cgroup/job/memory.max", "300000000\n");
  EXPECT_EQ(ReadMemoryBound(&v2).cgroup_limit, 300000000);
}

}  // namespace
}  // namespace shardline
