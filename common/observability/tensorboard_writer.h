// TensorBoard event files for the scalars of metrics.jsonl: each record's
// float fields (loss, lr, grad_norm, ..., accuracy) as scalars tagged with
// the field's name, at the record's step, in
//   <dir>/train/events.out.tfevents.<unix seconds>.<host>.<pid>
//   <dir>/eval/events.out.tfevents.<unix seconds>.<host>.<pid>
// A new pair of files per process (TensorBoard reads every file of a run
// directory in order), so a restarted coordinator adds to the same curves.
//
// Framing (TFRecord): per record, uint64 length (little-endian), uint32
// masked CRC32C of those 8 bytes, the serialized tensorboard.Event, uint32
// masked CRC32C of it. The first event of a file carries file_version
// "brain.Event:2".
//
//   ASSIGN_OR_RETURN(auto tb, TensorBoardWriter::Open(env, workdir + "/tensorboard"));
//   MetricsTee sink({jsonl.get(), tb.get()});
#ifndef SHARDLINE_COMMON_OBSERVABILITY_TENSORBOARD_WRITER_H_
#define SHARDLINE_COMMON_OBSERVABILITY_TENSORBOARD_WRITER_H_

#include <memory>
#include <string>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "common/platform/env.h"
#include "common/observability/metrics_writer.h"

namespace shardline {

// One TFRecord: the framing above around `data`.
std::string TfRecord(absl::string_view data);

class TensorBoardWriter : public MetricsSink {
 public:
  // Creates <dir>/train and <dir>/eval and a new event file in each.
  static absl::StatusOr<std::unique_ptr<TensorBoardWriter>> Open(Env* env, const std::string& dir);
  // Appends the record's scalars to its split's file and flushes (so a
  // running TensorBoard sees them). A record with no step, or of no split,
  // is skipped. Non-finite values are written as they are (TensorBoard
  // shows NaN). Not thread-safe.
  absl::Status Write(const metrics::MetricRecord& record) override;

 private:
  TensorBoardWriter(Env* env, std::unique_ptr<WritableFile> train, std::unique_ptr<WritableFile> eval)
      : env_(env), train_(std::move(train)), eval_(std::move(eval)) {}
  Env* const env_;
  std::unique_ptr<WritableFile> train_;
  std::unique_ptr<WritableFile> eval_;
};

// metrics.csv: the same records as rows, a column per MetricRecord field in
// field-number order (step, split, loss, lr, ...), empty cells for fields
// a record does not set, nan/inf/-inf for non-finite values. The header is
// written when the file is new; a restarted writer appends.
class CsvMetricsWriter : public MetricsSink {
 public:
  static absl::StatusOr<std::unique_ptr<CsvMetricsWriter>> Open(Env* env, const std::string& path);
  // The header line, without its newline.
  static std::string Header();
  // Not thread-safe.
  absl::Status Write(const metrics::MetricRecord& record) override;

 private:
  explicit CsvMetricsWriter(std::unique_ptr<WritableFile> file) : file_(std::move(file)) {}
  std::unique_ptr<WritableFile> file_;
};

}  // namespace shardline

#endif  // SHARDLINE_COMMON_OBSERVABILITY_TENSORBOARD_WRITER_H_
