#include "worker/checkpoint/restore_state.h"


#include <vector>

#include "absl/strings/str_format.h"
#include "common/faults/fault_injection.h"
#include "common/platform/logging.h"
#include "common/platform/status_macros.h"
#include "worker/checkpoint/safetensors.h"
#include "common/platform/clock.h"

namespace shardline {

absl::StatusOr<RestoredState> RestoreState(const RestoreSource& source, const FlatLayout& layout,
                                           const std::vector<Range>& buckets, Collectives& comm,
                                           absl::Span<float> params, Optimizer* optimizer) {
  RestoredState out;
  const Stopwatch start(source.env);
  auto seconds = [&start] { return start.ElapsedSeconds(); };
  const bool lead = comm.rank() == 0;
  if (source.memory_step > 0) {
    // From this rank's own shard in memory; the others' pieces come by
    // all-gather, bucket by bucket as every rank owns them. No disk read.
    if (source.memory == nullptr) return absl::InternalError("a restore from memory without a snapshot store");
    const int world = source.world > 0 ? source.world : comm.world_size();
    const int from = source.memory_world > 0 ? source.memory_world : world;
    ASSIGN_OR_RETURN(Restored restored,
                     source.memory->Restore(source.memory_step, from, layout, params.data(), optimizer,
                                            source.island));
    for (const Range& bucket : source.gather_params ? buckets : std::vector<Range>()) {
      RETURN_IF_ERROR(
          comm.AllGather(params.subspan(static_cast<size_t>(bucket.begin), static_cast<size_t>(bucket.size()))));
    }
    out.seconds = seconds();
    out.from_memory = true;
    if (lead) {
      SLOG(INFO) << absl::StrFormat("restored step %d from memory in %.1f ms (no checkpoint read)%s", restored.step,
                                    out.seconds * 1e3,
                                    from != world
                                        ? absl::StrFormat("; resharded from a world of %d to %d", from, world)
                                        : "");
    }
    CrashPoint("restored_from_memory", restored.step);
    if (from > world) CrashPoint("restored_after_shrink", restored.step);
    if (from < world) CrashPoint("restored_after_grow", restored.step);
    out.restored = std::move(restored);
  } else if (!source.disk_dir.empty()) {
    ASSIGN_OR_RETURN(Restored restored, RestoreCheckpoint(source.env, source.disk_dir, layout, params.data(), optimizer,
                                                                 source.island, source.islands));
    out.seconds = seconds();
    if (lead) {
      SLOG(INFO) << "restored step " << restored.step << " from " << source.disk_dir << " (" << restored.bytes_read
                 << " checkpoint bytes read)";
    }
    CrashPoint("restored_from_disk", restored.step);
    out.restored = std::move(restored);
  } else if (!source.init_from.empty()) {
    // Third in the resume order: parameters only, optimizer and data fresh.
    RETURN_IF_ERROR(ReadSafetensorsInto(source.env, source.init_from, layout, params.data()));
    if (lead) SLOG(INFO) << "initialised parameters from " << source.init_from;
  }
  return out;
}

}  // namespace shardline
