#include "common/platform/mem_env.h"

#include <gtest/gtest.h>

#include "common/checkpoint/shard_file.h"

namespace shardline {
namespace {

TEST(MemEnvTest, FilesAndDirectoriesBehaveLikeAFileSystem) {
  MemEnv env(Env::Default());
  EXPECT_FALSE(env.FileExists("a/b"));
  ASSERT_TRUE(env.CreateDirs("a/b").ok());
  EXPECT_TRUE(env.IsDirectory("a") && env.IsDirectory("a/b"));
  ASSERT_TRUE(WriteFileAtomically(&env, "a/b/x", "hello", /*durable=*/true).ok());
  ASSERT_TRUE(WriteFileAtomically(&env, "a/y", "!").ok());
  EXPECT_EQ(*env.ReadFile("a//b/x", kMaxDataFileBytes), "hello");
  EXPECT_EQ(*env.GetFileSize("a/b/x"), 5);
  EXPECT_EQ(*env.GetChildren("a"), (std::vector<std::string>{"b", "y"}));
  auto f = env.NewAppendableFile("a/y");
  ASSERT_TRUE(f.ok());
  ASSERT_TRUE((*f)->Append("?").ok());
  EXPECT_EQ(*env.ReadFile("a/y", kMaxDataFileBytes), "!?");
  ASSERT_TRUE(env.RenameFile("a/y", "a/z").ok());
  EXPECT_FALSE(env.FileExists("a/y"));
  EXPECT_EQ(env.GetChildren("nowhere").status().code(), absl::StatusCode::kNotFound);
  EXPECT_EQ(env.ReadFile("a/y", kMaxDataFileBytes).status().code(), absl::StatusCode::kNotFound);
  ASSERT_TRUE(env.DeleteRecursively("a/b").ok());
  EXPECT_FALSE(env.FileExists("a/b/x"));
  EXPECT_EQ(env.TotalBytes(), 2);
  auto lock = env.LockFile("l");
  ASSERT_TRUE(lock.ok());
  EXPECT_EQ(env.LockFile("l").status().code(), absl::StatusCode::kFailedPrecondition);
  lock->reset();
  EXPECT_TRUE(env.LockFile("l").ok());
}

TEST(MemEnvTest, ShardFilesRoundTripAndAFlippedByteIsCaught) {
  MemEnv env(Env::Default());
  ShardContents c;
  c.header.set_step(500);
  c.header.set_world_size(2);
  c.header.set_rank(1);
  SetShardPieces({Range{10, 13}}, &c.header);
  c.header.set_total_size(13);
  c.buffers = {{"params", {1, 2, 3}}, {"momentum", {4, 5, 6}}};
  ShardWriteOptions small_blocks;
  small_blocks.block_size = 4;  // several block CRCs for a few floats
  auto w = WriteShard(&env, "snap/step_500", ShardFileName(1, 2), c, small_blocks);
  ASSERT_TRUE(w.ok()) << w.status();
  auto back = ReadShard(&env, w->path);
  ASSERT_TRUE(back.ok()) << back.status();
  EXPECT_EQ(back->buffers[1].values, (std::vector<float>{4, 5, 6}));
  std::string bytes = *env.ReadFile(w->path, kMaxDataFileBytes);
  bytes[bytes.size() - 2] ^= 1;
  env.PutFile(w->path, bytes);
  EXPECT_EQ(ReadShard(&env, w->path).status().code(), absl::StatusCode::kDataLoss);
}

}  // namespace
}  // namespace shardline
