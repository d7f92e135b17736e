#include "common/faults/slow_disk_env.h"
#include "absl/strings/numbers.h"
#include "absl/strings/ascii.h"

#include <cstdlib>
#include <utility>

namespace shardline {
namespace {

class SlowFile : public WritableFile {
 public:
  SlowFile(std::unique_ptr<WritableFile> file, SlowDiskEnv* env) : file_(std::move(file)), env_(env) {}
  absl::Status Append(absl::string_view data) override { return file_->Append(data); }
  absl::Status Flush() override { return file_->Flush(); }
  absl::Status Sync() override {
    env_->Delay();
    return file_->Sync();
  }
  absl::Status StartWriteback() override { return file_->StartWriteback(); }
  absl::Status Close() override { return file_->Close(); }

 private:
  std::unique_ptr<WritableFile> file_;
  SlowDiskEnv* env_;
};

}  // namespace

SlowDiskEnv::SlowDiskEnv(Env* target, std::string control_file)
    : EnvWrapper(target), control_file_(std::move(control_file)) {}

void SlowDiskEnv::Delay() {
  // A missing or unreadable file is no delay.
  const std::string text(absl::StripAsciiWhitespace(target()->ReadFile(control_file_, kMaxSmallFileBytes).value_or("")));
  int64_t ms = 0;
  if (absl::SimpleAtoi(text, &ms) && ms > 0) target()->SleepForMicros(ms * 1000);
}

absl::StatusOr<std::unique_ptr<WritableFile>> SlowDiskEnv::Wrap(absl::StatusOr<std::unique_ptr<WritableFile>> file) {
  if (!file.ok()) return file.status();
  return std::unique_ptr<WritableFile>(new SlowFile(std::move(*file), this));
}

absl::StatusOr<std::unique_ptr<WritableFile>> SlowDiskEnv::NewAppendableFile(const std::string& path) {
  return Wrap(target()->NewAppendableFile(path));
}
absl::StatusOr<std::unique_ptr<WritableFile>> SlowDiskEnv::NewWritableFile(const std::string& path) {
  return Wrap(target()->NewWritableFile(path));
}
absl::StatusOr<std::unique_ptr<WritableFile>> SlowDiskEnv::NewUnbufferedFile(const std::string& path) {
  return Wrap(target()->NewUnbufferedFile(path));
}

absl::Status SlowDiskEnv::SyncDir(const std::string& dir) {
  Delay();
  return target()->SyncDir(dir);
}

Env* DefaultEnvWithFaults() {
  static Env* env = [] {
    const char* control = std::getenv("SHARDLINE_SLOW_DISK_FILE");
    if (control == nullptr || *control == '\0') return Env::Default();
    return static_cast<Env*>(new SlowDiskEnv(Env::Default(), control));
  }();
  return env;
}

}  // namespace shardline
