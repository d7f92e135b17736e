#include "coordinator/service.h"

#include <atomic>
#include <thread>

#include "common/grpc_util.h"
#include "common/logging.h"

namespace shardline {

grpc::Status CoordinatorService::Register(grpc::ServerContext* ctx,
                                          const coordinator::RegisterRequest* request,
                                          coordinator::RegisterResponse* response) {
  if (grpc::Status s = Authenticate(*ctx); !s.ok()) return s;
  absl::StatusOr<coordinator::RegisterResponse> r =
      job_->Register(*request, [ctx] { return ctx->IsCancelled(); });
  if (!r.ok()) return ToGrpcStatus(r.status());
  *response = std::move(*r);
  return grpc::Status::OK;
}

grpc::Status CoordinatorService::Status(grpc::ServerContext* ctx, const coordinator::StatusRequest* request,
                                        coordinator::JobStatus* response) {
  if (grpc::Status s = Authenticate(*ctx); !s.ok()) return s;
  *response = status_ ? status_() : job_->Snapshot();
  return grpc::Status::OK;
}

grpc::Status CoordinatorService::Heartbeat(
    grpc::ServerContext* ctx,
    grpc::ServerReaderWriter<coordinator::CoordinatorCommand, coordinator::WorkerReport>* stream) {
  if (grpc::Status s = Authenticate(*ctx); !s.ok()) return s;
  coordinator::WorkerReport report;
  if (!stream->Read(&report)) return grpc::Status::OK;
  absl::Status accepted = job_->Report(report);
  if (absl::IsPermissionDenied(accepted) && auth_ != nullptr) auth_->Refused(RejectReason::kNotAMember, ctx->peer());
  if (!accepted.ok()) return ToGrpcStatus(accepted);
  const int rank = report.rank();
  const uint64_t generation = report.generation();

  // The writer runs while the worker's side is open, and after the worker
  // closed it for as long as a finished worker waits for the job's end
  // (bounded by the worker: it cancels after its close timeout).
  std::atomic<bool> reading{true};
  std::atomic<bool> lingering{false};
  std::atomic<bool> ended_here{false};
  std::thread writer([&] {
    coordinator::CoordinatorCommand last;
    while ((reading.load() || lingering.load()) && !ctx->IsCancelled()) {
      bool end = false;
      std::optional<coordinator::CoordinatorCommand> c =
          job_->NextCommand(rank, generation, last, absl::Milliseconds(200), &end);
      if (c.has_value()) {
        if (!stream->Write(*c)) break;
        last = *c;
      }
      if (end) {
        ended_here = true;
        if (reading.load()) ctx->TryCancel();  // ends the read loop below
        break;
      }
    }
  });
  bool refused = false;
  while (stream->Read(&report)) {
    const absl::Status later = job_->Report(report);
    if (!later.ok()) {
      SLOG(WARNING) << "ending rank " << rank << "'s heartbeat stream: " << later;
      refused = true;
      break;
    }
  }
  if (!refused && !ctx->IsCancelled() && job_->AwaitsJobEnd(rank, generation)) lingering = true;
  reading = false;
  writer.join();
  const bool broken = ctx->IsCancelled() && !ended_here.load();
  job_->StreamEnded(rank, generation, broken);
  return grpc::Status::OK;
}

}  // namespace shardline
