// The job token and what is derived from it: every control-plane call
// proves the caller holds the token or its rank's credential, without sending
// either (common/net/auth_proof.h, common/net/proof_client.h), and data-plane streams
// carry tags only the coordinator hands out, so that nobody outside the job
// can join, steer, read or feed it (docs/security.md).
//
//   // a server process, from --token_file/$SHARDLINE_TOKEN, --tls_* and --insecure:
//   ASSIGN_OR_RETURN(std::unique_ptr<RpcAuth> auth,
//                    LoadRpcAuth(env, args, listen, RejectedRpcCounter(*registry)));
//   // server side, first in a handler:  if (grpc::Status s = auth->Check(*ctx); !s.ok()) return s;
#ifndef SHARDLINE_COMMON_NET_RPC_AUTH_H_
#define SHARDLINE_COMMON_NET_RPC_AUTH_H_

#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>

#include "absl/base/thread_annotations.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "common/platform/args.h"
#include "common/net/auth_proof.h"
#include "common/net/session_book.h"
#include "common/platform/env.h"
#include "common/platform/mutex.h"
#include "grpcpp/grpcpp.h"

namespace shardline {

// The environment variable a token may come from instead of a file.
inline constexpr char kTokenEnvVar[] = "SHARDLINE_TOKEN";

// Reads the job token (or a rank's credential) from `token_file` if it is
// non-empty, else from $SHARDLINE_TOKEN; "" if neither is given. Surrounding whitespace is
// dropped. Errors (INVALID_ARGUMENT / NOT_FOUND) name the file: missing,
// unreadable, empty, or readable by other users (a secret must not be).
// Never read from a command-line value, which `ps` shows to everyone.
absl::StatusOr<std::string> LoadToken(Env* env, const std::string& token_file);

// A fresh random token (64 hex digits from /dev/urandom).
absl::StatusOr<std::string> NewToken();

// Replaces `path` with `text` plus a newline, readable by this user only
// (mode 0600, written to a temporary file, synced, renamed over it): how
// `shardline launch` and `shardline credential` hand out secrets.
absl::Status WritePrivateFile(const std::string& path, const std::string& text);

// True if the host of "HOST:PORT" is a loopback address (127.0.0.0/8, ::1)
// or "localhost"; false for wildcard and every other address.
bool IsLoopbackListen(const std::string& listen);

// The secure default: a gRPC listener beyond loopback needs credentials (a
// token or mutual TLS), unless the operator said --insecure (then this logs
// a loud warning). `flag` names the listener in the error
// (FAILED_PRECONDITION).
absl::Status CheckListenSecurity(const std::string& flag, const std::string& listen, bool has_credentials,
                                 bool insecure);

// A warning for an HTTP `metrics_listen` beyond loopback (the pages carry no
// token: anyone who reaches them reads the job's numbers, addresses and
// status), or "" for a loopback one. The mains log it.
std::string MetricsListenWarning(const std::string& metrics_listen);

// Membership: the coordinator gives each member of a generation a random
// secret; the tag a sender presents to a receiver is derived from it, so a
// receiver can check who sends without being able to speak for anyone else.
// HMAC-SHA256(sender_secret, "shardline-member/<generation>/<receiver>"),
// hex.
std::string MemberTag(const std::string& sender_secret, uint64_t generation, int receiver);
// Metadata key of the member tag on a data-plane stream.
inline constexpr char kMemberTagMetadataKey[] = "shardline-member";

// Mutual TLS material, PEM text: this process's certificate chain and key,
// and the CA that must have signed every peer's certificate.
struct TlsPem {
  std::string cert_chain;
  std::string private_key;
  std::string ca;
};

// Reads --tls_cert, --tls_key and --tls_ca: all three or none (then
// nullopt). Errors (INVALID_ARGUMENT / NOT_FOUND) name the flag and file.
absl::StatusOr<std::optional<TlsPem>> LoadTls(Env* env, const std::string& cert_file, const std::string& key_file,
                                              const std::string& ca_file);

// Why a call was refused; the label of shardline_rpc_rejected_total.
enum class RejectReason {
  kMissingToken,
  kWrongToken,
  kNotAMember,
  kStaleSession,
  kWrongRank,
  kReplayedProof,  // a proof already used once (a relay or a replay)
  kReadOnly,       // a reader's credential on a call that changes something
  kRateLimited,    // a credential starting sessions (or a reader calling) too fast
};
// Every reason, for building one series each.
inline constexpr RejectReason kRejectReasons[] = {
    RejectReason::kMissingToken, RejectReason::kWrongToken,     RejectReason::kNotAMember, RejectReason::kStaleSession,
    RejectReason::kWrongRank,    RejectReason::kReplayedProof, RejectReason::kReadOnly,   RejectReason::kRateLimited};
// "missing_token", "wrong_token", "not_a_member", "stale_session",
// "wrong_rank", "replayed_proof", "read_only", "rate_limited"
const char* RejectReasonLabel(RejectReason reason);

// Which credentials a method admits.
enum class CallAccess {
  kMember,  // the token or a rank's credential
  kRead,    // those, or a reader's (kReaderRank): calls that change nothing
};

// What a server answers a Hello (common/net/auth_proof.h).
struct HelloAnswer {
  std::string server_nonce;
  std::string server_proof;
};

// The process's credential, and the checks made with it. With no secret
// nothing is attached and every call passes (a loopback-only or --insecure
// job). Thread-safe.
class RpcAuth {
 public:
  // `secret`: the job token or one rank's credential (ParseCredential; an
  // unparsable credential-like text is treated as a token that matches
  // nothing). `on_reject` (optional) runs for every refused call, e.g. to
  // count it.
  // `env` (the clock of its nonces and logs) must outlive it. `limits`: what
  // one credential may take of this server's session memory and time.
  RpcAuth(Env* env, std::string secret, std::function<void(RejectReason)> on_reject = {},
          SessionLimits limits = {});
  Env* env() const { return env_; }

  bool enabled() const { return !credential_.key.empty(); }
  // The job token, if this process holds it (a coordinator, an operator's
  // tool, or a worker given the token); "" for a rank credential.
  const std::string& token() const;
  const Credential& credential() const { return credential_; }

  // With TLS, every channel and server of this process speaks mutual TLS:
  // servers require a client certificate signed by the CA, clients verify
  // the server's certificate (chain and host name). Call before use.
  void set_tls(TlsPem tls) { tls_ = std::move(tls); }
  bool tls() const { return tls_.has_value(); }
  std::shared_ptr<grpc::ChannelCredentials> ChannelCredentials() const;
  std::shared_ptr<grpc::ServerCredentials> ServerCredentials() const;

  // Server side (needs the job token): the answer to a client's Hello for
  // `rank`'s credential (-1: the token), a nonce under this process's own
  // secret (a restarted server refuses the old sessions once: their clients
  // start new ones). Keeps no state. INVALID_ARGUMENT for a rank or nonce
  // out of range; FAILED_PRECONDITION without the token.
  absl::StatusOr<HelloAnswer> AnswerHello(int rank, absl::string_view client_nonce) const;

  // OK if the call carries a valid proof (kProofMetadataKey) for `method`
  // (the request message's full name), not used before, of a credential
  // `access` admits, within its credential's share (SessionLimits); then
  // *caller_rank (if given) is its rank, -1 for the token. Else
  // UNAUTHENTICATED (PERMISSION_DENIED for a reader on a call that changes
  // something, RESOURCE_EXHAUSTED past a rate limit); a refusal is counted
  // and logged with the
  // caller's address, at most once a second (the rest are summed into the
  // next line). Nothing of the request is read.
  grpc::Status Check(const grpc::ServerContextBase& ctx, absl::string_view method, CallAccess access,
                     int* caller_rank = nullptr);

  // Counts and logs (rate-limited) a refusal decided elsewhere, e.g. a
  // stream whose member tag is wrong.
  void Refused(RejectReason reason, const std::string& peer);

 private:
  Env* const env_;
  const Credential credential_;
  const std::function<void(RejectReason)> on_reject_;
  std::optional<TlsPem> tls_;
  // This process's own secret for its server nonces (random; empty without
  // the token).
  const std::string server_secret_;

  Mutex mu_;
  int64_t last_log_micros_ ABSL_GUARDED_BY(mu_) = 0;
  int64_t unlogged_ ABSL_GUARDED_BY(mu_) = 0;
  Mutex book_mu_;
  SessionBook book_ ABSL_GUARDED_BY(book_mu_);
};

// auth->Check(...), or OK when there is no auth (a server without a token).
inline grpc::Status CheckToken(RpcAuth* auth, const grpc::ServerContextBase& ctx, absl::string_view method,
                               CallAccess access, int* caller_rank = nullptr) {
  return auth != nullptr ? auth->Check(ctx, method, access, caller_rank) : grpc::Status::OK;
}

// A server process's RpcAuth from its flags: --token_file (else
// $SHARDLINE_TOKEN), --tls_cert/--tls_key/--tls_ca and --insecure, after
// CheckListenSecurity on its gRPC `listen` address. Errors name the flag.
absl::StatusOr<std::unique_ptr<RpcAuth>> LoadRpcAuth(Env* env, const Args& args, const std::string& listen,
                                                     std::function<void(RejectReason)> on_reject = {});

}  // namespace shardline

#endif  // SHARDLINE_COMMON_NET_RPC_AUTH_H_
