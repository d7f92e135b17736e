// The POSIX Env's reads: regular files only, never blocking in open() and
// never reading past a bound.
#include <sys/mount.h>
#include <sys/stat.h>
#include <unistd.h>

#include <string>

#include "absl/strings/match.h"
#include "common/platform/env.h"
#include "gtest/gtest.h"

namespace shardline {
namespace {

std::string TempDir() {
  char tmpl[] = "/tmp/posix_env_test.XXXXXX";
  return std::string(mkdtemp(tmpl));
}

TEST(PosixEnvTest, ReadsARegularFileWithinItsBound) {
  Env* env = Env::Default();
  const std::string dir = TempDir();
  ASSERT_TRUE(WriteFileAtomically(env, dir + "/f", "hello").ok());
  EXPECT_EQ(*env->ReadFile(dir + "/f", 5), "hello");
  absl::StatusOr<std::string> over = env->ReadFile(dir + "/f", 4);
  ASSERT_EQ(over.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_TRUE(absl::StrContains(over.status().message(), dir + "/f")) << over.status();
  ASSERT_TRUE(WriteFileAtomically(env, dir + "/empty", "").ok());
  EXPECT_EQ(*env->ReadFile(dir + "/empty", 0), "");
  EXPECT_EQ(env->ReadFile(dir + "/missing", 10).status().code(), absl::StatusCode::kNotFound);
  // Mapped: the same bytes, kept after the file is removed.
  absl::StatusOr<std::unique_ptr<MappedFile>> mapped = env->MapFile(dir + "/f");
  ASSERT_TRUE(mapped.ok()) << mapped.status();
  ASSERT_TRUE(env->DeleteFile(dir + "/f").ok());
  EXPECT_EQ((*mapped)->bytes(), "hello");
  EXPECT_EQ((*env->MapFile(dir + "/empty"))->bytes(), "");
  EXPECT_EQ(env->MapFile(dir + "/missing").status().code(), absl::StatusCode::kNotFound);
  ASSERT_TRUE(env->DeleteRecursively(dir).ok());
}

// /dev/zero would be read until memory runs out; a FIFO would block open()
// until a writer came. Both are refused at once, naming the path and kind.
TEST(PosixEnvTest, RefusesDevicesAndFifosAtOnce) {
  Env* env = Env::Default();
  const std::string dir = TempDir();
  const std::string fifo = dir + "/fifo";
  ASSERT_EQ(mkfifo(fifo.c_str(), 0600), 0);
  for (const std::string& path : {std::string("/dev/zero"), fifo, dir}) {
    absl::StatusOr<std::string> read = env->ReadFile(path, kMaxDataFileBytes);
    ASSERT_EQ(read.status().code(), absl::StatusCode::kFailedPrecondition) << path;
    EXPECT_TRUE(absl::StrContains(read.status().message(), path)) << read.status();
    EXPECT_TRUE(absl::StrContains(read.status().message(), "not a regular file")) << read.status();
    EXPECT_EQ(env->NewRandomAccessFile(path).status().code(), absl::StatusCode::kFailedPrecondition) << path;
    EXPECT_EQ(env->MapFile(path).status().code(), absl::StatusCode::kFailedPrecondition) << path;
  }
  EXPECT_TRUE(absl::StrContains(env->ReadFile(fifo, 10).status().message(), "a FIFO"));
  EXPECT_TRUE(absl::StrContains(env->ReadFile("/dev/zero", 10).status().message(), "a character device"));
  ASSERT_TRUE(env->DeleteRecursively(dir).ok());
}

// A read-only file system is not a full disk: nothing frees up by waiting,
// so it is FAILED_PRECONDITION, never RESOURCE_EXHAUSTED. (A read-only tmpfs
// the test mounts; it needs root.)
TEST(PosixEnvTest, AReadOnlyFileSystemIsAFailedPrecondition) {
  Env* env = Env::Default();
  const std::string dir = TempDir();
  if (mount("tmpfs", dir.c_str(), "tmpfs", MS_RDONLY, "size=1m") != 0) {
    rmdir(dir.c_str());
    GTEST_SKIP() << "cannot mount a tmpfs here (not root)";
  }
  absl::StatusOr<std::unique_ptr<WritableFile>> f = env->NewWritableFile(dir + "/x");
  umount2(dir.c_str(), MNT_DETACH);
  rmdir(dir.c_str());
  ASSERT_FALSE(f.ok());
  EXPECT_EQ(f.status().code(), absl::StatusCode::kFailedPrecondition) << f.status();
  EXPECT_TRUE(absl::StrContains(f.status().message(), "Read-only file system")) << f.status();
}

}  // namespace
}  // namespace shardline
