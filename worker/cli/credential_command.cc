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
    "usage: shardline credential --rank R [--rank_offset K] --out FILE [--token_file F]\n"
    "       shardline credential --reader --out FILE [--token_file F]\n"
    "\n"
    "Writes rank R's credential, derived from the job token, to FILE (mode 0600,\n"
    "replaced atomically). A worker given it (--token_file FILE) can register\n"
    "as rank R and no other; it never holds the token. --rank_offset K: rank\n"
    "R + K instead (a second site's workers counted from 0 at their site, as a\n"
    "Kubernetes Indexed Job counts them, are ranks K and up). With --reader, a\n"
    "credential that can only read the job (`shardline status --token_file\n"
    "FILE`): the coordinator refuses it every other call. The token comes from\n"
    "--token_file or $SHARDLINE_TOKEN.\n"
    "\n"
    "Exit 0 once FILE is written; 1 with a message naming the flag or file.\n";

absl::Status WriteCredential(const Args& args) {
  const bool reader = args.Get("reader") == "true";
  if (reader == args.Has("rank")) return absl::InvalidArgumentError("give --rank R or --reader (see --help)");
  ASSIGN_OR_RETURN(const int64_t index, IntFlag(args, "rank", -1));
  ASSIGN_OR_RETURN(const int64_t offset, IntFlag(args, "rank_offset", 0));
  if (offset < 0 || offset > kMaxCredentialRank) {
    return absl::InvalidArgumentError(absl::StrCat("--rank_offset must be an integer from 0 to ", kMaxCredentialRank,
                                                   ", got '", args.Get("rank_offset"), "'"));
  }
  if (reader && args.Has("rank_offset")) return absl::InvalidArgumentError("--rank_offset is for --rank, not --reader");
  const int64_t rank = index < 0 ? index : index + offset;
  if (!reader && (rank < 0 || rank > kMaxCredentialRank)) {
    return absl::InvalidArgumentError(absl::StrCat("--rank", offset > 0 ? " plus --rank_offset" : "",
                                                   " must be an integer from 0 to ", kMaxCredentialRank, ", got '",
                                                   args.Get("rank"), "'",
                                                   offset > 0 ? absl::StrCat(" + ", offset) : std::string()));
  }
  if (args.Get("out").empty()) return absl::InvalidArgumentError("--out FILE is required");
  ASSIGN_OR_RETURN(const std::string token, LoadToken(Env::Default(), args.Get("token_file")));
  if (token.empty()) return absl::InvalidArgumentError("no job token: give --token_file F or $SHARDLINE_TOKEN");
  ASSIGN_OR_RETURN(const Credential held, ParseCredential(token));
  RETURN_IF_ERROR(RequireJobToken(
      held, args.Has("token_file") ? absl::StrCat("--token_file ", args.Get("token_file")) : std::string("$SHARDLINE_TOKEN"),
      "shardline credential (credentials are made from the job token)"));
  return WritePrivateFile(args.Get("out"),
                          reader ? ReaderCredentialText(token) : RankCredentialText(token, static_cast<int>(rank)));
}

}  // namespace

int CredentialCommand(int argc, char** argv) {
  Args args;
  absl::Status parsed =
      ParseArgs(argc, argv, 2, {{"rank", "rank_offset", "out", "token_file"}, {}, {"reader"}}, "shardline credential", &args);
  return RunCommand(parsed, args, kHelp, "shardline credential", WriteCredential);
}

}  // namespace shardline
