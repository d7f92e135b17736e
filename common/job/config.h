// Loading, overriding and validating the job config (proto/config.proto).
//
//   ASSIGN_OR_RETURN(config::JobConfig cfg,
//                    LoadConfig(env, "deploy/configs/fmnist_mlp.textproto",
//                               {"optimizer.sgd.momentum=0.8",
//                                "model.mlp.hidden_sizes=512,256"}));
//
// Every error names the file (with line and column), the override, or the
// config field, and says what is wrong with it.
#ifndef SHARDLINE_COMMON_JOB_CONFIG_H_
#define SHARDLINE_COMMON_JOB_CONFIG_H_

#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "common/platform/env.h"
#include "proto/config.pb.h"

namespace shardline {

// Parses text-format JobConfig. `source` names the text in errors (a path).
// Unknown fields and syntax errors are InvalidArgument with line:column.
absl::StatusOr<config::JobConfig> ParseConfigText(absl::string_view text,
                                                  absl::string_view source);

// Applies one ml_collections-style override "a.b.c=value" in place.
//   scalars: "train.epochs=3", "data.dir=/tmp/x", "model.mlp.activation=tanh"
//   repeated: "model.mlp.hidden_sizes=512,256" or "=[512,256]" (replaces the list)
//   messages: "optimizer.adamw={}" or "optimizer.adamw={b2: 0.99}" (text format)
// Setting a field inside a oneof member selects that member.
absl::Status ApplyOverride(absl::string_view assignment, config::JobConfig* config);

// Checks every field's range and the cross-field rules (e.g. every rank's
// micro-batches are non-empty: global batch >= num_workers *
// grad_accum_steps). Pure: touches no files.
// Returns InvalidArgument listing every problem, one per line.
absl::Status ValidateConfig(const config::JobConfig& config);

// Checks what the config points at on this machine (the data directory).
absl::Status CheckConfigPaths(Env* env, const config::JobConfig& config);

// ReadFile + ParseConfigText + each ApplyOverride in order + ValidateConfig +
// (if check_paths) CheckConfigPaths. The coordinator skips the path check:
// the data set lives on the workers' hosts.
absl::StatusOr<config::JobConfig> LoadConfig(Env* env, const std::string& path,
                                             const std::vector<std::string>& overrides,
                                             bool check_paths = true);

// The config as text format, for logs and for sending to workers.
std::string ConfigToText(const config::JobConfig& config);

}  // namespace shardline

#endif  // SHARDLINE_COMMON_JOB_CONFIG_H_
