// A unary RPC served on CallQueues: readied on a queue, started when a
// client calls, answered exactly once (now or later, from any thread), and
// freed once gRPC has returned every tag it was given and the answer came.
//
// The request arrives as raw bytes (the service marks the method raw) and
// is parsed only after the job token is checked: a caller without the token
// costs its message's bytes, never the memory a parsed message takes (16 MiB
// of empty repeated fields once parsed into ~480 MiB).
//
//   class EchoCall : public UnaryCall<Req, Resp> {
//     ... Ready another with `new EchoCall(...)->Ready(...)` in ReadyAnother;
//     void Start() override { Answer(Resp{...}, grpc::Status::OK); }
//   };
#ifndef SHARDLINE_COORDINATOR_UNARY_CALL_H_
#define SHARDLINE_COORDINATOR_UNARY_CALL_H_

#include <functional>

#include "common/platform/mutex.h"
#include "common/net/rpc_auth.h"
#include "coordinator/call_queues.h"
#include "grpcpp/grpcpp.h"

namespace shardline {

template <typename Request, typename Response>
class UnaryCall : public AsyncCall {
 public:
  using Writer = grpc::ServerAsyncResponseWriter<grpc::ByteBuffer>;
  // The raw service's RequestX(ctx, request bytes, writer, cq, cq, tag).
  using RequestFn =
      std::function<void(grpc::ServerContext*, grpc::ByteBuffer*, Writer*, grpc::ServerCompletionQueue*, void* tag)>;

  // `auth`: the job token every call must carry (a call without it is
  // answered with the refusal, and Start never runs); null: none asked (a
  // server without a token, or a call probes make, like health checks).
  UnaryCall(CallQueues* queues, grpc::ServerCompletionQueue* cq, RpcAuth* auth)
      : queues_(queues), cq_(cq), auth_(auth), writer_(&ctx_) {}

  // Asks gRPC for the next such call on this call's queue; from a queue's
  // thread or before the queues start. Frees this call if the queues are
  // stopping.
  void Ready(const RequestFn& request) {
    if (queues_->stopping()) {
      delete this;
      return;
    }
    ctx_.AsyncNotifyWhenDone(&done_tag_);
    pending_ = 1;
    request(&ctx_, &raw_request_, &writer_, cq_, &ready_tag_);
  }

  void Complete(int op, bool ok) final {
    switch (op) {
      case kReady:
        // Not ok: the server is shutting down and this call was never
        // matched (gRPC then never returns the done tag).
        if (ok) {
          ReadyAnother(cq_);
          {
            MutexLock lock(&mu_);
            pending_ += 2;  // the done tag and the answer
          }
          if (grpc::Status token = CheckToken(auth_, ctx_, Request::descriptor()->full_name(), Access(), &caller_rank_);
              !token.ok()) {
            raw_request_.Clear();
            Answer({}, token);
          } else if (raw_request_.Length() > MaxRequestBytes()) {
            raw_request_.Clear();
            Answer({}, grpc::Status(grpc::StatusCode::INVALID_ARGUMENT,
                                    "oversized " + Request::descriptor()->full_name()));
          } else if (!grpc::SerializationTraits<Request>::Deserialize(&raw_request_, &request_).ok()) {
            Answer({}, grpc::Status(grpc::StatusCode::INVALID_ARGUMENT,
                                    "malformed " + Request::descriptor()->full_name()));
          } else {
            Start();
          }
        }
        break;
      case kDone: {
        bool answered;
        {
          MutexLock lock(&mu_);
          done_ = true;
          answered = answered_;
        }
        if (!answered) Cancelled();
        break;
      }
      default:  // kFinish
        break;
    }
    Release();
  }

 protected:
  // The call arrived (with the token, if one is asked): request() holds it.
  // Answer() must follow, once.
  virtual void Start() = 0;
  // The call ended (the client went away or the server shut down) before
  // the answer; Answer() must still come.
  virtual void Cancelled() {}
  // Readies a fresh call of the same kind on `cq`.
  virtual void ReadyAnother(grpc::ServerCompletionQueue* cq) = 0;

  // Which credentials may make the call: kRead only for calls that change
  // nothing.
  virtual CallAccess Access() const { return CallAccess::kMember; }

  // Requests longer than this are refused unparsed (a call that needs no
  // token is bounded well below the server's receive limit).
  virtual size_t MaxRequestBytes() const { return SIZE_MAX; }

  const Request& request() const { return request_; }
  // The rank whose credential the call proved; -1 for the job token (or no
  // token at all).
  int caller_rank() const { return caller_rank_; }
  std::string peer() const { return ctx_.peer(); }
  CallQueues* queues() const { return queues_; }
  RpcAuth* auth() const { return auth_; }

  // Sends the answer unless the call is already over; from any thread that
  // may start operations (see CallQueues::stopping).
  void Answer(const Response& response, const grpc::Status& status) {
    {
      MutexLock lock(&mu_);
      answered_ = true;
      if (!done_ && !queues_->stopping()) {
        ++pending_;
        bool own_buffer = false;
        if (status.ok() && !grpc::SerializationTraits<Response>::Serialize(response, &response_, &own_buffer).ok()) {
          writer_.FinishWithError(grpc::Status(grpc::StatusCode::INTERNAL, "cannot serialize the answer"),
                                  &finish_tag_);
        } else if (status.ok()) {
          writer_.Finish(response_, status, &finish_tag_);
        } else {
          writer_.FinishWithError(status, &finish_tag_);
        }
      }
    }
    Release();  // the answer
  }

 private:
  enum Op { kReady, kFinish, kDone };

  void Release() {
    bool over;
    {
      MutexLock lock(&mu_);
      over = --pending_ == 0;
    }
    if (over) delete this;
  }

  CallQueues* const queues_;
  grpc::ServerCompletionQueue* const cq_;
  RpcAuth* const auth_;
  grpc::ServerContext ctx_;
  Writer writer_;
  grpc::ByteBuffer raw_request_;  // consumed by parsing
  Request request_;
  int caller_rank_ = -1;
  CallTag ready_tag_{this, kReady};
  CallTag finish_tag_{this, kFinish};
  CallTag done_tag_{this, kDone};

  Mutex mu_;
  int pending_ ABSL_GUARDED_BY(mu_) = 0;  // tags out, plus the answer once started
  grpc::ByteBuffer response_ ABSL_GUARDED_BY(mu_);
  bool answered_ ABSL_GUARDED_BY(mu_) = false;
  bool done_ ABSL_GUARDED_BY(mu_) = false;
};

}  // namespace shardline

#endif  // SHARDLINE_COORDINATOR_UNARY_CALL_H_
