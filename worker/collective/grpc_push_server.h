// The receiving end of the data plane: the gRPC service behind a
// TransportServer (grpc_transport.h). It admits each Push stream to the
// generation its first frame names, parks streams for a generation this
// process has not joined yet (holding no thread), and delivers frames into
// that generation's Mailbox on the gRPC thread that read them.
// Internal to the gRPC transport.
#ifndef SHARDLINE_WORKER_COLLECTIVE_GRPC_PUSH_SERVER_H_
#define SHARDLINE_WORKER_COLLECTIVE_GRPC_PUSH_SERVER_H_

#include <cstdint>
#include <map>
#include <memory>
#include <thread>

#include "absl/status/status.h"
#include "common/net/grpc_util.h"
#include "common/platform/mutex.h"
#include "grpcpp/grpcpp.h"
#include "worker/collective/grpc_generation.h"
#include "worker/collective/grpc_transport.h"

namespace shardline {

// A stream whose first frame names a generation this process has not reached
// yet. It waits without a thread; the server resumes it when the generation
// is installed, or with null when it never will be (or it waited too long).
class ParkedStream {
 public:
  virtual ~ParkedStream() = default;
  virtual void Resume(std::shared_ptr<Generation> gen) = 0;
};

class TransportServer::Impl : public grpc::Service {
 public:
  Impl();
  ~Impl() override { StopReaper(); }

  TransportServerOptions options;  // set once, before the server starts
  Env* env = nullptr;              // likewise: the clock of every deadline

  enum class Admission { kNow, kParked, kRefused };

  // Where a stream from `src` whose first frame names `generation` goes:
  // kNow with *gen set if it is the current one; kParked if `may_park`, it
  // is at most kMaxGenerationsAhead ahead, fewer than kMaxParkedStreams wait
  // and fewer than kMaxParkedPerSender from `src` for that generation (the
  // server later calls stream->Resume, exactly once, unless Unpark takes it
  // back first; after options.generation_wait the reaper resumes it with
  // null); kRefused otherwise (older, too far ahead, too many).
  Admission Admit(uint64_t generation, int src, bool may_park, ParkedStream* stream,
                  std::shared_ptr<Generation>* gen);

  // Whether a stream may wait for a generation this process has not joined:
  // it must carry the park tag the coordinator gave its sender for this
  // receiver, checked with this process's credential. Without a credential
  // (a job without a token) every stream may.
  bool MayPark(const std::multimap<grpc::string_ref, grpc::string_ref>& metadata, uint64_t generation, int src) const;

  // Takes a parked stream back (it was cancelled). False if it is not parked
  // (any more): then Resume has been or is being called.
  bool Unpark(ParkedStream* stream);

  // Resumes, with null, every stream parked longer than
  // options.generation_wait, checking every 100 ms until StopReaper: a
  // stream never waits on another's
  // arrival to be let go.
  void StartReaper();
  void StopReaper();

  absl::Status Install(std::shared_ptr<Generation> gen);

  uint64_t generation();

  size_t parked();

  GrpcServer grpc;

 private:
  struct Parked {
    uint64_t generation;
    int src;
    int64_t since_micros;
  };
  Mutex mu_;
  std::shared_ptr<Generation> current_ ABSL_GUARDED_BY(mu_);
  std::map<ParkedStream*, Parked> parked_ ABSL_GUARDED_BY(mu_);
  bool reaper_stop_ ABSL_GUARDED_BY(mu_) = false;
  std::thread reaper_;
};

}  // namespace shardline

#endif  // SHARDLINE_WORKER_COLLECTIVE_GRPC_PUSH_SERVER_H_
