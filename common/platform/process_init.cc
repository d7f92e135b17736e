#include "common/platform/process_init.h"

#include <sys/stat.h>

#include <cstdio>
#include <cstdlib>
#include <string>

#include "absl/debugging/failure_signal_handler.h"
#include "absl/debugging/symbolize.h"
#include "absl/synchronization/mutex.h"
#include "common/platform/descriptors.h"
#include "common/platform/malloc_tuning.h"

namespace shardline {

void InitProcess(const char* argv0) {
  const char* umask_text = std::getenv(kUmaskEnvVar);
  mode_t mask = 077;
  if (umask_text != nullptr && *umask_text != '\0') {
    char* end = nullptr;
    const long parsed = std::strtol(umask_text, &end, 8);
    if (*end != '\0' || parsed < 0 || parsed > 0777) {
      std::fprintf(stderr, "%s: $%s=\"%s\" is not an octal umask (e.g. 022)\n", argv0, kUmaskEnvVar, umask_text);
      std::exit(2);
    }
    mask = static_cast<mode_t>(parsed);
  }
  umask(mask);
  absl::InitializeSymbolizer(argv0);
  absl::InstallFailureSignalHandler(absl::FailureSignalHandlerOptions());
  TuneMallocForLargeBuffers();
  RaiseDescriptorLimit();
  const char* detect = std::getenv("SHARDLINE_MUTEX_DEADLOCK_DETECTION");
  if (detect == nullptr || std::string(detect) != "1") {
    absl::SetMutexDeadlockDetectionMode(absl::OnDeadlockCycle::kIgnore);
  }
}

}  // namespace shardline
