// Test helper: N ranks as threads of this process, connected either by the
// in-process LocalFabric or by real gRPC TransportServers on loopback.
#ifndef SHARDLINE_TESTS_WORKER_COLLECTIVE_WORLD_H_
#define SHARDLINE_TESTS_WORKER_COLLECTIVE_WORLD_H_

#include <functional>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "absl/status/status.h"
#include "worker/collective/grpc_transport.h"
#include "worker/collective/local_transport.h"
#include "common/topology/peer_set.h"

namespace shardline {

enum class TransportKind { kLocal, kGrpc };

inline std::string KindName(TransportKind k) { return k == TransportKind::kLocal ? "local" : "grpc"; }

class TestWorld {
 public:
  TestWorld(TransportKind kind, int n, const TransportServerOptions& grpc_options = {}) : kind_(kind), n_(n) {
    if (kind == TransportKind::kGrpc) {
      for (int r = 0; r < n; ++r) {
        servers_.push_back(*TransportServer::Start(Env::Default(), "127.0.0.1:0", grpc_options));
        addresses_.push_back("127.0.0.1:" + std::to_string(servers_.back()->port()));
      }
    }
  }

  // Connects a fresh generation and runs fn(rank, transport) on n threads.
  // Returns each rank's status.
  std::vector<absl::Status> Run(const std::function<absl::Status(int, Transport*)>& fn) {
    ++generation_;
    std::vector<std::unique_ptr<Transport>> transports;
    if (kind_ == TransportKind::kLocal) fabric_ = std::make_unique<LocalFabric>(n_);
    for (int r = 0; r < n_; ++r) {
      transports.push_back(kind_ == TransportKind::kLocal
                               ? fabric_->Connect(r)
                               : *servers_[static_cast<size_t>(r)]->Connect(generation_, r, Directory(r)));
    }
    std::vector<absl::Status> statuses(static_cast<size_t>(n_));
    std::vector<std::thread> threads;
    for (int r = 0; r < n_; ++r) {
      threads.emplace_back([&, r] {
        statuses[static_cast<size_t>(r)] = fn(r, transports[static_cast<size_t>(r)].get());
      });
    }
    for (auto& t : threads) t.join();
    return statuses;
  }

  // Over gRPC, rank r knows the addresses of its data-plane peers only, as
  // the coordinator hands them out (common/topology/peer_set.h): a
  // collective that reaches another rank fails the test.
  std::vector<std::string> Directory(int r) const {
    std::vector<std::string> known(addresses_.size());
    known[static_cast<size_t>(r)] = addresses_[static_cast<size_t>(r)];
    for (int p : DataPlanePeers(r, n_)) known[static_cast<size_t>(p)] = addresses_[static_cast<size_t>(p)];
    return known;
  }

  LocalFabric* fabric() { return fabric_.get(); }
  TransportServer* server(int r) { return servers_[static_cast<size_t>(r)].get(); }

 private:
  TransportKind kind_;
  int n_;
  uint64_t generation_ = 0;
  std::unique_ptr<LocalFabric> fabric_;
  std::vector<std::unique_ptr<TransportServer>> servers_;
  std::vector<std::string> addresses_;
};

}  // namespace shardline

#endif  // SHARDLINE_TESTS_WORKER_COLLECTIVE_WORLD_H_
