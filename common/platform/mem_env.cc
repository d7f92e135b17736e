#include "common/platform/mem_env.h"

#include <cstring>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"

namespace shardline {
namespace {

class MemRandomAccessFile : public RandomAccessFile {
 public:
  MemRandomAccessFile(std::string path, std::shared_ptr<const std::string> data)
      : path_(std::move(path)), data_(std::move(data)) {}
  int64_t size() const override { return static_cast<int64_t>(data_->size()); }
  absl::Status ReadExactly(int64_t offset, size_t n, char* dst) override {
    if (offset < 0 || static_cast<size_t>(offset) + n > data_->size()) {
      return absl::DataLossError(absl::StrCat(path_, " ends at byte ", data_->size(), " (truncated)"));
    }
    std::memcpy(dst, data_->data() + offset, n);
    return absl::OkStatus();
  }

 private:
  const std::string path_;
  const std::shared_ptr<const std::string> data_;
};

class MemWritableFile : public WritableFile {
 public:
  explicit MemWritableFile(std::shared_ptr<std::string> data) : data_(std::move(data)) {}
  absl::Status Append(absl::string_view data) override {
    data_->append(data.data(), data.size());
    return absl::OkStatus();
  }
  absl::Status Flush() override { return absl::OkStatus(); }
  absl::Status Sync() override { return absl::OkStatus(); }
  absl::Status Close() override { return absl::OkStatus(); }

 private:
  std::shared_ptr<std::string> data_;
};

class MemLock : public FileLock {
 public:
  MemLock(Mutex* mu, std::set<std::string>* locks, std::string path) : mu_(mu), locks_(locks), path_(std::move(path)) {}
  ~MemLock() override {
    MutexLock lock(mu_);
    locks_->erase(path_);
  }

 private:
  Mutex* mu_;
  std::set<std::string>* locks_;
  std::string path_;
};

}  // namespace

std::string MemEnv::Normal(const std::string& path) {
  std::string out;
  for (char c : path) {
    if (c == '/' && !out.empty() && out.back() == '/') continue;
    out += c;
  }
  while (out.size() > 1 && out.back() == '/') out.pop_back();
  return out;
}

absl::StatusOr<std::string> MemEnv::ReadFile(const std::string& path, int64_t max_bytes) {
  MutexLock lock(&mu_);
  auto it = files_.find(Normal(path));
  if (it == files_.end()) return absl::NotFoundError(absl::StrCat(path, " does not exist (in memory)"));
  if (static_cast<int64_t>(it->second->size()) > max_bytes) return TooLargeError(path, it->second->size(), max_bytes);
  return *it->second;
}

absl::StatusOr<std::unique_ptr<RandomAccessFile>> MemEnv::NewRandomAccessFile(const std::string& path) {
  MutexLock lock(&mu_);
  auto it = files_.find(Normal(path));
  if (it == files_.end()) return absl::NotFoundError(absl::StrCat(path, " does not exist (in memory)"));
  // A snapshot of the contents: later appends to the file are not seen.
  return std::unique_ptr<RandomAccessFile>(
      new MemRandomAccessFile(path, std::make_shared<const std::string>(*it->second)));
}

namespace {

class MemMappedFile : public MappedFile {
 public:
  explicit MemMappedFile(std::shared_ptr<const std::string> contents) : contents_(std::move(contents)) {}
  absl::string_view bytes() const override { return *contents_; }

 private:
  const std::shared_ptr<const std::string> contents_;
};

}  // namespace

absl::StatusOr<std::unique_ptr<MappedFile>> MemEnv::MapFile(const std::string& path) {
  MutexLock lock(&mu_);
  auto it = files_.find(Normal(path));
  if (it == files_.end()) return absl::NotFoundError(absl::StrCat(path, " does not exist (in memory)"));
  return std::unique_ptr<MappedFile>(new MemMappedFile(std::make_shared<const std::string>(*it->second)));
}

bool MemEnv::FileExists(const std::string& path) {
  MutexLock lock(&mu_);
  const std::string p = Normal(path);
  if (files_.count(p) > 0 || dirs_.count(p) > 0) return true;
  auto it = files_.lower_bound(p + "/");
  return it != files_.end() && absl::StartsWith(it->first, p + "/");
}

bool MemEnv::IsDirectory(const std::string& path) {
  MutexLock lock(&mu_);
  const std::string p = Normal(path);
  if (dirs_.count(p) > 0) return true;
  auto it = files_.lower_bound(p + "/");
  return it != files_.end() && absl::StartsWith(it->first, p + "/");
}

absl::Status MemEnv::CreateDirs(const std::string& path) {
  MutexLock lock(&mu_);
  const std::string p = Normal(path);
  if (files_.count(p) > 0) return absl::FailedPreconditionError(absl::StrCat(path, " is a file"));
  for (size_t at = p.find('/', 1); at != std::string::npos; at = p.find('/', at + 1)) dirs_.insert(p.substr(0, at));
  dirs_.insert(p);
  return absl::OkStatus();
}

absl::StatusOr<std::unique_ptr<WritableFile>> MemEnv::NewAppendableFile(const std::string& path) {
  MutexLock lock(&mu_);
  Contents& c = files_[Normal(path)];
  if (c == nullptr) c = std::make_shared<std::string>();
  return std::unique_ptr<WritableFile>(new MemWritableFile(c));
}

absl::StatusOr<std::unique_ptr<WritableFile>> MemEnv::NewWritableFile(const std::string& path) {
  MutexLock lock(&mu_);
  Contents c = std::make_shared<std::string>();
  files_[Normal(path)] = c;
  return std::unique_ptr<WritableFile>(new MemWritableFile(c));
}

absl::Status MemEnv::RenameFile(const std::string& from, const std::string& to) {
  MutexLock lock(&mu_);
  auto it = files_.find(Normal(from));
  if (it == files_.end()) return absl::NotFoundError(absl::StrCat("rename ", from, ": it does not exist (in memory)"));
  Contents c = it->second;
  files_.erase(it);
  files_[Normal(to)] = std::move(c);
  return absl::OkStatus();
}

absl::StatusOr<std::vector<std::string>> MemEnv::GetChildren(const std::string& dir) {
  MutexLock lock(&mu_);
  const std::string prefix = Normal(dir) + "/";
  std::set<std::string> names;
  auto collect = [&](const std::string& path) {
    if (!absl::StartsWith(path, prefix)) return;
    const std::string rest = path.substr(prefix.size());
    if (!rest.empty()) names.insert(rest.substr(0, rest.find('/')));
  };
  for (const auto& [path, c] : files_) collect(path);
  for (const std::string& d : dirs_) collect(d);
  if (names.empty() && dirs_.count(Normal(dir)) == 0) {
    return absl::NotFoundError(absl::StrCat(dir, " does not exist (in memory)"));
  }
  return std::vector<std::string>(names.begin(), names.end());
}

absl::StatusOr<int64_t> MemEnv::GetFileSize(const std::string& path) {
  MutexLock lock(&mu_);
  auto it = files_.find(Normal(path));
  if (it == files_.end()) return absl::NotFoundError(absl::StrCat(path, " does not exist (in memory)"));
  return static_cast<int64_t>(it->second->size());
}

absl::Status MemEnv::DeleteFile(const std::string& path) {
  MutexLock lock(&mu_);
  if (files_.erase(Normal(path)) == 0) return absl::NotFoundError(absl::StrCat(path, " does not exist (in memory)"));
  return absl::OkStatus();
}

absl::Status MemEnv::DeleteRecursively(const std::string& path) {
  MutexLock lock(&mu_);
  const std::string p = Normal(path);
  const std::string prefix = p + "/";
  for (auto it = files_.begin(); it != files_.end();) {
    it = (it->first == p || absl::StartsWith(it->first, prefix)) ? files_.erase(it) : std::next(it);
  }
  for (auto it = dirs_.begin(); it != dirs_.end();) {
    it = (*it == p || absl::StartsWith(*it, prefix)) ? dirs_.erase(it) : std::next(it);
  }
  return absl::OkStatus();
}

absl::StatusOr<std::unique_ptr<FileLock>> MemEnv::LockFile(const std::string& path) {
  MutexLock lock(&mu_);
  if (!locks_.insert(Normal(path)).second) {
    return absl::FailedPreconditionError(absl::StrCat(path, " is locked (in memory)"));
  }
  return std::unique_ptr<FileLock>(new MemLock(&mu_, &locks_, Normal(path)));
}

void MemEnv::PutFile(const std::string& path, std::string contents) {
  MutexLock lock(&mu_);
  files_[Normal(path)] = std::make_shared<std::string>(std::move(contents));
}

int64_t MemEnv::TotalBytes() {
  MutexLock lock(&mu_);
  int64_t n = 0;
  for (const auto& [path, c] : files_) n += static_cast<int64_t>(c->size());
  return n;
}

}  // namespace shardline
