// A Transport decorator that injects message-level network faults, for
// fault-injection runs (the chaos harness, tests/chaos/) and tests: this
// kernel has no netem, so delay, loss and reordering come from here. What it
// does is read from a control file, re-read at most every 100 ms, so a
// harness can turn faults on and off while the job runs:
//
//   delay_ms=20 jitter_ms=10 loss=0.001 reorder=0.05 seed=7
//
//   delay_ms, jitter_ms  each Send first waits delay_ms + uniform[0, jitter_ms)
//   loss                 the probability that a Send is dropped (the peer's
//                        receive then meets its deadline: the world re-forms)
//   reorder              the probability that a Send is held back and handed
//                        on after the next Send to the same peer (or at the
//                        next other call): the tag-keyed mailbox must absorb it
//   seed                 of the decisions (per rank: seed + rank)
//
// Absent file or fields: no fault. Enabled in shardline-worker only by the
// environment variable SHARDLINE_NET_FAULT_FILE=<control file>.
#ifndef SHARDLINE_WORKER_COLLECTIVE_FAULTY_TRANSPORT_H_
#define SHARDLINE_WORKER_COLLECTIVE_FAULTY_TRANSPORT_H_

#include <memory>
#include <string>

#include "common/platform/env.h"
#include "worker/collective/transport.h"

namespace shardline {

std::unique_ptr<Transport> NewFaultyTransport(std::unique_ptr<Transport> inner, std::string control_file, Env* env);

}  // namespace shardline

#endif  // SHARDLINE_WORKER_COLLECTIVE_FAULTY_TRANSPORT_H_
