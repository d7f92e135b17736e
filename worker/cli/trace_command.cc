// shardline trace merge WORKDIR --out trace.json
#include <cstdio>

#include "absl/strings/str_cat.h"
#include "common/platform/args.h"
#include "common/platform/env.h"
#include "common/platform/status_macros.h"
#include "worker/cli/commands.h"
#include "worker/trace/trace_merge.h"

namespace shardline {
namespace {

constexpr char kHelp[] =
    "usage: shardline trace merge WORKDIR --out trace.json\n"
    "\n"
    "Joins the step traces a job recorded (train.trace_steps; WORKDIR/traces/) into\n"
    "one Chrome/Perfetto trace: a track for the coordinator (worlds formed and\n"
    "broken, checkpoint commits) and one per rank (each traced step's phases: data,\n"
    "forward, backward, reduce_scatter, optimizer with clip, wait_peers,\n"
    "checkpoint_snapshot and update, all_gather, norms; with collective.overlap\n"
    "all_gather is the wait inside forward), on the coordinator's clock.\n"
    "Open it in https://ui.perfetto.dev or chrome://tracing.\n";

absl::Status Trace(const Args& args) {
  if (args.positional.size() != 2 || args.positional[0] != "merge") {
    return absl::InvalidArgumentError("expected: shardline trace merge WORKDIR --out trace.json (see --help)");
  }
  if (args.Get("out").empty()) return absl::InvalidArgumentError("--out is required");
  Env* env = Env::Default();
  ASSIGN_OR_RETURN(std::string json, MergeTraces(env, args.positional[1] + "/traces"));
  RETURN_IF_ERROR(Annotate(WriteFileAtomically(env, args.Get("out"), json), "writing --out"));
  std::printf("wrote %s\n", args.Get("out").c_str());
  return absl::OkStatus();
}

}  // namespace

int TraceCommand(int argc, char** argv) {
  Args args;
  absl::Status parsed = ParseArgs(argc, argv, 2, {{"out"}, {}}, "shardline trace", &args);
  return RunCommand(parsed, args, kHelp, "shardline trace", Trace);
}

}  // namespace shardline
