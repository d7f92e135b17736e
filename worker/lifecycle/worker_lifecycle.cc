#include "worker/lifecycle/worker_lifecycle.h"

#include <unistd.h>

#include <cstdio>
#include <memory>
#include <optional>
#include <random>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_format.h"
#include "common/job/config.h"
#include "common/job/islands.h"
#include "common/platform/logging.h"
#include "common/platform/mutex.h"
#include "common/job/shard.h"
#include "common/topology/peer_set.h"
#include "common/platform/status_macros.h"
#include "common/platform/status_payload.h"
#include "worker/checkpoint/memory_snapshots.h"
#include "worker/collective/peer_fault.h"
#include "worker/lifecycle/mismatch_limit.h"
#include "worker/collective/faulty_transport.h"
#include "worker/collective/island_rings.h"
#include "worker/collective/ring.h"
#include "worker/control/coordinator_client.h"
#include "worker/control/heartbeat.h"
#include "worker/control/peer_directory.h"
#include "worker/data/dataset.h"
#include "worker/data/inflate_cache.h"
#include "worker/lifecycle/generation_observer.h"
#include "worker/lifecycle/watchdog.h"
#include "worker/model/gemm.h"
#include "worker/trace/trace_writer.h"
#include "worker/train/nan_guard.h"
#include "worker/train/train_loop.h"
#include "common/platform/clock.h"

namespace shardline {

GenerationEnd ClassifyGenerationEnd(const absl::Status& result, bool restoring) {
  if (result.ok()) return GenerationEnd::kFinished;
  if (SaveFailedStep(result) >= 0) return GenerationEnd::kSaveFailed;  // whatever its code
  if (absl::IsDataLoss(result) && restoring) return GenerationEnd::kBadCheckpoint;
  if (absl::IsFailedPrecondition(result) || absl::IsInvalidArgument(result)) return GenerationEnd::kFatal;
  return GenerationEnd::kRejoin;
}

namespace {

// What carries over from one generation to the next.
struct Carried {
  int requested_rank = -1;
  uint64_t previous_generation = 0;
  std::string left_because;
  std::optional<TrainingData> data;
  std::string data_key;  // what `data` was loaded for
  // Set when the previous generation finished without hearing the job's end.
  std::optional<coordinator::WorkerReport> finished_report;
  // In-memory snapshots (this rank's and its replicas of peers'): they
  // outlive the generations of this process.
  std::unique_ptr<MemorySnapshots> memory;
  // This process's numerics fingerprint of the job, computed once.
  NumericsMemo numerics;
  // The steps at which a generation of this process ended naming this
  // worker as the one that held or computed other bits (a PeerFaultError:
  // parameter agreement, a replay audit, non-finite values it sent).
  std::vector<int64_t> named_at;
  // The same for generations that ended on ranks holding or computing other
  // bits where nobody could be named (IsUnresolvedMismatch).
  std::vector<int64_t> unresolved_at;
  // Set once a limit is reached: said as this worker's fatal error in the
  // next generation it joins (the one that ended is no longer the
  // coordinator's to hear of), and the worker leaves.
  absl::Status leave_with;
};


// Before a restore from memory: shard s of the snapshot (taken in a world
// of `from` = memory_world_size, or this one) moves from rank
// world.memory_sources(s) to every rank r of this world whose pieces of
// `buckets` share elements with it - in the same world, r = s - for s, then r,
// in order, every rank taking part in every move (SendRecv is one op of
// every rank's sequence). DataLoss if a shard this rank should send is not
// here or one it received is damaged. The snapshot's world cut the same
// buckets (the job's config fixes the plan). Islands (island_size > 0):
// to the ranks at its place in the islands that read its island
// (RestoreMayMove, common/topology/peer_set.h); a shard of an island none
// reads (source -1) stays where it is.
absl::Status MoveMemoryShards(const coordinator::RegisterResponse& world, absl::Span<const Range> buckets,
                              int island_size, Collectives& comm, MemorySnapshots& memory) {
  const int me = world.rank(), n = world.world_size();
  const int from = world.memory_world_size() > 0 ? world.memory_world_size() : n;
  if (world.memory_sources_size() != from) {
    return absl::InvalidArgumentError(absl::StrCat("the coordinator's restore plan names ", world.memory_sources_size(),
                                                   " sources for a snapshot of a world of ", from));
  }
  absl::Status missing;
  for (int s = 0; s < from; ++s) {
    const int source = world.memory_sources(s);
    if (source < 0 && island_size > 0) continue;  // of an island no island here reads
    if (source < 0 || source >= n) {
      return absl::InvalidArgumentError(absl::StrCat("the coordinator's restore plan sends shard ", s, " from rank ",
                                                     source, ", not in a world of ", n));
    }
    const SnapshotKey key{world.memory_step(), from, s};
    const std::vector<Range> old = OwnedPieces(buckets, s, from);
    // Who reads shard s: the ranks whose pieces it overlaps; with islands,
    // those at its place in the islands that read its island.
    auto reads = [&](int r) {
      return island_size > 0 ? RestoreMayMove(s, from, r, n, island_size)
                             : !SharedRuns(old, OwnedPieces(buckets, r, n)).empty();
    };
    std::string bytes;  // the source's copy, read once for all its receivers
    bool read = false;
    for (int r = 0; r < n; ++r) {
      if (r == source || !reads(r)) continue;
      if (me == source && !read) {
        read = true;
        absl::StatusOr<std::string> held = memory.Bytes(key);
        if (held.ok()) {
          bytes = std::move(*held);
        } else {
          missing = absl::DataLossError(held.status().message());  // sent empty: the receiver finds it damaged
        }
      }
      ASSIGN_OR_RETURN(std::string got, comm.SendRecv(me == source ? r : -1, bytes, me == r ? source : -1));
      if (me == r) RETURN_IF_ERROR(memory.Put(key, std::move(got)));
    }
  }
  return missing;
}

// The outcome of one generation: return `status` if `done`, else register
// again.
struct Outcome {
  bool done = false;
  absl::Status status;
};

Outcome Done(absl::Status s) { return {true, std::move(s)}; }

void DefaultStillStuck() {
  SLOG(ERROR) << "watchdog: still stuck; exiting so a supervisor can restart this worker";
  fflush(stderr);
  _exit(3);
}

HeartbeatOptions HeartbeatFor(const WorkerOptions& options, CoordinatorClient& client,
                              const coordinator::RegisterResponse& world) {
  HeartbeatOptions hb;
  hb.env = options.env;
  hb.rank = world.rank();
  hb.generation = world.generation();
  hb.stop_at = world.stop_at();
  hb.interval = options.heartbeat_interval;
  hb.close_timeout = options.heartbeat_close_timeout;
  // Register has just made the session: no call is needed.
  hb.proof = client
                 .Proof(coordinator::WorkerReport::descriptor()->full_name(),
                        WallNow(options.env) + options.connect_timeout)
                 .value_or("");
  hb.member_secret = world.member_secret();
  return hb;
}

// What a generation trains: the coordinator's config (checked here too),
// the data (kept across generations while the config's data fields hold)
// and the model's size and bucket plan.
struct Plan {
  config::JobConfig cfg;
  const TrainingData* data = nullptr;
  int64_t parameters = 0;
  std::vector<Range> buckets;
};

absl::StatusOr<Plan> PlanGeneration(const WorkerOptions& options, const coordinator::RegisterResponse& world,
                                    Carried& carried) {
  Plan p;
  ASSIGN_OR_RETURN(p.cfg, ParseConfigText(world.config_text(), "the coordinator's config"));
  RETURN_IF_ERROR(ValidateConfig(p.cfg));
  RETURN_IF_ERROR(CheckConfigPaths(options.env, p.cfg));
  SetBlasThreads(p.cfg.runtime().blas_threads());
  const std::string data_key =
      absl::StrCat(p.cfg.data().dir(), "\n", p.cfg.data().text().train_path(), "\n", p.cfg.data().text().val_path(), "\n",
                   p.cfg.data().tokens().dir(), "\n", p.cfg.data().tokens().verify(), "\n", p.cfg.model().gpt().context());
  if (!carried.data.has_value() || carried.data_key != data_key) {
    ASSIGN_OR_RETURN(TrainingData loaded, LoadTrainingData(options.env, p.cfg));
    carried.data = std::move(loaded);
    carried.data_key = data_key;
  }
  p.data = &*carried.data;
  ASSIGN_OR_RETURN(p.parameters, ParameterCount(p.cfg, p.data->train));
  ASSIGN_OR_RETURN(p.buckets, GradientBuckets(p.cfg, p.data->train));
  return p;
}

// This rank's transport of the generation, checked against its directory.
absl::StatusOr<std::unique_ptr<Transport>> ConnectGeneration(const WorkerOptions& options, TransportServer* server,
                                                             const coordinator::RegisterResponse& world,
                                                             const Plan& plan) {
  ASSIGN_OR_RETURN(PeerDirectory directory, ReadPeerDirectory(world));
  ConnectOptions connect;
  connect.keys.secret = world.member_secret();
  connect.keys.peer_tags = std::move(directory.tags);
  connect.keys.park_tags = std::move(directory.park_tags);
  // A peer runs at most about one collective (the model's bytes) ahead.
  connect.max_unclaimed_bytes_per_peer = 2 * plan.parameters * int64_t{sizeof(float)} + (64 << 20);
  connect.max_world_size = plan.cfg.runtime().num_workers();
  ASSIGN_OR_RETURN(std::unique_ptr<Transport> connected,
                   server->Connect(world.generation(), world.rank(), std::move(directory.addresses),
                                   std::move(connect)));
  if (options.net_fault_file.empty()) return connected;
  return NewFaultyTransport(std::move(connected), options.net_fault_file, options.env);
}

CollectiveOptions CollectivesFor(Env* env, const config::JobConfig& cfg, int64_t parameters) {
  CollectiveOptions copts;
  copts.env = env;
  copts.timeout = absl::Seconds(cfg.runtime().collective_timeout_seconds());
  copts.bf16_reduce_scatter = cfg.collective().bf16_gradients();
  // A snapshot shard: parameters and at most three optimizer buffers of
  // them, plus the shard file's header and names.
  copts.max_message_bytes = static_cast<uint64_t>(4 * parameters) * sizeof(float) + (16 << 20);
  return copts;
}

// Step traces when train.trace_steps asks for them; a diagnostic: training
// goes on without them if the file cannot be opened.
std::unique_ptr<TraceWriter> OpenTraces(const WorkerOptions& options, const config::JobConfig& cfg,
                                        const coordinator::RegisterResponse& world) {
  if (cfg.train().trace_steps_size() == 0 || world.trace_dir().empty()) return nullptr;
  absl::StatusOr<std::unique_ptr<TraceWriter>> opened =
      TraceWriter::Open(options.env, world.trace_dir(), world.rank(), world.generation());
  if (opened.ok()) return std::move(*opened);
  SLOG(WARNING) << "step traces off: " << opened.status();
  return nullptr;
}

TrainOptions TrainOptionsFor(const WorkerOptions& options, const coordinator::RegisterResponse& world,
                             Heartbeat& heartbeat, StepObserver* observer, Carried& carried) {
  TrainOptions train;
  const bool lead = world.rank() == 0;
  train.metrics = lead ? heartbeat.outbox() : nullptr;
  train.show_progress = lead;
  train.stop_request = heartbeat.stop_request();
  train.checkpoint_request = heartbeat.checkpoint_request();
  train.eval_request = heartbeat.eval_request();
  train.steps_done = heartbeat.steps_done();
  train.observer = observer;
  train.checkpoint_root = world.checkpoint_root();
  train.checkpoint_sink = heartbeat.outbox();
  Outbox* outbox = heartbeat.outbox();
  train.on_numerics = [outbox](const NumericsFingerprint& n) {
    SLOG(INFO) << absl::StrFormat("numerics fingerprint 0x%016x (%s), %s", n.fingerprint, n.kernels,
                                  n.seconds > 0 ? absl::StrFormat("computed in %.0f ms", n.seconds * 1e3)
                                                : std::string("as this process computed it before"));
    coordinator::Numerics numerics;
    numerics.set_fingerprint(n.fingerprint);
    numerics.set_kernels(n.kernels);
    outbox->NumericsReady(numerics);
  };
  train.job_id = world.job_id();
  train.restore_dir = world.restore_dir();
  train.env = options.env;
  train.memory = carried.memory.get();
  train.numerics_memo = &carried.numerics;
  train.memory_restore_step = world.memory_step();
  train.memory_restore_world = world.memory_world_size();
  return train;
}

WatchdogOptions WatchdogFor(const WorkerOptions& options, const config::JobConfig& cfg, int rank,
                            Heartbeat& heartbeat) {
  WatchdogOptions w;
  w.timeout = absl::Seconds(cfg.runtime().watchdog_timeout_seconds());
  w.rank = rank;
  w.env = options.env;
  w.on_stuck = [&heartbeat, &options](const std::string& what) {
    if (options.metrics != nullptr) options.metrics->SetStuck(what);
    const std::string left = heartbeat.abandoned();
    SLOG(ERROR) << "watchdog: " << what << "; threads: training thread inside step "
                << heartbeat.steps_done()->load() + 1
                << " (compute or a collective); heartbeat thread: " << (left.empty() ? "reporting" : left);
    heartbeat.ReportStuck(what);
  };
  w.on_still_stuck = options.on_still_stuck ? options.on_still_stuck : DefaultStillStuck;
  return w;
}

std::string FinishedLine(const TrainResult& r) {
  return absl::StrCat(
      "finished ", r.steps, " steps", r.stopped_early ? " (stopped early)" : "", "; ", DescribeFinalEval(r.evals.back()),
      "; ", r.checkpoint_seconds, " s of training lost to checkpoints; ",
      absl::StrFormat("%d in-memory snapshots took %.3f s (%.2f%% of %.2f s of training); ", r.memory_snapshots,
                      r.memory_snapshot_seconds,
                      r.train_seconds > 0 ? 100 * r.memory_snapshot_seconds / r.train_seconds : 0.0, r.train_seconds),
      "per step: ", PhasesPerStep(r.phase_seconds, r.steps - r.start_step), "; ", DescribeHeld(r));
}

// Tells the coordinator how the generation ended (the heartbeat's last
// report) and says what the worker does next.
Outcome EndGeneration(const absl::StatusOr<TrainResult>& result, const coordinator::RegisterResponse& world,
                      Heartbeat& heartbeat, Carried& carried) {
  const absl::Status status = result.status();
  LastReport last;
  switch (ClassifyGenerationEnd(status, !world.restore_dir().empty() || world.memory_step() > 0)) {
    case GenerationEnd::kFinished: {
      last.finished = true;
      // Done only once the coordinator says every worker is: a coordinator
      // that was paused or cut off, or a world that broke before everyone
      // finished, would otherwise leave the job unfinished with no worker
      // left to finish it. Registering again either hears that the job is
      // over or joins a world that resumes from the last commit.
      const absl::Status confirmed = heartbeat.Close(last);
      if (!confirmed.ok()) {
        SLOG(WARNING) << "finished " << result->steps << " steps, but the job's end is not confirmed: "
                      << confirmed.message() << "; registering again";
        carried.previous_generation = world.generation();
        carried.left_because = absl::StrCat("finished step ", result->steps, "; the job's end was not confirmed");
        carried.finished_report = heartbeat.FinishedReportToResend();
        return {};
      }
      SLOG(INFO) << FinishedLine(*result);
      return Done(absl::OkStatus());
    }
    case GenerationEnd::kBadCheckpoint:
      if (world.memory_step() > 0) {
        SLOG(ERROR) << "the in-memory snapshot of step " << world.memory_step() << " cannot be restored here: "
                    << status.message();
        last.bad_memory_step = world.memory_step();
      } else {
        SLOG(ERROR) << "checkpoint at step " << world.start_step() << " failed verification: " << status.message();
        last.bad_checkpoint_step = world.start_step();
        last.bad_checkpoint_reason = std::string(status.message());
      }
      heartbeat.Close(last).IgnoreError();
      break;
    case GenerationEnd::kSaveFailed:
      SLOG(ERROR) << "saving the checkpoint at step " << SaveFailedStep(status) << " failed: " << status.message()
                  << "; registering again";
      last.save_failed_step = SaveFailedStep(status);
      last.save_failure = std::string(status.message());
      last.save_failure_code = status.code();
      heartbeat.Close(last).IgnoreError();
      break;
    case GenerationEnd::kFatal:
      last.fatal_error = std::string(status.message());
      last.diverged_step = IntPayload(status, NanGuard::kDivergedStepUrl, 0);
      heartbeat.Close(last).IgnoreError();
      return Done(status);
    case GenerationEnd::kRejoin:
      if (const bool named = PeerFaultRank(status) == world.rank(); named || IsUnresolvedMismatch(status)) {
        std::vector<int64_t>& at = named ? carried.named_at : carried.unresolved_at;
        at.push_back(world.start_step());
        if (const absl::Status limit = MismatchLimit(at, named, status); !limit.ok()) {
          SLOG(ERROR) << limit.message() << "; it says so in the next generation and leaves";
          carried.leave_with = limit;
        }
      }
      SLOG(WARNING) << "generation " << world.generation() << " ended: " << status.message()
                    << "; registering again";
      // Said, so the coordinator does not take this live worker for the
      // one lost; at most a second's wait on a coordinator cut off.
      last.left_reason = std::string(status.message());
      heartbeat.Close(last, absl::Seconds(1)).IgnoreError();
      break;
  }
  carried.previous_generation = world.generation();
  carried.left_because = std::string(status.message());
  return {};
}

Outcome RunGeneration(const WorkerOptions& options, TransportServer* server, CoordinatorClient& client,
                      const coordinator::RegisterResponse& world, Carried& carried) {
  // The heartbeat starts at once: the coordinator sees this worker alive
  // while it loads data, and notices at once if it dies meanwhile. The
  // transport is declared first so it outlives the heartbeat's threads.
  Mutex transport_mu;
  std::unique_ptr<Transport> transport;
  HeartbeatOptions hb = HeartbeatFor(options, client, world);
  hb.on_abandon = [&](const std::string&) {
    MutexLock lock(&transport_mu);
    if (transport != nullptr) transport->Shutdown();
  };
  Heartbeat heartbeat(client.stub(), hb);
  if (!carried.leave_with.ok()) {  // MismatchLimit: the job hears why this worker leaves
    LastReport last;
    last.fatal_error = std::string(carried.leave_with.message());
    heartbeat.Close(last).IgnoreError();
    return Done(carried.leave_with);
  }
  absl::StatusOr<Plan> plan = PlanGeneration(options, world, carried);
  if (!plan.ok()) return Done(plan.status());
  {
    absl::StatusOr<std::unique_ptr<Transport>> connected = ConnectGeneration(options, server, world, *plan);
    if (!connected.ok()) return Done(connected.status());
    MutexLock lock(&transport_mu);
    transport = std::move(*connected);
    if (!heartbeat.abandoned().empty()) transport->Shutdown();  // the world moved on while we loaded
  }
  RingCollectives ring(transport.get(), CollectivesFor(options.env, plan->cfg, plan->parameters));
  // Islands: every step inside the island's ring, outer steps across. A
  // world shrunk by runtime.min_islands has fewer islands (one, even: it
  // still takes outer steps).
  const IslandShape shape = ShapeIslands(plan->cfg, world.world_size());
  std::optional<IslandRings> islands;
  if (shape.outer_steps) {
    absl::StatusOr<IslandRings> rings =
        IslandRings::Create(transport.get(), shape, CollectivesFor(options.env, plan->cfg, plan->parameters));
    if (!rings.ok()) return Done(rings.status());
    islands = *std::move(rings);
  }
  heartbeat.set_total_steps(TotalSteps(plan->cfg, plan->data->train.num_examples));
  const std::unique_ptr<TraceWriter> traces = OpenTraces(options, plan->cfg, world);
  // Transport bytes: the island's ring carries every step's (outer steps count their own).
  GenerationObserver observer(options.metrics, islands.has_value() ? islands->island.get() : &ring, &heartbeat,
                              traces.get());
  TrainOptions train = TrainOptionsFor(options, world, heartbeat, &observer, carried);
  if (islands.has_value()) train.island_rings = &*islands;
  absl::StatusOr<TrainResult> result;
  {
    Watchdog watchdog(heartbeat.steps_done(), WatchdogFor(options, plan->cfg, world.rank(), heartbeat));
    const absl::Status moved = world.memory_step() > 0
                                   ? MoveMemoryShards(world, plan->buckets, shape.RegisteredIslandSize(), ring,
                                                      *carried.memory)
                                   : absl::OkStatus();
    Collectives& steps = islands.has_value() ? static_cast<Collectives&>(*islands->island) : ring;
    result = moved.ok() ? RunTraining(plan->cfg, *plan->data, steps, train) : absl::StatusOr<TrainResult>(moved);
  }
  return EndGeneration(result, world, heartbeat, carried);
}

}  // namespace

absl::Status RunWorker(const WorkerOptions& options, TransportServer* server) {
  SCHECK(options.env != nullptr) << "WorkerOptions.env is required";
  if (options.coordinator.empty()) return absl::InvalidArgumentError("the coordinator's address is required");
  CoordinatorClient client(options.env, options.coordinator, options.auth);
  std::random_device rd;
  const uint64_t incarnation = (static_cast<uint64_t>(rd()) << 32) | rd();
  Carried carried;
  carried.memory = std::make_unique<MemorySnapshots>(options.env);
  carried.requested_rank = options.requested_rank;
  for (;;) {
    coordinator::RegisterRequest req;
    req.set_transport_address(options.transport_address);
    req.set_requested_rank(carried.requested_rank);
    if (options.island >= 0) req.set_island(options.island);
    req.set_previous_generation(carried.previous_generation);
    req.set_incarnation(incarnation);
    req.set_reason(carried.left_because);
    if (carried.finished_report.has_value()) *req.mutable_finished_report() = *std::move(carried.finished_report);
    for (const SnapshotKey& k : carried.memory->Held()) {
      coordinator::HeldSnapshot* h = req.add_held_snapshots();
      h->set_step(k.step);
      h->set_world_size(k.world);
      h->set_rank(k.rank);
    }
    carried.finished_report.reset();
    ASSIGN_OR_RETURN(coordinator::RegisterResponse world, client.Register(req, options.connect_timeout));
    if (world.job_over()) {
      // Exit 0 means the job finished: a supervisor (launch, systemd,
      // Slurm) may take every worker's 0 as the job's success.
      if (!world.job_error().empty()) {
        return absl::FailedPreconditionError(absl::StrCat("the job failed: ", world.job_error()));
      }
      SLOG(INFO) << "the job is over; exiting";
      return absl::OkStatus();
    }
    carried.requested_rank = world.slot();  // keep it across generations
    logging::SetPrefix(world.slot() == world.rank() ? absl::StrCat("worker ", world.rank())
                                                    : absl::StrCat("worker ", world.slot(), " (rank ", world.rank(), ")"));
    if (options.metrics != nullptr) options.metrics->SetGeneration(world.generation());
    SLOG(INFO) << "joined generation " << world.generation() << " of job " << world.job_id() << " as rank "
               << world.rank() << " of " << world.world_size()
               << (world.slot() != world.rank() ? absl::StrCat(" (slot ", world.slot(), ")") : "");
    Outcome outcome = RunGeneration(options, server, client, world, carried);
    if (outcome.done) return outcome.status;
  }
}

}  // namespace shardline
