// An Env whose files live in this process's memory (LevelDB's memenv): what
// a worker keeps of its in-memory snapshots (worker/checkpoint/
// memory_snapshots.h), in the same shard format - and with the same CRC
// checks - as the checkpoints on disk. Files are byte strings keyed by
// normalised path; a directory exists once created or once a file is under
// it. Durability calls (Sync, SyncDir) do nothing: nothing here survives the
// process. The clock and sleep are the real ones. Thread-safe.
//
//   MemEnv mem(env);
//   ASSIGN_OR_RETURN(WrittenShard w, WriteShard(&mem, "snap/step_000000000500", name, contents));
//   ASSIGN_OR_RETURN(std::string bytes, mem.ReadFile(w.path));   // send it to a peer
#ifndef SHARDLINE_COMMON_PLATFORM_MEM_ENV_H_
#define SHARDLINE_COMMON_PLATFORM_MEM_ENV_H_

#include <map>
#include <memory>
#include <set>
#include <string>
#include <vector>

#include "common/platform/env.h"
#include "common/platform/mutex.h"

namespace shardline {

class MemEnv : public Env {
 public:
  // `clock` (any Env: its clocks and sleeps are this one's) must outlive it.
  explicit MemEnv(Env* clock) : clock_(clock) {}

  absl::StatusOr<std::string> ReadFile(const std::string& path, int64_t max_bytes) override;
  absl::StatusOr<std::unique_ptr<RandomAccessFile>> NewRandomAccessFile(const std::string& path) override;
  // A snapshot of the contents, held in memory.
  absl::StatusOr<std::unique_ptr<MappedFile>> MapFile(const std::string& path) override;
  bool FileExists(const std::string& path) override;
  bool IsDirectory(const std::string& path) override;
  absl::Status CreateDirs(const std::string& path) override;
  absl::StatusOr<std::unique_ptr<WritableFile>> NewAppendableFile(const std::string& path) override;
  absl::StatusOr<std::unique_ptr<WritableFile>> NewWritableFile(const std::string& path) override;
  absl::Status RenameFile(const std::string& from, const std::string& to) override;
  absl::Status SyncDir(const std::string&) override { return absl::OkStatus(); }
  absl::StatusOr<std::vector<std::string>> GetChildren(const std::string& dir) override;
  absl::StatusOr<int64_t> GetFileSize(const std::string& path) override;
  absl::Status DeleteFile(const std::string& path) override;
  absl::Status DeleteRecursively(const std::string& path) override;
  absl::StatusOr<std::unique_ptr<FileLock>> LockFile(const std::string& path) override;
  int64_t NowMicros() override { return clock_->NowMicros(); }
  int64_t NowUnixMicros() override { return clock_->NowUnixMicros(); }
  void SleepForMicros(int64_t micros) override { clock_->SleepForMicros(micros); }

  // Stores `contents` at `path` in one step (a file received whole).
  void PutFile(const std::string& path, std::string contents);
  // Bytes held in all files.
  int64_t TotalBytes();

 private:
  Env* const clock_;
  class File;
  // The file's contents are shared with open handles; a rename or delete
  // leaves open handles reading what they opened.
  using Contents = std::shared_ptr<std::string>;
  static std::string Normal(const std::string& path);

  Mutex mu_;
  std::map<std::string, Contents> files_ ABSL_GUARDED_BY(mu_);
  std::set<std::string> dirs_ ABSL_GUARDED_BY(mu_);
  std::set<std::string> locks_ ABSL_GUARDED_BY(mu_);
};

}  // namespace shardline

#endif  // SHARDLINE_COMMON_PLATFORM_MEM_ENV_H_
