#include "coordinator/decide/report_check.h"

#include <string>

#include "absl/strings/str_cat.h"

namespace shardline {
namespace {

absl::Status Bad(const coordinator::WorkerReport& r, const std::string& what) {
  return absl::InvalidArgumentError(absl::StrCat("report from rank ", r.rank(), " refused: ", what));
}

}  // namespace

absl::Status CheckReport(const coordinator::WorkerReport& r, const ReportLimits& limits,
                         absl::string_view shard_file) {
  auto in_range = [&](int64_t v) { return v >= 0 && v <= limits.max_step; };
  if (!in_range(r.steps_done())) return Bad(r, absl::StrCat("steps_done ", r.steps_done(), " out of range"));
  if (!in_range(r.total_steps())) return Bad(r, absl::StrCat("total_steps ", r.total_steps(), " out of range"));
  if (r.total_steps() > 0 && r.steps_done() > r.total_steps()) {
    return Bad(r, absl::StrCat("steps_done ", r.steps_done(), " beyond total_steps ", r.total_steps()));
  }
  if (!in_range(r.save_failed_step())) {
    return Bad(r, absl::StrCat("save_failed_step ", r.save_failed_step(), " out of range"));
  }
  if (!in_range(r.bad_memory_step())) {
    return Bad(r, absl::StrCat("bad_memory_step ", r.bad_memory_step(), " out of range"));
  }
  if (!in_range(r.diverged_step())) {
    return Bad(r, absl::StrCat("diverged_step ", r.diverged_step(), " out of range"));
  }
  if (!in_range(r.bad_checkpoint_step())) {
    return Bad(r, absl::StrCat("bad_checkpoint_step ", r.bad_checkpoint_step(), " out of range"));
  }
  for (const auto& [name, text] : {std::pair<const char*, const std::string*>{"fatal_error", &r.fatal_error()},
                                   {"watchdog", &r.watchdog()},
                                   {"bad_checkpoint_reason", &r.bad_checkpoint_reason()},
                                   {"save_failure", &r.save_failure()},
                                   {"left_reason", &r.left_reason()},
                                   {"numerics.kernels", &r.numerics().kernels()}}) {
    if (text->size() > limits.max_text_bytes) {
      return Bad(r, absl::StrCat(name, " of ", text->size(), " bytes (at most ", limits.max_text_bytes, ")"));
    }
  }
  if (r.metrics_size() > 0 && r.rank() != 0) return Bad(r, "metric records come only from rank 0");
  if (r.metrics_size() > limits.max_metric_records) {
    return Bad(r, absl::StrCat(r.metrics_size(), " metric records (at most ", limits.max_metric_records, ")"));
  }
  for (const metrics::MetricRecord& m : r.metrics()) {
    if (m.step() < 0) return Bad(r, absl::StrCat("metric record with step ", m.step()));
  }
  if (r.saved_size() > limits.max_saved_shards) {
    return Bad(r, absl::StrCat(r.saved_size(), " saved shards (at most ", limits.max_saved_shards, ")"));
  }
  for (const coordinator::SavedShard& s : r.saved()) {
    if (s.step() <= 0 || s.step() > limits.max_step) {
      return Bad(r, absl::StrCat("saved shard of step ", s.step(), " out of range"));
    }
    if (s.world_size() != limits.world_size) {
      return Bad(r, absl::StrCat("saved shard of step ", s.step(), " for a world of ", s.world_size(),
                                 "; this job's is ", limits.world_size));
    }
    if (s.file() != shard_file) {
      return Bad(r, absl::StrCat("saved shard of step ", s.step(), " names file '", s.file(), "'; rank ", r.rank(),
                                 " writes only ", shard_file));
    }
    if (s.size() <= 0 || s.size() > limits.max_shard_bytes) {
      return Bad(r, absl::StrCat("saved shard of step ", s.step(), " of ", s.size(), " bytes"));
    }
  }
  return absl::OkStatus();
}

absl::Status CheckRegisterRequest(const coordinator::RegisterRequest& req, const ReportLimits& limits) {
  const std::string& address = req.transport_address();
  if (address.empty() || address.size() > kMaxTransportAddressBytes) {
    return absl::InvalidArgumentError(absl::StrCat("register: transport_address of ", address.size(),
                                                   " bytes (1 to ", kMaxTransportAddressBytes, ")"));
  }
  for (char c : address) {
    if (c <= 0x20 || c >= 0x7f) {
      return absl::InvalidArgumentError("register: transport_address has a byte that is not visible ASCII");
    }
  }
  if (req.reason().size() > limits.max_text_bytes) {
    return absl::InvalidArgumentError(
        absl::StrCat("register: reason of ", req.reason().size(), " bytes (at most ", limits.max_text_bytes, ")"));
  }
  if (req.held_snapshots_size() > limits.max_held_snapshots) {
    return absl::InvalidArgumentError(absl::StrCat("register: ", req.held_snapshots_size(),
                                                   " held snapshots (at most ", limits.max_held_snapshots, ")"));
  }
  return absl::OkStatus();
}

absl::Status CheckRegisterIdentity(int caller_rank, const coordinator::RegisterRequest& req) {
  if (caller_rank < 0 || req.requested_rank() == caller_rank) return absl::OkStatus();
  return absl::PermissionDeniedError(absl::StrCat(
      "a caller holding rank ", caller_rank, "'s credential asked to register as ",
      req.requested_rank() < 0 ? std::string("any rank") : absl::StrCat("rank ", req.requested_rank()),
      "; a rank credential registers only for its own rank"));
}

}  // namespace shardline
