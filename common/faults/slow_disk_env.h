// A disk that turns slow on demand, for fault-injection runs (the chaos
// harness, tests/chaos/): every Sync of a file and every SyncDir first
// sleeps for the number of milliseconds written in a control file, read at
// each call; while the file is absent or holds 0 the disk is as fast as the
// one underneath. Enabled in shardline-worker and shardline-coordinator by
// the environment variable SHARDLINE_SLOW_DISK_FILE=<control file>; never
// on otherwise.
#ifndef SHARDLINE_COMMON_FAULTS_SLOW_DISK_ENV_H_
#define SHARDLINE_COMMON_FAULTS_SLOW_DISK_ENV_H_

#include <memory>
#include <string>

#include "common/platform/env_wrapper.h"

namespace shardline {

class SlowDiskEnv : public EnvWrapper {
 public:
  SlowDiskEnv(Env* target, std::string control_file);

  absl::StatusOr<std::unique_ptr<WritableFile>> NewAppendableFile(const std::string& path) override;
  absl::StatusOr<std::unique_ptr<WritableFile>> NewWritableFile(const std::string& path) override;
  absl::StatusOr<std::unique_ptr<WritableFile>> NewUnbufferedFile(const std::string& path) override;
  absl::Status SyncDir(const std::string& dir) override;

  // Sleeps for the delay the control file asks for now.
  void Delay();

 private:
  absl::StatusOr<std::unique_ptr<WritableFile>> Wrap(absl::StatusOr<std::unique_ptr<WritableFile>> file);
  const std::string control_file_;
};

// Env::Default(), or a process-lifetime SlowDiskEnv over it if
// SHARDLINE_SLOW_DISK_FILE is set.
Env* DefaultEnvWithFaults();

}  // namespace shardline

#endif  // SHARDLINE_COMMON_FAULTS_SLOW_DISK_ENV_H_
