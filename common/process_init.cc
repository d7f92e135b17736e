#include "common/process_init.h"

#include "absl/debugging/failure_signal_handler.h"
#include "absl/debugging/symbolize.h"
#include "common/malloc_tuning.h"

namespace shardline {

void InitProcess(const char* argv0) {
  absl::InitializeSymbolizer(argv0);
  absl::InstallFailureSignalHandler(absl::FailureSignalHandlerOptions());
  TuneMallocForLargeBuffers();
}

}  // namespace shardline
