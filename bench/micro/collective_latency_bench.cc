// Latency of small collectives with N ranks as threads of this process, over
// the in-process transport and over gRPC on loopback: the per-step scalar
// all-reduce (recursive doubling) and small AllReduces by algorithm (ring
// against recursive doubling), to see where the size-based choice
// (CollectiveOptions::doubling_max_bytes) should switch.
//
//   collective_latency_bench --worlds 2,4,8,16 --sizes 8,1024,16384,65536 --iters 200
//
// One JSON object per (transport, N, op, algorithm, size) on stdout: the
// median over iterations of the slowest rank's time (each iteration starts
// after a barrier).
#include <algorithm>
#include <cstdio>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/numbers.h"
#include "absl/strings/str_split.h"
#include "common/platform/args.h"
#include "common/platform/process_init.h"
#include "worker/collective/grpc_transport.h"
#include "worker/collective/local_transport.h"
#include "worker/collective/ring.h"

namespace shardline {
namespace {

std::vector<int64_t> List(const Args& args, const std::string& name, const std::string& def) {
  std::vector<int64_t> out;
  for (absl::string_view s : absl::StrSplit(args.Has(name) ? args.Get(name) : def, ',')) {
    int64_t v;
    if (!absl::SimpleAtoi(s, &v) || v < 0) {
      fprintf(stderr, "--%s: '%s' is not a count\n", name.c_str(), std::string(s).c_str());
      exit(2);
    }
    out.push_back(v);
  }
  return out;
}

// The transports of one world: a LocalFabric, or N gRPC servers on loopback.
class World {
 public:
  World(bool grpc, int n) : n_(n) {
    if (!grpc) {
      fabric_ = std::make_unique<LocalFabric>(n);
      for (int r = 0; r < n; ++r) transports_.push_back(fabric_->Connect(r));
      return;
    }
    TransportServerOptions o;
    o.keepalive_timeout = absl::Seconds(30);  // 16 ranks on 2 cores
    std::vector<std::string> addresses;
    for (int r = 0; r < n; ++r) {
      servers_.push_back(*TransportServer::Start(Env::Default(), "127.0.0.1:0", o));
      addresses.push_back("127.0.0.1:" + std::to_string(servers_.back()->port()));
    }
    for (int r = 0; r < n; ++r) transports_.push_back(*servers_[static_cast<size_t>(r)]->Connect(1, r, addresses));
  }
  ~World() {
    for (auto& t : transports_) t->Shutdown();
  }

  // Runs fn(rank, transport) on n threads; false if any rank failed.
  bool Run(const std::function<absl::Status(int, Transport*)>& fn) {
    std::vector<absl::Status> statuses(static_cast<size_t>(n_));
    std::vector<std::thread> threads;
    for (int r = 0; r < n_; ++r) {
      threads.emplace_back([&, r] { statuses[static_cast<size_t>(r)] = fn(r, transports_[static_cast<size_t>(r)].get()); });
    }
    for (auto& t : threads) t.join();
    for (const absl::Status& s : statuses) {
      if (!s.ok()) {
        fprintf(stderr, "%s\n", std::string(s.message()).c_str());
        return false;
      }
    }
    return true;
  }

 private:
  int n_;
  std::unique_ptr<LocalFabric> fabric_;
  std::vector<std::unique_ptr<TransportServer>> servers_;
  std::vector<std::unique_ptr<Transport>> transports_;
};

// The median over `iters` of the slowest rank's time for op(ring).
double Time(World& world, int iters, int64_t doubling_max_bytes,
            const std::function<absl::Status(RingCollectives&)>& op, bool* ok) {
  std::vector<double> slowest;
  *ok = world.Run([&](int rank, Transport* t) -> absl::Status {
    CollectiveOptions o;
    o.env = Env::Default();
    o.doubling_max_bytes = doubling_max_bytes;
    RingCollectives ring(t, o);
    for (int it = 0; it < iters + 5; ++it) {
      double barrier[1] = {0};
      if (absl::Status s = ring.AllReduceScalars(absl::MakeSpan(barrier), ReduceOp::kSum); !s.ok()) return s;
      const absl::Time start = absl::Now();
      if (absl::Status s = op(ring); !s.ok()) return s;
      double seconds[1] = {absl::ToDoubleSeconds(absl::Now() - start)};
      if (absl::Status s = ring.AllReduceScalars(absl::MakeSpan(seconds), ReduceOp::kMax); !s.ok()) return s;
      if (rank == 0 && it >= 5) slowest.push_back(seconds[0]);
    }
    return absl::OkStatus();
  });
  std::sort(slowest.begin(), slowest.end());
  return slowest.empty() ? 0 : slowest[slowest.size() / 2];
}

int Main(int argc, char** argv) {
  InitProcess(argv[0]);
  Args args;
  if (absl::Status s = ParseArgs(argc, argv, 1, {{"worlds", "sizes", "iters"}, {}}, "collective_latency_bench", &args);
      !s.ok()) {
    fprintf(stderr, "%s\n", std::string(s.message()).c_str());
    return 2;
  }
  const std::vector<int64_t> worlds = List(args, "worlds", "2,4,8,16");
  const std::vector<int64_t> sizes = List(args, "sizes", "8,256,4096,16384,65536,262144");
  const int iters = static_cast<int>(List(args, "iters", "200")[0]);
  for (const bool grpc : {false, true}) {
    for (int64_t n : worlds) {
      World world(grpc, static_cast<int>(n));
      auto report = [&](const char* op, const char* algorithm, int64_t bytes, double seconds) {
        printf("{\"transport\":\"%s\",\"world\":%ld,\"op\":\"%s\",\"algorithm\":\"%s\",\"bytes\":%ld,"
               "\"median_us\":%.2f}\n",
               grpc ? "grpc" : "local", static_cast<long>(n), op, algorithm, static_cast<long>(bytes), seconds * 1e6);
        fflush(stdout);
      };
      bool ok = true;
      // The per-step scalar all-reduce: 4 doubles (loss, correct, norm, flag).
      const double scalars_s = Time(world, iters, 0, [](RingCollectives& ring) {
        double v[4] = {1, 2, 3, 4};
        return ring.AllReduceScalars(absl::MakeSpan(v), ReduceOp::kSum);
      }, &ok);
      if (!ok) return 3;
      report("scalars", "doubling", 32, scalars_s);
      for (int64_t bytes : sizes) {
        std::vector<std::vector<float>> bufs(static_cast<size_t>(n), std::vector<float>(static_cast<size_t>(bytes / 4), 1.0f));
        for (const bool doubling : {false, true}) {
          const double s = Time(world, iters, doubling ? bytes : 0, [&](RingCollectives& ring) {
            return ring.AllReduce(absl::MakeSpan(bufs[static_cast<size_t>(ring.rank())]));
          }, &ok);
          if (!ok) return 3;
          report("allreduce", doubling ? "doubling" : "ring", bytes, s);
        }
      }
    }
  }
  return 0;
}

}  // namespace
}  // namespace shardline

int main(int argc, char** argv) { return shardline::Main(argc, argv); }
