// The job config's text format, and a --set override applied to it: the
// first line of the input is the override, the rest the config text.
#include <cstddef>
#include <cstdint>
#include <string>

#include "common/job/config.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string input(reinterpret_cast<const char*>(data), size);
  const size_t newline = input.find('\n');
  const std::string override_text = input.substr(0, newline);
  const std::string text = newline == std::string::npos ? "" : input.substr(newline + 1);
  absl::StatusOr<shardline::config::JobConfig> cfg = shardline::ParseConfigText(text, "fuzz");
  if (!cfg.ok()) return 0;
  (void)shardline::ValidateConfig(*cfg);
  if (shardline::ApplyOverride(override_text, &*cfg).ok()) (void)shardline::ValidateConfig(*cfg);
  return 0;
}
