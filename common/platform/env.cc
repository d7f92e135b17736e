// The Env's helpers that hold for every Env: atomic whole-file writes, the
// writable-directory probe, path names and error shapes (LevelDB keeps the
// same split: env.cc beside env_posix.cc). Nothing here touches a file but
// through the Env it is given.
#include <errno.h>
#include <unistd.h>

#include <cstdint>
#include <memory>
#include <string>

#include "absl/strings/str_cat.h"
#include "common/platform/env.h"
#include "common/platform/status_payload.h"

namespace shardline {

bool IsOutOfDescriptors(const absl::Status& status) {
  const int64_t err = IntPayload(status, kErrnoPayloadUrl);
  return err == EMFILE || err == ENFILE;
}

absl::Status TooLargeError(const std::string& path, int64_t size, int64_t max_bytes) {
  return absl::FailedPreconditionError(
      absl::StrCat(path, " holds ", size, " bytes or more; at most ", max_bytes, " are read from a file of its kind"));
}

std::string DirName(const std::string& path) {
  const size_t slash = path.find_last_of('/');
  return slash == std::string::npos ? "." : path.substr(0, slash);
}

std::string ExecutableDir() {
  char buf[4096];
  const ssize_t n = readlink("/proc/self/exe", buf, sizeof(buf) - 1);
  return n <= 0 ? "." : DirName(std::string(buf, static_cast<size_t>(n)));
}

absl::Status WriteFileAtomically(Env* env, const std::string& path, absl::string_view contents,
                                 bool durable) {
  const std::string tmp = path + ".tmp";
  absl::StatusOr<std::unique_ptr<WritableFile>> file = env->NewWritableFile(tmp);
  if (!file.ok()) return file.status();
  absl::Status s = (*file)->Append(contents);
  if (s.ok() && durable) s = (*file)->Sync();
  if (s.ok()) s = (*file)->Close();
  if (s.ok()) s = env->RenameFile(tmp, path);
  if (s.ok() && durable) s = env->SyncDir(DirName(path));
  if (!s.ok()) env->DeleteFile(tmp).IgnoreError();
  return s;
}

absl::Status CheckWritableDir(Env* env, const std::string& dir) {
  auto refuse = [&](const absl::Status& why) {
    return absl::FailedPreconditionError(absl::StrCat(dir, " is not writable: ", why.message()));
  };
  if (absl::Status s = env->CreateDirs(dir); !s.ok()) return refuse(s);
  const std::string probe = absl::StrCat(dir, "/.shardline-write-check-", getpid());
  absl::StatusOr<std::unique_ptr<WritableFile>> file = env->NewWritableFile(probe);
  if (!file.ok()) return refuse(file.status());
  absl::Status s = (*file)->Append("shardline checks it can write here\n");
  if (s.ok()) s = (*file)->Sync();
  const absl::Status closed = (*file)->Close();
  if (s.ok()) s = closed;
  const absl::Status removed = env->DeleteFile(probe);
  if (s.ok()) s = removed;
  return s.ok() ? absl::OkStatus() : refuse(s);
}

}  // namespace shardline
