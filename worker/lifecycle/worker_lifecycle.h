// A distributed worker from start to the job's end, as a component:
//
//   register -> join the generation (heartbeat) -> load config and data ->
//   connect the transport -> train -> classify how the generation ended ->
//   finish, fail, or register again
//
// `shardline-worker` parses flags and calls RunWorker; the tests drive it
// against an in-process coordinator.
//
//   WorkerOptions o;
//   o.coordinator = "10.0.0.1:7000";
//   o.transport_address = "10.0.0.2:" + std::to_string(server->port());
//   RETURN_IF_ERROR(RunWorker(o, server.get()));
#ifndef SHARDLINE_WORKER_LIFECYCLE_WORKER_LIFECYCLE_H_
#define SHARDLINE_WORKER_LIFECYCLE_WORKER_LIFECYCLE_H_

#include <functional>
#include <string>

#include "absl/status/status.h"
#include "absl/time/time.h"
#include "common/platform/env.h"
#include "worker/collective/grpc_transport.h"
#include "worker/lifecycle/worker_metrics.h"

namespace shardline {

struct WorkerOptions {
  // The coordinator's address, HOST:PORT. Required.
  std::string coordinator;
  // This worker's transport address as peers should dial it. Required.
  std::string transport_address;
  // The rank to ask for; -1: any. After the first registration the worker
  // keeps asking for the rank it got.
  int requested_rank = -1;
  // The island (collective.islands) of this worker's host; -1: any. The
  // coordinator gives it a rank of that island's block.
  int island = -1;
  // Give up on registering (coordinator unreachable, rank held) after this.
  absl::Duration connect_timeout = absl::Seconds(60);
  // Time between heartbeats.
  absl::Duration heartbeat_interval = absl::Milliseconds(100);
  // How long the last report waits for the coordinator to end the stream
  // (for the finished report: to say every worker finished). Past it the
  // worker registers again, which waits for the job's end at the
  // coordinator.
  absl::Duration heartbeat_close_timeout = absl::Seconds(10);
  // The job token for calls to the coordinator; null: none. (The transport
  // server carries its own, in TransportServerOptions.)
  const RpcAuth* auth = nullptr;
  // Prometheus metrics to feed; null: none.
  WorkerMetrics* metrics = nullptr;
  // Called when the watchdog finds a generation still stuck twice its
  // timeout after it stopped moving. Empty: log and _exit(3), so a
  // supervisor restarts the worker. Tests record instead.
  std::function<void()> on_still_stuck;
  // Required: the process's Env (chosen once, in main).
  Env* env = nullptr;
  // Fault-injection runs only: the data plane goes through a
  // FaultyTransport reading this control file (worker/collective/faulty_transport.h).
  std::string net_fault_file;
};

// How one generation's training ended, and so what the worker does next.
enum class GenerationEnd {
  kFinished,       // trained to the end (or an agreed stop): report, return OK once the
                   // coordinator says every worker finished, else register again
  kBadCheckpoint,  // the checkpoint handed out failed verification: report it, register again
  kFatal,          // a restart would fail the same way: report, return the error
  kSaveFailed,     // writing this rank's shard failed (disk full, ...): report it, register again
  kRejoin,         // the world broke (a peer lost, a new generation, a timeout): register again
};

// Classifies RunTraining's result by its status code and payloads (a
// SaveFailedError is a failed save whatever its code). `restoring`: the
// generation was told to restore a checkpoint.
GenerationEnd ClassifyGenerationEnd(const absl::Status& result, bool restoring);

// Runs the worker until the job is over. Returns OK when the job finished,
// FAILED_PRECONDITION ("the job failed: ...") when the coordinator says it
// failed, and an error when registering fails for connect_timeout,
// the config or data set is unusable here, or training failed in a way a
// restart would repeat. `server` must be listening at transport_address.
absl::Status RunWorker(const WorkerOptions& options, TransportServer* server);

}  // namespace shardline

#endif  // SHARDLINE_WORKER_LIFECYCLE_WORKER_LIFECYCLE_H_
