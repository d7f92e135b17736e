#include "coordinator/service.h"

#include <atomic>

#include "common/grpc_util.h"
#include "common/mutex.h"

namespace shardline {
namespace {

// One Register call: the Job answers it (exactly once, maybe later, maybe
// from another thread); a cancelled call withdraws its registration. Freed
// once gRPC is done with it and StartRegister has returned, whichever is
// last.
class RegisterCall : public grpc::ServerUnaryReactor {
 public:
  RegisterCall(Job* job, coordinator::RegisterResponse* response) : job_(job), response_(response) {}

  void Start(const coordinator::RegisterRequest& request) {
    const uint64_t id = job_->StartRegister(request, [this](absl::StatusOr<coordinator::RegisterResponse> r) {
      if (r.ok()) {
        *response_ = std::move(*r);
        Finish(grpc::Status::OK);
      } else {
        Finish(ToGrpcStatus(r.status()));
      }
    });
    bool cancelled;
    {
      MutexLock lock(&mu_);
      id_ = id;
      cancelled = cancelled_;
    }
    if (cancelled && id != 0) job_->CancelRegistration(id);
    Unref();
  }

  void OnCancel() override {
    uint64_t id;
    {
      MutexLock lock(&mu_);
      cancelled_ = true;
      id = id_;
    }
    if (id != 0) job_->CancelRegistration(id);  // nothing if already answered
  }

  void OnDone() override { Unref(); }

 private:
  void Unref() {
    if (refs_.fetch_sub(1) == 1) delete this;
  }

  Job* const job_;
  coordinator::RegisterResponse* const response_;
  std::atomic<int> refs_{2};  // Start's and gRPC's
  Mutex mu_;
  uint64_t id_ ABSL_GUARDED_BY(mu_) = 0;
  bool cancelled_ ABSL_GUARDED_BY(mu_) = false;
};

}  // namespace

grpc::ServerUnaryReactor* CoordinatorService::Register(grpc::CallbackServerContext* ctx,
                                                       const coordinator::RegisterRequest* request,
                                                       coordinator::RegisterResponse* response) {
  if (grpc::Status s = CheckToken(auth_, *ctx); !s.ok()) {
    grpc::ServerUnaryReactor* refused = ctx->DefaultReactor();
    refused->Finish(s);
    return refused;
  }
  auto* call = new RegisterCall(job_, response);
  call->Start(*request);
  return call;
}

grpc::ServerUnaryReactor* CoordinatorService::Status(grpc::CallbackServerContext* ctx,
                                                     const coordinator::StatusRequest* request,
                                                     coordinator::JobStatus* response) {
  grpc::ServerUnaryReactor* reactor = ctx->DefaultReactor();
  if (grpc::Status s = CheckToken(auth_, *ctx); !s.ok()) {
    reactor->Finish(s);
    return reactor;
  }
  *response = status_ ? status_() : job_->Snapshot();
  reactor->Finish(grpc::Status::OK);
  return reactor;
}

grpc::ServerBidiReactor<coordinator::WorkerReport, coordinator::CoordinatorCommand>* CoordinatorService::Heartbeat(
    grpc::CallbackServerContext* ctx) {
  return streams_.NewStream(ctx);
}

}  // namespace shardline
