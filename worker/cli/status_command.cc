// shardline status: the job at a glance, from the coordinator's Status RPC.
#include <cstdio>

#include "absl/strings/ascii.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "common/platform/args.h"
#include "common/platform/env.h"
#include "common/net/grpc_util.h"
#include "common/net/auth_proof.h"
#include "common/net/rpc_auth.h"
#include "common/platform/status_macros.h"
#include "common/status/status_report.h"
#include "google/protobuf/util/json_util.h"
#include "proto/coordinator.grpc.pb.h"
#include "worker/cli/commands.h"
#include "worker/control/coordinator_client.h"
#include "common/platform/clock.h"

namespace shardline {
namespace {

constexpr char kHelp[] =
    "usage: shardline status --coordinator HOST:PORT | --workdir DIR [--json]\n"
    "                        [--token_file F] [--tls_cert F --tls_key F --tls_ca F]\n"
    "                        [--timeout_seconds S]\n"
    "\n"
    "The job as its coordinator sees it: state, generation, global step and total,\n"
    "ETA, the latest loss and the best eval, the last committed checkpoint, goodput,\n"
    "and each worker's rank, host, last heartbeat, step and straggler score.\n"
    "\n"
    "  --coordinator HOST:PORT  the coordinator's gRPC address\n"
    "  --workdir DIR            ... read from DIR/coordinator.address instead; the\n"
    "                           token defaults to DIR/token when that exists\n"
    "  --token_file F           the job token (default $SHARDLINE_TOKEN)\n"
    "  --json                   print the status message as JSON (field names as in\n"
    "                           proto/coordinator.proto's JobStatus)\n"
    "  --timeout_seconds S      give up after S seconds (default 5)\n"
    "\n"
    "Exit 0 when the coordinator answered; 1 when it could not be reached or\n"
    "refused the call (the message says which).\n";

absl::Status Status(const Args& args) {
  Env* env = Env::Default();
  std::string address = args.Get("coordinator");
  std::string token_file = args.Get("token_file");
  if (address.empty() == args.Get("workdir").empty()) {
    return absl::InvalidArgumentError("give exactly one of --coordinator HOST:PORT and --workdir DIR");
  }
  if (!args.Get("workdir").empty()) {
    const std::string dir = args.Get("workdir");
    absl::StatusOr<std::string> text = env->ReadFile(dir + "/coordinator.address", kMaxSmallFileBytes);
    if (!text.ok()) {
      return absl::NotFoundError(absl::StrCat(dir, "/coordinator.address cannot be read (", text.status().message(),
                                              "); is a coordinator running on that workdir?"));
    }
    address = std::string(absl::StripAsciiWhitespace(*text));
    if (token_file.empty() && std::getenv("SHARDLINE_TOKEN") == nullptr && env->FileExists(dir + "/token")) {
      token_file = dir + "/token";
    }
  }
  double timeout = 5;
  if (args.Has("timeout_seconds") && (!absl::SimpleAtod(args.Get("timeout_seconds"), &timeout) || timeout <= 0)) {
    return absl::InvalidArgumentError("--timeout_seconds must be a positive number");
  }
  ASSIGN_OR_RETURN(const std::string token, LoadToken(env, token_file));
  ASSIGN_OR_RETURN(std::optional<TlsPem> tls,
                   LoadTls(env, args.Get("tls_cert"), args.Get("tls_key"), args.Get("tls_ca")));
  // Holding the token, status proves only the reader's credential derived
  // from it: whatever a relay between here and the coordinator sees can at
  // most read the job (docs/security.md).
  ASSIGN_OR_RETURN(const Credential held, ParseCredential(token));
  RpcAuth auth(env, !token.empty() && held.rank == -1 ? ReaderCredentialText(token) : token);
  if (tls.has_value()) auth.set_tls(std::move(*tls));
  // A coordinator still starting answers within the deadline. One that
  // cannot prove it holds the token is told nothing (not even a proof).
  CoordinatorClient client(env, address, &auth);
  absl::StatusOr<coordinator::JobStatus> got =
      client.Status(absl::Milliseconds(static_cast<int64_t>(timeout * 1e3)), /*wait_for_ready=*/true);
  if (!got.ok()) {
    return Annotate(got.status(), absl::StrCat("asking the coordinator at ", address, " for the job's status"));
  }
  const coordinator::JobStatus& status = *got;
  if (args.Get("json") == "true") {
    google::protobuf::util::JsonPrintOptions o;
    o.preserve_proto_field_names = true;
    o.add_whitespace = true;
    o.always_print_primitive_fields = true;  // rank 0, step 0: scripts find every field
    std::string json;
    static_cast<void>(google::protobuf::util::MessageToJsonString(status, &json, o));
    std::fputs(json.c_str(), stdout);
  } else {
    std::fputs(StatusReport(status, WallNow(env)).c_str(), stdout);
  }
  return absl::OkStatus();
}

}  // namespace

int StatusCommand(int argc, char** argv) {
  Args args;
  absl::Status parsed =
      ParseArgs(argc, argv, 2, {{"coordinator", "workdir", "token_file", "tls_cert", "tls_key", "tls_ca", "timeout_seconds"}, {}, {"json"}}, "shardline status", &args);
  return RunCommand(parsed, args, kHelp, "shardline status", Status);
}

}  // namespace shardline
