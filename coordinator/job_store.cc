#include "coordinator/job_store.h"

#include "absl/strings/str_cat.h"
#include "common/platform/status_macros.h"
#include "rocksdb/db.h"

namespace shardline {
namespace {

absl::Status FromRocks(const rocksdb::Status& s, absl::string_view what, absl::string_view dir) {
  if (s.ok()) return absl::OkStatus();
  const std::string msg = absl::StrCat(what, " in job store ", dir, ": ", s.ToString());
  if (s.IsCorruption()) return absl::DataLossError(msg);
  return absl::InternalError(msg);
}

rocksdb::Slice ToSlice(absl::string_view v) { return rocksdb::Slice(v.data(), v.size()); }

}  // namespace

JobStore::JobStore(std::unique_ptr<FileLock> lock, std::unique_ptr<rocksdb::DB> db, std::string dir)
    : lock_(std::move(lock)), db_(std::move(db)), dir_(std::move(dir)) {}

JobStore::~JobStore() = default;

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
  options.keep_log_file_num = 2;  // the job store is tiny; keep its info logs small
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
  return FromRocks(db_->Put(options, ToSlice(key), ToSlice(value)), absl::StrCat("put ", key), dir_);
}

absl::Status JobStore::Delete(absl::string_view key, bool sync) {
  rocksdb::WriteOptions options;
  options.sync = sync;
  return FromRocks(db_->Delete(options, ToSlice(key)), absl::StrCat("delete ", key), dir_);
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
