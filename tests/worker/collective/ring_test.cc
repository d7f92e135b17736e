#include "worker/collective/ring.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <cmath>
#include <cstring>
#include <limits>
#include <tuple>

#include "absl/strings/match.h"
#include "common/job/rng.h"
#include "common/net/rpc_auth.h"
#include "common/job/shard.h"
#include "common/platform/status_macros.h"
#include "common/encoding/bf16.h"
#include "worker/collective/peer_fault.h"
#include "tests/common/topology/doubling_sim.h"
#include "tests/worker/collective/world.h"

namespace shardline {
namespace {

const std::vector<int64_t> kLengths = {0, 1, 2, 3, 7, 13, 31, 97, 1000, 4099};
// A segment of 2 floats makes every chunk multi-segment; 1 MiB is the default.
const std::vector<int64_t> kSegmentBytes = {8, 1 << 20};

// Small integers: every summation order gives the exact same float.
float Value(int rank, int64_t i) { return static_cast<float>((rank * 7 + i * 3) % 11 - 5); }

CollectiveOptions Options(int64_t segment_bytes) {
  CollectiveOptions o;
  o.env = Env::Default();
  o.timeout = absl::Seconds(20);
  o.max_segment_bytes = segment_bytes;
  return o;
}

class RingMatrixTest : public ::testing::TestWithParam<std::tuple<TransportKind, int>> {};

TEST_P(RingMatrixTest, AllOperationsGiveExactResultsForEveryLength) {
  // Not a structured binding: the lambdas below capture n (C++17 lambdas
  // cannot capture a binding; clang refuses).
  const TransportKind kind = std::get<0>(GetParam());
  const int n = std::get<1>(GetParam());
  // Exact results, not failure detection (RingFailureTest and the e2e tests
  // keep the default keepalive): up to 16 ranks share this one process,
  // which under the sanitizers on 2 cores can leave pings unanswered for
  // longer than the 2 s default and see live peers declared gone.
  TransportServerOptions grpc_options;
  grpc_options.keepalive_timeout = absl::Seconds(30);
  TestWorld world(kind, n, grpc_options);
  for (int64_t seg : kSegmentBytes) {
    for (int64_t len : kLengths) {
      SCOPED_TRACE("length " + std::to_string(len) + " segment bytes " + std::to_string(seg));
      std::vector<float> sum(static_cast<size_t>(len));
      for (int r = 0; r < n; ++r) {
        for (int64_t i = 0; i < len; ++i) sum[static_cast<size_t>(i)] += Value(r, i);
      }
      const std::vector<absl::Status> statuses = world.Run([&](int rank, Transport* t) -> absl::Status {
        RingCollectives ring(t, Options(seg));
        // Reduce-scatter: my chunk holds the sum.
        std::vector<float> buf(static_cast<size_t>(len));
        for (int64_t i = 0; i < len; ++i) buf[static_cast<size_t>(i)] = Value(rank, i);
        absl::Status s = ring.ReduceScatter(absl::MakeSpan(buf));
        if (!s.ok()) return s;
        const Range mine = ShardRange(len, rank, n);
        for (int64_t i = mine.begin; i < mine.end; ++i) {
          EXPECT_EQ(buf[static_cast<size_t>(i)], sum[static_cast<size_t>(i)]) << "rank " << rank << " i " << i;
        }
        // All-gather: every chunk arrives from its owner.
        for (int64_t i = mine.begin; i < mine.end; ++i) buf[static_cast<size_t>(i)] = static_cast<float>(i);
        if (!(s = ring.AllGather(absl::MakeSpan(buf))).ok()) return s;
        for (int64_t i = 0; i < len; ++i) EXPECT_EQ(buf[static_cast<size_t>(i)], static_cast<float>(i));
        // All-reduce, by size (each algorithm at every length: below).
        for (int64_t i = 0; i < len; ++i) buf[static_cast<size_t>(i)] = Value(rank, i);
        if (!(s = ring.AllReduce(absl::MakeSpan(buf))).ok()) return s;
        EXPECT_EQ(buf, sum) << "rank " << rank;
        // Broadcast from the last rank.
        for (int64_t i = 0; i < len; ++i) buf[static_cast<size_t>(i)] = rank == n - 1 ? Value(rank, i) : -99.0f;
        if (!(s = ring.Broadcast(absl::MakeSpan(buf), n - 1)).ok()) return s;
        for (int64_t i = 0; i < len; ++i) EXPECT_EQ(buf[static_cast<size_t>(i)], Value(n - 1, i));
        // Scalars.
        double scalars[2] = {static_cast<double>(rank), static_cast<double>(rank * rank)};
        if (!(s = ring.AllReduceScalars(absl::MakeSpan(scalars), ReduceOp::kSum)).ok()) return s;
        EXPECT_EQ(scalars[0], n * (n - 1) / 2.0);
        double top[1] = {static_cast<double>(n - 1 - rank)};
        if (!(s = ring.AllReduceScalars(absl::MakeSpan(top), ReduceOp::kMax)).ok()) return s;
        EXPECT_EQ(top[0], n - 1);
        // Send-receive: a shift to the next rank of `len` bytes, then one
        // move (the last rank to rank 0) the others sit out.
        const std::string bytes(static_cast<size_t>(len), static_cast<char>('a' + rank));
        absl::StatusOr<std::string> got = ring.SendRecv((rank + 1) % n, bytes, (rank + n - 1) % n);
        if (!got.ok()) return got.status();
        EXPECT_EQ(*got, std::string(static_cast<size_t>(len), static_cast<char>('a' + (rank + n - 1) % n)));
        got = ring.SendRecv(rank == n - 1 ? 0 : -1, bytes, rank == 0 ? n - 1 : -1);
        if (!got.ok()) return got.status();
        EXPECT_EQ(*got, rank == 0 ? std::string(static_cast<size_t>(len), static_cast<char>('a' + n - 1)) : "");
        return absl::OkStatus();
      });
      for (int r = 0; r < n; ++r) EXPECT_TRUE(statuses[static_cast<size_t>(r)].ok()) << statuses[static_cast<size_t>(r)];
      // AllReduce with each algorithm forced (one ring per transport: a
      // fresh world each, as rings on one transport would share tags).
      for (const int64_t limit : {int64_t{0}, std::numeric_limits<int64_t>::max()}) {
        const std::vector<absl::Status> forced = world.Run([&](int rank, Transport* t) -> absl::Status {
          CollectiveOptions o = Options(seg);
          o.doubling_max_bytes = limit;
          RingCollectives ring(t, o);
          std::vector<float> buf(static_cast<size_t>(len));
          for (int64_t i = 0; i < len; ++i) buf[static_cast<size_t>(i)] = Value(rank, i);
          RETURN_IF_ERROR(ring.AllReduce(absl::MakeSpan(buf)));
          EXPECT_EQ(buf, sum) << "rank " << rank << " doubling up to " << limit << " bytes";
          return absl::OkStatus();
        });
        for (const absl::Status& st : forced) EXPECT_TRUE(st.ok()) << st;
      }
    }
  }
}

INSTANTIATE_TEST_SUITE_P(
    TransportsAndWorldSizes, RingMatrixTest,
    ::testing::Combine(::testing::Values(TransportKind::kLocal, TransportKind::kGrpc),
                       ::testing::Values(1, 2, 3, 4, 5, 8, 16)),
    [](const auto& info) {
      return KindName(std::get<0>(info.param)) + "_N" + std::to_string(std::get<1>(info.param));
    });

class RingDeterminismTest : public ::testing::TestWithParam<TransportKind> {};

// Random floats, where summation order matters: every rank gets the same
// bits, every run gets the same bits, and the bits are the documented order
// x[c+1] + x[c+2] + ... + x[c] for chunk c.
TEST_P(RingDeterminismTest, BitwiseEqualAcrossRanksAndRunsInTheDocumentedOrder) {
  const int n = 5;
  const int64_t len = 10007;
  auto input = [](int rank, int64_t i) {
    return RandomStream(7, Purpose::kDropout, 0, static_cast<uint32_t>(rank)).Uniform(static_cast<uint64_t>(i)) * 1e3f - 500.0f;
  };
  std::vector<float> expected(static_cast<size_t>(len));
  for (int c = 0; c < n; ++c) {
    const Range chunk = ShardRange(len, c, n);
    for (int64_t i = chunk.begin; i < chunk.end; ++i) {
      float acc = input((c + 1) % n, i);
      for (int k = 2; k <= n; ++k) acc = input((c + k) % n, i) + acc;
      expected[static_cast<size_t>(i)] = acc;
    }
  }
  TestWorld world(GetParam(), n);
  std::vector<std::vector<float>> results(n);
  for (int run = 0; run < 2; ++run) {
    const auto statuses = world.Run([&](int rank, Transport* t) {
      CollectiveOptions o = Options(4096);
      o.doubling_max_bytes = 0;  // the ring's order, at any length
      RingCollectives ring(t, o);
      std::vector<float> buf(static_cast<size_t>(len));
      for (int64_t i = 0; i < len; ++i) buf[static_cast<size_t>(i)] = input(rank, i);
      absl::Status s = ring.AllReduce(absl::MakeSpan(buf));
      results[static_cast<size_t>(rank)] = buf;
      return s;
    });
    for (const auto& s : statuses) ASSERT_TRUE(s.ok()) << s;
    for (int r = 0; r < n; ++r) {
      ASSERT_EQ(std::memcmp(results[static_cast<size_t>(r)].data(), expected.data(), sizeof(float) * len), 0)
          << "rank " << r << " run " << run;
    }
  }
}

INSTANTIATE_TEST_SUITE_P(Transports, RingDeterminismTest,
                         ::testing::Values(TransportKind::kLocal, TransportKind::kGrpc),
                         [](const auto& info) { return KindName(info.param); });

class RingBf16Test : public ::testing::TestWithParam<std::tuple<TransportKind, int>> {};

// bf16_reduce_scatter: each partial sum is rounded to bf16 as it is sent and
// added in float32, so chunk c is, bit for bit, x[c] + r(... r(r(x[c+1]) +
// x[c+2]) ...) with r the round trip through bf16, on every rank, segment
// size and run; half the bytes travel; a following AllGather (and AllReduce)
// still moves exact floats.
TEST_P(RingBf16Test, PartialSumsTravelAsBf16InTheDocumentedOrder) {
  const TransportKind kind = std::get<0>(GetParam());
  const int n = std::get<1>(GetParam());
  const int64_t len = 4099;
  auto input = [](int rank, int64_t i) {
    return RandomStream(9, Purpose::kDropout, 0, static_cast<uint32_t>(rank)).Uniform(static_cast<uint64_t>(i)) * 2.0f - 1.0f;
  };
  auto round = [](float v) { return Bf16ToFloat(FloatToBf16(v)); };
  std::vector<float> expected(static_cast<size_t>(len)), exact(static_cast<size_t>(len));
  for (int c = 0; c < n; ++c) {
    const Range chunk = ShardRange(len, c, n);
    for (int64_t i = chunk.begin; i < chunk.end; ++i) {
      float acc = input((c + 1) % n, i), plain = acc;
      for (int k = 2; k <= n; ++k) {
        acc = input((c + k) % n, i) + round(acc);
        plain = input((c + k) % n, i) + plain;
      }
      expected[static_cast<size_t>(i)] = acc;
      exact[static_cast<size_t>(i)] = plain;
    }
  }
  // Not vacuous: the rounding changes most sums.
  int64_t differ = 0;
  for (int64_t i = 0; i < len; ++i) differ += expected[static_cast<size_t>(i)] != exact[static_cast<size_t>(i)];
  ASSERT_GT(differ, len / 2);
  TestWorld world(kind, n);
  for (int64_t seg : {int64_t{64}, int64_t{1} << 20}) {
    std::vector<int64_t> sent(static_cast<size_t>(n));
    const auto statuses = world.Run([&](int rank, Transport* t) -> absl::Status {
      CollectiveOptions o = Options(seg);
      o.bf16_reduce_scatter = true;
      o.doubling_max_bytes = 0;  // the all-reduce below in the ring's order
      RingCollectives ring(t, o);
      std::vector<float> buf(static_cast<size_t>(len));
      for (int64_t i = 0; i < len; ++i) buf[static_cast<size_t>(i)] = input(rank, i);
      RETURN_IF_ERROR(ring.ReduceScatter(absl::MakeSpan(buf)));
      EXPECT_EQ(ring.nonfinite_source(), -1);
      const Range mine = ShardRange(len, rank, n);
      for (int64_t i = mine.begin; i < mine.end; ++i) {
        EXPECT_EQ(std::memcmp(&buf[static_cast<size_t>(i)], &expected[static_cast<size_t>(i)], sizeof(float)), 0)
            << "rank " << rank << " i " << i;
      }
      sent[static_cast<size_t>(rank)] = ring.bytes_sent();  // of the reduce-scatter alone
      // The owners' exact floats reach every rank.
      RETURN_IF_ERROR(ring.AllGather(absl::MakeSpan(buf)));
      EXPECT_EQ(std::memcmp(buf.data(), expected.data(), sizeof(float) * len), 0) << "rank " << rank;
      for (int64_t i = 0; i < len; ++i) buf[static_cast<size_t>(i)] = input(rank, i);
      RETURN_IF_ERROR(ring.AllReduce(absl::MakeSpan(buf)));
      EXPECT_EQ(std::memcmp(buf.data(), exact.data(), sizeof(float) * len), 0) << "rank " << rank << ": all-reduce";
      return absl::OkStatus();
    });
    for (const auto& s : statuses) ASSERT_TRUE(s.ok()) << s;
    for (int r = 0; r < n; ++r) {
      // Every chunk but its own, 2 bytes a value.
      EXPECT_EQ(sent[static_cast<size_t>(r)], (len - ShardRange(len, r, n).size()) * 2) << "rank " << r;
    }
  }
}

INSTANTIATE_TEST_SUITE_P(
    TransportsAndWorldSizes, RingBf16Test,
    ::testing::Combine(::testing::Values(TransportKind::kLocal, TransportKind::kGrpc), ::testing::Values(2, 3, 5)),
    [](const auto& info) {
      return KindName(std::get<0>(info.param)) + "_N" + std::to_string(std::get<1>(info.param));
    });

class DoublingTest : public ::testing::TestWithParam<std::tuple<TransportKind, int>> {};

// Chosen by size: an AllReduce of at most doubling_max_bytes and every
// scalar all-reduce run recursive doubling, bit for bit as the schedule's
// simulation (doubling_schedule.h) computes it, on every rank and run; a
// larger AllReduce runs the ring, in the ring's order.
TEST_P(DoublingTest, SmallMessagesTakeRecursiveDoublingBitForBit) {
  const TransportKind kind = std::get<0>(GetParam());
  const int n = std::get<1>(GetParam());
  const int64_t len = 1000;  // 4000 bytes
  auto input = [](int rank, int64_t i) {
    return RandomStream(13, Purpose::kDropout, 0, static_cast<uint32_t>(rank)).Uniform(static_cast<uint64_t>(i)) * 1e3f - 500.0f;
  };
  std::vector<std::vector<float>> inputs(static_cast<size_t>(n), std::vector<float>(static_cast<size_t>(len)));
  for (int r = 0; r < n; ++r) {
    for (int64_t i = 0; i < len; ++i) inputs[static_cast<size_t>(r)][static_cast<size_t>(i)] = input(r, i);
  }
  const std::vector<float> doubling = SimulateDoubling<std::vector<float>>(
      inputs, [](const std::vector<float>& lo, const std::vector<float>& hi) {
        std::vector<float> out(lo.size());
        for (size_t i = 0; i < lo.size(); ++i) out[i] = lo[i] + hi[i];
        return out;
      })[0];
  std::vector<float> ring_order(static_cast<size_t>(len));
  for (int c = 0; c < n; ++c) {
    const Range chunk = ShardRange(len, c, n);
    for (int64_t i = chunk.begin; i < chunk.end; ++i) {
      float acc = input((c + 1) % n, i);
      for (int k = 2; k <= n; ++k) acc = input((c + k) % n, i) + acc;
      ring_order[static_cast<size_t>(i)] = acc;
    }
  }
  if (n >= 3) {
    ASSERT_NE(doubling, ring_order) << "the two orders must differ for the test to tell them apart";
  }
  // Scalars: a sum, a max and a min, reduced as the schedule does.
  std::vector<std::vector<double>> scalar_in(static_cast<size_t>(n));
  for (int r = 0; r < n; ++r) {
    scalar_in[static_cast<size_t>(r)] = {input(r, 0) * 1.1, static_cast<double>(input(r, 1)), static_cast<double>(input(r, 2))};
  }
  const std::vector<double> scalar_want = SimulateDoubling<std::vector<double>>(
      scalar_in, [](const std::vector<double>& lo, const std::vector<double>& hi) {
        return std::vector<double>{lo[0] + hi[0], std::max(lo[1], hi[1]), std::min(lo[2], hi[2])};
      })[0];
  TestWorld world(kind, n);
  for (int run = 0; run < 2; ++run) {
    // One ring per transport (rings sharing one would share tags): a fresh
    // world per limit.
    for (const int64_t limit : {int64_t{4000}, int64_t{3999}}) {  // doubling, then the ring
      const auto statuses = world.Run([&](int rank, Transport* t) -> absl::Status {
        CollectiveOptions o = Options(1 << 20);
        o.doubling_max_bytes = limit;
        RingCollectives ring(t, o);
        std::vector<float> buf = inputs[static_cast<size_t>(rank)];
        RETURN_IF_ERROR(ring.AllReduce(absl::MakeSpan(buf)));
        const std::vector<float>& want = limit == 4000 ? doubling : ring_order;
        EXPECT_EQ(std::memcmp(buf.data(), want.data(), sizeof(float) * len), 0)
            << "rank " << rank << " run " << run << " limit " << limit;
        EXPECT_EQ(ring.nonfinite_source(), -1);
        return absl::OkStatus();
      });
      for (const auto& s : statuses) ASSERT_TRUE(s.ok()) << s;
    }
    const auto statuses = world.Run([&](int rank, Transport* t) -> absl::Status {
      RingCollectives ring(t, Options(1 << 20));
      std::vector<double> v = scalar_in[static_cast<size_t>(rank)];
      const ReduceOp ops[3] = {ReduceOp::kSum, ReduceOp::kMax, ReduceOp::kMin};
      RETURN_IF_ERROR(ring.AllReduceScalars(absl::MakeSpan(v), ops));
      EXPECT_EQ(std::memcmp(v.data(), scalar_want.data(), sizeof(double) * 3), 0) << "rank " << rank << " run " << run;
      return absl::OkStatus();
    });
    for (const auto& s : statuses) ASSERT_TRUE(s.ok()) << s;
  }
}

INSTANTIATE_TEST_SUITE_P(
    TransportsAndWorldSizes, DoublingTest,
    ::testing::Combine(::testing::Values(TransportKind::kLocal, TransportKind::kGrpc),
                       ::testing::Values(2, 3, 5, 8, 13, 16)),
    [](const auto& info) {
      return KindName(std::get<0>(info.param)) + "_N" + std::to_string(std::get<1>(info.param));
    });

// A non-finite scalar: every rank still runs the whole op, and all learn
// the same culprit, the lowest rank that put one in (here an extra rank of
// the doubling schedule, then two culprits at once); the culprits
// themselves get kInvalidArgument.
TEST(DoublingFaultTest, EveryRankNamesTheSameCulprit) {
  const int n = 5;
  for (const std::vector<int>& culprits : {std::vector<int>{4}, std::vector<int>{3, 1}}) {
    TestWorld world(TransportKind::kLocal, n);
    std::vector<absl::Status> got(n);
    world.Run([&](int rank, Transport* t) -> absl::Status {
      RingCollectives ring(t, Options(1 << 20));
      const bool bad = std::count(culprits.begin(), culprits.end(), rank) > 0;
      double v[2] = {1.0, bad ? std::numeric_limits<double>::infinity() : 2.0};
      got[static_cast<size_t>(rank)] = ring.AllReduceScalars(absl::MakeSpan(v), ReduceOp::kSum);
      return absl::OkStatus();
    });
    const int lowest = *std::min_element(culprits.begin(), culprits.end());
    for (int r = 0; r < n; ++r) {
      if (std::count(culprits.begin(), culprits.end(), r) > 0) {
        EXPECT_TRUE(absl::IsInvalidArgument(got[static_cast<size_t>(r)])) << r << ": " << got[static_cast<size_t>(r)];
      } else {
        EXPECT_EQ(PeerFaultRank(got[static_cast<size_t>(r)]), lowest) << r << ": " << got[static_cast<size_t>(r)];
      }
    }
  }
}

class RingNonFiniteTest : public ::testing::TestWithParam<TransportKind> {};

// Non-finite floats are delivered as they came, and each rank learns which
// neighbour it got them from; the next clean op reports nothing. Rank 1's
// whole gradient is NaN: rank 2 receives it from 1, rank 0 receives it
// (added into a partial sum) from 2, and rank 1 receives only chunks whose
// chains it has not joined yet. The all-gather spreads rank 1's chunk the
// same way. A NaN scalar is refused at once, naming the sender.
TEST_P(RingNonFiniteTest, TheSenderOfNonFiniteValuesIsReportedAndScalarsRefuseThem) {
  const int n = 3;
  const int64_t len = 999;
  const float nan = std::numeric_limits<float>::quiet_NaN();
  TestWorld world(GetParam(), n);
  std::vector<std::vector<int>> sources(n);
  std::vector<absl::Status> scalar_status(n);
  const auto statuses = world.Run([&](int rank, Transport* t) -> absl::Status {
    RingCollectives ring(t, Options(64));
    std::vector<int>& seen = sources[static_cast<size_t>(rank)];
    std::vector<float> buf(static_cast<size_t>(len), rank == 1 ? nan : 1.0f);
    if (absl::Status s = ring.ReduceScatter(absl::MakeSpan(buf)); !s.ok()) return s;
    seen.push_back(ring.nonfinite_source());
    const Range mine = ShardRange(len, rank, n);
    EXPECT_TRUE(std::isnan(buf[static_cast<size_t>(mine.begin)])) << "rank " << rank << ": delivered as it came";
    std::fill(buf.begin(), buf.end(), 2.0f);
    if (rank == 1) buf[static_cast<size_t>(mine.begin)] = std::numeric_limits<float>::infinity();
    if (absl::Status s = ring.AllGather(absl::MakeSpan(buf)); !s.ok()) return s;
    seen.push_back(ring.nonfinite_source());
    std::fill(buf.begin(), buf.end(), 3.0f);
    if (absl::Status s = ring.AllReduce(absl::MakeSpan(buf)); !s.ok()) return s;
    seen.push_back(ring.nonfinite_source());
    double scalars[2] = {1.0, rank == 1 ? static_cast<double>(nan) : 2.0};
    scalar_status[static_cast<size_t>(rank)] = ring.AllReduceScalars(absl::MakeSpan(scalars), ReduceOp::kSum);
    return absl::OkStatus();
  });
  for (const absl::Status& s : statuses) ASSERT_TRUE(s.ok()) << s;
  EXPECT_EQ(sources[0], std::vector<int>({2, 2, -1}));
  EXPECT_EQ(sources[1], std::vector<int>({-1, -1, -1}));
  EXPECT_EQ(sources[2], std::vector<int>({1, 1, -1}));
  for (int r : {0, 2}) {
    EXPECT_EQ(PeerFaultRank(scalar_status[static_cast<size_t>(r)]), 1) << scalar_status[static_cast<size_t>(r)];
    EXPECT_TRUE(absl::StrContains(scalar_status[static_cast<size_t>(r)].message(), "rank 1 sent a non-finite value"))
        << scalar_status[static_cast<size_t>(r)];
  }
  EXPECT_TRUE(absl::IsInvalidArgument(scalar_status[1])) << scalar_status[1];
}

INSTANTIATE_TEST_SUITE_P(Transports, RingNonFiniteTest,
                         ::testing::Values(TransportKind::kLocal, TransportKind::kGrpc),
                         [](const auto& info) { return KindName(info.param); });

TEST(RingFailureTest, KilledRankIsNamedByEveryOtherRankWellBeforeTheDeadline) {
  const int n = 4;
  TestWorld world(TransportKind::kLocal, n);
  const absl::Time start = absl::Now();
  const auto statuses = world.Run([&](int rank, Transport* t) -> absl::Status {
    CollectiveOptions o = Options(64);
    o.timeout = absl::Seconds(30);
    RingCollectives ring(t, o);
    std::vector<float> buf(100000, 1.0f);
    if (rank == 2) {
      world.fabric()->Kill(2);
      return absl::OkStatus();
    }
    for (int i = 0; i < 50; ++i) {
      absl::Status s = ring.AllReduce(absl::MakeSpan(buf));
      if (!s.ok()) return s;
    }
    return absl::OkStatus();
  });
  EXPECT_LT(absl::Now() - start, absl::Seconds(10));
  for (int r : {0, 1, 3}) {
    const absl::Status& s = statuses[static_cast<size_t>(r)];
    // Rank 3 receives from rank 2 and sees it die; it tells ranks 0 and 1,
    // which are waiting on live peers.
    EXPECT_TRUE(absl::IsUnavailable(s)) << "rank " << r << ": " << s;
    EXPECT_TRUE(absl::StrContains(s.message(), "peer rank 2 is gone")) << "rank " << r << ": " << s;
  }
}

TEST(RingFailureTest, SilentRankFailsOthersByTheDeadlineNamingAPeer) {
  const int n = 3;
  TestWorld world(TransportKind::kLocal, n);
  const absl::Time start = absl::Now();
  const auto statuses = world.Run([&](int rank, Transport* t) -> absl::Status {
    CollectiveOptions o = Options(1 << 20);
    o.timeout = absl::Milliseconds(500);
    RingCollectives ring(t, o);
    std::vector<float> buf(1000, 1.0f);
    if (rank == 1) return absl::OkStatus();  // never joins
    return ring.AllReduce(absl::MakeSpan(buf));
  });
  const absl::Duration took = absl::Now() - start;
  EXPECT_GE(took, absl::Milliseconds(450));
  EXPECT_LT(took, absl::Milliseconds(2500));
  // Rank 2 waits on rank 1, rank 0 on rank 2, with equal deadlines: whoever
  // times out first names the peer it waited on and tells the other. (Over
  // gRPC, keepalive names a frozen process itself: see
  // tests/e2e/collective_process_test.cc.)
  for (int r : {0, 2}) {
    const absl::Status& s = statuses[static_cast<size_t>(r)];
    EXPECT_TRUE(absl::IsDeadlineExceeded(s) || absl::IsUnavailable(s)) << s;
    EXPECT_TRUE(absl::StrContains(s.message(), "sent nothing")) << s;
  }
}

class GrpcPeerGoneTest : public ::testing::TestWithParam<int> {};

// At N=12 most ranks are not rank 2's data-plane peers: they learn of its
// departure from the failure reports their own peers pass on.
TEST_P(GrpcPeerGoneTest, APeerThatGoesAwayIsNamedByEveryRank) {
  const int n = GetParam();
  TestWorld world(TransportKind::kGrpc, n);
  const absl::Time start = absl::Now();
  const auto statuses = world.Run([&](int rank, Transport* t) -> absl::Status {
    CollectiveOptions o = Options(1 << 16);
    o.timeout = absl::Seconds(30);
    RingCollectives ring(t, o);
    std::vector<float> buf(1 << 18, 1.0f);
    if (rank == 2) {
      absl::Status s = ring.AllReduce(absl::MakeSpan(buf));  // one good round
      t->Shutdown();                                         // then leave
      return s;
    }
    for (int i = 0; i < 1000; ++i) {
      absl::Status s = ring.AllReduce(absl::MakeSpan(buf));
      if (!s.ok()) return s;
    }
    return absl::InternalError("the world kept going without rank 2");
  });
  EXPECT_LT(absl::Now() - start, absl::Seconds(10));
  for (int r = 0; r < n; ++r) {
    if (r == 2) continue;
    const absl::Status& s = statuses[static_cast<size_t>(r)];
    EXPECT_TRUE(absl::IsUnavailable(s)) << "rank " << r << ": " << s;
    EXPECT_TRUE(absl::StrContains(s.message(), "rank 2")) << "rank " << r << ": " << s;
  }
}

INSTANTIATE_TEST_SUITE_P(WorldSizes, GrpcPeerGoneTest, ::testing::Values(4, 12),
                         [](const ::testing::TestParamInfo<int>& i) { return "N" + std::to_string(i.param); });

TEST(GrpcTransportTest, ARankThatIsNotADataPlanePeerCanNeitherBeReachedNorSpeak) {
  std::atomic<int> refused{0};
  RpcAuth receiver_auth(Env::Default(), "", [&](RejectReason r) { refused += r == RejectReason::kNotAMember; });
  TransportServerOptions ro;
  ro.auth = &receiver_auth;
  auto receiver = *TransportServer::Start(Env::Default(), "127.0.0.1:0", ro);
  auto stranger = *TransportServer::Start(Env::Default(), "127.0.0.1:0");
  const std::string r0 = "127.0.0.1:" + std::to_string(receiver->port());
  const std::string s2 = "127.0.0.1:" + std::to_string(stranger->port());
  // Rank 0 of three knows rank 1 only; rank 2 knows everyone.
  std::unique_ptr<Transport> rx = *receiver->Connect(5, 0, {r0, "127.0.0.1:1", ""});
  std::unique_ptr<Transport> tx = *stranger->Connect(5, 2, {r0, "127.0.0.1:1", s2});
  const char byte = 1;
  const absl::Status unreachable = rx->Send(2, 1, absl::MakeConstSpan(&byte, 1), absl::Now() + absl::Seconds(5));
  EXPECT_TRUE(absl::IsFailedPrecondition(unreachable)) << unreachable;
  EXPECT_TRUE(absl::StrContains(unreachable.message(), "rank 2 is not among rank 0's data-plane peers")) << unreachable;
  EXPECT_TRUE(absl::IsFailedPrecondition(rx->Receive(2, 1, absl::Now() + absl::Seconds(1)).status()));

  tx->Send(0, 4, absl::MakeConstSpan(&byte, 1), absl::Now() + absl::Seconds(5)).IgnoreError();
  tx->Flush(absl::Now() + absl::Seconds(5)).IgnoreError();
  const absl::Time until = absl::Now() + absl::Seconds(20);
  while (refused.load() < 1 && absl::Now() < until) absl::SleepFor(absl::Milliseconds(10));
  EXPECT_EQ(refused.load(), 1) << "a stream from a rank outside the directory was not refused";
}

TEST(GrpcTransportTest, OlderGenerationIsRefusedAndNewOneWorks) {
  auto server = *TransportServer::Start(Env::Default(), "127.0.0.1:0");
  const std::vector<std::string> peers = {"127.0.0.1:" + std::to_string(server->port())};
  ASSERT_TRUE(server->Connect(5, 0, peers).ok());
  absl::StatusOr<std::unique_ptr<Transport>> stale = server->Connect(4, 0, peers);
  EXPECT_EQ(stale.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_FALSE(server->Connect(6, 3, peers).ok());  // rank outside the world
}

// Two ranks, each in its own TransportServer; rank 1 sends one frame under
// `sender_token`, rank 0 holds `receiver_token`.
// Issue 33, finding 6: a stream naming a generation the receiver has not
// joined was parked before any membership check, so a stranger could hold
// every slot until another stream happened to arrive. Now it waits only with
// the park tag the coordinator gave its sender for this receiver (checked
// with the receiver's own credential, the token or its rank's), at most
// twice per sender and generation, and for generation_wait at most.
// Issue 33, finding 6: a member could announce a send-receive of up to
// 2^40 bytes and the receiver resized to it. Past the job's largest message
// it is a faulty peer, named, and nothing is allocated.
TEST(RingTest, ASendReceiveLongerThanAnyMessageOfTheJobIsRefusedNamingTheSender) {
  TestWorld world(TransportKind::kLocal, 2);
  const std::vector<absl::Status> statuses = world.Run([&](int rank, Transport* t) -> absl::Status {
    CollectiveOptions o;
    o.env = Env::Default();
    o.timeout = absl::Seconds(10);
    o.max_message_bytes = 1000;
    RingCollectives ring(t, o);
    const std::string fits(1000, 'a'), too_long(1001, 'b');
    absl::StatusOr<std::string> got = ring.SendRecv(rank == 1 ? 0 : -1, fits, rank == 0 ? 1 : -1);
    RETURN_IF_ERROR(got.status());
    if (rank == 0) {
      EXPECT_EQ(*got, fits);
    }
    return ring.SendRecv(rank == 1 ? 0 : -1, too_long, rank == 0 ? 1 : -1).status();
  });
  EXPECT_EQ(statuses[0].code(), absl::StatusCode::kDataLoss) << statuses[0];
  EXPECT_TRUE(absl::StrContains(statuses[0].message(), "rank 1 announced 1001 bytes")) << statuses[0];
}

TEST(GrpcTransportTest, OnlyASenderWithItsParkTagWaitsForAGenerationAndNotForever) {
  const std::string token = "job-token";
  const std::string good = ParkTag(KeyFor(token, 0), 2, 1);  // rank 1 -> rank 0, generation 2
  for (const std::string& receiver_secret : {token, RankCredentialText(token, 0)}) {
    std::atomic<int> refused{0};
    RpcAuth receiver_auth(Env::Default(), receiver_secret, [&](RejectReason r) { refused += r == RejectReason::kNotAMember; });
    TransportServerOptions ro;
    ro.auth = &receiver_auth;
    ro.generation_wait = absl::Seconds(1);
    auto receiver = *TransportServer::Start(Env::Default(), "127.0.0.1:0", ro);
    const std::string r = "127.0.0.1:" + std::to_string(receiver->port());
    std::unique_ptr<Transport> rx1 = *receiver->Connect(1, 0, {r, "127.0.0.1:1"});
    // A stream of generation 2 from rank 1 with the park tag `tag`; its
    // sender is kept so the stream stays open.
    std::vector<std::pair<std::unique_ptr<TransportServer>, std::unique_ptr<Transport>>> senders;
    auto send = [&](const std::string& tag) {
      auto server = *TransportServer::Start(Env::Default(), "127.0.0.1:0");
      ConnectOptions o;
      o.keys.park_tags = {tag, ""};
      std::unique_ptr<Transport> tx = *server->Connect(2, 1, {r, "127.0.0.1:1"}, o);
      // Static: Send may reference the bytes until a Flush (transport.h),
      // after this lambda has returned.
      static const char byte = 1;
      EXPECT_TRUE(tx->Send(0, 1, absl::MakeConstSpan(&byte, 1), absl::Now() + absl::Seconds(5)).ok());
      senders.emplace_back(std::move(server), std::move(tx));
    };
    auto parked_becomes = [&](size_t n) {
      for (const absl::Time until = absl::Now() + absl::Seconds(10); absl::Now() < until;) {
        if (receiver->parked_streams() == n) return true;
        absl::SleepFor(absl::Milliseconds(20));
      }
      return receiver->parked_streams() == n;
    };
    // No tag, a wrong one, one for another generation, sender or receiver.
    for (const std::string& tag : {std::string(), std::string(64, '0'), ParkTag(KeyFor(token, 0), 3, 1),
                                   ParkTag(KeyFor(token, 0), 2, 0), ParkTag(KeyFor(token, 1), 2, 1)}) {
      send(tag);
    }
    for (const absl::Time until = absl::Now() + absl::Seconds(10); refused.load() < 5 && absl::Now() < until;) {
      absl::SleepFor(absl::Milliseconds(20));
    }
    EXPECT_EQ(refused.load(), 5) << receiver_secret;
    EXPECT_EQ(receiver->parked_streams(), 0u) << receiver_secret;
    // The member's stream waits; a third from the same sender does not.
    for (int i = 0; i < 3; ++i) send(good);
    EXPECT_TRUE(parked_becomes(2)) << receiver->parked_streams();
    absl::SleepFor(absl::Milliseconds(200));
    EXPECT_EQ(receiver->parked_streams(), 2u);
    // Nobody else arrives, and the generation never comes: the waits end.
    EXPECT_TRUE(parked_becomes(0)) << receiver->parked_streams();
  }
}

// Issue 46: a token holder could park streams for sender ranks 2..39 in a
// world of two and fill every slot. Only ranks some world of the job can
// have (ConnectOptions::max_world_size, runtime.num_workers) may wait.
TEST(GrpcTransportTest, OnlyRanksOfTheJobsLargestWorldMayWaitForAGeneration) {
  const std::string token = "job-token";
  for (const int max_world : {0, 3}) {  // 0: this world's size, 2
    RpcAuth receiver_auth(Env::Default(), token);
    TransportServerOptions ro;
    ro.auth = &receiver_auth;
    ro.generation_wait = absl::Seconds(5);
    auto receiver = *TransportServer::Start(Env::Default(), "127.0.0.1:0", ro);
    const std::string r = "127.0.0.1:" + std::to_string(receiver->port());
    ConnectOptions rxo;
    rxo.max_world_size = max_world;
    std::unique_ptr<Transport> rx1 = *receiver->Connect(1, 0, {r, "127.0.0.1:1"}, rxo);
    // Rank 2 of a world of three, generation 2, with a valid park tag.
    auto server = *TransportServer::Start(Env::Default(), "127.0.0.1:0");
    ConnectOptions o;
    o.keys.park_tags = {ParkTag(KeyFor(token, 0), 2, 2), "", ""};
    std::unique_ptr<Transport> tx = *server->Connect(2, 2, {r, "127.0.0.1:1", "127.0.0.1:2"}, o);
    const char byte = 1;
    EXPECT_TRUE(tx->Send(0, 1, absl::MakeConstSpan(&byte, 1), absl::Now() + absl::Seconds(5)).ok());
    const size_t want = max_world == 3 ? 1 : 0;
    for (const absl::Time until = absl::Now() + absl::Seconds(3);
         receiver->parked_streams() != 1 && absl::Now() < until;) {
      absl::SleepFor(absl::Milliseconds(20));
    }
    EXPECT_EQ(receiver->parked_streams(), want) << "max_world_size " << max_world;
    tx->Shutdown();
    rx1->Shutdown();
  }
}

TEST(GrpcTransportTest, OnlyTheRegisteredMemberCanSpeakForItsRank) {
  // What the coordinator hands out for generation 3 of a world of two.
  const std::string secret0 = "secret-of-rank-0", secret1 = "secret-of-rank-1";
  std::atomic<int> refused{0};
  RpcAuth receiver_auth(Env::Default(), "", [&](RejectReason r) { refused += r == RejectReason::kNotAMember; });
  TransportServerOptions ro;
  ro.auth = &receiver_auth;
  auto receiver = *TransportServer::Start(Env::Default(), "127.0.0.1:0", ro);
  auto member = *TransportServer::Start(Env::Default(), "127.0.0.1:0");
  const std::string r0 = "127.0.0.1:" + std::to_string(receiver->port());
  MemberKeys keys0{secret0, {MemberTag(secret0, 3, 0), MemberTag(secret1, 3, 0)}};
  std::unique_ptr<Transport> rx = *receiver->Connect(3, 0, {r0, "127.0.0.1:" + std::to_string(member->port())}, ConnectOptions{keys0});

  const float value = 7;
  const auto bytes = absl::MakeConstSpan(reinterpret_cast<const char*>(&value), sizeof(value));
  // The member gets through.
  std::unique_ptr<Transport> tx = *member->Connect(3, 1, {r0, "127.0.0.1:1"}, ConnectOptions{MemberKeys{secret1, {}}});
  ASSERT_TRUE(tx->Send(0, 10, bytes, absl::Now() + absl::Seconds(5)).ok());
  float got = 0;
  ASSERT_TRUE(RecvInto(*rx, 1, 10, absl::MakeSpan(reinterpret_cast<char*>(&got), sizeof(got)),
                       absl::Now() + absl::Seconds(10))
                  .ok());
  EXPECT_EQ(got, 7);
  // Impostors know the generation and the rank, and have another member's
  // secret, a guess, or none: each stream is refused.
  int attempts = 0;
  for (const std::string& stolen : {std::string(), secret0, std::string("guess")}) {
    auto impostor = *TransportServer::Start(Env::Default(), "127.0.0.1:0");
    std::unique_ptr<Transport> fake = *impostor->Connect(3, 1, {r0, "127.0.0.1:1"}, ConnectOptions{MemberKeys{stolen, {}}});
    fake->Send(0, 9, bytes, absl::Now() + absl::Seconds(5)).IgnoreError();
    fake->Flush(absl::Now() + absl::Seconds(5)).IgnoreError();
    ++attempts;
    const absl::Time until = absl::Now() + absl::Seconds(20);
    while (refused.load() < attempts && absl::Now() < until) absl::SleepFor(absl::Milliseconds(10));
    EXPECT_EQ(refused.load(), attempts) << "impostor with secret '" << stolen << "' was not refused";
  }
  EXPECT_FALSE(rx->Receive(1, 9, absl::Now() + absl::Seconds(1)).ok()) << "an impostor's frame was delivered";
}

TEST(GrpcTransportTest, StreamsNamingFutureGenerationsHoldNoThreadAndFarAheadIsRefusedAtOnce) {
  auto receiver = *TransportServer::Start(Env::Default(), "127.0.0.1:0");
  auto legit = *TransportServer::Start(Env::Default(), "127.0.0.1:0");
  const std::string r = "127.0.0.1:" + std::to_string(receiver->port());
  const std::string l = "127.0.0.1:" + std::to_string(legit->port());
  std::unique_ptr<Transport> rx = *receiver->Connect(1, 0, {r, l});
  std::unique_ptr<Transport> tx = *legit->Connect(1, 1, {r, l});

  // Forty streams whose first frame names the next generation: one rogue
  // rank "0" of generation 2 whose forty peers are all the receiver.
  auto rogue = *TransportServer::Start(Env::Default(), "127.0.0.1:0");
  std::vector<std::string> peers = {"127.0.0.1:" + std::to_string(rogue->port())};
  for (int i = 0; i < 40; ++i) peers.push_back(r);
  std::unique_ptr<Transport> flood = *rogue->Connect(2, 0, peers);
  const char byte = 1;
  for (int p = 1; p <= 40; ++p) {
    flood->Send(p, 5, absl::MakeConstSpan(&byte, 1), absl::Now() + absl::Seconds(5)).IgnoreError();
  }
  flood->Flush(absl::Now() + absl::Seconds(5)).IgnoreError();
  absl::SleepFor(absl::Milliseconds(300));  // let them all arrive and park

  // The current generation is served meanwhile.
  const float value = 3;
  ASSERT_TRUE(tx->Send(0, 3, absl::MakeConstSpan(reinterpret_cast<const char*>(&value), 4),
                       absl::Now() + absl::Seconds(5))
                  .ok());
  float got = 0;
  ASSERT_TRUE(RecvInto(*rx, 1, 3, absl::MakeSpan(reinterpret_cast<char*>(&got), 4), absl::Now() + absl::Seconds(10))
                  .ok())
      << "the current generation starved behind streams of a future one";
  EXPECT_EQ(got, 3);

  // A generation far ahead is refused at once: the sender's stream breaks
  // long before the 30 s a parked stream may wait.
  auto far = *TransportServer::Start(Env::Default(), "127.0.0.1:0");
  std::unique_ptr<Transport> ahead = *far->Connect(9, 1, {r, "127.0.0.1:" + std::to_string(far->port())});
  const absl::Time until = absl::Now() + absl::Seconds(10);
  bool refused = false;
  while (!refused && absl::Now() < until) {
    refused = !ahead->Send(0, 1, absl::MakeConstSpan(&byte, 1), absl::Now() + absl::Seconds(1)).ok();
    if (!refused) absl::SleepFor(absl::Milliseconds(50));
  }
  EXPECT_TRUE(refused) << "a stream of generation 9 was not refused while this rank is at generation 1";
  // Everything shuts down without waiting for the parked streams.
  flood.reset();
  rogue.reset();
}

TEST(GrpcTransportTest, AStreamOfTheNextGenerationIsDeliveredOnceThisRankGetsThere) {
  auto receiver = *TransportServer::Start(Env::Default(), "127.0.0.1:0");
  auto early = *TransportServer::Start(Env::Default(), "127.0.0.1:0");
  const std::string r = "127.0.0.1:" + std::to_string(receiver->port());
  const std::string e = "127.0.0.1:" + std::to_string(early->port());
  std::unique_ptr<Transport> rx1 = *receiver->Connect(1, 0, {r, e});
  // The peer reaches generation 2 first and sends at once.
  std::unique_ptr<Transport> tx = *early->Connect(2, 1, {r, e});
  const float value = 9;
  ASSERT_TRUE(tx->Send(0, 4, absl::MakeConstSpan(reinterpret_cast<const char*>(&value), 4),
                       absl::Now() + absl::Seconds(5))
                  .ok());
  absl::SleepFor(absl::Milliseconds(200));  // parked at the receiver
  std::unique_ptr<Transport> rx2 = *receiver->Connect(2, 0, {r, e});
  float got = 0;
  ASSERT_TRUE(RecvInto(*rx2, 1, 4, absl::MakeSpan(reinterpret_cast<char*>(&got), 4), absl::Now() + absl::Seconds(10))
                  .ok());
  EXPECT_EQ(got, 9);
}

TEST(GrpcTransportTest, OversizedFramesAndFloodsOfUnexpectedOnesFailTheWorldNamingTheSender) {
  // A frame larger than a segment is refused by gRPC before it is buffered.
  {
    TransportServerOptions small;
    small.max_frame_bytes = 64 << 10;
    auto receiver = *TransportServer::Start(Env::Default(), "127.0.0.1:0", small);
    auto sender = *TransportServer::Start(Env::Default(), "127.0.0.1:0");
    const std::vector<std::string> peers = {"127.0.0.1:" + std::to_string(receiver->port()),
                                            "127.0.0.1:" + std::to_string(sender->port())};
    std::unique_ptr<Transport> rx = *receiver->Connect(1, 0, peers);
    std::unique_ptr<Transport> tx = *sender->Connect(1, 1, peers);
    const std::string big(1 << 20, 'x');
    tx->Send(0, 1, absl::MakeConstSpan(big.data(), big.size()), absl::Now() + absl::Seconds(5)).IgnoreError();
    tx->Flush(absl::Now() + absl::Seconds(10)).IgnoreError();
    EXPECT_FALSE(rx->Receive(1, 1, absl::Now() + absl::Seconds(2)).ok()) << "an oversized frame was delivered";
  }
  // Frames nobody asked for, past the per-peer cap: the world fails naming
  // the sender, instead of holding them until the generation ends.
  {
    auto receiver = *TransportServer::Start(Env::Default(), "127.0.0.1:0");
    auto sender = *TransportServer::Start(Env::Default(), "127.0.0.1:0");
    const std::vector<std::string> peers = {"127.0.0.1:" + std::to_string(receiver->port()),
                                            "127.0.0.1:" + std::to_string(sender->port())};
    ConnectOptions capped;
    capped.max_unclaimed_bytes_per_peer = 1 << 20;
    std::unique_ptr<Transport> rx = *receiver->Connect(1, 0, peers, capped);
    std::unique_ptr<Transport> tx = *sender->Connect(1, 1, peers);
    const std::string frame(512 << 10, 'y');
    for (uint64_t tag = 1000; tag < 1003; ++tag) {
      tx->Send(0, tag, absl::MakeConstSpan(frame.data(), frame.size()), absl::Now() + absl::Seconds(5))
          .IgnoreError();
    }
    tx->Flush(absl::Now() + absl::Seconds(10)).IgnoreError();
    absl::StatusOr<std::unique_ptr<Payload>> next = rx->Receive(1, 7, absl::Now() + absl::Seconds(20));
    ASSERT_FALSE(next.ok());
    EXPECT_EQ(next.status().code(), absl::StatusCode::kUnavailable) << next.status();
    // Named as gone (the mailbox's mark) or faulty (the world's poison), whichever the receive sees first.
    EXPECT_TRUE(absl::StrContains(next.status().message(), "peer rank 1 is")) << next.status();
    EXPECT_TRUE(absl::StrContains(next.status().message(), "no receive asked for")) << next.status();
  }
}

}  // namespace
}  // namespace shardline
