// An Env that forwards every call to another; subclass it and override what
// a test wants to break (LevelDB's EnvWrapper).
//
//   class NoSpaceEnv : public EnvWrapper {
//    public:
//     using EnvWrapper::EnvWrapper;
//     absl::StatusOr<std::unique_ptr<WritableFile>> NewWritableFile(const std::string&) override {
//       return absl::ResourceExhaustedError("disk full");
//     }
//   };
#ifndef SHARDLINE_COMMON_PLATFORM_ENV_WRAPPER_H_
#define SHARDLINE_COMMON_PLATFORM_ENV_WRAPPER_H_

#include "common/platform/env.h"

namespace shardline {

class EnvWrapper : public Env {
 public:
  explicit EnvWrapper(Env* target) : target_(target) {}
  Env* target() const { return target_; }

  absl::StatusOr<std::string> ReadFile(const std::string& p, int64_t max_bytes) override {
    return target_->ReadFile(p, max_bytes);
  }
  absl::StatusOr<std::unique_ptr<RandomAccessFile>> NewRandomAccessFile(const std::string& p) override {
    return target_->NewRandomAccessFile(p);
  }
  absl::StatusOr<std::unique_ptr<MappedFile>> MapFile(const std::string& p) override { return target_->MapFile(p); }
  bool FileExists(const std::string& p) override { return target_->FileExists(p); }
  bool IsDirectory(const std::string& p) override { return target_->IsDirectory(p); }
  absl::Status CreateDirs(const std::string& p) override { return target_->CreateDirs(p); }
  absl::StatusOr<std::unique_ptr<WritableFile>> NewAppendableFile(const std::string& p) override {
    return target_->NewAppendableFile(p);
  }
  absl::StatusOr<std::unique_ptr<WritableFile>> NewWritableFile(const std::string& p) override {
    return target_->NewWritableFile(p);
  }
  absl::StatusOr<std::unique_ptr<WritableFile>> NewUnbufferedFile(const std::string& p) override {
    return target_->NewUnbufferedFile(p);
  }
  absl::Status RenameFile(const std::string& f, const std::string& t) override { return target_->RenameFile(f, t); }
  absl::Status SyncDir(const std::string& d) override { return target_->SyncDir(d); }
  absl::StatusOr<std::vector<std::string>> GetChildren(const std::string& d) override { return target_->GetChildren(d); }
  absl::StatusOr<int64_t> GetFileSize(const std::string& p) override { return target_->GetFileSize(p); }
  absl::Status DeleteFile(const std::string& p) override { return target_->DeleteFile(p); }
  absl::Status DeleteRecursively(const std::string& p) override { return target_->DeleteRecursively(p); }
  absl::StatusOr<std::unique_ptr<FileLock>> LockFile(const std::string& p) override { return target_->LockFile(p); }
  int64_t NowMicros() override { return target_->NowMicros(); }
  int64_t NowUnixMicros() override { return target_->NowUnixMicros(); }
  void SleepForMicros(int64_t m) override { target_->SleepForMicros(m); }

 private:
  Env* target_;
};

}  // namespace shardline

#endif  // SHARDLINE_COMMON_PLATFORM_ENV_WRAPPER_H_
