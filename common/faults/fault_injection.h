// Crash points for tests of crash safety. With the environment variable
// SHARDLINE_CRASH_AT="<point>:<step>:<marker file>" a process reaching that
// point for that step kills itself with SIGKILL (no cleanup, as a real kill),
// once: it first creates the marker file, and does nothing if it exists, so
// restarted processes (which inherit the variable) go on.
// "<step>" may be "*": any step; several faults are separated by ",", each
// with its own marker (a second fault can hit the recovery from the
// first). Points (coordinator): "world_formed" (a generation formed, its
// step is where it starts; nothing persisted), "after_committed_file" (a
// COMMITTED file written, retention not applied), and below; (worker):
// "snapshot_replication" (between the shifts that replicate an in-memory
// snapshot), "restored_from_memory" / "restored_from_disk" (a restore
// done, no step trained). Also: "after_commit_record"
// (coordinator: the RocksDB commit record is written, COMMITTED is not),
// "before_shard_rename" (worker: the shard is written and fsynced under its
// temporary name, not renamed), "every_worker_finished" (coordinator: the
// last finished report is in, nothing is recorded or told yet),
// "after_finished_record" (coordinator: the job is durably finished, no
// worker is told yet). Elastic worlds and graceful stops (coordinator):
// "world_shrunk" / "world_grown" (a generation of fewer / more workers than
// the last formed, nothing persisted; the step is where it starts),
// "growing" (a returning worker is to join: the decision taken, the running
// world not yet told to end; the step is the checkpoint's), "stop_scheduled"
// (a graceful stop's step chosen, no worker told; the step is the stop's);
// (worker): "restored_after_shrink" / "restored_after_grow" (restored from
// the memory of a larger / smaller world, no step trained), "stopping" (the
// agreed stop step reached, before the final eval and save),
// "backward_gather" (ZeRO stage 3: the backward past its first layer, about
// to gather the next layer's parameters, earlier buckets' reduce-scatters
// and prefetched gathers possibly in flight); islands (worker):
// "outer_exchange" (an outer step due after that step, before anything
// crosses islands), "outer_updated" (the outer update applied to this
// rank's pieces, the island not yet gathered, nothing saved).
#ifndef SHARDLINE_COMMON_FAULTS_FAULT_INJECTION_H_
#define SHARDLINE_COMMON_FAULTS_FAULT_INJECTION_H_

#include <cstdint>

#include "absl/strings/string_view.h"

namespace shardline {

void CrashPoint(absl::string_view point, int64_t step);

// With SHARDLINE_HANG_AT="<point>:<marker file>", the first process to reach
// `point` (it creates the marker) stops there for good, as a hung process
// would: only SIGKILL ends it (pause() returns after a caught signal and
// waits again). Points: "worker_after_job_done" (a worker told the job is
// over, before it exits), "coordinator_after_job_end" (the job finished and
// every worker was told, before the coordinator exits).
void HangPoint(absl::string_view point);

}  // namespace shardline

#endif  // SHARDLINE_COMMON_FAULTS_FAULT_INJECTION_H_
