#include "coordinator/job_store.h"

#include <cstdarg>
#include <cstdio>
#include <memory>
#include <vector>

#include "absl/strings/str_cat.h"
#include "common/platform/logging.h"
#include "common/platform/mutex.h"
#include "common/platform/status_macros.h"
#include "rocksdb/db.h"
#include "rocksdb/env.h"

namespace shardline {
namespace {

absl::Status FromRocks(const rocksdb::Status& s, absl::string_view what, absl::string_view dir) {
  if (s.ok()) return absl::OkStatus();
  const std::string msg = absl::StrCat(what, " in job store ", dir, ": ", s.ToString());
  if (s.IsCorruption()) return absl::DataLossError(msg);
  // Issue 62: a full disk ended the coordinator with INTERNAL and no advice.
  // Said as the shard path says it; nothing committed is lost (the store
  // writes are synced before anything depends on them).
  if (s.IsNoSpace()) {
    return absl::ResourceExhaustedError(absl::StrCat(
        msg, ": the disk holding ", dir, " is full. Every committed checkpoint is kept; free space on it, then run "
        "the coordinator (or `shardline launch`) again to resume"));
  }
  return absl::InternalError(msg);
}

rocksdb::Slice ToSlice(absl::string_view v) { return rocksdb::Slice(v.data(), v.size()); }

// RocksDB's own log, warnings and worse, into the coordinator's log rather
// than a LOG file beside the store: on a full disk RocksDB logged the
// failure into a LOG file whose last write had failed, and Debian's 7.8
// asserts there (WritableFileWriter::AssertFalseAndGetStatusForPrevError),
// so the coordinator died with SIGABRT instead of saying what was full.
class StoreLogger final : public rocksdb::Logger {
 public:
  StoreLogger() : rocksdb::Logger(rocksdb::InfoLogLevel::WARN_LEVEL) {}
  using rocksdb::Logger::Logv;
  void Logv(const char* format, va_list ap) override {
    char line[1024];
    std::vsnprintf(line, sizeof(line), format, ap);
    SLOG(WARNING) << "RocksDB: " << line;
  }
};

}  // namespace

JobStore::JobStore(std::unique_ptr<FileLock> lock, std::unique_ptr<rocksdb::DB> db, std::string dir)
    : lock_(std::move(lock)), db_(std::move(db)), dir_(std::move(dir)) {}

JobStore::~JobStore() {
  // Debian's RocksDB 7.8 asserts (SIGABRT) closing a log file whose write
  // failed (WritableFileWriter::AssertFalseAndGetStatusForPrevError), so a
  // coordinator on a full disk died instead of saying what was full. After
  // a failed write the store is left open for the process's exit to close:
  // what was synced before stays, as after a crash.
  if (write_failed_.load()) {
    SLOG(WARNING) << "job store " << dir_ << " is left for the process's exit to close after a failed write";
    // Kept reachable (not leaked: LeakSanitizer would say so) and never
    // destroyed.
    static auto* const mu = new Mutex();
    static auto* const left_open = new std::vector<std::unique_ptr<rocksdb::DB>>();
    MutexLock lock(mu);
    left_open->push_back(std::move(db_));
  }
}

absl::Status JobStore::Written(absl::Status s) {
  if (!s.ok() && !absl::IsDataLoss(s)) write_failed_ = true;
  return s;
}

absl::StatusOr<std::unique_ptr<JobStore>> JobStore::Open(Env* env, const std::string& dir) {
  // Our own lock, taken first, decides "in use" by its error code; RocksDB's
  // LOCK would say so only in the wording of an IOError.
  RETURN_IF_ERROR(env->CreateDirs(dir));
  absl::StatusOr<std::unique_ptr<FileLock>> lock = env->LockFile(dir + "/SHARDLINE_LOCK");
  if (absl::IsFailedPrecondition(lock.status())) {
    return absl::FailedPreconditionError(absl::StrCat("job store ", dir, " is in use (is another coordinator using "
                                                      "this workdir?)"));
  }
  if (!lock.ok()) return lock.status();
  rocksdb::Options options;
  options.create_if_missing = true;
  options.max_open_files = 64;
  options.info_log = std::make_shared<StoreLogger>();
  rocksdb::DB* raw = nullptr;
  const rocksdb::Status s = rocksdb::DB::Open(options, dir, &raw);
  if (!s.ok()) return FromRocks(s, "open", dir);
  return std::unique_ptr<JobStore>(new JobStore(std::move(*lock), std::unique_ptr<rocksdb::DB>(raw), dir));
}

absl::StatusOr<std::optional<std::string>> JobStore::Get(absl::string_view key) {
  std::string value;
  const rocksdb::Status s = db_->Get(rocksdb::ReadOptions(), ToSlice(key), &value);
  if (s.IsNotFound()) return std::optional<std::string>();
  if (!s.ok()) return FromRocks(s, absl::StrCat("get ", key), dir_);
  return std::optional<std::string>(std::move(value));
}

absl::Status JobStore::Put(absl::string_view key, absl::string_view value, bool sync) {
  rocksdb::WriteOptions options;
  options.sync = sync;
  return Written(FromRocks(db_->Put(options, ToSlice(key), ToSlice(value)), absl::StrCat("put ", key), dir_));
}

absl::Status JobStore::Delete(absl::string_view key, bool sync) {
  rocksdb::WriteOptions options;
  options.sync = sync;
  return Written(FromRocks(db_->Delete(options, ToSlice(key)), absl::StrCat("delete ", key), dir_));
}

absl::StatusOr<std::vector<std::pair<std::string, std::string>>> JobStore::List(absl::string_view prefix) {
  std::vector<std::pair<std::string, std::string>> out;
  std::unique_ptr<rocksdb::Iterator> it(db_->NewIterator(rocksdb::ReadOptions()));
  for (it->Seek(ToSlice(prefix)); it->Valid() && it->key().starts_with(ToSlice(prefix)); it->Next()) {
    out.emplace_back(it->key().ToString(), it->value().ToString());
  }
  if (!it->status().ok()) return FromRocks(it->status(), absl::StrCat("list ", prefix), dir_);
  return out;
}

}  // namespace shardline
