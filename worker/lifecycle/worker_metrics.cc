#include "worker/lifecycle/worker_metrics.h"

#include <algorithm>

#include "absl/strings/str_cat.h"

#include "common/observability/prometheus_util.h"

#include "common/platform/logging.h"

namespace shardline {
WorkerMetrics::WorkerMetrics(prometheus::Registry& r, Peaks peaks)
    : peaks_(peaks),
      step_(NewGauge(r, "shardline_step", "Steps this worker has completed in its current run")),
      loss_(NewGauge(r, "shardline_loss", "Training loss of the last step (mean over the global batch)")),
      learning_rate_(NewGauge(r, "shardline_learning_rate", "Learning rate of the last step")),
      grad_norm_(NewGauge(r, "shardline_grad_norm", "Global gradient L2 norm at the last log step")),
      samples_per_second_(NewGauge(r, "shardline_samples_per_second", "Global examples per second of the last step")),
      mfu_(NewGauge(r, "shardline_mfu_ratio",
                    "This rank's model FLOPs per second over its measured matrix-product peak in the job's precision "
                    "(sgemm for FP32, oneDNN's bfloat16 matmul for BF16)")),
      peak_flops_gauge_(NewGauge(r, "shardline_sgemm_peak_flops", "Measured one-process sgemm FLOP/s (the FP32 MFU denominator)")),
      bf16_peak_flops_gauge_(NewGauge(r, "shardline_bf16_peak_flops",
                                      "Measured one-process oneDNN bfloat16 matmul FLOP/s (the BF16 MFU denominator; "
                                      "0 on a CPU without AVX512_BF16)")),
      generation_(NewGauge(r, "shardline_worker_generation", "World generation this worker is in")),
      owned_parameter_bytes_(NewGauge(r, "shardline_owned_parameter_bytes", "Bytes of the parameter shard this worker owns")),
      owned_optimizer_state_bytes_(NewGauge(r, "shardline_owned_optimizer_state_bytes", "Bytes of optimizer state this worker owns")),
      step_duration_(prometheus::BuildHistogram()
                         .Name("shardline_step_duration_seconds")
                         .Help("Wall time of a training step")
                         .Register(r)
                         .Add({}, prometheus::Histogram::BucketBoundaries{0.0005, 0.001, 0.002, 0.005, 0.01, 0.02,
                                                                           0.05, 0.1, 0.2, 0.5, 1, 2, 5})),
      phase_seconds_(prometheus::BuildCounter()
                         .Name("shardline_phase_seconds_total")
                         .Help("Time spent in each phase of the training steps")
                         .Register(r)),
      overhead_seconds_(prometheus::BuildCounter()
                            .Name("shardline_worker_overhead_seconds_total")
                            .Help("Time this worker spent outside its steps' own work, by kind "
                                  "(restore, evaluation, checkpoint_stall, memory_snapshot)")
                            .Register(r)),
      busy_seconds_(NewCounter(r, "shardline_busy_seconds_total",
                               "Time in steps spent on this rank's own work (data, forward, backward, optimizer), "
                               "not waiting on peers")),
      wait_peers_seconds_(NewCounter(r, "shardline_wait_peers_seconds_total",
                                     "Time in the per-step scalar all-reduce: waiting for the slowest rank")),
      audits_(NewCounter(r, "shardline_audits_total",
                         "Replay audits this worker passed: steps in which it recomputed another rank's first "
                         "micro-batch and every rank's gradient hash matched (audit.every_steps)")),
      collective_background_seconds_(NewCounter(
          r, "shardline_collective_background_seconds_total",
          "Time gradient and parameter collectives ran in the background (collective.overlap), hidden behind "
          "compute or waited for in the reduce_scatter and all_gather phases")),
      outer_steps_(NewCounter(r, "shardline_outer_steps_total", "Islands: outer steps this worker took part in")),
      outer_sent_bytes_(NewCounter(r, "shardline_outer_sent_bytes_total",
                                   "Islands: pseudo-gradient payload bytes this worker sent across islands")),
      outer_seconds_(NewCounter(r, "shardline_outer_seconds_total",
                                "Islands: time in outer steps, waiting on the exchange across islands included")),
      island_divergence_(NewGauge(r, "shardline_island_divergence",
                                  "Islands: at the last outer step, the RMS over islands of the pseudo-gradient's L2 "
                                  "norm (how far the islands walked apart in their inner steps)")),
      sent_bytes_(NewCounter(r, "shardline_transport_sent_bytes_total", "Collective payload bytes sent")),
      received_bytes_(NewCounter(r, "shardline_transport_received_bytes_total", "Collective payload bytes received")),
      memory_bytes_(prometheus::BuildGauge()
                        .Name("shardline_worker_memory_bytes")
                        .Help("Bytes this worker holds, by kind: parameters and gradients resident after the last "
                              "step, parameters_peak during it (ZeRO-3: own pieces and the buckets gathered at "
                              "once), optimizer state, activations (the model's workspace), evaluation (what evaluations "
                              "added to it), evaluation_peak (parameters held at an evaluation's peak, as "
                              "parameters_peak), communication (the most the collectives held at once in "
                              "the step: received messages, gRPC's copies of sent ones, the bf16 wire buffer), "
                              "peak_rss of the process")
                        .Register(r)) {
  peak_flops_gauge_.Set(peaks.fp32);
  for (const char* phase : {"compute", "reduce_scatter", "optimizer", "all_gather"}) {
    phase_seconds_.Add({{"phase", phase}});
  }
  for (Overhead kind : {Overhead::kRestore, Overhead::kEvaluation, Overhead::kCheckpointStall, Overhead::kMemorySnapshot}) {
    overhead_seconds_.Add({{"kind", OverheadName(kind)}});
  }
}

void WorkerMetrics::OnStart(const RunInfo& info) {
  info_ = info;
  if (info.bf16 && bf16_peak_ < 0) {
    bf16_peak_ = peaks_.measure_bf16 ? peaks_.measure_bf16() : 0;
    bf16_peak_flops_gauge_.Set(bf16_peak_);
    SLOG(INFO) << "oneDNN bfloat16 peak " << static_cast<int>(bf16_peak_ / 1e9) << " GFLOP/s (the BF16 MFU denominator)";
  }
  SLOG(INFO) << "rank " << info.rank << " of " << info.world_size << " owns " << info.owned_parameters
             << " parameters (" << info.owned_parameters * 4 << " bytes) and "
             << info.optimizer_state_floats * 4 << " bytes of optimizer state";
  owned_parameter_bytes_.Set(static_cast<double>(info.owned_parameters) * sizeof(float));
  owned_optimizer_state_bytes_.Set(static_cast<double>(info.optimizer_state_floats) * sizeof(float));
}

void WorkerMetrics::OnStep(const StepResult& r, double seconds) {
  step_.Set(static_cast<double>(r.step + 1));
  loss_.Set(r.loss);
  learning_rate_.Set(r.lr);
  if (r.grad_norm >= 0) grad_norm_.Set(r.grad_norm);
  step_duration_.Observe(seconds);
  phase_seconds_.Add({{"phase", "compute"}}).Increment(r.times.compute);
  phase_seconds_.Add({{"phase", "reduce_scatter"}}).Increment(r.times.reduce_scatter);
  phase_seconds_.Add({{"phase", "optimizer"}}).Increment(r.times.optimizer);
  phase_seconds_.Add({{"phase", "all_gather"}}).Increment(r.times.all_gather);
  busy_seconds_.Increment(std::max(0.0, r.times.busy()));
  const MemoryHeld& m = r.memory;
  for (const auto& [kind, bytes] : {std::pair<const char*, int64_t>{"parameters", m.parameters},
                                    {"parameters_peak", m.parameters_peak},
                                    {"gradients", m.gradients},
                                    {"optimizer", m.optimizer},
                                    {"activations", m.activations},
                                    {"evaluation", m.evaluation},
                                    {"evaluation_peak", m.evaluation_peak},
                                    {"communication", m.communication},
                                    {"rounded_weights", m.rounded_weights},
                                    {"peak_rss", PeakRssBytes()}}) {
    memory_bytes_.Add({{"kind", kind}}).Set(static_cast<double>(bytes));
  }
  wait_peers_seconds_.Increment(r.times.wait_peers);
  if (r.audited) audits_.Increment();
  collective_background_seconds_.Increment(r.times.comm_busy);
  if (seconds > 0) {
    samples_per_second_.Set(info_.global_batch_size / seconds);
    const double my_flops = static_cast<double>(info_.flops_per_example) * info_.global_batch_size /
                            std::max(1, info_.world_size);
    const double peak = info_.bf16 ? bf16_peak_ : peaks_.fp32;
    if (peak > 0) mfu_.Set(my_flops / seconds / peak);
  }
}

void WorkerMetrics::OnOverhead(Overhead kind, double seconds) {
  overhead_seconds_.Add({{"kind", OverheadName(kind)}}).Increment(seconds);
}

void WorkerMetrics::SetTransportBytes(int64_t sent, int64_t received) {
  if (sent < sent_seen_ || received < received_seen_) sent_seen_ = received_seen_ = 0;  // a new transport
  sent_bytes_.Increment(static_cast<double>(sent - sent_seen_));
  received_bytes_.Increment(static_cast<double>(received - received_seen_));
  sent_seen_ = sent;
  received_seen_ = received;
}

void WorkerMetrics::SetGeneration(uint64_t generation) {
  generation_.Set(static_cast<double>(generation));
  MutexLock lock(&stuck_mu_);
  stuck_.clear();
}

void WorkerMetrics::SetStuck(const std::string& what) {
  MutexLock lock(&stuck_mu_);
  stuck_ = what;
}

Health WorkerMetrics::health() const {
  {
    MutexLock lock(&stuck_mu_);
    if (!stuck_.empty()) return {false, absl::StrCat("stuck: ", stuck_)};
  }
  // The gauges are the state: thread-safe to read, set as the worker goes.
  const auto generation = static_cast<uint64_t>(generation_.Value());
  if (generation == 0) return {false, "registering with the coordinator; no world joined yet"};
  return {true, absl::StrCat("generation ", generation, ", step ", static_cast<int64_t>(step_.Value()))};
}

void WorkerMetrics::OnOuterStep(const OuterStepReport& report) {
  outer_steps_.Increment();
  outer_sent_bytes_.Increment(static_cast<double>(report.bytes_sent));
  outer_seconds_.Increment(report.seconds);
  island_divergence_.Set(report.pseudo_gradient_norm);
}

}  // namespace shardline
