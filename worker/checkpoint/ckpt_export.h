// `shardline ckpt export`: a committed checkpoint's parameters as one
// safetensors file, streamed from the shards window by window, so a model
// larger than the exporter's memory exports too (issue 48).
//
// The checkpoint is verified first, as VerifyCheckpoint verifies it (every
// byte read and checked, nothing kept); then each tensor, in the file's
// order, is assembled in windows of at most `window_floats` from the shards'
// pieces (ShardReader, each block's CRC checked again as it is read) and
// appended to "<out>.tmp", which is made durable and renamed to `out` only
// when all of it is written. The bytes are SafetensorsBytes' for the same
// parameters: the same checkpoint always exports the same file.
//
//   ASSIGN_OR_RETURN(ExportedCheckpoint e, ExportCheckpoint(env, StepDir(root, 1200), "m.safetensors", {}));
#ifndef SHARDLINE_WORKER_CHECKPOINT_CKPT_EXPORT_H_
#define SHARDLINE_WORKER_CHECKPOINT_CKPT_EXPORT_H_

#include <cstdint>
#include <map>
#include <string>

#include "absl/status/statusor.h"
#include "common/platform/env.h"

namespace shardline {

struct ExportOptions {
  // Floats assembled in memory at once at most (the exporter's memory, with
  // one 1 MiB block per shard). Default 4 Mi floats: 16 MiB.
  int64_t window_floats = int64_t{4} << 20;
  // Goes into the header's "__metadata__".
  std::map<std::string, std::string> metadata;
};

struct ExportedCheckpoint {
  int64_t tensors = 0;
  int64_t parameters = 0;
  int64_t bytes = 0;  // of the file
  // The tokenizer the checkpoint was trained with (token shards), or "".
  std::string tokenizer_sha256;
};

// Writes the parameters of the committed checkpoint `step_dir` to `out`.
// kDataLoss naming the shard if any check fails (then `out` is untouched and
// the temporary file removed); write errors name `out`.
absl::StatusOr<ExportedCheckpoint> ExportCheckpoint(Env* env, const std::string& step_dir, const std::string& out,
                                                    const ExportOptions& options);

}  // namespace shardline

#endif  // SHARDLINE_WORKER_CHECKPOINT_CKPT_EXPORT_H_
