// Posted receives: a handler registered with Expect runs exactly once, on
// the thread that delivers its message (or in Expect, if the message came
// first); Await returns its status, or names the peer that cannot deliver;
// after CancelExpected no handler runs.
#include "worker/collective/mailbox.h"

#include <gtest/gtest.h>

#include <atomic>
#include <thread>

#include "absl/strings/match.h"

namespace shardline {
namespace {

std::unique_ptr<Payload> Bytes(const std::string& s) { return std::make_unique<StringPayload>(s); }

std::string Text(const Payload& p) {
  std::string out(p.size(), '\0');
  EXPECT_TRUE(CopyPayloadInto(p, absl::MakeSpan(out)).ok());
  return out;
}

const absl::Time kSoon = absl::InfiniteFuture();

TEST(MailboxTest, PostedHandlerRunsOnTheDeliveringThread) {
  Mailbox box(2);
  std::thread::id ran_on;
  std::string got;
  box.Expect(1, 7, [&](std::unique_ptr<Payload> p) {
    ran_on = std::this_thread::get_id();
    got = Text(*p);
    return absl::OkStatus();
  });
  std::thread::id deliverer;
  std::thread t([&] {
    deliverer = std::this_thread::get_id();
    EXPECT_TRUE(box.Put(1, 7, Bytes("segment")).ok());
  });
  t.join();
  EXPECT_TRUE(box.Await(1, 7, kSoon).ok());
  EXPECT_EQ(got, "segment");
  EXPECT_EQ(ran_on, deliverer);
}

TEST(MailboxTest, MessageThatCameFirstIsHandledInExpect) {
  Mailbox box(2);
  EXPECT_TRUE(box.Put(1, 3, Bytes("early")).ok());
  std::string got;
  box.Expect(1, 3, [&](std::unique_ptr<Payload> p) {
    got = Text(*p);
    return absl::OkStatus();
  });
  EXPECT_EQ(got, "early");
  EXPECT_TRUE(box.Await(1, 3, kSoon).ok());
}

TEST(MailboxTest, AwaitReturnsTheHandlersError) {
  Mailbox box(2);
  box.Expect(1, 1, [](std::unique_ptr<Payload>) { return absl::InternalError("received 3 bytes; expected 8"); });
  EXPECT_TRUE(box.Put(1, 1, Bytes("abc")).ok());
  const absl::Status s = box.Await(1, 1, kSoon);
  EXPECT_TRUE(absl::IsInternal(s)) << s;
  EXPECT_TRUE(absl::StrContains(s.message(), "expected 8")) << s;
}

TEST(MailboxTest, AwaitNamesAGonePeerAndAMissingMessage) {
  Mailbox box(3);
  box.Expect(2, 5, [](std::unique_ptr<Payload>) { return absl::OkStatus(); });
  box.MarkGone(2, "its connection broke");
  const absl::Status gone = box.Await(2, 5, kSoon);
  EXPECT_TRUE(absl::IsUnavailable(gone)) << gone;
  EXPECT_TRUE(absl::StrContains(gone.message(), "peer rank 2 is gone: its connection broke")) << gone;

  box.Expect(1, 5, [](std::unique_ptr<Payload>) { return absl::OkStatus(); });
  const absl::Status late = box.Await(1, 5, absl::Now() + absl::Milliseconds(20));
  EXPECT_TRUE(absl::IsDeadlineExceeded(late)) << late;
  EXPECT_TRUE(absl::StrContains(late.message(), "peer rank 1")) << late;
}

TEST(MailboxTest, NoHandlerRunsAfterCancel) {
  Mailbox box(2);
  std::atomic<int> runs{0};
  box.Expect(1, 9, [&](std::unique_ptr<Payload>) {
    ++runs;
    return absl::OkStatus();
  });
  box.CancelExpected();
  EXPECT_TRUE(box.Put(1, 9, Bytes("late")).ok());
  EXPECT_EQ(runs.load(), 0);
  // The late message waits for a plain Take instead.
  absl::StatusOr<std::unique_ptr<Payload>> p = box.Take(1, 9, kSoon);
  ASSERT_TRUE(p.ok()) << p.status();
  EXPECT_EQ(Text(**p), "late");
}

TEST(MailboxTest, CancelWaitsForARunningHandler) {
  Mailbox box(2);
  std::atomic<bool> started{false}, finished{false};
  box.Expect(1, 4, [&](std::unique_ptr<Payload>) {
    started = true;
    absl::SleepFor(absl::Milliseconds(100));
    finished = true;
    return absl::OkStatus();
  });
  std::thread t([&] { EXPECT_TRUE(box.Put(1, 4, Bytes("x")).ok()); });
  while (!started) absl::SleepFor(absl::Milliseconds(1));
  box.CancelExpected();
  EXPECT_TRUE(finished.load());
  t.join();
}

TEST(MailboxTest, UnclaimedBytesPerSourceAreCappedAndTheSenderIsNamedFaulty) {
  Mailbox box(3, /*max_unclaimed_bytes_per_source=*/10);
  EXPECT_TRUE(box.Put(1, 100, Bytes("abcd")).ok());
  EXPECT_TRUE(box.Put(1, 101, Bytes("efgh")).ok());  // 8 bytes wait
  EXPECT_TRUE(box.Put(2, 100, Bytes("0123456789")).ok());  // the cap is per source
  // Claimed bytes no longer count: rank 1 may send again.
  ASSERT_TRUE(box.Take(1, 100, absl::Now()).ok());
  EXPECT_TRUE(box.Put(1, 102, Bytes("ijkl")).ok());  // 8 wait again
  // A repeated tag replaces its message and its bytes.
  EXPECT_TRUE(box.Put(1, 102, Bytes("mn")).ok());  // 6 wait
  // A posted receive takes its message straight away, whatever its size.
  box.Expect(1, 200, [](std::unique_ptr<Payload>) { return absl::OkStatus(); });
  EXPECT_TRUE(box.Put(1, 200, Bytes(std::string(100, 'x'))).ok());
  EXPECT_TRUE(box.Await(1, 200, absl::Now() + absl::Seconds(5)).ok());

  const absl::Status over = box.Put(1, 103, Bytes("opqrs"));  // 11 > 10
  EXPECT_EQ(over.code(), absl::StatusCode::kResourceExhausted);
  EXPECT_TRUE(absl::StrContains(over.message(), "peer rank 1")) << over;
  // The frame is dropped and rank 1 is gone; what it sent before stays.
  absl::StatusOr<std::unique_ptr<Payload>> dropped = box.Take(1, 103, absl::Now() + absl::Seconds(5));
  EXPECT_EQ(dropped.status().code(), absl::StatusCode::kUnavailable);
  EXPECT_TRUE(absl::StrContains(dropped.status().message(), "no receive asked for")) << dropped.status();
  EXPECT_TRUE(box.Take(1, 101, absl::Now()).ok());
  EXPECT_TRUE(box.Take(2, 100, absl::Now()).ok());  // other sources are unaffected
}

// Issue 33, finding 6: empty frames with distinct tags cost no bytes, so a
// byte cap alone let a member queue them without bound.
TEST(MailboxTest, UnclaimedMessagesPerSourceAreCappedByCountToo) {
  Mailbox box(2, /*max_unclaimed_bytes_per_source=*/1 << 20, /*max_unclaimed_messages_per_source=*/3);
  for (uint64_t tag = 0; tag < 3; ++tag) EXPECT_TRUE(box.Put(1, tag, Bytes("")).ok()) << tag;
  EXPECT_TRUE(box.Put(1, 2, Bytes("")).ok()) << "a repeated tag replaces: still 3";
  ASSERT_TRUE(box.Take(1, 0, absl::Now()).ok());
  EXPECT_TRUE(box.Put(1, 3, Bytes("")).ok()) << "a claimed message no longer counts";
  const absl::Status over = box.Put(1, 4, Bytes(""));
  EXPECT_EQ(over.code(), absl::StatusCode::kResourceExhausted);
  EXPECT_TRUE(absl::StrContains(over.message(), "4 messages no receive asked for")) << over;
  EXPECT_EQ(box.Take(1, 4, absl::Now()).status().code(), absl::StatusCode::kUnavailable);
}

}  // namespace
}  // namespace shardline
