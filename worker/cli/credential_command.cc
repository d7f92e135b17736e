// shardline credential: a rank's credential, derived from the job token, for
// scripts that start workers (Slurm, Kubernetes, systemd): each worker gets
// the credential of its own rank, never the token (docs/security.md).
#include <cstdio>

#include "absl/strings/str_cat.h"
#include "common/platform/args.h"
#include "common/net/auth_proof.h"
#include "common/platform/env.h"
#include "common/net/rpc_auth.h"
#include "common/platform/status_macros.h"
#include "worker/cli/commands.h"

namespace shardline {
namespace {

constexpr char kHelp[] =
    "usage: shardline credential --rank R --out FILE [--token_file F]\n"
    "       shardline credential --reader --out FILE [--token_file F]\n"
    "\n"
    "Writes rank R's credential, derived from the job token, to FILE (mode 0600,\n"
    "replaced atomically). A worker given it (--token_file FILE) can register\n"
    "as rank R and no other; it never holds the token. With --reader, a\n"
    "credential that can only read the job (`shardline status --token_file\n"
    "FILE`): the coordinator refuses it every other call. The token comes from\n"
    "--token_file or $SHARDLINE_TOKEN.\n"
    "\n"
    "Exit 0 once FILE is written; 1 with a message naming the flag or file.\n";

absl::Status WriteCredential(const Args& args) {
  const bool reader = args.Get("reader") == "true";
  if (reader == args.Has("rank")) return absl::InvalidArgumentError("give --rank R or --reader (see --help)");
  ASSIGN_OR_RETURN(const int64_t rank, IntFlag(args, "rank", -1));
  if (!reader && (rank < 0 || rank > kMaxCredentialRank)) {
    return absl::InvalidArgumentError(
        absl::StrCat("--rank must be an integer from 0 to ", kMaxCredentialRank, ", got '", args.Get("rank"), "'"));
  }
  if (args.Get("out").empty()) return absl::InvalidArgumentError("--out FILE is required");
  ASSIGN_OR_RETURN(const std::string token, LoadToken(Env::Default(), args.Get("token_file")));
  if (token.empty()) return absl::InvalidArgumentError("no job token: give --token_file F or $SHARDLINE_TOKEN");
  ASSIGN_OR_RETURN(const Credential held, ParseCredential(token));
  if (held.rank != -1) {
    return absl::InvalidArgumentError(absl::StrCat(
        "the token given is ", held.rank == kReaderRank ? std::string("a reader's") : absl::StrCat("rank ", held.rank, "'s"),
        " credential; credentials are made from the job token"));
  }
  return WritePrivateFile(args.Get("out"),
                          reader ? ReaderCredentialText(token) : RankCredentialText(token, static_cast<int>(rank)));
}

}  // namespace

int CredentialCommand(int argc, char** argv) {
  Args args;
  absl::Status parsed =
      ParseArgs(argc, argv, 2, {{"rank", "out", "token_file"}, {}, {"reader"}}, "shardline credential", &args);
  return RunCommand(parsed, args, kHelp, "shardline credential", WriteCredential);
}

}  // namespace shardline
