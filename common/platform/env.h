// Env: every file, clock and sleep call goes through this interface, as in
// LevelDB, so tests can inject faults (disk full, fsync failure, crash before
// rename) and a fake clock. Env::Default() is the POSIX implementation and is
// thread-safe.
//
//   Env* env = Env::Default();
//   ASSIGN_OR_RETURN(std::string bytes, env->ReadFile(path));
//   ASSIGN_OR_RETURN(auto file, env->NewAppendableFile(workdir + "/metrics.jsonl"));
//   RETURN_IF_ERROR(file->Append(line));
#ifndef SHARDLINE_COMMON_PLATFORM_ENV_H_
#define SHARDLINE_COMMON_PLATFORM_ENV_H_

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/string_view.h"

namespace shardline {

// A file open for reading at any offset: pread, so several threads may read
// one file. Errors name the path.
class RandomAccessFile {
 public:
  virtual ~RandomAccessFile() = default;
  // The file's size when it was opened.
  virtual int64_t size() const = 0;
  // Reads bytes [offset, offset + n) into dst; kDataLoss if the file ends
  // before them.
  virtual absl::Status ReadExactly(int64_t offset, size_t n, char* dst) = 0;
  // A hint: start reading [offset, offset + n) from the device now, without
  // waiting (POSIX_FADV_WILLNEED), so later reads find it in the cache. The
  // default does nothing.
  virtual void Prefetch(int64_t offset, int64_t n) {}
};

// A file open for sequential writing. Not thread-safe. Errors name the path.
class WritableFile {
 public:
  virtual ~WritableFile() = default;
  virtual absl::Status Append(absl::string_view data) = 0;
  // Hands buffered data to the OS.
  virtual absl::Status Flush() = 0;
  // Makes the data durable (fdatasync).
  virtual absl::Status Sync() = 0;
  // A hint: start writing what was appended so far to the device without
  // waiting for it (RocksDB's bytes_per_sync), so the disk works while the
  // caller produces more and a later Sync has less left to wait for. Promises
  // nothing about durability. The default does nothing.
  virtual absl::Status StartWriteback() { return absl::OkStatus(); }
  virtual absl::Status Close() = 0;
};

// The alignment of NewUnbufferedFile's appends: offsets, sizes and memory.
inline constexpr size_t kUnbufferedAlignment = 4096;

// A file's bytes mapped read-only (mmap, MAP_PRIVATE), for a reader of a
// file larger than it wants to hold: the pages are the kernel's page cache,
// read on first touch and dropped under memory pressure, never the
// process's own memory. Unmapped when destroyed. The file must not be
// truncated meanwhile (shardline's files are replaced by rename, never
// rewritten in place).
class MappedFile {
 public:
  enum class Access { kNormal, kRandom, kSequential };
  virtual ~MappedFile() = default;
  virtual absl::string_view bytes() const = 0;
  // A hint: how the bytes will be read (madvise). kRandom stops the kernel
  // reading ahead around each page touched (for scattered reads of a file
  // larger than memory, 4 KiB from the disk per page rather than 128 KiB
  // and more). The default does nothing.
  virtual void Advise(Access access) const {}
};

// An exclusive lock on a file, held until this object is destroyed.
class FileLock {
 public:
  virtual ~FileLock() = default;
};

// Bounds for Env::ReadFile, by what a file holds (every whole-file read
// names one, so no input can grow memory without bound).
// Addresses, ids, tokens, certificates, markers and control files.
inline constexpr int64_t kMaxSmallFileBytes = int64_t{1} << 20;
// A job's config (text format).
inline constexpr int64_t kMaxConfigFileBytes = int64_t{16} << 20;
// A SentencePiece tokenizer (tokenizer.model): every read of one, and what
// the tokenizer helper accepts (worker/data/spm_protocol.h).
inline constexpr int64_t kMaxTokenizerFileBytes = int64_t{256} << 20;
// Data sets, traces and other files read whole into memory.
inline constexpr int64_t kMaxDataFileBytes = int64_t{4} << 30;

// The errno behind an Env error, as an integer payload (status_payload.h):
// code decides on it, never on the message.
inline constexpr char kErrnoPayloadUrl[] = "shardline/errno";
// True for an error of a process (EMFILE) or system (ENFILE) out of file
// descriptors: a flood of connections that may pass, worth a bounded retry.
bool IsOutOfDescriptors(const absl::Status& status);

class Env {
 public:
  virtual ~Env() = default;

  // The process-wide POSIX Env. Never destroyed.
  static Env* Default();

  // Reads the whole file. NotFound if it does not exist; FailedPrecondition
  // naming the path if it is not a regular file (a FIFO, a device: never
  // opened in a way that blocks or read without end) or holds more than
  // `max_bytes` (the kMax*FileBytes above, or a format's own bound).
  virtual absl::StatusOr<std::string> ReadFile(const std::string& path, int64_t max_bytes) = 0;
  // For reads of large files in pieces (checkpoint restore reads each block
  // straight into its destination). Regular files only, as ReadFile.
  virtual absl::StatusOr<std::unique_ptr<RandomAccessFile>> NewRandomAccessFile(const std::string& path) = 0;
  // The whole file mapped (MappedFile). Regular files only, as ReadFile.
  virtual absl::StatusOr<std::unique_ptr<MappedFile>> MapFile(const std::string& path) = 0;
  virtual bool FileExists(const std::string& path) = 0;
  virtual bool IsDirectory(const std::string& path) = 0;
  // Creates `path` and any missing parents (mkdir -p).
  virtual absl::Status CreateDirs(const std::string& path) = 0;
  // Opens for appending, creating the file if needed.
  virtual absl::StatusOr<std::unique_ptr<WritableFile>> NewAppendableFile(
      const std::string& path) = 0;
  // Creates or truncates.
  virtual absl::StatusOr<std::unique_ptr<WritableFile>> NewWritableFile(
      const std::string& path) = 0;
  // Creates or truncates a file whose writes bypass the page cache (O_DIRECT),
  // for large files written once: the data goes from the caller's memory to
  // the device with no copy into the cache. Every Append but the last must
  // pass a multiple of kUnbufferedAlignment bytes from memory aligned to it;
  // the last may be shorter (Sync trims the padding). kUnimplemented, from
  // here or from an Append, where the file system cannot (tmpfs): callers
  // fall back to NewWritableFile.
  virtual absl::StatusOr<std::unique_ptr<WritableFile>> NewUnbufferedFile(const std::string& path) {
    return absl::UnimplementedError(absl::StrCat("unbuffered writes to ", path));
  }
  virtual absl::Status RenameFile(const std::string& from, const std::string& to) = 0;
  // Makes the directory's entries (creations, renames) durable.
  virtual absl::Status SyncDir(const std::string& dir) = 0;
  // Names (not paths) of the entries of `dir`, without "." and "..".
  virtual absl::StatusOr<std::vector<std::string>> GetChildren(const std::string& dir) = 0;
  virtual absl::StatusOr<int64_t> GetFileSize(const std::string& path) = 0;
  virtual absl::Status DeleteFile(const std::string& path) = 0;
  // Deletes `path` and everything under it. OK if it does not exist.
  virtual absl::Status DeleteRecursively(const std::string& path) = 0;

  // Takes an exclusive advisory lock on `path` (created if missing), held
  // until the returned object is destroyed. FAILED_PRECONDITION if anyone,
  // in this process or another, holds it already.
  virtual absl::StatusOr<std::unique_ptr<FileLock>> LockFile(const std::string& path) = 0;

  // Monotonic clock in microseconds: for durations and deadlines.
  virtual int64_t NowMicros() = 0;
  // Wall clock, microseconds since the Unix epoch: for timestamps people
  // read, traces merged across hosts and gRPC deadlines (which gRPC takes
  // as wall-clock times); never for durations (it may jump).
  virtual int64_t NowUnixMicros() = 0;
  virtual void SleepForMicros(int64_t micros) = 0;
};

// The error ReadFile returns for a file of `size` bytes over `max_bytes`.
absl::Status TooLargeError(const std::string& path, int64_t size, int64_t max_bytes);

// The directory part of `path`: "a/b" for "a/b/c", "." for "c".
std::string DirName(const std::string& path);

// The directory of this process's executable (/proc/self/exe), where its
// sibling binaries are; "." if it cannot be read.
std::string ExecutableDir();

// Writes `contents` to `path` so readers see the old file or the whole new
// one, never a part: a temporary file in the same directory, then rename.
// With `durable`, the file is fsynced before the rename and the directory
// after it, so the new contents survive a crash once this returns.
absl::Status WriteFileAtomically(Env* env, const std::string& path, absl::string_view contents,
                                 bool durable = false);

// Creates `dir` if needed and checks that a file can be created, written,
// synced and removed in it; kFailedPrecondition naming `dir` and what
// failed otherwise. For finding a read-only or full checkpoint directory
// before training rather than at the first save after it.
absl::Status CheckWritableDir(Env* env, const std::string& dir);

}  // namespace shardline

#endif  // SHARDLINE_COMMON_PLATFORM_ENV_H_
