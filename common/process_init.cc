#include "common/process_init.h"

#include <cstdlib>
#include <string>

#include "absl/debugging/failure_signal_handler.h"
#include "absl/debugging/symbolize.h"
#include "absl/synchronization/mutex.h"
#include "common/malloc_tuning.h"

namespace shardline {

void InitProcess(const char* argv0) {
  absl::InitializeSymbolizer(argv0);
  absl::InstallFailureSignalHandler(absl::FailureSignalHandlerOptions());
  TuneMallocForLargeBuffers();
  const char* detect = std::getenv("SHARDLINE_MUTEX_DEADLOCK_DETECTION");
  if (detect == nullptr || std::string(detect) != "1") {
    absl::SetMutexDeadlockDetectionMode(absl::OnDeadlockCycle::kIgnore);
  }
}

}  // namespace shardline
