#include "coordinator/service.h"

#include "common/net/grpc_util.h"
#include "coordinator/decide/report_check.h"
#include "coordinator/unary_call.h"

namespace shardline {
namespace {

using coordinator::Coordinator;
using grpc::health::v1::Health;
using grpc::health::v1::HealthCheckRequest;
using grpc::health::v1::HealthCheckResponse;

// One Register call: the Job answers it (exactly once, maybe later, maybe
// from the pump's thread); a call that ends first withdraws its claim.
class RegisterCall : public UnaryCall<coordinator::RegisterRequest, coordinator::RegisterResponse> {
 public:
  RegisterCall(CoordinatorService::RpcService* rpc, Job* job, RpcAuth* auth, CallQueues* queues,
               grpc::ServerCompletionQueue* cq)
      : UnaryCall(queues, cq, auth), rpc_(rpc), job_(job) {}

  static void ReadyOn(CoordinatorService::RpcService* rpc, Job* job, RpcAuth* auth, CallQueues* queues,
                      grpc::ServerCompletionQueue* cq) {
    (new RegisterCall(rpc, job, auth, queues, cq))->Ready([rpc](auto* ctx, auto* req, auto* writer, auto* q, void* tag) {
      rpc->RequestRegister(ctx, req, writer, q, q, tag);
    });
  }

 private:
  void ReadyAnother(grpc::ServerCompletionQueue* cq) override { ReadyOn(rpc_, job_, auth(), queues(), cq); }

  void Start() override {
    if (absl::Status identity = CheckRegisterIdentity(caller_rank(), request()); !identity.ok()) {
      if (auth() != nullptr) auth()->Refused(RejectReason::kWrongRank, peer());
      Answer({}, ToGrpcStatus(identity));
      return;
    }
    id_ = job_->StartRegister(request(), [this](absl::StatusOr<coordinator::RegisterResponse> r) {
      if (r.ok()) {
        Answer(*r, grpc::Status::OK);
      } else {
        Answer({}, ToGrpcStatus(r.status()));
      }
    });
  }

  void Cancelled() override {
    if (id_ != 0) job_->CancelRegistration(id_);  // nothing if answered meanwhile
  }

  CoordinatorService::RpcService* const rpc_;
  Job* const job_;
  uint64_t id_ = 0;  // set and read on the queue's thread only
};

// The handshake's first half (common/net/auth_proof.h): needs no credential,
// and answers only a MAC over the client's nonce.
class HelloCall : public UnaryCall<coordinator::HelloRequest, coordinator::HelloReply> {
 public:
  HelloCall(CoordinatorService::RpcService* rpc, RpcAuth* auth, CallQueues* queues, grpc::ServerCompletionQueue* cq)
      : UnaryCall(queues, cq, /*auth=*/nullptr), rpc_(rpc), hello_auth_(auth) {}

  static void ReadyOn(CoordinatorService::RpcService* rpc, RpcAuth* auth, CallQueues* queues,
                      grpc::ServerCompletionQueue* cq) {
    (new HelloCall(rpc, auth, queues, cq))->Ready([rpc](auto* ctx, auto* req, auto* writer, auto* q, void* tag) {
      rpc->RequestHello(ctx, req, writer, q, q, tag);
    });
  }

 private:
  void ReadyAnother(grpc::ServerCompletionQueue* cq) override { ReadyOn(rpc_, hello_auth_, queues(), cq); }
  size_t MaxRequestBytes() const override { return 256; }

  void Start() override {
    if (hello_auth_ == nullptr || hello_auth_->token().empty()) {
      Answer({}, grpc::Status(grpc::StatusCode::FAILED_PRECONDITION, "this coordinator runs without a job token"));
      return;
    }
    absl::StatusOr<HelloAnswer> answer = hello_auth_->AnswerHello(request().rank(), request().client_nonce());
    if (!answer.ok()) {
      Answer({}, ToGrpcStatus(answer.status()));
      return;
    }
    coordinator::HelloReply reply;
    reply.set_server_nonce(answer->server_nonce);
    reply.set_server_proof(answer->server_proof);
    Answer(reply, grpc::Status::OK);
  }

  CoordinatorService::RpcService* const rpc_;
  RpcAuth* const hello_auth_;
};

class StatusCall : public UnaryCall<coordinator::StatusRequest, coordinator::JobStatus> {
 public:
  using StatusFn = std::function<coordinator::JobStatus()>;
  StatusCall(CoordinatorService::RpcService* rpc, const StatusFn* status, RpcAuth* auth, CallQueues* queues,
             grpc::ServerCompletionQueue* cq)
      : UnaryCall(queues, cq, auth), rpc_(rpc), status_(status) {}

  static void ReadyOn(CoordinatorService::RpcService* rpc, const StatusFn* status, RpcAuth* auth, CallQueues* queues,
                      grpc::ServerCompletionQueue* cq) {
    (new StatusCall(rpc, status, auth, queues, cq))->Ready([rpc](auto* ctx, auto* req, auto* writer, auto* q, void* tag) {
      rpc->RequestStatus(ctx, req, writer, q, q, tag);
    });
  }

 private:
  void ReadyAnother(grpc::ServerCompletionQueue* cq) override { ReadyOn(rpc_, status_, auth(), queues(), cq); }

  void Start() override { Answer((*status_)(), grpc::Status::OK); }
  // Reading the job's status changes nothing: a reader's credential may.
  CallAccess Access() const override { return CallAccess::kRead; }

  CoordinatorService::RpcService* const rpc_;
  const StatusFn* const status_;
};

// grpc.health.v1 Check, as gRPC's own health service answers it: the
// server ("") and the Coordinator service are SERVING while the process
// serves; other names are NOT_FOUND. No job token: probes carry none.
class HealthCheckCall : public UnaryCall<HealthCheckRequest, HealthCheckResponse> {
 public:
  HealthCheckCall(CoordinatorService::HealthService* health, CallQueues* queues, grpc::ServerCompletionQueue* cq)
      : UnaryCall(queues, cq, /*auth=*/nullptr), health_(health) {}

  static void ReadyOn(CoordinatorService::HealthService* health, CallQueues* queues, grpc::ServerCompletionQueue* cq) {
    (new HealthCheckCall(health, queues, cq))->Ready([health](auto* ctx, auto* req, auto* writer, auto* q, void* tag) {
      health->RequestCheck(ctx, req, writer, q, q, tag);
    });
  }

 private:
  void ReadyAnother(grpc::ServerCompletionQueue* cq) override { ReadyOn(health_, queues(), cq); }

  void Start() override {
    const std::string& name = request().service();
    if (!name.empty() && name != Coordinator::service_full_name()) {
      Answer({}, grpc::Status(grpc::StatusCode::NOT_FOUND, "unknown service " + name));
      return;
    }
    HealthCheckResponse r;
    r.set_status(HealthCheckResponse::SERVING);
    Answer(r, grpc::Status::OK);
  }

  CoordinatorService::HealthService* const health_;
};

// grpc.health.v1 Watch is not served: UNIMPLEMENTED, which the protocol
// tells clients to read as "use Check".
class HealthWatchCall : public AsyncCall {
 public:
  HealthWatchCall(CoordinatorService::HealthService* health, CallQueues* queues, grpc::ServerCompletionQueue* cq)
      : health_(health), queues_(queues), cq_(cq), writer_(&ctx_) {}

  static void ReadyOn(CoordinatorService::HealthService* health, CallQueues* queues, grpc::ServerCompletionQueue* cq) {
    if (queues->stopping()) return;
    auto* call = new HealthWatchCall(health, queues, cq);
    health->RequestWatch(&call->ctx_, &call->request_, &call->writer_, cq, cq, &call->ready_tag_);
  }

  void Complete(int op, bool ok) override {
    if (op == kReady && ok && !queues_->stopping()) {
      ReadyOn(health_, queues_, cq_);
      writer_.Finish(grpc::Status(grpc::StatusCode::UNIMPLEMENTED, "Watch is not served; use Check"), &finish_tag_);
      return;
    }
    delete this;  // finished, refused, or never matched (the server shut down)
  }

 private:
  enum Op { kReady, kFinish };
  CoordinatorService::HealthService* const health_;
  CallQueues* const queues_;
  grpc::ServerCompletionQueue* const cq_;
  grpc::ServerContext ctx_;
  HealthCheckRequest request_;
  grpc::ServerAsyncWriter<HealthCheckResponse> writer_;
  CallTag ready_tag_{this, kReady};
  CallTag finish_tag_{this, kFinish};
};

}  // namespace

CoordinatorService::CoordinatorService(Job* job, RpcAuth* auth, std::function<coordinator::JobStatus()> status,
                                       CoordinatorServiceOptions options)
    : job_(job),
      auth_(auth),
      status_(status ? std::move(status) : std::function<coordinator::JobStatus()>([job] { return job->Snapshot(); })),
      options_(options),
      queues_(options.queues),
      streams_(job, auth, &queues_, options.streams) {}

CoordinatorService::~CoordinatorService() { Stop(); }

absl::StatusOr<GrpcServer> CoordinatorService::Listen(const std::string& listen, GrpcServerOptions options) {
  options.default_health_service = false;
  options.configure = [this](grpc::ServerBuilder* builder) { queues_.AddTo(builder); };
  absl::StatusOr<GrpcServer> server = StartGrpcServer(listen, {&rpc_, &health_}, options);
  if (!server.ok()) return server.status();
  ReadyCalls();
  queues_.Start();
  return server;
}

void CoordinatorService::ReadyCalls() {
  streams_.Start([this](grpc::ServerContext* ctx, HeartbeatStreams::ReaderWriter* rw,
                        grpc::ServerCompletionQueue* cq, void* tag) { rpc_.RequestHeartbeat(ctx, rw, cq, cq, tag); });
  for (size_t q = 0; q < queues_.size(); ++q) {
    grpc::ServerCompletionQueue* cq = queues_.queue(q);
    for (int i = 0; i < std::max(1, options_.ready_registrations_per_queue); ++i) {
      RegisterCall::ReadyOn(&rpc_, job_, auth_, &queues_, cq);
    }
    StatusCall::ReadyOn(&rpc_, &status_, auth_, &queues_, cq);
    HelloCall::ReadyOn(&rpc_, auth_, &queues_, cq);
    HealthCheckCall::ReadyOn(&health_, &queues_, cq);
    HealthWatchCall::ReadyOn(&health_, &queues_, cq);
  }
}

void CoordinatorService::Stop() {
  if (stopped_) return;
  stopped_ = true;
  streams_.StopPump();
  queues_.Stop();
}

}  // namespace shardline
