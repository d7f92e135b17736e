// An in-process transport: ranks are threads of one process sharing a
// LocalFabric. For tests of the collective algorithms, and for simulating a
// dead rank (Kill) without processes.
//
//   LocalFabric fabric(4);
//   std::vector<std::thread> ranks;
//   for (int r = 0; r < 4; ++r) ranks.emplace_back([&, r] {
//     std::unique_ptr<Transport> t = fabric.Connect(r);
//     RingCollectives ring(t.get(), options);
//     ...
//   });
#ifndef SHARDLINE_WORKER_COLLECTIVE_LOCAL_TRANSPORT_H_
#define SHARDLINE_WORKER_COLLECTIVE_LOCAL_TRANSPORT_H_

#include <memory>
#include <vector>

#include "worker/collective/mailbox.h"
#include "worker/collective/transport.h"

namespace shardline {

class LocalFabric {
 public:
  explicit LocalFabric(int world_size);
  int world_size() const { return static_cast<int>(mailboxes_.size()); }
  // The transport of `rank`. The fabric must outlive it.
  std::unique_ptr<Transport> Connect(int rank);
  // Simulates the death of `rank`: every other rank's Recv from it fails
  // with kUnavailable, and its own operations fail with kAborted.
  void Kill(int rank);

 private:
  friend class LocalTransport;
  std::vector<std::unique_ptr<Mailbox>> mailboxes_;
};

}  // namespace shardline

#endif  // SHARDLINE_WORKER_COLLECTIVE_LOCAL_TRANSPORT_H_
