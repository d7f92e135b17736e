// The Register calls, and the plainest report, the Job tests make for
// their simulated workers.
#ifndef SHARDLINE_TESTS_COORDINATOR_REGISTER_REQUEST_H_
#define SHARDLINE_TESTS_COORDINATOR_REGISTER_REQUEST_H_

#include <cstdint>

#include "absl/strings/str_cat.h"
#include "proto/coordinator.pb.h"

namespace shardline {

// A worker asking for `slot` (-1: any), in its incarnation `incarnation`
// (which also names its transport address), last in generation `previous`.
inline coordinator::RegisterRequest RegisterReq(int slot, uint64_t incarnation, uint64_t previous = 0) {
  coordinator::RegisterRequest r;
  r.set_transport_address(absl::StrCat("127.0.0.1:", 1000 + incarnation));
  r.set_requested_rank(slot);
  r.set_incarnation(incarnation);
  r.set_previous_generation(previous);
  return r;
}

// A report from the member `world` answered (its rank, generation and
// secret), carrying nothing else yet.
inline coordinator::WorkerReport MemberReport(const coordinator::RegisterResponse& world) {
  coordinator::WorkerReport r;
  r.set_rank(world.rank());
  r.set_generation(world.generation());
  r.set_member_secret(world.member_secret());
  return r;
}

// Says the worker holds in memory shard `shard` of the snapshot of `step`
// taken by a world of `world`.
inline void AddHeld(coordinator::RegisterRequest* r, int64_t step, int world, int shard) {
  coordinator::HeldSnapshot* h = r->add_held_snapshots();
  h->set_step(step);
  h->set_world_size(world);
  h->set_rank(shard);
}

}  // namespace shardline

#endif  // SHARDLINE_TESTS_COORDINATOR_REGISTER_REQUEST_H_
