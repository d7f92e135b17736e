// The fault-injecting transport over the in-process one: what it does to
// messages is what the chaos harness relies on.
#include "worker/collective/faulty_transport.h"

#include <gtest/gtest.h>

#include <cstdio>
#include <cstring>
#include <fstream>
#include <thread>
#include <vector>

#include "common/platform/mutex.h"
#include "worker/collective/local_transport.h"
#include "worker/collective/payload.h"
#include "worker/collective/ring.h"

namespace shardline {
namespace {

std::string ControlFile(const std::string& contents) {
  const std::string path = ::testing::TempDir() + "/faulty_transport_" +
                           ::testing::UnitTest::GetInstance()->current_test_info()->name();
  std::ofstream(path) << contents;
  return path;
}

// An all-reduce of 3 ranks through FaultyTransports reading `control`.
std::vector<std::vector<float>> AllReduce(const std::string& control, std::vector<absl::Status>* status) {
  constexpr int kRanks = 3;
  LocalFabric fabric(kRanks);
  std::vector<std::vector<float>> out(kRanks);
  status->assign(kRanks, absl::OkStatus());
  std::vector<std::thread> ranks;
  for (int r = 0; r < kRanks; ++r) {
    ranks.emplace_back([&, r] {
      std::unique_ptr<Transport> t = NewFaultyTransport(fabric.Connect(r), control, Env::Default());
      CollectiveOptions o;
      o.env = Env::Default();
      o.timeout = absl::Seconds(2);
      o.max_segment_bytes = 4096;
      RingCollectives ring(t.get(), o);
      std::vector<float> buf(10007);
      for (size_t i = 0; i < buf.size(); ++i) buf[i] = 0.001f * static_cast<float>((i * 7 + r * 13) % 1000);
      (*status)[r] = ring.AllReduce(absl::MakeSpan(buf));
      if (!(*status)[r].ok()) t->Shutdown();
      out[r] = std::move(buf);
    });
  }
  for (std::thread& t : ranks) t.join();
  return out;
}

TEST(FaultyTransportTest, WithoutAControlFileItIsTransparent) {
  std::vector<absl::Status> plain, faulty;
  const auto want = AllReduce("/nonexistent/control", &plain);
  for (const absl::Status& s : plain) ASSERT_TRUE(s.ok()) << s;
  const auto got = AllReduce(ControlFile(""), &faulty);
  for (const absl::Status& s : faulty) ASSERT_TRUE(s.ok()) << s;
  EXPECT_EQ(got, want);
}

TEST(FaultyTransportTest, ReorderedAndDelayedMessagesChangeNoBit) {
  std::vector<absl::Status> plain, faulty;
  const auto want = AllReduce("/nonexistent/control", &plain);
  const auto got = AllReduce(ControlFile("reorder=0.5 delay_ms=0.2 jitter_ms=0.5 seed=3"), &faulty);
  for (const absl::Status& s : faulty) ASSERT_TRUE(s.ok()) << s;
  ASSERT_EQ(got.size(), want.size());
  for (size_t r = 0; r < got.size(); ++r) {
    ASSERT_EQ(got[r].size(), want[r].size());
    EXPECT_EQ(std::memcmp(got[r].data(), want[r].data(), got[r].size() * sizeof(float)), 0) << "rank " << r;
  }
}

TEST(FaultyTransportTest, AHeldBackMessageArrivesAfterTheNextOne) {
  LocalFabric fabric(2);
  std::unique_ptr<Transport> sender = NewFaultyTransport(fabric.Connect(0), ControlFile("reorder=1"), Env::Default());
  std::unique_ptr<Transport> receiver = fabric.Connect(1);
  std::vector<uint64_t> order;
  Mutex mu;
  for (uint64_t tag : {1, 2}) {
    ASSERT_TRUE(receiver
                    ->ExpectReceive(0, tag,
                                    [&, tag](std::unique_ptr<Payload>) {
                                      MutexLock lock(&mu);
                                      order.push_back(tag);
                                      return absl::OkStatus();
                                    })
                    .ok());
  }
  const char a[] = "first", b[] = "second";
  const absl::Time deadline = absl::Now() + absl::Seconds(10);
  ASSERT_TRUE(sender->Send(1, 1, absl::MakeConstSpan(a, sizeof(a)), deadline).ok());
  ASSERT_TRUE(sender->Send(1, 2, absl::MakeConstSpan(b, sizeof(b)), deadline).ok());
  ASSERT_TRUE(sender->Flush(deadline).ok());
  for (uint64_t tag : {1, 2}) ASSERT_TRUE(receiver->AwaitReceive(0, tag, deadline).ok());
  MutexLock lock(&mu);
  EXPECT_EQ(order, (std::vector<uint64_t>{2, 1}));
}

TEST(FaultyTransportTest, ALostMessageFailsTheCollectiveAtItsDeadlineNamingAPeer) {
  std::vector<absl::Status> status;
  AllReduce(ControlFile("loss=1"), &status);
  int failed = 0;
  for (const absl::Status& s : status) {
    if (s.ok()) continue;
    ++failed;
    EXPECT_TRUE(absl::IsDeadlineExceeded(s) || absl::IsUnavailable(s) || absl::IsAborted(s)) << s;
    EXPECT_NE(s.message().find("rank"), absl::string_view::npos) << s;
  }
  EXPECT_EQ(failed, 3) << "every rank must fail, none may hang";
}

}  // namespace
}  // namespace shardline
