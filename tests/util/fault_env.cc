#include "tests/util/fault_env.h"

#include <cerrno>

#include "absl/strings/str_cat.h"
#include "common/platform/status_payload.h"

#include <thread>
#include <utility>

#include "absl/strings/match.h"
#include "common/platform/status_macros.h"

namespace shardline {

int64_t FaultEnv::NowMicros() { return manual_clock_.load() ? now_micros_.load() : EnvWrapper::NowMicros(); }

void FaultEnv::SleepForMicros(int64_t micros) {
  if (!manual_clock_.load()) return EnvWrapper::SleepForMicros(micros);
  now_micros_ += micros;
  if (on_sleep_) on_sleep_();
  std::this_thread::yield();
}

absl::StatusOr<int64_t> FaultEnv::GetFileSize(const std::string& path) {
  if (stall_.load()) {
    if (!stalled_.HasBeenNotified()) stalled_.Notify();
    release_.WaitForNotification();
  }
  if (out_of_descriptors_.load() > 0) {
    --out_of_descriptors_;
    return WithIntPayload(absl::InternalError(absl::StrCat("stat ", path, ": Too many open files")), kErrnoPayloadUrl,
                          EMFILE);
  }
  return EnvWrapper::GetFileSize(path);
}

namespace {

// A file whose Append or Sync fails, as on a full or failing disk.
class FailingFile : public WritableFile {
 public:
  FailingFile(std::unique_ptr<WritableFile> base, FaultEnv::WriteFault fault)
      : base_(std::move(base)), fault_(fault) {}
  absl::Status Append(absl::string_view d) override {
    return fault_ == FaultEnv::WriteFault::kNoSpace ? absl::ResourceExhaustedError("No space left on device")
                                                    : base_->Append(d);
  }
  absl::Status Flush() override { return base_->Flush(); }
  absl::Status Sync() override { return absl::InternalError("fsync failed: Input/output error"); }
  absl::Status Close() override { return base_->Close(); }

 private:
  std::unique_ptr<WritableFile> base_;
  const FaultEnv::WriteFault fault_;
};

class RefusingFile : public WritableFile {
 public:
  absl::Status Append(absl::string_view) override { return absl::UnimplementedError("O_DIRECT writes"); }
  absl::Status Flush() override { return absl::OkStatus(); }
  absl::Status Sync() override { return absl::OkStatus(); }
  absl::Status Close() override { return absl::OkStatus(); }
};

}  // namespace

class RecordingFile : public RandomAccessFile {
 public:
  RecordingFile(std::unique_ptr<RandomAccessFile> base, FaultEnv* env) : base_(std::move(base)), env_(env) {}
  int64_t size() const override { return base_->size(); }
  absl::Status ReadExactly(int64_t offset, size_t n, char* dst) override {
    env_->Record({false, offset, static_cast<int64_t>(n)});
    return base_->ReadExactly(offset, n, dst);
  }
  void Prefetch(int64_t offset, int64_t n) override { env_->Record({true, offset, n}); }

 private:
  std::unique_ptr<RandomAccessFile> base_;
  FaultEnv* env_;
};

absl::StatusOr<std::unique_ptr<WritableFile>> FaultEnv::Faulty(absl::StatusOr<std::unique_ptr<WritableFile>> f) {
  const WriteFault fault = write_fault_.load();
  if (!f.ok() || fault == WriteFault::kNone) return f;
  return std::unique_ptr<WritableFile>(new FailingFile(std::move(*f), fault));
}

absl::StatusOr<std::unique_ptr<WritableFile>> FaultEnv::NewWritableFile(const std::string& path) {
  return Faulty(EnvWrapper::NewWritableFile(path));
}

absl::StatusOr<std::unique_ptr<WritableFile>> FaultEnv::NewUnbufferedFile(const std::string& path) {
  if (refuse_unbuffered_.load()) {
    ++unbuffered_opened_;
    return std::unique_ptr<WritableFile>(new RefusingFile());
  }
  return Faulty(EnvWrapper::NewUnbufferedFile(path));
}

absl::StatusOr<std::string> FaultEnv::ReadFile(const std::string& path, int64_t max_bytes) {
  if (!count_reads_of_.empty() && absl::StrContains(path, count_reads_of_)) ++reads_;
  return EnvWrapper::ReadFile(path, max_bytes);
}

absl::StatusOr<std::unique_ptr<RandomAccessFile>> FaultEnv::NewRandomAccessFile(const std::string& path) {
  ASSIGN_OR_RETURN(std::unique_ptr<RandomAccessFile> f, EnvWrapper::NewRandomAccessFile(path));
  if (!record_accesses_.load()) return f;
  return std::unique_ptr<RandomAccessFile>(new RecordingFile(std::move(f), this));
}

void FaultEnv::Record(Access a) {
  MutexLock lock(&mu_);
  accesses_.push_back(a);
}

std::vector<FaultEnv::Access> FaultEnv::accesses() {
  MutexLock lock(&mu_);
  return accesses_;
}

}  // namespace shardline
