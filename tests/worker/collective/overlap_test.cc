#include "worker/collective/overlap.h"

#include <gtest/gtest.h>

#include <cstring>
#include <vector>

#include "common/job/shard.h"
#include "common/platform/status_macros.h"
#include "tests/worker/collective/world.h"
#include "worker/collective/ring.h"

namespace shardline {
namespace {

std::vector<float> Values(int rank, int n) {
  std::vector<float> v(static_cast<size_t>(n));
  for (int i = 0; i < n; ++i) v[static_cast<size_t>(i)] = 0.001f * static_cast<float>((rank + 1) * 7919 + i * 31 % 997);
  return v;
}

// Bucketed ops started in the background, waited for out of order, with
// plain calls between them, give every rank bitwise what the same ops give
// run one after the other; the plain calls see every earlier op finished.
class OverlapTransportTest : public ::testing::TestWithParam<TransportKind> {};

TEST_P(OverlapTransportTest, BackgroundOpsEqualTheSameOpsInOrder) {
  constexpr int kRanks = 3, kSize = 1000;
  const std::vector<shardline::Range> buckets = {{0, 100}, {100, 700}, {700, 1000}};
  {
    TestWorld world(GetParam(), kRanks);
    std::vector<std::vector<float>> plain(kRanks), overlapped(kRanks);
    auto run = [&](bool overlap) {
      return world.Run([&](int r, Transport* t) -> absl::Status {
        RingCollectives ring(t, CollectiveOptions{Env::Default()});
        std::vector<float> grads = Values(r, kSize), params = Values(r + 10, kSize);
        std::vector<double> scalars = {static_cast<double>(r)};
        if (!overlap) {
          for (size_t k = buckets.size(); k-- > 0;) {
            RETURN_IF_ERROR(ring.ReduceScatter(absl::MakeSpan(grads).subspan(buckets[k].begin, buckets[k].size())));
          }
          RETURN_IF_ERROR(ring.AllReduceScalars(absl::MakeSpan(scalars), ReduceOp::kSum));
          for (const shardline::Range& b : buckets) {
            RETURN_IF_ERROR(ring.AllGather(absl::MakeSpan(params).subspan(b.begin, b.size())));
          }
        } else {
          OverlapCollectives comm(&ring, Env::Default());
          std::vector<Ticket> rs;
          for (size_t k = buckets.size(); k-- > 0;) {
            rs.push_back(comm.StartReduceScatter(absl::MakeSpan(grads).subspan(buckets[k].begin, buckets[k].size())));
          }
          for (size_t i = rs.size(); i-- > 0;) RETURN_IF_ERROR(comm.Wait(rs[i]).status);  // any order
          RETURN_IF_ERROR(comm.AllReduceScalars(absl::MakeSpan(scalars), ReduceOp::kSum));
          std::vector<Ticket> ag;
          for (const shardline::Range& b : buckets) ag.push_back(comm.StartAllGather(absl::MakeSpan(params).subspan(b.begin, b.size())));
          RETURN_IF_ERROR(comm.Drain());
          for (Ticket a : ag) RETURN_IF_ERROR(comm.Wait(a).status);
          EXPECT_GE(comm.busy_seconds(), 0.0);
        }
        EXPECT_EQ(scalars[0], 0.0 + 1.0 + 2.0);
        std::vector<float>& out = overlap ? overlapped[static_cast<size_t>(r)] : plain[static_cast<size_t>(r)];
        out = params;
        for (const shardline::Range& b : buckets) {
          const shardline::Range mine = ShardRange(b.size(), r, kRanks);
          out.insert(out.end(), grads.begin() + b.begin + mine.begin, grads.begin() + b.begin + mine.end);
        }
        return absl::OkStatus();
      });
    };
    for (const absl::Status& s : run(false)) ASSERT_TRUE(s.ok()) << s;
    for (const absl::Status& s : run(true)) ASSERT_TRUE(s.ok()) << s;
    for (int r = 0; r < kRanks; ++r) {
      ASSERT_EQ(plain[static_cast<size_t>(r)].size(), overlapped[static_cast<size_t>(r)].size());
      EXPECT_EQ(std::memcmp(plain[static_cast<size_t>(r)].data(), overlapped[static_cast<size_t>(r)].data(),
                            plain[static_cast<size_t>(r)].size() * sizeof(float)),
                0)
          << "rank " << r;
    }
  }
}

INSTANTIATE_TEST_SUITE_P(Transports, OverlapTransportTest,
                         ::testing::Values(TransportKind::kLocal, TransportKind::kGrpc),
                         [](const auto& info) { return KindName(info.param); });

// A collective that fails its second op (a fault injected: the world broke).
class FailingSecond : public LocalCollectives {
 public:
  absl::Status ReduceScatter(absl::Span<float>) override { return Next(); }
  absl::Status AllGather(absl::Span<float>) override { return Next(); }
  int ops = 0;

 private:
  absl::Status Next() { return ++ops == 2 ? absl::UnavailableError("rank 1 went away") : absl::OkStatus(); }
};

// After a failed op nothing more runs: every later op, waited or drained,
// and every plain call fail with the first failure, at once.
TEST(OverlapCollectivesTest, AFailedOpFailsEveryLaterOneWithoutRunningIt) {
  FailingSecond inner;
  std::vector<float> buffer(8);
  OverlapCollectives comm(&inner, Env::Default());
  const Ticket a = comm.StartReduceScatter(absl::MakeSpan(buffer));
  const Ticket b = comm.StartAllGather(absl::MakeSpan(buffer));
  const Ticket c = comm.StartAllGather(absl::MakeSpan(buffer));
  EXPECT_TRUE(comm.Wait(a).status.ok());
  EXPECT_EQ(comm.Wait(c).status.code(), absl::StatusCode::kUnavailable);
  EXPECT_EQ(comm.Wait(b).status.code(), absl::StatusCode::kUnavailable);
  EXPECT_EQ(comm.Drain().code(), absl::StatusCode::kUnavailable);
  double v = 1;
  EXPECT_EQ(comm.AllReduceScalars(absl::MakeSpan(&v, 1), ReduceOp::kSum).code(), absl::StatusCode::kUnavailable);
  EXPECT_EQ(inner.ops, 2);  // c never ran
  EXPECT_EQ(comm.Wait(a).status.code(), absl::StatusCode::kInternal);  // a ticket is waited for once
}

}  // namespace
}  // namespace shardline
