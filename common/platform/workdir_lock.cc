#include "common/platform/workdir_lock.h"

#include <fcntl.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>

#include "absl/strings/ascii.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "common/platform/env.h"
#include "common/encoding/text_escape.h"
#include "common/platform/clock.h"

namespace shardline {
namespace {

std::string HostName() {
  char name[256] = {};
  gethostname(name, sizeof(name) - 1);
  return name;
}

// The holder's record in the lock file, or what is known without it.
std::string Holder(int fd) {
  char buf[512];
  const ssize_t n = pread(fd, buf, sizeof(buf) - 1, 0);
  const std::string text(absl::StripAsciiWhitespace(absl::string_view(buf, n > 0 ? static_cast<size_t>(n) : 0)));
  return text.empty() ? std::string("another process (it has not said which yet)") : EscapeControl(text, 400);
}

}  // namespace

absl::StatusOr<std::unique_ptr<WorkdirLock>> WorkdirLock::Acquire(Env* env, const std::string& dir,
                                                                  const std::string& owner) {
  if (absl::Status made = env->CreateDirs(dir); !made.ok()) {
    return absl::Status(made.code(), absl::StrCat("creating workdir ", dir, ": ", made.message()));
  }
  const std::string path = dir + "/LOCK";
  struct stat want;
  if (const char* inherited = std::getenv(kWorkdirLockFdEnvVar); inherited != nullptr) {
    int fd = -1;
    struct stat have;
    if (absl::SimpleAtoi(inherited, &fd) && fd >= 0 && fstat(fd, &have) == 0 && stat(path.c_str(), &want) == 0 &&
        have.st_dev == want.st_dev && have.st_ino == want.st_ino) {
      fcntl(fd, F_SETFD, FD_CLOEXEC);  // ours to use, not to pass on
      return std::unique_ptr<WorkdirLock>(new WorkdirLock(fd, /*owned=*/false));
    }
  }
  const int fd = open(path.c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0600);
  if (fd < 0) {
    return absl::FailedPreconditionError(absl::StrCat("cannot open ", path, ": ", strerror(errno)));
  }
  if (flock(fd, LOCK_EX | LOCK_NB) != 0) {
    const int err = errno;
    const std::string holder = Holder(fd);
    close(fd);
    if (err == EWOULDBLOCK) {
      return absl::FailedPreconditionError(
          absl::StrCat("workdir ", dir, " is in use by ", holder, "; nothing was changed"));
    }
    return absl::FailedPreconditionError(absl::StrCat("cannot lock ", path, ": ", strerror(err)));
  }
  const std::string record = absl::StrCat(owner, " (pid ", getpid(), " on host ", HostName(), ", since ",
                                          absl::FormatTime("%Y-%m-%d %H:%M:%S UTC", WallNow(env), absl::UTCTimeZone()),
                                          ")\n");
  if (ftruncate(fd, 0) != 0 || pwrite(fd, record.data(), record.size(), 0) != static_cast<ssize_t>(record.size())) {
    // The lock holds regardless; only the description of it is missing.
  }
  return std::unique_ptr<WorkdirLock>(new WorkdirLock(fd, /*owned=*/true));
}

WorkdirLock::~WorkdirLock() {
  if (owned_) {
    // Cleared first, so a later holder's reader never sees us named.
    if (ftruncate(fd_, 0) != 0) {
    }
  }
  close(fd_);
}

void WorkdirLock::ShareWithChildren() {
  fcntl(fd_, F_SETFD, 0);
  setenv(kWorkdirLockFdEnvVar, absl::StrCat(fd_).c_str(), 1);
}

}  // namespace shardline
