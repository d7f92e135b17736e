#include "common/net/auth_proof.h"

#include <sys/random.h>

#include <cerrno>
#include <cstring>
#include <vector>

#include "absl/strings/ascii.h"
#include "absl/strings/escaping.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "openssl/evp.h"
#include "openssl/hmac.h"

namespace shardline {
namespace {

constexpr char kRankPrefix[] = "shardline-rank/";
constexpr char kReaderPrefix[] = "shardline-reader/";
constexpr int64_t kClockStepMicros = int64_t{60} * 1'000'000;

bool IsHex(absl::string_view s, size_t min, size_t max) {
  if (s.size() < min || s.size() > max) return false;
  for (char c : s) {
    if (!absl::ascii_isxdigit(static_cast<unsigned char>(c))) return false;
  }
  return true;
}

}  // namespace

bool SecretEquals(absl::string_view a, absl::string_view b) {
  if (a.size() != b.size()) return false;
  unsigned char diff = 0;
  for (size_t i = 0; i < a.size(); ++i) diff |= static_cast<unsigned char>(a[i] ^ b[i]);
  return diff == 0;
}

std::string HmacSha256Hex(absl::string_view key, absl::string_view message) {
  unsigned char digest[EVP_MAX_MD_SIZE];
  unsigned int length = 0;
  HMAC(EVP_sha256(), key.data(), static_cast<int>(key.size()), reinterpret_cast<const unsigned char*>(message.data()),
       message.size(), digest, &length);
  return absl::BytesToHexString(absl::string_view(reinterpret_cast<const char*>(digest), length));
}

std::string KeyFor(absl::string_view token, int rank) {
  if (rank == kReaderRank) return HmacSha256Hex(token, "shardline-reader");
  if (rank < 0) return std::string(token);
  return HmacSha256Hex(token, absl::StrCat(kRankPrefix, rank));
}

std::string RankCredentialText(absl::string_view token, int rank) {
  return absl::StrCat(kRankPrefix, rank, "/", KeyFor(token, rank));
}

std::string ReaderCredentialText(absl::string_view token) {
  return absl::StrCat(kReaderPrefix, KeyFor(token, kReaderRank));
}

absl::StatusOr<Credential> ParseCredential(absl::string_view text) {
  if (absl::StartsWith(text, kReaderPrefix)) {
    const absl::string_view key = text.substr(sizeof(kReaderPrefix) - 1);
    if (!IsHex(key, 64, 64)) {
      return absl::InvalidArgumentError(
          "a reader credential has the form shardline-reader/<64 hex digits> (made by `shardline credential "
          "--reader`)");
    }
    return Credential{kReaderRank, std::string(key)};
  }
  if (!absl::StartsWith(text, kRankPrefix)) return Credential{-1, std::string(text)};
  const std::vector<absl::string_view> parts = absl::StrSplit(text.substr(sizeof(kRankPrefix) - 1), '/');
  int rank = -1;
  if (parts.size() != 2 || !absl::SimpleAtoi(parts[0], &rank) || rank < 0 || rank > kMaxCredentialRank ||
      !IsHex(parts[1], 64, 64)) {
    return absl::InvalidArgumentError(
        "a rank credential has the form shardline-rank/<rank>/<64 hex digits> (made by `shardline credential`)");
  }
  return Credential{rank, std::string(parts[1])};
}

absl::Status RequireJobToken(const Credential& held, absl::string_view source, absl::string_view who) {
  if (held.rank == -1) return absl::OkStatus();
  return absl::InvalidArgumentError(
      absl::StrCat(source, " holds ", held.rank == kReaderRank ? std::string("a reader's") : absl::StrCat("rank ", held.rank, "'s"),
                   " credential; ", who, " needs the job token itself"));
}

absl::StatusOr<std::string> RandomHex(size_t bytes, absl::string_view what) {
  // getrandom(2): the kernel's CSPRNG (as /dev/urandom), with no file to
  // open; blocks only until the pool is first seeded at boot.
  std::string raw(bytes, '\0');
  size_t got = 0;
  while (got < bytes) {
    const ssize_t n = getrandom(raw.data() + got, bytes - got, 0);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return absl::UnavailableError(absl::StrCat("getrandom failed for ", what, ": ", strerror(errno)));
    got += static_cast<size_t>(n);
  }
  return absl::BytesToHexString(raw);
}

absl::StatusOr<std::string> NewNonce() { return RandomHex(16, "a nonce"); }

bool IsClientNonce(absl::string_view nonce) { return IsHex(nonce, 16, 64); }

std::string ServerNonce(absl::string_view server_secret, int rank, absl::string_view client_nonce,
                        int64_t now_micros) {
  return absl::StrCat(now_micros, "-",
                      HmacSha256Hex(server_secret, absl::StrCat("shardline-nonce/", rank, "/", client_nonce, "/",
                                                                now_micros)));
}

bool ServerNonceFresh(absl::string_view server_secret, int rank, absl::string_view client_nonce,
                      absl::string_view server_nonce, int64_t now_micros) {
  const int64_t made = ServerNonceMade(server_nonce);
  if (made <= 0 || made < now_micros - kProofSessionMaxAgeMicros || made > now_micros + kClockStepMicros) {
    return false;
  }
  return SecretEquals(server_nonce, ServerNonce(server_secret, rank, client_nonce, made));
}

std::string ServerProof(absl::string_view key, absl::string_view client_nonce, absl::string_view server_nonce) {
  return HmacSha256Hex(key, absl::StrCat("shardline-server/", client_nonce, "/", server_nonce));
}

std::string ClientProof(absl::string_view key, absl::string_view client_nonce, absl::string_view server_nonce,
                        absl::string_view method, uint64_t seq) {
  return HmacSha256Hex(key, absl::StrCat("shardline-call/", client_nonce, "/", server_nonce, "/", method, "/", seq));
}

std::string FormatCallProof(const CallProof& p) {
  return absl::StrCat(p.rank, ".", p.client_nonce, ".", p.server_nonce, ".", p.seq, ".", p.proof);
}

absl::StatusOr<CallProof> ParseCallProof(absl::string_view text) {
  const std::vector<absl::string_view> parts = absl::StrSplit(text, '.');
  CallProof p;
  if (text.size() > 300 || parts.size() != 5 || !absl::SimpleAtoi(parts[0], &p.rank) || p.rank < kReaderRank ||
      p.rank > kMaxCredentialRank || !IsClientNonce(parts[1]) || parts[2].size() > 96 || parts[3].size() > 20 ||
      !absl::SimpleAtoi(parts[3], &p.seq) || !IsHex(parts[4], 64, 64)) {
    return absl::InvalidArgumentError("malformed call proof");
  }
  p.client_nonce = std::string(parts[1]);
  p.server_nonce = std::string(parts[2]);
  p.proof = std::string(parts[4]);
  return p;
}

ProofVerdict CheckCallProof(absl::string_view token, absl::string_view server_secret, absl::string_view header,
                            absl::string_view method, int64_t now_micros, CallProof* parsed) {
  absl::StatusOr<CallProof> p = ParseCallProof(header);
  if (!p.ok()) return ProofVerdict::kMalformed;
  if (!ServerNonceFresh(server_secret, p->rank, p->client_nonce, p->server_nonce, now_micros)) {
    return ProofVerdict::kStale;
  }
  const std::string key = KeyFor(token, p->rank);
  if (!SecretEquals(p->proof, ClientProof(key, p->client_nonce, p->server_nonce, method, p->seq))) {
    return ProofVerdict::kWrong;
  }
  if (parsed != nullptr) *parsed = *std::move(p);
  return ProofVerdict::kOk;
}

int64_t ServerNonceMade(absl::string_view server_nonce) {
  int64_t made = 0;
  const size_t dash = server_nonce.find('-');
  if (dash == absl::string_view::npos || !absl::SimpleAtoi(server_nonce.substr(0, dash), &made) || made <= 0) return 0;
  return made;
}

int64_t ServerNonceExpiry(absl::string_view server_nonce) {
  const int64_t made = ServerNonceMade(server_nonce);
  return made == 0 ? 0 : made + kProofSessionMaxAgeMicros;
}

std::string ParkTag(absl::string_view receiver_key, uint64_t generation, int sender) {
  return HmacSha256Hex(receiver_key, absl::StrCat("shardline-park/", generation, "/", sender));
}

}  // namespace shardline
