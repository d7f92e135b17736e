// The coordinator's durable state (job id, generation, global step, and
// later the checkpoint catalog) in RocksDB under <workdir>/coordinator_db.
// Writes that would lose work if forgotten are synced (WAL fsync) before
// they return.
//
//   ASSIGN_OR_RETURN(auto store, JobStore::Open(workdir + "/coordinator_db"));
//   RETURN_IF_ERROR(store->Put("generation", "3", /*sync=*/true));
//   ASSIGN_OR_RETURN(std::optional<std::string> gen, store->Get("generation"));
#ifndef SHARDLINE_COORDINATOR_JOB_STORE_H_
#define SHARDLINE_COORDINATOR_JOB_STORE_H_

#include <atomic>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "common/platform/env.h"

namespace rocksdb {
class DB;
}  // namespace rocksdb

namespace shardline {

class JobStore {
 public:
  // Opens (creating if needed) the database in `dir`, holding the lock file
  // `dir`/SHARDLINE_LOCK while open: a second opener (another coordinator on
  // the same workdir, in any process) gets kFailedPrecondition naming the
  // directory.
  static absl::StatusOr<std::unique_ptr<JobStore>> Open(Env* env, const std::string& dir);
  ~JobStore();

  // nullopt if the key was never written (or was deleted).
  absl::StatusOr<std::optional<std::string>> Get(absl::string_view key);
  // With sync, the write is durable when this returns.
  absl::Status Put(absl::string_view key, absl::string_view value, bool sync);
  absl::Status Delete(absl::string_view key, bool sync);
  // Every (key, value) whose key starts with `prefix`, in key order.
  absl::StatusOr<std::vector<std::pair<std::string, std::string>>> List(absl::string_view prefix);

 private:
  JobStore(std::unique_ptr<FileLock> lock, std::unique_ptr<rocksdb::DB> db, std::string dir);
  // `s`, noting a failed write.
  absl::Status Written(absl::Status s);
  std::unique_ptr<FileLock> lock_;  // released after db_ closes
  std::unique_ptr<rocksdb::DB> db_;
  // A write failed (a full disk): the store is not closed (below).
  std::atomic<bool> write_failed_{false};
  std::string dir_;
};

}  // namespace shardline

#endif  // SHARDLINE_COORDINATOR_JOB_STORE_H_
