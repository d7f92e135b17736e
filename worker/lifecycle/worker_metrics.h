// A worker's Prometheus metrics, built once on a registry that is passed in;
// fed by the train loop as a StepObserver.
//
//   auto registry = std::make_shared<prometheus::Registry>();
//   WorkerMetrics metrics(*registry, {MeasureSgemmGflops(env, 512, 0.2) * 1e9, nullptr});
//   options.observer = &metrics;
#ifndef SHARDLINE_WORKER_LIFECYCLE_WORKER_METRICS_H_
#define SHARDLINE_WORKER_LIFECYCLE_WORKER_METRICS_H_

#include <cstdint>
#include <functional>
#include <string>

#include "common/observability/metrics_exposer.h"
#include "common/platform/mutex.h"
#include "prometheus/counter.h"
#include "prometheus/gauge.h"
#include "prometheus/histogram.h"
#include "prometheus/registry.h"
#include "worker/train/train_loop.h"

namespace shardline {

class WorkerMetrics : public StepObserver {
 public:
  // This process's matrix-product FLOP/s in each precision: the MFU
  // denominator of a job in that precision.
  struct Peaks {
    double fp32 = 0;  // OpenBLAS sgemm, measured at start
    // Measures oneDNN's bfloat16 peak (0 on a CPU without it); called once,
    // at the first BF16 run's start, so an FP32 worker's (re)start never
    // pays for it. Null: not measured.
    std::function<double()> measure_bf16;
  };
  WorkerMetrics(prometheus::Registry& registry, Peaks peaks);

  void OnStart(const RunInfo& info) override;
  void OnStep(const StepResult& result, double step_seconds) override;
  void OnOverhead(Overhead kind, double seconds) override;
  void OnTrace(int64_t, const std::vector<PhaseSpan>&) override {}
  void OnOuterStep(const OuterStepReport& report) override;
  // Advances the byte counters to these running totals of one transport.
  void SetTransportBytes(int64_t sent, int64_t received);
  // Joined a world of this generation (clears a stuck mark).
  void SetGeneration(uint64_t generation);
  // The watchdog found the training thread stuck: /healthz fails until the
  // next generation.
  void SetStuck(const std::string& what);

  // For /healthz (thread-safe): not ok before the first world is joined or
  // while stuck; ok, with the generation and step, otherwise (also while
  // registering again after a world broke: that is expected).
  Health health() const;

 private:
  mutable Mutex stuck_mu_;
  std::string stuck_ ABSL_GUARDED_BY(stuck_mu_);
  const Peaks peaks_;
  double bf16_peak_ = -1;  // < 0: not measured yet
  RunInfo info_;
  int64_t sent_seen_ = 0, received_seen_ = 0;
  prometheus::Gauge& step_;
  prometheus::Gauge& loss_;
  prometheus::Gauge& learning_rate_;
  prometheus::Gauge& grad_norm_;
  prometheus::Gauge& samples_per_second_;
  prometheus::Gauge& mfu_;
  prometheus::Gauge& peak_flops_gauge_;
  prometheus::Gauge& bf16_peak_flops_gauge_;
  prometheus::Gauge& generation_;
  prometheus::Gauge& owned_parameter_bytes_;
  prometheus::Gauge& owned_optimizer_state_bytes_;
  prometheus::Histogram& step_duration_;
  prometheus::Family<prometheus::Counter>& phase_seconds_;
  prometheus::Family<prometheus::Counter>& overhead_seconds_;
  prometheus::Counter& busy_seconds_;
  prometheus::Counter& wait_peers_seconds_;
  prometheus::Counter& audits_;
  prometheus::Counter& collective_background_seconds_;
  prometheus::Counter& outer_steps_;
  prometheus::Counter& outer_sent_bytes_;
  prometheus::Counter& outer_seconds_;
  prometheus::Gauge& island_divergence_;
  prometheus::Counter& sent_bytes_;
  prometheus::Counter& received_bytes_;
  prometheus::Family<prometheus::Gauge>& memory_bytes_;
};

}  // namespace shardline

#endif  // SHARDLINE_WORKER_LIFECYCLE_WORKER_METRICS_H_
