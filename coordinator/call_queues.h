// The threads and completion queues that serve the coordinator's RPCs on
// gRPC's asynchronous API. Each thread polls its own queue and runs every
// event of the calls on it, one at a time, on that thread: a report is
// read, handed to the Job and the next read started without a hand-off to
// another thread. With no callback or synchronous method on the server,
// these threads are the only ones polling gRPC's sockets.
//
//   CallQueues queues({.threads = 1});
//   queues.AddTo(&builder);                  // before BuildAndStart
//   ... server = builder.BuildAndStart(); ready calls on queues.queue(i) ...
//   queues.Start();
//   ...
//   server->Shutdown(deadline);             // no call is left open
//   queues.Stop();
#ifndef SHARDLINE_COORDINATOR_CALL_QUEUES_H_
#define SHARDLINE_COORDINATOR_CALL_QUEUES_H_

#include <atomic>
#include <memory>
#include <thread>
#include <vector>

#include "absl/synchronization/blocking_counter.h"
#include "grpcpp/grpcpp.h"

namespace shardline {

// An RPC in progress. Each operation it starts carries a CallTag naming it
// and the operation; the queue's thread hands the completion back here.
class AsyncCall {
 public:
  virtual ~AsyncCall() = default;
  // Operation `op` completed (`ok`: as gRPC reports it). Runs on the
  // call's queue's thread, never concurrently with another Complete of the
  // same call.
  virtual void Complete(int op, bool ok) = 0;
};

struct CallTag {
  AsyncCall* call;  // null: CallQueues' own (the stop barrier)
  int op;
};

struct CallQueuesOptions {
  // Threads, each with its own queue. One keeps the RPC work of the
  // coordinator on one core; more spread it when the Job is not the
  // bottleneck.
  int threads = 1;
};

class CallQueues {
 public:
  explicit CallQueues(CallQueuesOptions options = {});
  // Stop()s if that was not done.
  ~CallQueues();

  // Adds the queues to `builder`; once, before the server is built.
  void AddTo(grpc::ServerBuilder* builder);
  size_t size() const { return queues_.size(); }
  grpc::ServerCompletionQueue* queue(size_t i) const { return queues_[i].get(); }

  // Starts the threads. Calls readied before are served once they arrive.
  void Start();

  // True once Stop began: a call must then start no operation. Read it on
  // a queue's thread before starting one: Stop waits until every thread has
  // finished what it was doing when this turned true.
  bool stopping() const { return stopping_.load(std::memory_order_acquire); }

  // After the server's Shutdown has returned (no call is left open) and
  // after every thread other than the queues' own has stopped starting
  // operations: stops, drains and shuts the queues, and joins the threads.
  // Idempotent.
  void Stop();

 private:
  void Serve(grpc::ServerCompletionQueue* cq);

  const CallQueuesOptions options_;
  std::vector<std::unique_ptr<grpc::ServerCompletionQueue>> queues_;
  std::vector<std::thread> threads_;
  std::atomic<bool> stopping_{false};
  bool stopped_ = false;
  // Stop's barrier: the tag its alarms carry, and the count the threads
  // take down (set before the alarms; atomic, as what orders the two is
  // inside gRPC).
  const CallTag barrier_tag_{nullptr, 0};
  std::atomic<absl::BlockingCounter*> barrier_{nullptr};
};

}  // namespace shardline

#endif  // SHARDLINE_COORDINATOR_CALL_QUEUES_H_
