#include "coordinator/call_queues.h"

#include <algorithm>
#include <chrono>

#include "grpcpp/alarm.h"

namespace shardline {

CallQueues::CallQueues(CallQueuesOptions options) : options_(options) {}

CallQueues::~CallQueues() { Stop(); }

void CallQueues::AddTo(grpc::ServerBuilder* builder) {
  for (int i = 0; i < std::max(1, options_.threads); ++i) queues_.push_back(builder->AddCompletionQueue());
}

void CallQueues::Start() {
  for (auto& q : queues_) threads_.emplace_back([this, cq = q.get()] { Serve(cq); });
}

void CallQueues::Serve(grpc::ServerCompletionQueue* cq) {
  void* tag;
  bool ok;
  while (cq->Next(&tag, &ok)) {
    const CallTag* t = static_cast<const CallTag*>(tag);
    if (t->call == nullptr) {
      barrier_.load(std::memory_order_acquire)->DecrementCount();
    } else {
      t->call->Complete(t->op, ok);
    }
  }
}

void CallQueues::Stop() {
  if (stopped_) return;
  stopped_ = true;
  stopping_.store(true, std::memory_order_release);
  if (!threads_.empty()) {
    // A barrier through every queue: once each thread has reached it, none
    // is inside a Complete that read stopping() false, so no operation
    // starts on a queue after it shuts down (gRPC would abort).
    absl::BlockingCounter passed(static_cast<int>(queues_.size()));
    barrier_.store(&passed, std::memory_order_release);
    std::vector<grpc::Alarm> alarms(queues_.size());
    for (size_t i = 0; i < queues_.size(); ++i) {
      // A deadline in the past (the epoch): each alarm fires at once.
      alarms[i].Set(queues_[i].get(), std::chrono::system_clock::time_point(), const_cast<CallTag*>(&barrier_tag_));
    }
    passed.Wait();
  }
  for (auto& q : queues_) q->Shutdown();
  if (threads_.empty()) {
    for (auto& q : queues_) Serve(q.get());  // drains a queue no thread ran
  }
  for (std::thread& t : threads_) t.join();
}

}  // namespace shardline
