#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <sys/file.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include <algorithm>
#include <cstdint>
#include <cstdlib>
#include <cstring>

#include "absl/strings/str_cat.h"
#include "common/platform/env.h"
#include "common/platform/status_payload.h"
#include "common/platform/status_macros.h"

namespace shardline {
namespace {

absl::Status PosixErrorOf(const std::string& context, int err);

absl::Status PosixError(const std::string& context, int err) {
  return WithIntPayload(PosixErrorOf(context, err), kErrnoPayloadUrl, err);
}

absl::Status PosixErrorOf(const std::string& context, int err) {
  std::string msg = absl::StrCat(context, ": ", strerror(err));
  switch (err) {
    case ENOENT:
      return absl::NotFoundError(msg);
    case EACCES:
    case EPERM:
      return absl::PermissionDeniedError(msg);
    case ENOSPC:
    case EDQUOT:
      return absl::ResourceExhaustedError(msg);
    case EROFS:
      // Not a resource that frees up: the operator must remount or move the
      // workdir, so no retry.
      return absl::FailedPreconditionError(msg);
    default:
      return absl::InternalError(msg);
  }
}

const char* FileKind(mode_t mode) {
  if (S_ISDIR(mode)) return "a directory";
  if (S_ISFIFO(mode)) return "a FIFO";
  if (S_ISCHR(mode)) return "a character device";
  if (S_ISBLK(mode)) return "a block device";
  if (S_ISSOCK(mode)) return "a socket";
  return "not a regular file";
}

// Opens `path` for reading if it is a regular file. O_NONBLOCK so that a
// FIFO does not block open() until a writer comes (it is refused next);
// on a regular file the flag changes nothing.
absl::StatusOr<int> OpenRegularForRead(const std::string& path, struct stat* st) {
  const int fd = open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NONBLOCK | O_NOCTTY);
  if (fd < 0) return PosixError(absl::StrCat("open ", path), errno);
  if (fstat(fd, st) != 0) {
    const int err = errno;
    close(fd);
    return PosixError(absl::StrCat("stat ", path), err);
  }
  if (!S_ISREG(st->st_mode)) {
    close(fd);
    return absl::FailedPreconditionError(
        absl::StrCat(path, " is ", FileKind(st->st_mode), ", not a regular file; give a file's path"));
  }
  return fd;
}

// Closes *fd unless it is already closed (-1), and marks it closed.
absl::Status CloseOnce(const std::string& path, int* fd) {
  const int f = *fd;
  *fd = -1;
  if (f >= 0 && close(f) != 0) return PosixError(absl::StrCat("close ", path), errno);
  return absl::OkStatus();
}

class PosixWritableFile : public WritableFile {
 public:
  PosixWritableFile(std::string path, int fd) : path_(std::move(path)), fd_(fd) {}
  ~PosixWritableFile() override {
    if (fd_ >= 0) close(fd_);
  }

  absl::Status Append(absl::string_view data) override {
    const char* p = data.data();
    size_t left = data.size();
    while (left > 0) {
      ssize_t n = write(fd_, p, left);
      if (n < 0) {
        if (errno == EINTR) continue;
        return PosixError(absl::StrCat("write ", path_), errno);
      }
      p += n;
      left -= static_cast<size_t>(n);
    }
    return absl::OkStatus();
  }
  absl::Status Flush() override { return absl::OkStatus(); }  // unbuffered
  absl::Status Sync() override {
    if (fdatasync(fd_) != 0) return PosixError(absl::StrCat("fdatasync ", path_), errno);
    return absl::OkStatus();
  }
  absl::Status StartWriteback() override {
    // Only the range appended since the last call: older ranges are queued.
    const off_t end = lseek(fd_, 0, SEEK_CUR);
    if (end < 0) return PosixError(absl::StrCat("lseek ", path_), errno);
    if (end > written_back_ && sync_file_range(fd_, written_back_, end - written_back_, SYNC_FILE_RANGE_WRITE) != 0) {
      return PosixError(absl::StrCat("sync_file_range ", path_), errno);
    }
    written_back_ = end;
    return absl::OkStatus();
  }
  absl::Status Close() override { return CloseOnce(path_, &fd_); }

 private:
  std::string path_;
  int fd_;
  off_t written_back_ = 0;
};

// O_DIRECT writes. The last, unaligned append is padded to the alignment
// from a scratch block; Sync trims the file to its real size first.
class PosixUnbufferedFile : public WritableFile {
 public:
  PosixUnbufferedFile(std::string path, int fd) : path_(std::move(path)), fd_(fd) {}
  ~PosixUnbufferedFile() override {
    if (fd_ >= 0) close(fd_);
  }

  absl::Status Append(absl::string_view data) override {
    if (padded_) return absl::FailedPreconditionError(absl::StrCat(path_, ": append after the unaligned last one"));
    const size_t aligned = data.size() / kUnbufferedAlignment * kUnbufferedAlignment;
    if (aligned > 0) {
      if (reinterpret_cast<uintptr_t>(data.data()) % kUnbufferedAlignment != 0) {
        return absl::InvalidArgumentError(absl::StrCat(path_, ": unaligned memory for an unbuffered write"));
      }
      RETURN_IF_ERROR(WriteAll(data.data(), aligned));
    }
    if (aligned == data.size()) return absl::OkStatus();
    const size_t tail = data.size() - aligned;
    void* block = nullptr;
    if (posix_memalign(&block, kUnbufferedAlignment, kUnbufferedAlignment) != 0) {
      return absl::ResourceExhaustedError(absl::StrCat(path_, ": no memory for the last block"));
    }
    std::memset(block, 0, kUnbufferedAlignment);
    std::memcpy(block, data.data() + aligned, tail);
    absl::Status s = WriteAll(static_cast<const char*>(block), kUnbufferedAlignment);
    free(block);
    padded_ = true;
    size_ -= static_cast<off_t>(kUnbufferedAlignment - tail);
    return s;
  }
  absl::Status Flush() override { return absl::OkStatus(); }
  absl::Status Sync() override {
    if (padded_ && ftruncate(fd_, size_) != 0) return PosixError(absl::StrCat("truncate ", path_), errno);
    if (fdatasync(fd_) != 0) return PosixError(absl::StrCat("fdatasync ", path_), errno);
    return absl::OkStatus();
  }
  absl::Status Close() override { return CloseOnce(path_, &fd_); }

 private:
  absl::Status WriteAll(const char* p, size_t n) {
    while (n > 0) {
      const ssize_t w = pwrite(fd_, p, n, written_);
      if (w < 0) {
        if (errno == EINTR) continue;
        // Some file systems accept O_DIRECT at open and refuse the writes.
        if (errno == EINVAL) return absl::UnimplementedError(absl::StrCat("O_DIRECT writes to ", path_));
        return PosixError(absl::StrCat("write ", path_), errno);
      }
      p += w;
      n -= static_cast<size_t>(w);
      written_ += w;
      size_ += w;
    }
    return absl::OkStatus();
  }

  const std::string path_;
  int fd_;
  off_t written_ = 0;  // bytes on disk, padding included
  off_t size_ = 0;     // the file's real size
  bool padded_ = false;
};

class PosixRandomAccessFile : public RandomAccessFile {
 public:
  PosixRandomAccessFile(std::string path, int fd, int64_t size) : path_(std::move(path)), fd_(fd), size_(size) {}
  ~PosixRandomAccessFile() override { close(fd_); }
  int64_t size() const override { return size_; }
  void Prefetch(int64_t offset, int64_t n) override { posix_fadvise(fd_, offset, n, POSIX_FADV_WILLNEED); }

  absl::Status ReadExactly(int64_t offset, size_t n, char* dst) override {
    while (n > 0) {
      const ssize_t got = pread(fd_, dst, n, offset);
      if (got < 0) {
        if (errno == EINTR) continue;
        return PosixError(absl::StrCat("read ", path_), errno);
      }
      if (got == 0) return absl::DataLossError(absl::StrCat(path_, " ends at byte ", offset, " (truncated)"));
      dst += got;
      offset += got;
      n -= static_cast<size_t>(got);
    }
    return absl::OkStatus();
  }

 private:
  const std::string path_;
  const int fd_;
  const int64_t size_;
};

// flock: held per open file, so a second LockFile in the same process
// conflicts too (fcntl locks would not).
class PosixFileLock : public FileLock {
 public:
  explicit PosixFileLock(int fd) : fd_(fd) {}
  ~PosixFileLock() override { close(fd_); }  // closing releases the lock

 private:
  const int fd_;
};

class PosixMappedFile : public MappedFile {
 public:
  PosixMappedFile(void* base, size_t size) : base_(base), size_(size) {}
  ~PosixMappedFile() override {
    if (size_ > 0) munmap(base_, size_);
  }
  absl::string_view bytes() const override { return absl::string_view(static_cast<const char*>(base_), size_); }
  void Advise(Access access) const override {
    if (size_ == 0) return;
    const int advice = access == Access::kRandom       ? MADV_RANDOM
                       : access == Access::kSequential ? MADV_SEQUENTIAL
                                                       : MADV_NORMAL;
    madvise(base_, size_, advice);  // a hint: its failure changes nothing read
  }

 private:
  void* const base_;
  const size_t size_;
};

class PosixEnv : public Env {
 public:
  absl::StatusOr<std::unique_ptr<RandomAccessFile>> NewRandomAccessFile(const std::string& path) override {
    struct stat st;
    ASSIGN_OR_RETURN(const int fd, OpenRegularForRead(path, &st));
    return std::unique_ptr<RandomAccessFile>(new PosixRandomAccessFile(path, fd, st.st_size));
  }

  absl::StatusOr<std::unique_ptr<MappedFile>> MapFile(const std::string& path) override {
    struct stat st;
    ASSIGN_OR_RETURN(const int fd, OpenRegularForRead(path, &st));
    const size_t size = static_cast<size_t>(st.st_size);
    void* base = nullptr;
    if (size > 0) {
      base = mmap(nullptr, size, PROT_READ, MAP_PRIVATE, fd, 0);
      if (base == MAP_FAILED) {
        const int err = errno;
        close(fd);
        return PosixError(absl::StrCat("mmap ", path), err);
      }
    }
    close(fd);  // the mapping holds the file
    return std::unique_ptr<MappedFile>(new PosixMappedFile(base, size));
  }

  absl::StatusOr<std::string> ReadFile(const std::string& path, int64_t max_bytes) override {
    struct stat st;
    ASSIGN_OR_RETURN(const int fd, OpenRegularForRead(path, &st));
    if (st.st_size > max_bytes) {
      close(fd);
      return TooLargeError(path, st.st_size, max_bytes);
    }
    // Read straight into a buffer of the file's size (large reads, no
    // regrowing); keep reading in case the file grew meanwhile, up to the
    // bound.
    // One byte past the bound is read only to find a file over it.
    const size_t most = static_cast<size_t>(std::min<int64_t>(max_bytes, INT64_MAX - 1)) + 1;
    std::string out(static_cast<size_t>(st.st_size), '\0');
    size_t have = 0;
    char probe[4096];  // at the buffer's end: is there more? (no doubling just to find the end)
    for (;;) {
      const bool full = have == out.size();
      if (full && have == most) {
        close(fd);
        return TooLargeError(path, static_cast<int64_t>(have), max_bytes);
      }
      ssize_t n = full ? read(fd, probe, std::min(sizeof(probe), most - have)) : read(fd, &out[have], out.size() - have);
      if (full && n > 0) {  // the file grew: keep what came, and room for more
        out.resize(std::min(std::max<size_t>(out.size() * 2, 1 << 16), most));
        std::memcpy(&out[have], probe, static_cast<size_t>(n));
      }
      if (n < 0) {
        if (errno == EINTR) continue;
        int err = errno;
        close(fd);
        return PosixError(absl::StrCat("read ", path), err);
      }
      if (n == 0) break;
      have += static_cast<size_t>(n);
    }
    close(fd);
    out.resize(have);
    return out;
  }

  bool FileExists(const std::string& path) override { return access(path.c_str(), F_OK) == 0; }

  bool IsDirectory(const std::string& path) override {
    struct stat st;
    return stat(path.c_str(), &st) == 0 && S_ISDIR(st.st_mode);
  }

  absl::Status CreateDirs(const std::string& path) override {
    if (path.empty() || IsDirectory(path)) return absl::OkStatus();
    size_t slash = path.find_last_of('/');
    if (slash != std::string::npos && slash > 0) {
      absl::Status parent = CreateDirs(path.substr(0, slash));
      if (!parent.ok()) return parent;
    }
    if (mkdir(path.c_str(), 0755) != 0 && errno != EEXIST) {
      return PosixError(absl::StrCat("mkdir ", path), errno);
    }
    return absl::OkStatus();
  }

  absl::StatusOr<std::unique_ptr<WritableFile>> NewAppendableFile(
      const std::string& path) override {
    return Open(path, O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC);
  }

  absl::StatusOr<std::unique_ptr<WritableFile>> NewWritableFile(
      const std::string& path) override {
    return Open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC);
  }

  absl::StatusOr<std::unique_ptr<WritableFile>> NewUnbufferedFile(const std::string& path) override {
    const int fd = open(path.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC | O_DIRECT, 0644);
    if (fd < 0 && errno == EINVAL) return absl::UnimplementedError(absl::StrCat("O_DIRECT on ", path));
    if (fd < 0) return PosixError(absl::StrCat("open ", path), errno);
    return std::unique_ptr<WritableFile>(new PosixUnbufferedFile(path, fd));
  }

  absl::Status RenameFile(const std::string& from, const std::string& to) override {
    if (rename(from.c_str(), to.c_str()) != 0) {
      return PosixError(absl::StrCat("rename ", from, " to ", to), errno);
    }
    return absl::OkStatus();
  }

  absl::Status SyncDir(const std::string& dir) override {
    const int fd = open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (fd < 0) return PosixError(absl::StrCat("open directory ", dir), errno);
    const int rc = fsync(fd);
    const int err = errno;
    close(fd);
    if (rc != 0) return PosixError(absl::StrCat("fsync directory ", dir), err);
    return absl::OkStatus();
  }

  absl::StatusOr<std::vector<std::string>> GetChildren(const std::string& dir) override {
    DIR* d = opendir(dir.c_str());
    if (d == nullptr) return PosixError(absl::StrCat("list ", dir), errno);
    std::vector<std::string> out;
    while (dirent* e = readdir(d)) {
      const std::string name = e->d_name;
      if (name != "." && name != "..") out.push_back(name);
    }
    closedir(d);
    return out;
  }

  absl::StatusOr<int64_t> GetFileSize(const std::string& path) override {
    struct stat st;
    if (stat(path.c_str(), &st) != 0) return PosixError(absl::StrCat("stat ", path), errno);
    return static_cast<int64_t>(st.st_size);
  }

  absl::Status DeleteFile(const std::string& path) override {
    if (unlink(path.c_str()) != 0) return PosixError(absl::StrCat("delete ", path), errno);
    return absl::OkStatus();
  }

  absl::Status DeleteRecursively(const std::string& path) override {
    struct stat st;
    if (lstat(path.c_str(), &st) != 0) return errno == ENOENT ? absl::OkStatus() : PosixError(absl::StrCat("stat ", path), errno);
    if (S_ISDIR(st.st_mode)) {
      absl::StatusOr<std::vector<std::string>> children = GetChildren(path);
      if (!children.ok()) return children.status();
      for (const std::string& c : *children) {
        absl::Status s = DeleteRecursively(path + "/" + c);
        if (!s.ok()) return s;
      }
      if (rmdir(path.c_str()) != 0) return PosixError(absl::StrCat("remove directory ", path), errno);
      return absl::OkStatus();
    }
    return DeleteFile(path);
  }

  absl::StatusOr<std::unique_ptr<FileLock>> LockFile(const std::string& path) override {
    const int fd = open(path.c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0644);
    if (fd < 0) return PosixError(absl::StrCat("open ", path), errno);
    if (flock(fd, LOCK_EX | LOCK_NB) != 0) {
      const int err = errno;
      close(fd);
      if (err == EWOULDBLOCK) return absl::FailedPreconditionError(absl::StrCat(path, " is locked by another holder"));
      return PosixError(absl::StrCat("lock ", path), err);
    }
    return std::unique_ptr<FileLock>(new PosixFileLock(fd));
  }

  int64_t NowMicros() override {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return static_cast<int64_t>(ts.tv_sec) * 1000000 + ts.tv_nsec / 1000;
  }

  int64_t NowUnixMicros() override {
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    return static_cast<int64_t>(ts.tv_sec) * 1000000 + ts.tv_nsec / 1000;
  }

  void SleepForMicros(int64_t micros) override {
    if (micros > 0) usleep(static_cast<useconds_t>(micros));
  }

 private:
  absl::StatusOr<std::unique_ptr<WritableFile>> Open(const std::string& path, int flags) {
    int fd = open(path.c_str(), flags, 0644);
    if (fd < 0) return PosixError(absl::StrCat("open ", path), errno);
    return std::unique_ptr<WritableFile>(new PosixWritableFile(path, fd));
  }
};

}  // namespace

Env* Env::Default() {
  static Env* env = new PosixEnv();
  return env;
}

}  // namespace shardline
