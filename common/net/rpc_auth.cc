#include "common/net/rpc_auth.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <tuple>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "common/net/listen_address.h"
#include "common/platform/logging.h"
#include "common/platform/status_macros.h"
#include "common/platform/clock.h"

namespace shardline {

std::string MemberTag(const std::string& sender_secret, uint64_t generation, int receiver) {
  return HmacSha256Hex(sender_secret, absl::StrCat("shardline-member/", generation, "/", receiver));
}

absl::StatusOr<std::string> LoadToken(Env* env, const std::string& token_file) {
  if (token_file.empty()) {
    const char* from_env = std::getenv(kTokenEnvVar);
    if (from_env == nullptr) return std::string();
    const std::string token(absl::StripAsciiWhitespace(from_env));
    if (token.empty()) return absl::InvalidArgumentError(absl::StrCat("$", kTokenEnvVar, " is set but empty"));
    return token;
  }
  struct stat st;
  if (stat(token_file.c_str(), &st) != 0) {
    return absl::NotFoundError(absl::StrCat("token file ", token_file, " does not exist or cannot be read"));
  }
  if ((st.st_mode & (S_IRWXG | S_IRWXO)) != 0) {
    return absl::InvalidArgumentError(absl::StrFormat(
        "token file %s is accessible by other users (mode %o); make it private: chmod 600 %s", token_file,
        st.st_mode & 0777, token_file));
  }
  absl::StatusOr<std::string> text = env->ReadFile(token_file, kMaxSmallFileBytes);
  if (!text.ok()) return absl::NotFoundError(absl::StrCat("token file ", token_file, ": ", text.status().message()));
  const std::string token(absl::StripAsciiWhitespace(*text));
  if (token.empty()) return absl::InvalidArgumentError(absl::StrCat("token file ", token_file, " is empty"));
  return token;
}

absl::StatusOr<std::string> NewToken() { return RandomHex(32, "a job token"); }

absl::Status WritePrivateFile(const std::string& path, const std::string& text) {
  const std::string tmp = path + ".tmp";
  std::remove(tmp.c_str());
  const int fd = open(tmp.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
  if (fd < 0) return absl::InternalError(absl::StrCat("creating ", tmp, ": ", strerror(errno)));
  const std::string line = text + "\n";
  const bool written = write(fd, line.data(), line.size()) == static_cast<ssize_t>(line.size()) && fsync(fd) == 0;
  const int err = errno;
  close(fd);
  if (!written) {
    std::remove(tmp.c_str());
    return absl::InternalError(absl::StrCat("writing ", tmp, ": ", strerror(err)));
  }
  if (rename(tmp.c_str(), path.c_str()) != 0) {
    const int rename_err = errno;
    std::remove(tmp.c_str());
    return absl::InternalError(absl::StrCat("renaming ", tmp, " to ", path, ": ", strerror(rename_err)));
  }
  return absl::OkStatus();
}

bool IsLoopbackListen(const std::string& listen) {
  std::string host = ListenHost(listen);
  if (host.size() >= 2 && host.front() == '[' && host.back() == ']') host = host.substr(1, host.size() - 2);
  if (absl::EqualsIgnoreCase(host, "localhost") || host == "::1") return true;
  return absl::StartsWith(host, "127.") && host.find_first_not_of("0123456789.") == std::string::npos;
}

absl::Status CheckListenSecurity(const std::string& flag, const std::string& listen, bool has_credentials,
                                 bool insecure) {
  if (has_credentials || IsLoopbackListen(listen)) return absl::OkStatus();
  if (!insecure) {
    return absl::FailedPreconditionError(absl::StrCat(
        flag, " ", listen, " is reachable beyond this host, but no job token is set: anyone who can reach "
        "the port could join, steer or read the job. Give --token_file FILE (or $", kTokenEnvVar,
        ") or mutual TLS (--tls_cert, --tls_key, --tls_ca), or pass --insecure to run without either"));
  }
  SLOG(WARNING) << "INSECURE: " << flag << " " << listen
                << " listens beyond this host without a job token or TLS (--insecure); anyone who can reach it "
                   "can join, steer or read this job";
  return absl::OkStatus();
}

std::string MetricsListenWarning(const std::string& metrics_listen) {
  if (IsLoopbackListen(metrics_listen)) return "";
  return absl::StrCat("--metrics_listen ", metrics_listen,
                      " serves /metrics, /healthz and /status beyond this host without a token: anyone who can "
                      "reach it reads this job's numbers, state and addresses; keep it on a network only your "
                      "monitoring reaches");
}

void RpcAuth::Refused(RejectReason reason, const std::string& peer) {
  if (on_reject_) on_reject_(reason);
  MutexLock lock(&mu_);
  const int64_t now = env_->NowMicros();
  if (now - last_log_micros_ >= 1'000'000 || last_log_micros_ == 0) {
    SLOG(WARNING) << "refused a call from " << peer << ": " << RejectReasonLabel(reason)
                  << (unlogged_ > 0 ? absl::StrCat(" (and ", unlogged_, " more refused since the last line)")
                                    : std::string());
    last_log_micros_ = now;
    unlogged_ = 0;
  } else {
    ++unlogged_;
  }
}

const char* RejectReasonLabel(RejectReason reason) {
  switch (reason) {
    case RejectReason::kMissingToken:
      return "missing_token";
    case RejectReason::kWrongToken:
      return "wrong_token";
    case RejectReason::kNotAMember:
      return "not_a_member";
    case RejectReason::kStaleSession:
      return "stale_session";
    case RejectReason::kWrongRank:
      return "wrong_rank";
    case RejectReason::kReplayedProof:
      return "replayed_proof";
    case RejectReason::kReadOnly:
      return "read_only";
    case RejectReason::kRateLimited:
      return "rate_limited";
  }
  return "unknown";
}

namespace {

Credential CredentialOf(const std::string& secret) {
  absl::StatusOr<Credential> c = ParseCredential(secret);
  // LoadRpcAuth and the commands report an unparsable credential; here it
  // becomes a token no server shares.
  return c.ok() ? *c : Credential{-1, secret};
}

// A server's own secret for its nonces: 256 random bits, made once per
// process. getrandom(2) does not fail once the kernel's pool is seeded; if
// it ever did, a MAC of the token and this process's start stands in (still
// nothing a rank or reader credential can compute).
std::string ServerSecretFor(Env* env, const Credential& c) {
  if (c.rank != -1 || c.key.empty()) return std::string();
  absl::StatusOr<std::string> random = RandomHex(32, "the server's nonce secret");
  if (random.ok()) return *random;
  return HmacSha256Hex(c.key, absl::StrCat("shardline-server-secret/", getpid(), "/", env->NowMicros()));
}

}  // namespace

RpcAuth::RpcAuth(Env* env, std::string secret, std::function<void(RejectReason)> on_reject, SessionLimits limits)
    : env_(env),
      credential_(CredentialOf(secret)),
      on_reject_(std::move(on_reject)),
      server_secret_(ServerSecretFor(env, credential_)),
      book_(limits) {}

const std::string& RpcAuth::token() const {
  static const std::string* const kNone = new std::string();
  return credential_.rank < 0 ? credential_.key : *kNone;
}

absl::StatusOr<std::optional<TlsPem>> LoadTls(Env* env, const std::string& cert_file, const std::string& key_file,
                                              const std::string& ca_file) {
  const int given = !cert_file.empty() + !key_file.empty() + !ca_file.empty();
  if (given == 0) return std::optional<TlsPem>();
  if (given != 3) {
    return absl::InvalidArgumentError("--tls_cert, --tls_key and --tls_ca go together: give all three or none");
  }
  TlsPem pem;
  for (const auto& [flag, file, out] : {std::tuple<const char*, const std::string*, std::string*>{
                                            "--tls_cert", &cert_file, &pem.cert_chain},
                                        {"--tls_key", &key_file, &pem.private_key},
                                        {"--tls_ca", &ca_file, &pem.ca}}) {
    absl::StatusOr<std::string> text = env->ReadFile(*file, kMaxSmallFileBytes);
    if (!text.ok()) return absl::NotFoundError(absl::StrCat(flag, " ", *file, ": ", text.status().message()));
    if (text->find("-----BEGIN ") == std::string::npos) {
      return absl::InvalidArgumentError(absl::StrCat(flag, " ", *file, " is not a PEM file"));
    }
    *out = std::move(*text);
  }
  return std::optional<TlsPem>(std::move(pem));
}

absl::StatusOr<std::unique_ptr<RpcAuth>> LoadRpcAuth(Env* env, const Args& args, const std::string& listen,
                                                     std::function<void(RejectReason)> on_reject) {
  ASSIGN_OR_RETURN(const std::string token, LoadToken(env, args.Get("token_file")));
  if (absl::StatusOr<Credential> c = ParseCredential(token); !c.ok()) {
    return absl::InvalidArgumentError(absl::StrCat(
        args.Has("token_file") ? absl::StrCat("token file ", args.Get("token_file")) : std::string("$SHARDLINE_TOKEN"),
        ": ", c.status().message()));
  }
  ASSIGN_OR_RETURN(std::optional<TlsPem> tls,
                   LoadTls(env, args.Get("tls_cert"), args.Get("tls_key"), args.Get("tls_ca")));
  RETURN_IF_ERROR(
      CheckListenSecurity("--listen", listen, !token.empty() || tls.has_value(), args.Get("insecure") == "true"));
  auto auth = std::make_unique<RpcAuth>(env, token, std::move(on_reject));
  if (tls.has_value()) auth->set_tls(std::move(*tls));
  return auth;
}

std::shared_ptr<grpc::ChannelCredentials> RpcAuth::ChannelCredentials() const {
  if (!tls_.has_value()) return grpc::InsecureChannelCredentials();
  grpc::SslCredentialsOptions o;
  o.pem_root_certs = tls_->ca;
  o.pem_private_key = tls_->private_key;
  o.pem_cert_chain = tls_->cert_chain;
  return grpc::SslCredentials(o);
}

std::shared_ptr<grpc::ServerCredentials> RpcAuth::ServerCredentials() const {
  if (!tls_.has_value()) return grpc::InsecureServerCredentials();
  grpc::SslServerCredentialsOptions o(GRPC_SSL_REQUEST_AND_REQUIRE_CLIENT_CERTIFICATE_AND_VERIFY);
  o.pem_root_certs = tls_->ca;
  o.pem_key_cert_pairs.push_back({tls_->private_key, tls_->cert_chain});
  return grpc::SslServerCredentials(o);
}

absl::StatusOr<HelloAnswer> RpcAuth::AnswerHello(int rank, absl::string_view client_nonce) const {
  if (token().empty()) return absl::FailedPreconditionError("this server holds no job token");
  if (rank < kReaderRank || rank > kMaxCredentialRank) {
    return absl::InvalidArgumentError(absl::StrCat("Hello for rank ", rank, ", out of range"));
  }
  if (!IsClientNonce(client_nonce)) return absl::InvalidArgumentError("Hello's client nonce must be 16 to 64 hex digits");
  const std::string key = KeyFor(token(), rank);
  HelloAnswer answer;
  answer.server_nonce = ServerNonce(server_secret_, rank, client_nonce, absl::ToUnixMicros(WallNow(env_)));
  answer.server_proof = ServerProof(key, client_nonce, answer.server_nonce);
  return answer;
}

grpc::Status RpcAuth::Check(const grpc::ServerContextBase& ctx, absl::string_view method, CallAccess access,
                            int* caller_rank) {
  if (!enabled()) return grpc::Status::OK;
  if (token().empty()) {
    return grpc::Status(grpc::StatusCode::UNAUTHENTICATED, "this server holds no job token to check calls with");
  }
  const auto& metadata = ctx.client_metadata();
  const auto it = metadata.find(kProofMetadataKey);
  RejectReason reason = RejectReason::kMissingToken;
  if (it != metadata.end()) {
    const int64_t now = absl::ToUnixMicros(WallNow(env_));
    CallProof proof;
    switch (CheckCallProof(token(), server_secret_, absl::string_view(it->second.data(), it->second.size()), method,
                           now, &proof)) {
      case ProofVerdict::kOk: {
        if (proof.rank == kReaderRank && access != CallAccess::kRead) {
          Refused(RejectReason::kReadOnly, ctx.peer());
          return grpc::Status(grpc::StatusCode::PERMISSION_DENIED,
                              "a reader's credential may only read (shardline status); this call needs the job "
                              "token or a rank's credential");
        }
        SessionVerdict verdict;
        {
          MutexLock lock(&book_mu_);
          verdict = book_.Admit(SessionCall{proof.rank, proof.server_nonce, ServerNonceMade(proof.server_nonce),
                                            ServerNonceExpiry(proof.server_nonce), proof.seq,
                                            access == CallAccess::kRead},
                                now);
        }
        if (verdict == SessionVerdict::kOk) {
          if (caller_rank != nullptr) *caller_rank = proof.rank;
          return grpc::Status::OK;
        }
        if (verdict == SessionVerdict::kRateLimited) {
          Refused(RejectReason::kRateLimited, ctx.peer());
          return grpc::Status(grpc::StatusCode::RESOURCE_EXHAUSTED,
                              absl::StrCat("rate_limited: this credential (",
                                           proof.rank == kReaderRank ? std::string("the reader's")
                                           : proof.rank < 0          ? std::string("the job token")
                                                                     : absl::StrCat("rank ", proof.rank),
                                           ") starts sessions or calls faster than this server admits; retry "
                                           "in a second (docs/security.md)"));
        }
        reason = verdict == SessionVerdict::kReplayed ? RejectReason::kReplayedProof : RejectReason::kStaleSession;
        break;
      }
      case ProofVerdict::kStale:
        reason = RejectReason::kStaleSession;
        break;
      case ProofVerdict::kMalformed:
      case ProofVerdict::kWrong:
        reason = RejectReason::kWrongToken;
        break;
    }
  }
  Refused(reason, ctx.peer());
  return grpc::Status(grpc::StatusCode::UNAUTHENTICATED,
                      "this call does not prove it holds the job's token (see docs/security.md)");
}

}  // namespace shardline
