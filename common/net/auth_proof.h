// Proving a secret without sending it: the job's credentials and the
// challenge-response both ends of a control-plane call run (docs/security.md).
// Pure functions of their inputs, no I/O and no clock of their own.
//
// Credentials. The job token T is the root secret; the coordinator and the
// operator's tools hold it. A worker may instead hold only its rank's
// credential, "shardline-rank/<r>/<key>" with key = HMAC(T,
// "shardline-rank/<r>"): it proves it may act as rank r and no other. A
// reader's credential, "shardline-reader/<key>" with key = HMAC(T,
// "shardline-reader") (rank kReaderRank), may only read (`shardline
// status`): the server refuses it every call that changes anything.
//
// Handshake (one round trip per session, then one header per call):
//   client -> server  Hello{rank, client_nonce}            (nothing secret)
//   server -> client  server_nonce = ServerNonce(S, rank, cn, now),
//                     ServerProof(K, cn, sn)                (proves K)
//   client            checks the server proof; a server that cannot give it
//                     learns nothing more than a random nonce
//   client -> server  on call number `seq` of the session, for method M:
//                     "<rank>.<cn>.<sn>.<seq>.<ClientProof(K, cn, sn, M, seq)>"
// where K is the key of the credential the client named (T for rank -1) and
// S is the server's own secret, random for each server process, which no
// client holds: a session exists only because the server answered a Hello,
// and no credential can mint its own (issue 62). A proof is bound to the
// server's own challenge, to one method (a proof made for Status never
// passes for Register) and to one use (the server's SessionBook remembers
// the calls of each session, per credential), so a relay that sees a call's
// proof can at most deliver that one call. The server's nonce carries its
// time and a MAC: a session is good for kProofSessionMaxAge after the server
// made it.
//
//   ASSIGN_OR_RETURN(Credential c, ParseCredential(text));
//   std::string sn = ServerNonce(server_secret, c.rank, cn, now_micros);
#ifndef SHARDLINE_COMMON_NET_AUTH_PROOF_H_
#define SHARDLINE_COMMON_NET_AUTH_PROOF_H_

#include <cstdint>
#include <string>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace shardline {

// Metadata key of the per-call proof.
inline constexpr char kProofMetadataKey[] = "shardline-proof";
// How long after the server made it a session's proofs are accepted; a
// client starts a new session after half of it.
inline constexpr int64_t kProofSessionMaxAgeMicros = int64_t{600} * 1'000'000;
// The largest rank a credential may name.
inline constexpr int kMaxCredentialRank = 1 << 20;
// The rank a reader's credential names: read-only calls only.
inline constexpr int kReaderRank = -2;

// What a process holds: the job token (rank -1, may act as any rank), one
// rank's credential, or a reader's (kReaderRank).
struct Credential {
  int rank = -1;
  std::string key;  // the token itself for rank -1
};

// Constant-time equality, for secrets and tags.
bool SecretEquals(absl::string_view a, absl::string_view b);

// HMAC-SHA256(key, message), 64 lower-case hex digits.
std::string HmacSha256Hex(absl::string_view key, absl::string_view message);

// The key of rank `rank`'s credential: HMAC(token, "shardline-rank/<rank>");
// the token itself for rank -1; HMAC(token, "shardline-reader") for
// kReaderRank.
std::string KeyFor(absl::string_view token, int rank);

// The text of rank `rank`'s credential, as a credential file holds it.
std::string RankCredentialText(absl::string_view token, int rank);
// The text of the reader's credential: "shardline-reader/<key>".
std::string ReaderCredentialText(absl::string_view token);

// A credential file's text (surrounding whitespace already dropped): a rank
// or reader credential if it has that form, else the job token.
// INVALID_ARGUMENT for a text that starts like one but is not one.
absl::StatusOr<Credential> ParseCredential(absl::string_view text);

// OK if `held` is the job token itself; else INVALID_ARGUMENT "<source>
// holds rank R's credential (a reader's credential); <who> needs the job
// token itself". For the processes that derive other credentials from what
// they hold: the coordinator, `shardline launch`, `shardline credential`.
absl::Status RequireJobToken(const Credential& held, absl::string_view source, absl::string_view who);

// `bytes` random bytes from /dev/urandom, as 2 * bytes hex digits; `what`
// names the use in the error.
absl::StatusOr<std::string> RandomHex(size_t bytes, absl::string_view what);
// 32 random hex digits: RandomHex(16).
absl::StatusOr<std::string> NewNonce();
// True for a client nonce of the accepted form: 16 to 64 hex digits.
bool IsClientNonce(absl::string_view nonce);

// The server's half of a session of `rank`'s credential for client nonce
// `client_nonce`, made at `now_micros` under the server's own secret
// `server_secret`: "<micros>-<mac>".
std::string ServerNonce(absl::string_view server_secret, int rank, absl::string_view client_nonce,
                        int64_t now_micros);
// True if `server_nonce` is one ServerNonce(server_secret, rank,
// client_nonce, t) made for some t with now - kProofSessionMaxAge <= t <=
// now + 60 s (clock steps).
bool ServerNonceFresh(absl::string_view server_secret, int rank, absl::string_view client_nonce,
                      absl::string_view server_nonce, int64_t now_micros);

std::string ServerProof(absl::string_view key, absl::string_view client_nonce, absl::string_view server_nonce);
// The proof of call `seq` of a session for `method` (the call's request
// message type, e.g. "shardline.coordinator.RegisterRequest": each method
// of the service has its own).
std::string ClientProof(absl::string_view key, absl::string_view client_nonce, absl::string_view server_nonce,
                        absl::string_view method, uint64_t seq);

// The per-call header value and its parts.
struct CallProof {
  int rank = -1;
  std::string client_nonce;
  std::string server_nonce;
  uint64_t seq = 0;
  std::string proof;
};
std::string FormatCallProof(const CallProof& p);
// INVALID_ARGUMENT for anything not of the form FormatCallProof makes.
absl::StatusOr<CallProof> ParseCallProof(absl::string_view text);

// Why a call proof is refused, or kOk.
enum class ProofVerdict { kOk, kMalformed, kStale, kWrong };
// Checks a call's header against the job token and the server's secret:
// the right key for the rank it names, a fresh server nonce this server
// made for that rank, the right client proof for `method`. On kOk, *parsed
// (if given) holds the header's parts: single use is the caller's to
// enforce (it keeps state; this does not).
ProofVerdict CheckCallProof(absl::string_view token, absl::string_view server_secret, absl::string_view header,
                            absl::string_view method, int64_t now_micros, CallProof* parsed);
// When `server_nonce` (ServerNonce's form) was made, in Unix microseconds
// (0 if it is not of that form).
int64_t ServerNonceMade(absl::string_view server_nonce);
// When it stops being accepted: ServerNonceMade + kProofSessionMaxAge (0 if
// it is not of that form): how long a server must remember the proofs it
// accepted under it.
int64_t ServerNonceExpiry(absl::string_view server_nonce);

// Data plane: what a sender in generation `generation` shows receiver
// `receiver` so that a stream arriving before the receiver has joined that
// generation may wait for it. The coordinator derives it from the token;
// the receiver from its own credential (KeyFor(token, receiver)).
std::string ParkTag(absl::string_view receiver_key, uint64_t generation, int sender);

}  // namespace shardline

#endif  // SHARDLINE_COMMON_NET_AUTH_PROOF_H_
