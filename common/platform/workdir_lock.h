// One owner per workdir: every command that writes a workdir (`shardline
// train`, `shardline launch`, the coordinator) holds DIR/LOCK, an flock
// taken before it changes anything, and a command that cannot take it
// changes nothing and names the holder. The lock dies with its process (no
// stale lock after a crash). `launch` hands its lock to the coordinator it
// starts: the descriptor is inherited, named by $SHARDLINE_WORKDIR_LOCK_FD.
//
//   ASSIGN_OR_RETURN(std::unique_ptr<WorkdirLock> lock, WorkdirLock::Acquire(env, workdir, "shardline train"));
//   ... write the workdir ...
#ifndef SHARDLINE_COMMON_PLATFORM_WORKDIR_LOCK_H_
#define SHARDLINE_COMMON_PLATFORM_WORKDIR_LOCK_H_

#include <memory>
#include <string>

#include "absl/status/statusor.h"
#include "common/platform/env.h"

namespace shardline {

// The environment variable naming an inherited lock descriptor.
inline constexpr char kWorkdirLockFdEnvVar[] = "SHARDLINE_WORKDIR_LOCK_FD";

class WorkdirLock {
 public:
  // Creates `dir` if it does not exist (and nothing else), then takes
  // `dir`/LOCK for `owner` (a command's name) and records in it the owner,
  // pid, host and time. If $SHARDLINE_WORKDIR_LOCK_FD names an open
  // descriptor of that very file, the lock is the parent's, held for us.
  // FAILED_PRECONDITION if another process holds it: "workdir DIR is in use
  // by <owner> (pid P on host H, since T)".
  static absl::StatusOr<std::unique_ptr<WorkdirLock>> Acquire(Env* env, const std::string& dir,
                                                              const std::string& owner);
  ~WorkdirLock();
  WorkdirLock(const WorkdirLock&) = delete;
  WorkdirLock& operator=(const WorkdirLock&) = delete;

  // Lets processes this one starts from now on inherit the lock (clears
  // close-on-exec and sets $SHARDLINE_WORKDIR_LOCK_FD in this process's
  // environment). For `launch` only.
  void ShareWithChildren();

 private:
  WorkdirLock(int fd, bool owned) : fd_(fd), owned_(owned) {}
  const int fd_;
  const bool owned_;  // false: inherited; the parent releases it
};

}  // namespace shardline

#endif  // SHARDLINE_COMMON_PLATFORM_WORKDIR_LOCK_H_
