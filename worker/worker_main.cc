// shardline-worker: one rank of a distributed job. See --help.
#include <cstdint>
#include <cstdlib>
#include <signal.h>
#include <unistd.h>

#include "absl/strings/str_cat.h"
#include "common/platform/process_init.h"
#include "common/faults/slow_disk_env.h"
#include "common/platform/args.h"
#include "common/net/listen_address.h"
#include "common/platform/logging.h"
#include "common/platform/malloc_tuning.h"
#include "common/platform/memory_limit.h"
#include "common/platform/env.h"
#include "common/observability/metrics_exposer.h"
#include "common/faults/corruption.h"
#include "common/faults/fault_injection.h"
#include "common/net/rpc_auth.h"
#include "common/net/rpc_auth_metrics.h"
#include "common/platform/status_macros.h"
#include "prometheus/registry.h"
#include "worker/collective/grpc_transport.h"
#include "worker/lifecycle/worker_lifecycle.h"
#include "worker/model/gemm.h"
#include "worker/model/products.h"
#include "worker/lifecycle/worker_metrics.h"

namespace shardline {
namespace {

constexpr char kHelp[] =
    "usage: shardline-worker --coordinator HOST:PORT [--listen HOST:PORT]\n"
    "                        [--metrics_listen HOST:PORT] [--rank K] [--island I]\n"
    "\n"
    "One rank of a distributed job. The job config comes from the coordinator;\n"
    "the worker needs no config file (only the data set at the config's data.dir).\n"
    "\n"
    "  --coordinator HOST:PORT    the coordinator's --listen address\n"
    "  --listen HOST:PORT         address other workers connect to (default\n"
    "                             127.0.0.1:0; port 0 picks one)\n"
    "  --advertise HOST           host name peers should use (default: the --listen\n"
    "                             host, or this machine's name for 0.0.0.0)\n"
    "  --metrics_listen HOST:PORT Prometheus /metrics (default 127.0.0.1:0)\n"
    "  --rank K                   ask for rank K (stable across restarts); default any\n"
    "  --island I                 this host is in island I (collective.islands): a rank\n"
    "                             of that island's block; put one island per site\n"
    "  --connect_timeout_seconds  give up on an unreachable coordinator after this\n"
    "                             long (default 60)\n"
    "  --token_file FILE          the job token (a private file); default $SHARDLINE_TOKEN.\n"
    "                             Sent on every call, required on every call received\n"
    "  --tls_cert F --tls_key F --tls_ca F  mutual TLS (PEM), to the coordinator and\n"
    "                             between workers; certificates must name the advertised host\n"
    "  --insecure                 allow --listen beyond loopback without a token or TLS\n"
    "  --ignore_sigterm           ignore SIGTERM: under a scheduler that signals every\n"
    "                             task on cancel (Slurm's scancel), the worker ends with\n"
    "                             the coordinator's graceful stop (final checkpoint);\n"
    "                             the scheduler's SIGKILL still bounds it\n"
    "\n"
    "Exit codes: 0 the job finished (or was stopped); 1 an error (the message names\n"
    "it); 3 the watchdog found this worker stuck.\n";

std::string AdvertiseHost(const Args& args, const std::string& listen) {
  if (args.Has("advertise")) return args.Get("advertise");
  std::string host = ListenHost(listen);
  if (IsWildcardHost(host)) {
    char name[256] = {};
    gethostname(name, sizeof(name) - 1);
    host = name;
  }
  return host;
}

absl::Status Run(const Args& args) {
  if (args.Get("coordinator").empty()) return absl::InvalidArgumentError("--coordinator is required");
  // --rank and --island: -1 when absent.
  auto index_flag = [&args](const std::string& name) -> absl::StatusOr<int> {
    ASSIGN_OR_RETURN(const int64_t v, IntFlag(args, name, -1));
    if (args.Has(name) && (v < 0 || v > INT32_MAX)) {
      return absl::InvalidArgumentError(absl::StrCat("--", name, " must be a non-negative integer, got '",
                                                     args.Get(name), "'"));
    }
    return static_cast<int>(v);
  };
  ASSIGN_OR_RETURN(int requested_rank, index_flag("rank"));
  ASSIGN_OR_RETURN(const int island, index_flag("island"));
  ASSIGN_OR_RETURN(const double connect_timeout, DoubleFlag(args, "connect_timeout_seconds", 60));
  const std::string listen = args.Has("listen") ? args.Get("listen") : "127.0.0.1:0";
  // The process's Env, chosen once: everything below is given it.
  Env* const env = DefaultEnvWithFaults();  // SHARDLINE_SLOW_DISK_FILE: fault-injection runs only
  auto registry = std::make_shared<prometheus::Registry>();
  ASSIGN_OR_RETURN(std::unique_ptr<RpcAuth> auth,
                   LoadRpcAuth(env, args, listen, RejectedRpcCounter(*registry)));
  // A rank's credential makes this worker that rank and no other.
  if (const int bound = auth->credential().rank; bound >= 0) {
    if (requested_rank >= 0 && requested_rank != bound) {
      return absl::InvalidArgumentError(absl::StrCat("--rank ", requested_rank, " but the credential given (",
                                                     args.Has("token_file") ? args.Get("token_file") : "$SHARDLINE_TOKEN",
                                                     ") is rank ", bound, "'s"));
    }
    requested_rank = bound;
  }
  TransportServerOptions transport_options;
  transport_options.auth = auth.get();
  transport_options.on_connection_refused = RefusedConnectionCounter(*registry);
  ASSIGN_OR_RETURN(std::unique_ptr<TransportServer> server, TransportServer::Start(env, listen, transport_options));
  const std::string address = absl::StrCat(AdvertiseHost(args, listen), ":", server->port());

  // A fault-injection spec that does not parse is refused here, not ignored.
  ASSIGN_OR_RETURN(const std::optional<CorruptionSpec> corrupt, CorruptionFromEnv());
  if (corrupt.has_value()) {
    SLOG(WARNING) << "SHARDLINE_CORRUPT is set: rank " << corrupt->rank << " flips bit " << corrupt->bit << " of a "
                  << CorruptSiteName(corrupt->site) << " value in step " << corrupt->step
                  << " (fault injection, common/faults/corruption.h)";
  }
  SetBlasThreads(1);
  // 50 ms: part of every (re)start's path to its first step.
  const double sgemm_gflops = MeasureSgemmGflops(env, 512, 0.05);
  // The bfloat16 peak (another 50 ms) only when a BF16 job starts.
  WorkerMetrics metrics(*registry, {sgemm_gflops * 1e9, [env] {
                                      if (!CheckPrecisionSupported(Precision::kBfloat16).ok()) return 0.0;
                                      return MeasureGemmGflops(env, Precision::kBfloat16, 512, 0.05) * 1e9;
                                    }});
  const std::string metrics_listen = args.Has("metrics_listen") ? args.Get("metrics_listen") : "127.0.0.1:0";
  if (const std::string warning = MetricsListenWarning(metrics_listen); !warning.empty()) SLOG(WARNING) << warning;
  ASSIGN_OR_RETURN(std::unique_ptr<MetricsExposer> exposer,
                   MetricsExposer::Start(env, metrics_listen, registry,
                                         [&metrics] { return metrics.health(); }));
  SLOG(INFO) << "worker transport on " << address << ", metrics on port " << exposer->port()
             << ", coordinator " << args.Get("coordinator") << (island >= 0 ? absl::StrCat(", island ", island) : "")
             << "; OpenBLAS " << BlasCoreName() << " kernels, "
             << static_cast<int>(sgemm_gflops) << " GFLOP/s sgemm; matrix-product ISA " << CpuMatmulIsa()
             << "; bfloat16 products: " << Bf16KernelName(ProcessBf16Kernel());

  WorkerOptions options;
  options.coordinator = args.Get("coordinator");
  options.transport_address = address;
  options.requested_rank = requested_rank;
  options.island = island;
  options.connect_timeout = absl::Seconds(connect_timeout);
  options.metrics = &metrics;
  options.auth = auth.get();
  options.env = env;
  if (const char* f = std::getenv("SHARDLINE_NET_FAULT_FILE")) options.net_fault_file = f;  // likewise
  absl::Status ran = RunWorker(options, server.get());
  if (ran.ok()) HangPoint("worker_after_job_done");
  return ran;
}

// SIGTERM ends a worker at once and quietly (no crash report: it was asked
// to), with the conventional 128 + 15. The job's graceful stop goes through
// the coordinator (SIGTERM to it, or to `shardline launch`).
void OnTerm(int) {
  static const char kLine[] = "shardline-worker: stopped by SIGTERM\n";
  ssize_t ignored = write(STDERR_FILENO, kLine, sizeof(kLine) - 1);
  (void)ignored;
  _exit(128 + SIGTERM);
}

}  // namespace
}  // namespace shardline

int main(int argc, char** argv) {
  shardline::InitProcess(argv[0]);
  shardline::logging::SetPrefix("worker");
  // Under a memory cgroup limit the plan is a budget (memory_plan.h): one
  // malloc arena keeps what threads free for reuse by the others.
  if (const shardline::MemoryBound b = shardline::ReadMemoryBound(shardline::Env::Default()); b.cgroup_limit > 0) {
    shardline::UseOneMallocArena();
    SLOG(INFO) << "memory cgroup limit " << (b.cgroup_limit >> 20) << " MiB (" << b.cgroup
               << "): one malloc arena";
  }
  shardline::Args args;
  absl::Status parsed = shardline::ParseArgs(
      argc, argv, 1, {{"coordinator", "listen", "advertise", "metrics_listen", "rank", "island", "connect_timeout_seconds",
                       "token_file", "tls_cert", "tls_key", "tls_ca"}, {}, {"insecure", "ignore_sigterm"}}, "shardline-worker", &args);
  // After the failure handler, which also takes SIGTERM.
  signal(SIGTERM, parsed.ok() && args.Has("ignore_sigterm") ? SIG_IGN : shardline::OnTerm);
  return shardline::RunCommand(parsed, args, shardline::kHelp, "shardline-worker", shardline::Run);
}
