// Checks a worker's heartbeat report before the coordinator acts on any of
// it: every number in range, every text bounded, every file name the one the
// checkpoint format allows for that rank. Nothing from the network is
// joined onto a path or trusted to index anything unchecked.
//
//   RETURN_IF_ERROR(CheckReport(report, {.world_size = n}, ShardFileName(rank, n)));
#ifndef SHARDLINE_COORDINATOR_DECIDE_REPORT_CHECK_H_
#define SHARDLINE_COORDINATOR_DECIDE_REPORT_CHECK_H_

#include <cstddef>
#include <cstdint>

#include "absl/status/status.h"
#include "absl/strings/string_view.h"
#include "proto/coordinator.pb.h"

namespace shardline {

struct ReportLimits {
  int world_size = 1;
  // Steps are int32 on the wire to metrics.jsonl; runs are refused beyond.
  int64_t max_step = INT32_MAX;
  // fatal_error, watchdog, bad_checkpoint_reason, save_failure,
  // left_reason, numerics.kernels.
  size_t max_text_bytes = 16 << 10;
  // Rank 0 sends a few records a second; a report carries what queued since
  // the last one (a stalled stream may have queued many).
  int max_metric_records = 100000;
  // Shards saved since the last report: one per save.
  int max_saved_shards = 64;
  // In-memory snapshot shards a registering survivor lists (the Job keeps
  // at most 64 of them; a list past this is not one a worker sends).
  int max_held_snapshots = 4096;
  // A shard file larger than this is not one shardline wrote.
  int64_t max_shard_bytes = int64_t{1} << 40;
};

// OK, or INVALID_ARGUMENT naming the rank and the offending field. Assumes
// the rank is a member (the Job checks membership first). `shard_file` is
// the one shard file name the checkpoint format gives this rank in this
// world (ShardFileName, common/checkpoint/shard_file.h; the caller names it,
// so the deciders stay apart from the checkpoint format's code).
absl::Status CheckReport(const coordinator::WorkerReport& report, const ReportLimits& limits,
                         absl::string_view shard_file);

// A Register's own fields, before anything is logged or kept: a transport
// address of 1 to kMaxTransportAddressBytes bytes of visible ASCII, a
// reason of at most `limits.max_text_bytes`, at most
// `limits.max_held_snapshots` held snapshots. OK, or INVALID_ARGUMENT
// naming the field (and never repeating its bytes). The finished report
// inside is checked by CheckReport once its sender is known to be a member.
absl::Status CheckRegisterRequest(const coordinator::RegisterRequest& req, const ReportLimits& limits);

// Whether a caller that proved `caller_rank`'s credential (-1: the job
// token, which may act as any rank) may make this Register: a rank
// credential registers only for its own rank, asked for by number. OK, or
// PERMISSION_DENIED naming both ranks.
absl::Status CheckRegisterIdentity(int caller_rank, const coordinator::RegisterRequest& req);

// The longest transport address a Register may carry.
inline constexpr size_t kMaxTransportAddressBytes = 255;

// The coordinator's receive limit, from the largest message ReportLimits
// lets through: a report (alone or inside a Register) of max_metric_records
// records of at most 80 bytes each (13 fields, every one set), three texts
// and a reason of max_text_bytes, max_saved_shards shards and
// max_held_snapshots snapshots of a few hundred bytes at most: about
// 8.4 MB, rounded up to a power of two.
inline constexpr int kMaxControlMessageBytes = 16 << 20;
static_assert(int64_t{100000} * 80 + 4 * (16 << 10) + 64 * 1024 + 4096 * 32 < kMaxControlMessageBytes,
              "the coordinator's receive limit must hold the largest legitimate report");

}  // namespace shardline

#endif  // SHARDLINE_COORDINATOR_DECIDE_REPORT_CHECK_H_
