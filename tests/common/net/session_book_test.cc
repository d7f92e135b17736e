#include "common/net/session_book.h"

#include "absl/strings/str_cat.h"
#include "common/net/auth_proof.h"
#include "gtest/gtest.h"

namespace shardline {
namespace {

constexpr int64_t kSecond = 1'000'000;
constexpr int64_t kT0 = int64_t{1'800'000'000} * kSecond;

SessionCall Call(int rank, int session, uint64_t seq, int64_t made = kT0, bool read_only = true) {
  return SessionCall{rank, absl::StrCat(made, "-s", rank, "-", session), made, made + kProofSessionMaxAgeMicros, seq,
                     read_only};
}

// Limits with no rate limit, to see the shares alone.
SessionLimits NoRateLimits() {
  SessionLimits limits;
  limits.new_sessions_per_second = 1e9;
  limits.new_session_burst = 1e9;
  limits.read_calls_per_second = 1e9;
  limits.read_call_burst = 1e9;
  return limits;
}

TEST(SessionBookTest, EveryCallIsAcceptedOnceInAnyOrderWithinTheWindow) {
  SessionBook book;
  EXPECT_EQ(book.Admit(Call(0, 1, 5), kT0), SessionVerdict::kOk);
  EXPECT_EQ(book.Admit(Call(0, 1, 5), kT0), SessionVerdict::kReplayed);
  // Calls of one session overtake each other: a lower seq not yet seen is
  // accepted once.
  for (uint64_t seq : {3, 0, 9, 7, 4}) EXPECT_EQ(book.Admit(Call(0, 1, seq), kT0), SessionVerdict::kOk) << seq;
  for (uint64_t seq : {3, 0, 9, 7, 4, 5}) EXPECT_EQ(book.Admit(Call(0, 1, seq), kT0), SessionVerdict::kReplayed);
  // A jump past the window: everything a window behind is refused, as it
  // cannot be told from a replay.
  const uint64_t far = 9 + SessionBook::kSeqWindow + 10;
  EXPECT_EQ(book.Admit(Call(0, 1, far), kT0), SessionVerdict::kOk);
  EXPECT_EQ(book.Admit(Call(0, 1, 8), kT0), SessionVerdict::kReplayed);
  EXPECT_EQ(book.Admit(Call(0, 1, far - SessionBook::kSeqWindow), kT0), SessionVerdict::kReplayed);
  EXPECT_EQ(book.Admit(Call(0, 1, far - SessionBook::kSeqWindow + 1), kT0), SessionVerdict::kOk);
  EXPECT_EQ(book.sessions(), 1u);
}

TEST(SessionBookTest, ManyCallsOfOneSessionTakeNoMoreMemory) {
  // Issue 62: 70,000 Status calls of a reader pushed out worker 0's Register
  // session when every accepted proof took a table entry.
  SessionBook book(NoRateLimits());
  ASSERT_EQ(book.Admit(Call(0, 1, 0), kT0), SessionVerdict::kOk);
  for (uint64_t seq = 0; seq < 200'000; ++seq) {
    ASSERT_EQ(book.Admit(Call(kReaderRank, 1, seq), kT0), SessionVerdict::kOk) << seq;
  }
  EXPECT_EQ(book.sessions(), 2u);
  EXPECT_EQ(book.Admit(Call(0, 1, 1), kT0), SessionVerdict::kOk) << "worker 0's session survives";
}

TEST(SessionBookTest, ACredentialPushesOutOnlyItsOwnSessions) {
  SessionLimits limits = NoRateLimits();
  limits.sessions_per_credential = 4;
  SessionBook book(limits);
  ASSERT_EQ(book.Admit(Call(0, 0, 0, kT0), kT0), SessionVerdict::kOk);
  ASSERT_EQ(book.Admit(Call(-1, 0, 0, kT0), kT0), SessionVerdict::kOk);
  // A reader (or rank 3) starting thousands of sessions.
  for (int i = 1; i <= 5000; ++i) {
    ASSERT_EQ(book.Admit(Call(kReaderRank, i, 0, kT0 + i), kT0 + i), SessionVerdict::kOk) << i;
    ASSERT_EQ(book.Admit(Call(3, i, 0, kT0 + i), kT0 + i), SessionVerdict::kOk) << i;
  }
  EXPECT_EQ(book.sessions_of(kReaderRank), 4u);
  EXPECT_EQ(book.sessions_of(3), 4u);
  EXPECT_EQ(book.Admit(Call(0, 0, 1, kT0), kT0 + 6000), SessionVerdict::kOk) << "rank 0 untouched";
  EXPECT_EQ(book.Admit(Call(-1, 0, 1, kT0), kT0 + 6000), SessionVerdict::kOk) << "the token untouched";
  // A pushed-out session is refused from then on (its client starts a new
  // one); a replay of its old proofs cannot pass as a new session.
  EXPECT_EQ(book.Admit(Call(kReaderRank, 1, 1, kT0 + 1), kT0 + 6000), SessionVerdict::kForgotten);
  EXPECT_EQ(book.Admit(Call(kReaderRank, 1, 0, kT0 + 1), kT0 + 6000), SessionVerdict::kForgotten);
  // The most recently used ones stay.
  EXPECT_EQ(book.Admit(Call(kReaderRank, 5000, 1, kT0 + 5000), kT0 + 6000), SessionVerdict::kOk);
  // A session made after the push-out is new.
  EXPECT_EQ(book.Admit(Call(kReaderRank, 9999, 0, kT0 + 7000), kT0 + 7000), SessionVerdict::kOk);
}

TEST(SessionBookTest, NewSessionsAreRateLimitedPerCredential) {
  SessionLimits limits;
  limits.new_sessions_per_second = 10;
  limits.new_session_burst = 20;
  SessionBook book(limits);
  int accepted = 0;
  for (int i = 0; i < 100; ++i) accepted += book.Admit(Call(2, i, 0, kT0), kT0) == SessionVerdict::kOk;
  EXPECT_EQ(accepted, 20) << "the burst";
  EXPECT_EQ(book.Admit(Call(2, 500, 0, kT0), kT0), SessionVerdict::kRateLimited);
  // Another credential is not limited by rank 2's flood.
  EXPECT_EQ(book.Admit(Call(1, 0, 0, kT0), kT0), SessionVerdict::kOk);
  // Calls of sessions rank 2 already has go on.
  EXPECT_EQ(book.Admit(Call(2, 0, 1, kT0), kT0), SessionVerdict::kOk);
  // A second later, ten more.
  accepted = 0;
  for (int i = 100; i < 200; ++i) accepted += book.Admit(Call(2, i, 0, kT0), kT0 + kSecond) == SessionVerdict::kOk;
  EXPECT_EQ(accepted, 10);
}

TEST(SessionBookTest, TheTokenStartsAWorldOfSessionsAtOnce) {
  // control_plane_load: 4,096 simulated workers holding the token register
  // at once; the token is the operator's root secret, not rate-limited.
  SessionBook book;
  for (int i = 0; i < 4096; ++i) {
    ASSERT_EQ(book.Admit(Call(-1, i, 0, kT0, /*read_only=*/false), kT0), SessionVerdict::kOk) << i;
  }
  EXPECT_EQ(book.sessions_of(-1), 4096u);
  // Its share is bounded too: past it, its own least recently used go.
  SessionLimits limits;
  limits.token_sessions = 10;
  SessionBook small(limits);
  for (int i = 0; i < 100; ++i) ASSERT_EQ(small.Admit(Call(-1, i, 0, kT0 + i), kT0 + i), SessionVerdict::kOk);
  EXPECT_EQ(small.sessions(), 10u);
  EXPECT_EQ(small.Admit(Call(-1, 0, 1, kT0), kT0 + 200), SessionVerdict::kForgotten);
}

TEST(SessionBookTest, ReadsAreRateLimitedPerCredentialAndTheJobsCallsNot) {
  SessionLimits limits;
  limits.read_calls_per_second = 100;
  limits.read_call_burst = 50;
  SessionBook book(limits);
  int accepted = 0;
  for (uint64_t seq = 0; seq < 1000; ++seq) accepted += book.Admit(Call(kReaderRank, 0, seq), kT0) == SessionVerdict::kOk;
  EXPECT_EQ(accepted, 50);
  // Another credential's reads have their own bucket; the job's own calls
  // (Register, Heartbeat) are not limited per call.
  EXPECT_EQ(book.Admit(Call(0, 0, 0), kT0), SessionVerdict::kOk);
  for (uint64_t seq = 1; seq < 1000; ++seq) {
    ASSERT_EQ(book.Admit(Call(0, 0, seq, kT0, /*read_only=*/false), kT0), SessionVerdict::kOk);
  }
  // Half a second refills 50.
  accepted = 0;
  for (uint64_t seq = 1000; seq < 2000; ++seq) {
    accepted += book.Admit(Call(kReaderRank, 0, seq), kT0 + kSecond / 2) == SessionVerdict::kOk;
  }
  EXPECT_EQ(accepted, 50);
}

TEST(SessionBookTest, TheTotalIsBoundedWithoutTakingFromAnyone) {
  SessionLimits limits = NoRateLimits();
  limits.max_sessions = 8;
  limits.sessions_per_credential = 4;
  SessionBook book(limits);
  for (int rank = 0; rank < 2; ++rank) {
    for (int i = 0; i < 4; ++i) ASSERT_EQ(book.Admit(Call(rank, i, 0), kT0), SessionVerdict::kOk);
  }
  EXPECT_EQ(book.sessions(), 8u);
  EXPECT_EQ(book.Admit(Call(5, 0, 0), kT0), SessionVerdict::kRateLimited) << "full: a newcomer waits";
  EXPECT_EQ(book.Admit(Call(-1, 0, 0), kT0), SessionVerdict::kOk) << "the token has a share of its own";
  // A credential at its own share still rotates within it.
  EXPECT_EQ(book.Admit(Call(0, 9, 0, kT0 + 1), kT0 + 1), SessionVerdict::kOk);
  EXPECT_EQ(book.sessions(), 9u);
  // Once sessions expire there is room again.
  const int64_t later = kT0 + kProofSessionMaxAgeMicros + 10;
  EXPECT_EQ(book.Admit(Call(5, 0, 0, later), later), SessionVerdict::kOk);
  EXPECT_LE(book.sessions(), 2u);
}

}  // namespace
}  // namespace shardline
