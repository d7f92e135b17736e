// The one fault-injecting Env of the tests: the default Env (or another)
// with each fault switched on by the test that needs it. Off by default:
// a FaultEnv with nothing switched on is the Env it wraps.
//
//   FaultEnv env;                       // the real disk and clock
//   env.UseManualClock();               // NowMicros moves only by Advance / sleeps
//   env.StallDisk();                    // the next GetFileSize blocks ...
//   env.stalled().WaitForNotification();
//   env.ReleaseDisk();                  // ... until released
//   env.FailWrites(FaultEnv::kNoSpace); // every new file's Append fails
#ifndef SHARDLINE_TESTS_UTIL_FAULT_ENV_H_
#define SHARDLINE_TESTS_UTIL_FAULT_ENV_H_

#include <atomic>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "absl/time/time.h"
#include "common/platform/env_wrapper.h"
#include "common/platform/mutex.h"

namespace shardline {

class FaultEnv : public EnvWrapper {
 public:
  explicit FaultEnv(Env* base = Env::Default()) : EnvWrapper(base) {}

  // --- the clock ---
  // From now on NowMicros reads a clock that moves only by Advance and by
  // SleepForMicros (which returns at once, after calling on_sleep).
  void UseManualClock(int64_t start_micros = 1'000'000'000'000) {
    now_micros_ = start_micros;
    manual_clock_ = true;
  }
  void Advance(absl::Duration d) { now_micros_ += absl::ToInt64Microseconds(d); }
  void OnSleep(std::function<void()> hook) { on_sleep_ = std::move(hook); }  // before the clock is used
  int64_t NowMicros() override;
  void SleepForMicros(int64_t micros) override;

  // --- a stalled disk ---
  // After StallDisk, GetFileSize (a commit's first disk access) blocks
  // until ReleaseDisk; stalled() is notified when the first one does.
  void StallDisk() { stall_ = true; }
  Notification& stalled() { return stalled_; }
  void ReleaseDisk() { release_.Notify(); }
  absl::StatusOr<int64_t> GetFileSize(const std::string& path) override;

  // --- out of descriptors ---
  // The next `times` GetFileSize calls fail as a process out of file
  // descriptors does (EMFILE in the errno payload).
  void RunOutOfDescriptors(int times) { out_of_descriptors_ = times; }

  // --- failing writes ---
  enum class WriteFault { kNone, kNoSpace /* Append fails */, kSyncFails /* Sync fails */ };
  void FailWrites(WriteFault fault) { write_fault_ = fault; }
  // O_DIRECT accepted at open, every write refused (some file systems).
  void RefuseUnbufferedWrites() { refuse_unbuffered_ = true; }
  int unbuffered_opened() const { return unbuffered_opened_.load(); }
  absl::StatusOr<std::unique_ptr<WritableFile>> NewWritableFile(const std::string& path) override;
  absl::StatusOr<std::unique_ptr<WritableFile>> NewUnbufferedFile(const std::string& path) override;

  // --- what was read ---
  // Whole-file reads (ReadFile) of paths that contain `substring`.
  void CountReadsOf(std::string substring) { count_reads_of_ = std::move(substring); }
  int reads() const { return reads_.load(); }
  absl::StatusOr<std::string> ReadFile(const std::string& path, int64_t max_bytes) override;
  // Every ReadExactly and Prefetch on random-access files, in order.
  struct Access {
    bool prefetch;  // else a read
    int64_t offset, bytes;
  };
  void RecordAccesses() { record_accesses_ = true; }
  std::vector<Access> accesses();
  absl::StatusOr<std::unique_ptr<RandomAccessFile>> NewRandomAccessFile(const std::string& path) override;

 private:
  friend class RecordingFile;
  void Record(Access a);
  absl::StatusOr<std::unique_ptr<WritableFile>> Faulty(absl::StatusOr<std::unique_ptr<WritableFile>> f);

  std::atomic<int> out_of_descriptors_{0};
  std::atomic<bool> manual_clock_{false};
  std::atomic<int64_t> now_micros_{0};
  std::function<void()> on_sleep_;
  std::atomic<bool> stall_{false};
  Notification stalled_, release_;
  std::atomic<WriteFault> write_fault_{WriteFault::kNone};
  std::atomic<bool> refuse_unbuffered_{false};
  std::atomic<int> unbuffered_opened_{0};
  std::string count_reads_of_;
  std::atomic<int> reads_{0};
  std::atomic<bool> record_accesses_{false};
  Mutex mu_;
  std::vector<Access> accesses_ ABSL_GUARDED_BY(mu_);
};

}  // namespace shardline

#endif  // SHARDLINE_TESTS_UTIL_FAULT_ENV_H_
