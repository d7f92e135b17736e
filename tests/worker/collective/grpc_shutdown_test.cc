// A failed generation of the gRPC transport closes without waiting on peers
// that are gone: the close is what a surviving worker waits on before it
// re-registers, so a wait here is a wait in every recovery.
#include <gtest/gtest.h>

#include <memory>
#include <thread>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/synchronization/notification.h"
#include "absl/time/clock.h"
#include "worker/collective/grpc_transport.h"

namespace shardline {
namespace {

// Longer than any test waits: a close that waits for the drain timeout (or
// for the grace a failed generation gives its streams) shows up as a close
// that did not finish, not as a slow one.
constexpr absl::Duration kDrain = absl::Seconds(90);
constexpr absl::Duration kPatience = absl::Seconds(30);

std::string Addr(const TransportServer& s) { return absl::StrCat("127.0.0.1:", s.port()); }

TransportServerOptions Options(absl::Duration report_grace = kDrain) {
  TransportServerOptions o;
  o.drain_timeout = kDrain;
  o.report_grace = report_grace;
  return o;
}

// True if t->Shutdown() returns within kPatience. Joins it either way.
bool ClosesPromptly(Transport* t) {
  absl::Notification done;
  std::thread closer([&] {
    t->Shutdown();
    done.Notify();
  });
  const bool prompt = done.WaitForNotificationWithTimeout(kPatience);
  closer.join();
  return prompt;
}

enum class Departure { kDead, kRestartedInPlace };

struct Case {
  Departure departure;
  bool data_queued;  // rank 1 has sent rank 2 data before finding it gone
};

class GrpcFailedGenerationTest : public ::testing::TestWithParam<Case> {};

// Rank 2 of three leaves before it has taken a frame; rank 1 finds it silent
// and fails the world, rank 0 hears of it from rank 1. Both send their
// reports to rank 2's address: nothing listens there, or a fresh process
// that has joined no generation does. Neither holds a close; only data the
// restarted process already holds for the old generation (it parks streams
// of generations it may yet join) costs the report grace.
TEST_P(GrpcFailedGenerationTest, ClosesWithoutWaitingForAPeerThatLeft) {
  const Case c = GetParam();
  const bool parked = c.departure == Departure::kRestartedInPlace && c.data_queued;
  const TransportServerOptions options = Options(parked ? absl::Seconds(1) : kDrain);
  auto s0 = *TransportServer::Start(Env::Default(), "127.0.0.1:0", options);
  auto s1 = *TransportServer::Start(Env::Default(), "127.0.0.1:0", options);
  auto s2 = *TransportServer::Start(Env::Default(), "127.0.0.1:0", options);
  const std::vector<std::string> peers = {Addr(*s0), Addr(*s1), Addr(*s2)};
  const std::string address2 = peers[2];
  std::unique_ptr<Transport> t0 = *s0->Connect(3, 0, peers);
  std::unique_ptr<Transport> t1 = *s1->Connect(3, 1, peers);
  s2.reset();
  if (c.departure == Departure::kRestartedInPlace) {
    absl::StatusOr<std::unique_ptr<TransportServer>> again = TransportServer::Start(Env::Default(), address2, options);
    ASSERT_TRUE(again.ok()) << again.status();
    s2 = *std::move(again);
  }
  const char byte = 1;  // a sent payload is referenced until the close
  if (c.data_queued) {
    ASSERT_TRUE(t1->Send(2, 5, absl::MakeConstSpan(&byte, 1), absl::Now() + absl::Seconds(5)).ok());
    if (parked) absl::SleepFor(absl::Milliseconds(200));  // let it reach the new process and park
  }

  const absl::Status silent = t1->Receive(2, 1, absl::Now() + absl::Milliseconds(200)).status();
  ASSERT_TRUE(absl::IsDeadlineExceeded(silent)) << silent;
  const absl::Status told = t0->Receive(1, 1, absl::Now() + kPatience).status();
  EXPECT_TRUE(absl::IsUnavailable(told)) << told;
  EXPECT_TRUE(absl::StrContains(told.message(), "rank 2")) << told;

  EXPECT_TRUE(ClosesPromptly(t0.get())) << "rank 0 waited on rank 2 after hearing the world failed";
  EXPECT_TRUE(ClosesPromptly(t1.get())) << "rank 1 waited on rank 2 after finding it gone";
  // The restarted process is not held either: it joins the next generation.
  if (s2 != nullptr) {
    EXPECT_TRUE(s2->Connect(4, 2, peers).ok());
  }
}

INSTANTIATE_TEST_SUITE_P(Departures, GrpcFailedGenerationTest,
                         ::testing::Values(Case{Departure::kDead, false}, Case{Departure::kDead, true},
                                           Case{Departure::kRestartedInPlace, false},
                                           Case{Departure::kRestartedInPlace, true}),
                         [](const ::testing::TestParamInfo<Case>& i) {
                           return absl::StrCat(i.param.departure == Departure::kDead ? "Dead" : "RestartedInPlace",
                                               i.param.data_queued ? "WithDataQueued" : "");
                         });

// The report still reaches every live peer, over streams already carrying
// data and over ones opened for it, and a peer that is still taking data is
// drained, not cut off.
TEST(GrpcFailedGenerationTest, TheReportReachesLivePeersOverOldAndNewStreams) {
  auto s0 = *TransportServer::Start(Env::Default(), "127.0.0.1:0", Options());
  auto s1 = *TransportServer::Start(Env::Default(), "127.0.0.1:0", Options());
  auto s2 = *TransportServer::Start(Env::Default(), "127.0.0.1:0", Options());
  const std::vector<std::string> peers = {Addr(*s0), Addr(*s1), Addr(*s2)};
  std::unique_ptr<Transport> t0 = *s0->Connect(7, 0, peers);
  std::unique_ptr<Transport> t1 = *s1->Connect(7, 1, peers);
  std::unique_ptr<Transport> t2 = *s2->Connect(7, 2, peers);
  // Rank 1 has a stream to rank 0 (taken from), none to rank 2.
  const char byte = 3;
  ASSERT_TRUE(t1->Send(0, 1, absl::MakeConstSpan(&byte, 1), absl::Now() + absl::Seconds(5)).ok());
  ASSERT_TRUE(t0->Receive(1, 1, absl::Now() + kPatience).ok());

  const absl::Status silent = t1->Receive(0, 9, absl::Now() + absl::Milliseconds(100)).status();
  ASSERT_TRUE(absl::IsDeadlineExceeded(silent)) << silent;
  for (Transport* t : {t0.get(), t2.get()}) {
    const absl::Status told = t->Receive(1, 2, absl::Now() + kPatience).status();
    EXPECT_TRUE(absl::IsUnavailable(told)) << "rank " << t->rank() << ": " << told;
    EXPECT_TRUE(absl::StrContains(told.message(), "reported by rank 1")) << "rank " << t->rank() << ": " << told;
  }
  for (Transport* t : {t1.get(), t0.get(), t2.get()}) {
    EXPECT_TRUE(ClosesPromptly(t)) << "rank " << t->rank();
  }
}

}  // namespace
}  // namespace shardline
