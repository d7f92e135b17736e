// The process's communication memory (worker/collective/comm_memory.h):
// every holder - a received payload, gRPC's copy of a sent one, the ring's
// bf16 wire buffer - is counted while it lives and given back after, and
// the peak is the most held at once. Real gRPC serialization, no network.
#include "worker/collective/comm_memory.h"

#include <gtest/gtest.h>

#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "grpcpp/grpcpp.h"
#include "worker/collective/grpc_frame.h"
#include "worker/collective/local_transport.h"
#include "worker/collective/payload.h"
#include "worker/collective/ring.h"

namespace shardline {
namespace {

// The bytes held now: the peak of a fresh period that has only begun.
int64_t HeldNow() {
  TakePeakCommMemory();
  return TakePeakCommMemory();
}

TEST(CommMemoryTest, LiveBytesAreCountedAndTheirPeakTaken) {
  const int64_t before = HeldNow();
  {
    StringPayload a(std::string(1000, 'a'));
    {
      StringPayload b(std::string(500, 'b'));
    }
    StringPayload c(std::string(200, 'c'));
    EXPECT_EQ(TakePeakCommMemory() - before, 1500);  // a and b at once
    EXPECT_EQ(TakePeakCommMemory() - before, 1200);  // since then: a and c, held now
  }
  EXPECT_EQ(TakePeakCommMemory() - before, 1200);
  EXPECT_EQ(TakePeakCommMemory() - before, 0);
}

TEST(CommMemoryTest, AChargeMovesAndResizesWithoutCountingTwice) {
  const int64_t before = HeldNow();
  {
    CommMemoryCharge a(100);
    CommMemoryCharge b(std::move(a));
    EXPECT_EQ(HeldNow() - before, 100);
    b.Reset(300);
    EXPECT_EQ(HeldNow() - before, 300);
    CommMemoryCharge c(50);
    c = std::move(b);  // c's 50 given back
    EXPECT_EQ(HeldNow() - before, 300);
    EXPECT_EQ(c.bytes(), 300u);
  }
  EXPECT_EQ(HeldNow() - before, 0);
}

// gRPC's copy of an outgoing payload is held until gRPC destroys its
// buffer; the received frame's payload, read in place from the slices,
// until the payload is destroyed.
TEST(CommMemoryTest, AFramesSendCopyAndItsReceivedPayloadAreCountedWhileAlive) {
  std::string bytes(300 * 1024, '\0');
  for (size_t i = 0; i < bytes.size(); ++i) bytes[i] = static_cast<char>(i * 7);
  OutFrame out;
  out.src_rank = 3;
  out.generation = 9;
  out.tag = 42;
  out.payload = absl::Span<const char>(bytes);
  const int64_t before = HeldNow();
  InFrame in;
  {
    grpc::ByteBuffer buffer;
    bool own = false;
    ASSERT_TRUE(grpc::SerializationTraits<OutFrame>::Serialize(out, &buffer, &own).ok());
    EXPECT_EQ(HeldNow() - before, static_cast<int64_t>(bytes.size()));  // the send copy
    ASSERT_TRUE(grpc::SerializationTraits<InFrame>::Deserialize(&buffer, &in).ok());
  }
  // The buffer is gone; the payload keeps the slices (the same copy) and is
  // counted itself.
  ASSERT_NE(in.payload, nullptr);
  EXPECT_EQ(in.src_rank, 3);
  EXPECT_EQ(in.tag, 42u);
  std::string got(in.payload->size(), '\0');
  ASSERT_TRUE(CopyPayloadInto(*in.payload, absl::MakeSpan(got)).ok());
  EXPECT_EQ(got, bytes);
  EXPECT_EQ(HeldNow() - before, 2 * static_cast<int64_t>(bytes.size()));
  in.payload.reset();
  EXPECT_EQ(HeldNow() - before, 0);
}

// A bf16 reduce-scatter's wire buffer (2 bytes a value) stays with the ring
// for its next operation and is counted until the ring is destroyed.
TEST(CommMemoryTest, TheRingsBf16WireBufferIsCountedForTheRingsLife) {
  const int64_t len = 10000;
  LocalFabric fabric(2);
  std::vector<std::unique_ptr<Transport>> transports;
  for (int r = 0; r < 2; ++r) transports.push_back(fabric.Connect(r));
  const int64_t before = HeldNow();
  {
    CollectiveOptions o;
    o.env = Env::Default();
    o.bf16_reduce_scatter = true;
    std::vector<std::unique_ptr<RingCollectives>> rings;
    for (auto& t : transports) rings.push_back(std::make_unique<RingCollectives>(t.get(), o));
    std::vector<absl::Status> statuses(2);
    std::vector<std::thread> threads;
    for (int r = 0; r < 2; ++r) {
      threads.emplace_back([&, r] {
        std::vector<float> buf(static_cast<size_t>(len), 1.0f);
        statuses[static_cast<size_t>(r)] = rings[static_cast<size_t>(r)]->ReduceScatter(absl::MakeSpan(buf));
      });
    }
    for (auto& t : threads) t.join();
    for (const auto& s : statuses) ASSERT_TRUE(s.ok()) << s;
    // Both rings' wire buffers; every received message is consumed.
    EXPECT_GE(HeldNow() - before, 2 * len * 2);
  }
  EXPECT_EQ(HeldNow() - before, 0);
}

}  // namespace
}  // namespace shardline
