// shardline's side of `shardline-spm` (spm_protocol.h): starts the helper,
// sends it requests and reads its replies, each with a deadline, so a
// helper that dies or hangs is an error, never a wait without end.
//
//   ASSIGN_OR_RETURN(std::unique_ptr<SpmClient> spm, SpmClient::Start(env));
//   ASSIGN_OR_RETURN(std::vector<SpmPiece> pieces, spm->Load(model));
//   RETURN_IF_ERROR(spm->Encode("text\n", &ids));
#ifndef SHARDLINE_WORKER_DATA_SPM_CLIENT_H_
#define SHARDLINE_WORKER_DATA_SPM_CLIENT_H_

#include <sys/types.h>

#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "common/platform/env.h"
#include "absl/strings/string_view.h"

namespace shardline {

struct SpmPiece {
  uint8_t kind = 0;  // spm::PieceKind
  std::string text;  // as SentencePiece spells it (U+2581 for a space)
};

// Where the helper is looked for, in order: $SHARDLINE_SPM_HELPER, beside
// this process's executable, and where this build tree put it.
std::vector<std::string> SpmHelperPaths();

struct SpmClientOptions {
  // How long the helper may take to start each reply: they only bound a
  // helper that hangs (it computes, it never waits), so they are long.
  int64_t train_millis = int64_t{6} * 3600 * 1000;
  int64_t request_millis = int64_t{10} * 60 * 1000;
  // Liveness, in seconds rather than those minutes (issue 62: a SIGSTOPped
  // helper stalled `data tokenize` silently for 10 minutes): while a reply
  // or a write is awaited, a helper whose CPU time stands still for this
  // long (and that is not waiting on its disk), or that is stopped, is
  // broken. The helper only computes, so a live one always moves it.
  int64_t liveness_millis = 10'000;
};

class SpmClient {
 public:
  // Starts the helper. NotFound naming the places looked in if there is none.
  // A helper that misses a deadline is DeadlineExceeded; one that dies or
  // stops reading, Unavailable; either way the client is broken after it.
  // `env` (the clock of every deadline and wait) must outlive the client.
  static absl::StatusOr<std::unique_ptr<SpmClient>> Start(Env* env, const SpmClientOptions& options = SpmClientOptions());
  // Closes the helper's input (it exits), waits a little, then kills it.
  ~SpmClient();
  SpmClient(const SpmClient&) = delete;
  SpmClient& operator=(const SpmClient&) = delete;

  // Trains a model with SentencePieceTrainer's flags; the serialized model.
  absl::StatusOr<std::string> Train(const std::map<std::string, std::string>& flags, uint32_t seed);
  // Loads a serialized model for Encode; its pieces, by id.
  absl::StatusOr<std::vector<SpmPiece>> Load(absl::string_view model);
  // Appends SentencePiece's ids of `text` (at most 64 MiB) to *ids.
  absl::Status Encode(absl::string_view text, std::vector<int32_t>* ids);

 private:
  SpmClient() = default;
  absl::Status Send(absl::string_view bytes);
  // Sends a request (its header, then its body) and reads its reply's
  // status; the deadline, `millis` from now, for the rest of the reply.
  absl::StatusOr<int64_t> Call(absl::string_view header, absl::string_view body, int64_t millis, const char* what);
  // Reads exactly n bytes before `deadline_ms` (CLOCK_MONOTONIC).
  absl::Status Receive(void* dst, size_t n, int64_t deadline_ms);
  // The reply's status word; the helper's error as a status if it failed.
  absl::Status ReplyStatus(int64_t deadline_ms, const char* what);
  absl::Status Broken(absl::StatusCode code, const std::string& what);
  // Called at least once a second while waiting on the helper: DeadlineExceeded
  // (and broken) once it has made no progress for liveness_millis.
  absl::Status CheckAlive();
  // Starts a wait: the helper counts as having progressed now.
  void StartWaiting();

  Env* env_ = nullptr;
  SpmClientOptions options_;
  pid_t pid_ = -1;
  int to_helper_ = -1;
  int from_helper_ = -1;
  std::string path_;
  bool broken_ = false;
  int64_t cpu_ticks_ = -1;      // the helper's CPU time when last seen
  int64_t progressed_ms_ = 0;   // when it was last seen to progress
};

}  // namespace shardline

#endif  // SHARDLINE_WORKER_DATA_SPM_CLIENT_H_
