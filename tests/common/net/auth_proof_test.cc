#include "common/net/auth_proof.h"

#include "absl/strings/str_cat.h"
#include "gtest/gtest.h"

namespace shardline {
namespace {

constexpr int64_t kNow = int64_t{1'800'000'000} * 1'000'000;
constexpr char kNonce[] = "00112233445566778899aabbccddeeff";

TEST(AuthProofTest, RankCredentialsAreDerivedAndParsed) {
  const std::string text = RankCredentialText("tok", 7);
  EXPECT_EQ(text.rfind("shardline-rank/7/", 0), 0u) << text;
  absl::StatusOr<Credential> c = ParseCredential(text);
  ASSERT_TRUE(c.ok()) << c.status();
  EXPECT_EQ(c->rank, 7);
  EXPECT_EQ(c->key, KeyFor("tok", 7));
  EXPECT_NE(KeyFor("tok", 7), KeyFor("tok", 8));
  EXPECT_NE(KeyFor("tok", 7), KeyFor("tol", 7));
  EXPECT_EQ(KeyFor("tok", -1), "tok");
  absl::StatusOr<Credential> token = ParseCredential("0123abcd");
  ASSERT_TRUE(token.ok());
  EXPECT_EQ(token->rank, -1);
  for (const char* bad : {"shardline-rank/", "shardline-rank/7", "shardline-rank/x/00", "shardline-rank/-1/00",
                          "shardline-rank/7/abc", "shardline-rank/99999999/" "0000000000000000000000000000000000000000000000000000000000000000"}) {
    EXPECT_FALSE(ParseCredential(bad).ok()) << bad;
  }
}

constexpr char kStatus[] = "shardline.coordinator.StatusRequest";
constexpr char kRegister[] = "shardline.coordinator.RegisterRequest";

TEST(AuthProofTest, AProofChecksOnlyWithTheRightKeyFreshAndWhole) {
  const std::string token = "the-job-token";
  const std::string secret = "the-servers-own-secret";
  for (int rank : {kReaderRank, -1, 0, 5}) {
    const std::string key = KeyFor(token, rank);
    const std::string sn = ServerNonce(secret, rank, kNonce, kNow);
    CallProof p{rank, kNonce, sn, 3, ClientProof(key, kNonce, sn, kStatus, 3)};
    CallProof parsed;
    EXPECT_EQ(CheckCallProof(token, secret, FormatCallProof(p), kStatus, kNow + 1'000'000, &parsed), ProofVerdict::kOk);
    EXPECT_EQ(parsed.rank, rank);
    EXPECT_EQ(parsed.seq, 3u);
    EXPECT_EQ(parsed.server_nonce, sn);
    // Issue 46: a proof is bound to its method; one made for Status (say,
    // by `shardline status` through a relay) never passes for Register.
    EXPECT_EQ(CheckCallProof(token, secret, FormatCallProof(p), kRegister, kNow, nullptr), ProofVerdict::kWrong);
    // ... and to its call number: another seq needs another proof.
    CallProof next = p;
    next.seq = 4;
    EXPECT_EQ(CheckCallProof(token, secret, FormatCallProof(next), kStatus, kNow, nullptr), ProofVerdict::kWrong);
    // Claiming another rank with this proof fails: its key differs.
    CallProof other = p;
    other.rank = rank + 1;
    EXPECT_NE(CheckCallProof(token, secret, FormatCallProof(other), kStatus, kNow, nullptr), ProofVerdict::kOk);
    // Stale after the session's age, and from too far in the future.
    EXPECT_EQ(CheckCallProof(token, secret, FormatCallProof(p), kStatus, kNow + kProofSessionMaxAgeMicros + 1, nullptr),
              ProofVerdict::kStale);
    EXPECT_EQ(CheckCallProof(token, secret, FormatCallProof(p), kStatus, kNow - int64_t{120} * 1'000'000, nullptr),
              ProofVerdict::kStale);
    EXPECT_EQ(ServerNonceExpiry(sn), kNow + kProofSessionMaxAgeMicros);
    EXPECT_EQ(ServerNonceMade(sn), kNow);
    // Issue 62: a credential cannot mint its own session. A nonce MACed
    // under the client's key (as a client could make one) is not the
    // server's, nor is one the server made for another rank.
    for (const std::string& minted : {ServerNonce(key, rank, kNonce, kNow), ServerNonce(secret, rank + 1, kNonce, kNow),
                                      ServerNonce("another-server", rank, kNonce, kNow)}) {
      CallProof self_made = p;
      self_made.server_nonce = minted;
      self_made.proof = ClientProof(key, kNonce, minted, kStatus, 3);
      EXPECT_EQ(CheckCallProof(token, secret, FormatCallProof(self_made), kStatus, kNow, nullptr),
                ProofVerdict::kStale);
    }
    // The server's proof is not a client proof (an oracle gives nothing).
    CallProof reflected = p;
    reflected.proof = ServerProof(key, kNonce, sn);
    EXPECT_EQ(CheckCallProof(token, secret, FormatCallProof(reflected), kStatus, kNow, nullptr), ProofVerdict::kWrong);
    // Another token's proof, and a forged server nonce.
    CallProof wrong = p;
    wrong.proof = ClientProof(KeyFor("another", rank), kNonce, sn, kStatus, 3);
    EXPECT_EQ(CheckCallProof(token, secret, FormatCallProof(wrong), kStatus, kNow, nullptr), ProofVerdict::kWrong);
    CallProof forged = p;
    forged.server_nonce = absl::StrCat(kNow, "-", std::string(64, 'a'));
    EXPECT_EQ(CheckCallProof(token, secret, FormatCallProof(forged), kStatus, kNow, nullptr), ProofVerdict::kStale);
  }
  for (const char* bad : {"", "x", "1.2.3", "-1.zz.1-2.0.00", "-1.00112233445566778899aabbccddeeff.1-2.0.abc",
                          "-3.00112233445566778899aabbccddeeff.1-2.0."
                          "0000000000000000000000000000000000000000000000000000000000000000",
                          "-1.00112233445566778899aabbccddeeff.1-2.x."
                          "0000000000000000000000000000000000000000000000000000000000000000"}) {
    EXPECT_EQ(CheckCallProof(token, secret, bad, kStatus, kNow, nullptr), ProofVerdict::kMalformed) << bad;
  }
  EXPECT_EQ(CheckCallProof(token, secret, std::string(4096, '1'), kStatus, kNow, nullptr), ProofVerdict::kMalformed);
  EXPECT_EQ(ServerNonceMade("x-1"), 0);
  EXPECT_EQ(ServerNonceMade("-5-aa"), 0);
  EXPECT_EQ(ServerNonceExpiry("nonsense"), 0);
}

TEST(AuthProofTest, ReaderCredentialsAreDerivedAndParsed) {
  const std::string text = ReaderCredentialText("tok");
  EXPECT_EQ(text.rfind("shardline-reader/", 0), 0u) << text;
  absl::StatusOr<Credential> c = ParseCredential(text);
  ASSERT_TRUE(c.ok()) << c.status();
  EXPECT_EQ(c->rank, kReaderRank);
  EXPECT_EQ(c->key, KeyFor("tok", kReaderRank));
  EXPECT_NE(c->key, "tok");
  EXPECT_NE(c->key, KeyFor("tok", 0));
  EXPECT_FALSE(ParseCredential("shardline-reader/abc").ok());
}

TEST(AuthProofTest, ParkTagsAreBoundToReceiverGenerationAndSender) {
  const std::string k1 = KeyFor("tok", 1);
  const std::string t = ParkTag(k1, 4, 0);
  EXPECT_EQ(t, ParkTag(k1, 4, 0));
  EXPECT_NE(t, ParkTag(k1, 5, 0));
  EXPECT_NE(t, ParkTag(k1, 4, 2));
  EXPECT_NE(t, ParkTag(KeyFor("tok", 2), 4, 0));
}

}  // namespace
}  // namespace shardline
