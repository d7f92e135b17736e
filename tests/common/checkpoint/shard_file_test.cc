#include "common/checkpoint/shard_file.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cstdlib>
#include <functional>
#include <utility>
#include <vector>

#include "absl/strings/match.h"
#include "common/encoding/crc32c.h"
#include "common/platform/env_wrapper.h"
#include "common/platform/status_macros.h"
#include "tests/corruption.h"
#include "tests/util/fault_env.h"

namespace shardline {
namespace {

std::string FreshDir() {
  const std::string dir = ::testing::TempDir() + "/shard_file_" +
                          ::testing::UnitTest::GetInstance()->current_test_info()->name();
  std::system(("rm -rf '" + dir + "' && mkdir -p '" + dir + "'").c_str());
  return dir;
}

ShardContents Sample(int64_t floats) {
  ShardContents c;
  c.header.set_step(1200);
  c.header.set_world_size(2);
  c.header.set_rank(1);
  c.header.set_total_size(floats * 2);
  SetShardPieces({Range{floats, floats * 2}}, &c.header);
  state::TensorEntry* t = c.header.add_tensors();
  t->set_name("layer0/w");
  t->add_shape(2);
  t->add_shape(floats);
  t->set_dtype("f32");
  c.header.mutable_data_position()->set_next_step(1200);
  ShardBuffer params{"params", std::vector<float>(static_cast<size_t>(floats))};
  ShardBuffer momentum{"momentum", std::vector<float>(static_cast<size_t>(floats))};
  for (int64_t i = 0; i < floats; ++i) {
    params.values[static_cast<size_t>(i)] = 0.5f * static_cast<float>(i);
    momentum.values[static_cast<size_t>(i)] = -static_cast<float>(i);
  }
  c.buffers = {params, momentum};
  return c;
}

TEST(ShardFileTest, RoundTripsBuffersAndHeaderAndReportsSizeAndCrc) {
  const std::string dir = FreshDir();
  Env* env = Env::Default();
  const ShardContents original = Sample(300000);  // 2.4 MB: several 1 MiB blocks
  absl::StatusOr<WrittenShard> w = WriteShard(env, dir, ShardFileName(1, 2), original);
  ASSERT_TRUE(w.ok()) << w.status();
  EXPECT_EQ(w->path, dir + "/shard-00001-of-00002.ckpt");
  EXPECT_EQ(*env->GetFileSize(w->path), w->size);
  const std::string bytes = *env->ReadFile(w->path, kMaxDataFileBytes);
  // The manifest checksum is the header's CRC (the header lists every
  // block's CRC): bytes 20 .. 20 + header_len.
  uint32_t header_len = 0;
  for (int i = 0; i < 4; ++i) header_len |= static_cast<uint32_t>(static_cast<unsigned char>(bytes[12 + i])) << (8 * i);
  EXPECT_EQ(crc32c::Value(bytes.data() + 20, header_len), w->crc32c);
  EXPECT_FALSE(env->FileExists(w->path + ".tmp"));

  absl::StatusOr<ShardContents> back = ReadShard(env, w->path);
  ASSERT_TRUE(back.ok()) << back.status();
  EXPECT_EQ(back->header.step(), 1200);
  EXPECT_EQ(ShardPieces(back->header), (std::vector<Range>{{300000, 600000}}));
  EXPECT_EQ(back->header.tensors(0).name(), "layer0/w");
  EXPECT_EQ(back->header.block_crc_size(), 3);
  EXPECT_EQ(back->checksum, w->crc32c);
  ASSERT_EQ(back->buffers.size(), 2u);
  EXPECT_EQ(back->buffers[0].name, "params");
  EXPECT_EQ(back->buffers[0].values, original.buffers[0].values);
  EXPECT_EQ(back->buffers[1].values, original.buffers[1].values);
}

TEST(ShardFileTest, FlippedPayloadByteIsFoundAndLocated) {
  const std::string dir = FreshDir();
  Env* env = Env::Default();
  WrittenShard w = *WriteShard(env, dir, "s.ckpt", Sample(300000));
  ASSERT_TRUE(FlipByte(w.path, -10, 0x01).ok());  // in the last block
  absl::StatusOr<ShardContents> r = ReadShard(env, w.path);
  EXPECT_EQ(r.status().code(), absl::StatusCode::kDataLoss);
  EXPECT_TRUE(absl::StrContains(r.status().message(), w.path)) << r.status();
  EXPECT_TRUE(absl::StrContains(r.status().message(), "checksum mismatch in block 2")) << r.status();
}

// Restore reads sub-ranges of buffers straight into place; with 64-byte
// blocks, blocks straddle the placed ranges and the boundary between the two
// buffers, and some lie outside every placed range.
TEST(ShardFileTest, ReadShardIntoPlacesSubRangesAndVerifiesSkippedBlocks) {
  const std::string dir = FreshDir();
  Env* env = Env::Default();
  ShardWriteOptions tiny_blocks;
  tiny_blocks.block_size = 64;
  WrittenShard w = *WriteShard(env, dir, "s.ckpt", Sample(100), tiny_blocks);
  std::vector<float> params(100, 7.0f), momentum(200, 7.0f);
  PlaceFn place = [&](const state::ShardHeader&, const state::BufferEntry& b) -> absl::StatusOr<Placements> {
    if (b.name() == "params") return Placements{{params.data(), 0, 100}};
    return Placements{{momentum.data() + 50, 13, 77}};  // floats 13..77 of momentum
  };
  uint32_t checksum = 0;
  absl::StatusOr<state::ShardHeader> h = ReadShardInto(env, w.path, place, &checksum);
  ASSERT_TRUE(h.ok()) << h.status();
  EXPECT_EQ(checksum, w.crc32c);
  for (int i = 0; i < 100; ++i) ASSERT_EQ(params[static_cast<size_t>(i)], 0.5f * static_cast<float>(i)) << i;
  for (int i = 0; i < 200; ++i) {
    const float want = i >= 50 && i < 114 ? -static_cast<float>(i - 50 + 13) : 7.0f;
    ASSERT_EQ(momentum[static_cast<size_t>(i)], want) << i;
  }

  // A flipped byte in momentum's last float, which nothing reads into place,
  // is still found.
  ASSERT_TRUE(FlipByte(w.path, -1, 0x40).ok());
  h = ReadShardInto(env, w.path, place, nullptr);
  EXPECT_EQ(h.status().code(), absl::StatusCode::kDataLoss) << h.status();
  EXPECT_TRUE(absl::StrContains(h.status().message(), "checksum mismatch in block 12")) << h.status();

  // The place function's refusal comes back as is, before any payload is read.
  std::fill(params.begin(), params.end(), 7.0f);
  h = ReadShardInto(
      env, w.path,
      [](const state::ShardHeader&, const state::BufferEntry&) -> absl::StatusOr<Placements> {
        return absl::FailedPreconditionError("another model");
      },
      nullptr);
  EXPECT_EQ(h.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_EQ(params[0], 7.0f);
}

// How many prefetch hints a reader gave.
int Prefetches(FaultEnv& env) {
  int n = 0;
  for (const FaultEnv::Access& a : env.accesses()) n += a.prefetch ? 1 : 0;
  return n;
}

// Large shards are read with the kernel asked to stay a window ahead: the
// hints cover the payload once, in order, and never run more than a window
// and a quarter ahead of the block being read. Small ones get no hints.
// The same file with the header rewritten: `edit` applied, the header CRC
// recomputed and the version field set to `version`.
std::string Rewritten(const std::string& bytes, uint32_t version, const std::function<void(state::ShardHeader*)>& edit) {
  auto u32 = [&](size_t at) {
    uint32_t v = 0;
    for (int i = 0; i < 4; ++i) v |= static_cast<uint32_t>(static_cast<uint8_t>(bytes[at + i])) << (8 * i);
    return v;
  };
  auto put = [](uint32_t v, std::string* out) {
    for (int i = 0; i < 4; ++i) out->push_back(static_cast<char>(v >> (8 * i)));
  };
  const uint32_t header_len = u32(12);
  state::ShardHeader h;
  EXPECT_TRUE(h.ParseFromString(bytes.substr(20, header_len)));
  edit(&h);
  const std::string header = h.SerializeAsString();
  std::string out = bytes.substr(0, 8);
  put(version, &out);
  put(static_cast<uint32_t>(header.size()), &out);
  put(crc32c::Mask(crc32c::Value(header.data(), header.size())), &out);
  return out + header + bytes.substr(20 + header_len);
}

// Version 2 shards hold pieces; version 1 shards (one range [begin, end))
// still read, as that one piece. A header mixing the two, or pieces out of
// order or outside the model, is refused naming the file.
TEST(ShardFileTest, ReadsPiecesAndVersionOneRanges) {
  const std::string dir = FreshDir();
  Env* env = Env::Default();
  ShardContents c = Sample(10);
  c.header.set_total_size(40);
  SetShardPieces({Range{3, 5}, Range{20, 28}}, &c.header);
  absl::StatusOr<WrittenShard> w = WriteShard(env, dir, ShardFileName(1, 2), c);
  ASSERT_TRUE(w.ok()) << w.status();
  absl::StatusOr<ShardContents> back = ReadShard(env, w->path);
  ASSERT_TRUE(back.ok()) << back.status();
  EXPECT_EQ(ShardPieces(back->header), (std::vector<Range>{{3, 5}, {20, 28}}));
  EXPECT_EQ(back->buffers[0].values, c.buffers[0].values);

  const std::string bytes = *env->ReadFile(w->path, kMaxDataFileBytes);
  const std::string path = dir + "/edited.ckpt";
  auto read = [&](const std::string& file) {
    EXPECT_TRUE(WriteFileAtomically(env, path, file, /*durable=*/false).ok());
    return ReadShard(env, path);
  };
  // Version 1: begin/end, no pieces.
  back = read(Rewritten(bytes, 1, [](state::ShardHeader* h) {
    h->clear_pieces();
    h->set_begin(30);
    h->set_end(40);
  }));
  ASSERT_TRUE(back.ok()) << back.status();
  EXPECT_EQ(ShardPieces(back->header), (std::vector<Range>{{30, 40}}));
  EXPECT_EQ(back->buffers[1].values, c.buffers[1].values);

  const std::vector<std::function<void(state::ShardHeader*)>> bad = {
      [](state::ShardHeader* h) { h->set_begin(0); },                          // v2 with a v1 range
      [](state::ShardHeader* h) { SetShardPieces({Range{20, 28}, Range{3, 5}}, h); },  // out of order
      [](state::ShardHeader* h) { SetShardPieces({Range{3, 5}, Range{34, 42}}, h); },  // outside 40
      [](state::ShardHeader* h) { h->add_pieces(7); },                         // not pairs
  };
  for (size_t i = 0; i < bad.size(); ++i) {
    back = read(Rewritten(bytes, 2, bad[i]));
    EXPECT_EQ(back.status().code(), absl::StatusCode::kDataLoss) << i << ": " << back.status();
    EXPECT_TRUE(absl::StrContains(back.status().message(), path)) << back.status();
  }
  // The writer refuses a version 1 range.
  c.header.set_begin(0);
  EXPECT_EQ(WriteShard(env, dir, ShardFileName(0, 2), c).status().code(), absl::StatusCode::kInvalidArgument);
}

TEST(ShardFileTest, LargeShardsArePrefetchedAWindowAhead) {
  Env* env = Env::Default();
  ShardWriteOptions small_blocks;
  small_blocks.block_size = 4096;
  const ShardContents original = Sample(20000);  // 160,000 payload bytes, 40 blocks
  WrittenShard w = *WriteShard(env, FreshDir(), "s.ckpt", original, small_blocks);
  ShardReadOptions o;
  o.prefetch_min_bytes = 100000;
  o.prefetch_window = 32768;
  std::vector<float> params(20000), momentum(20000);
  PlaceFn place = [&](const state::ShardHeader&, const state::BufferEntry& b) -> absl::StatusOr<Placements> {
    return Placements{{b.name() == "params" ? params.data() : momentum.data(), 0, b.floats()}};
  };
  FaultEnv rec(env);
  rec.RecordAccesses();
  ASSERT_TRUE(ReadShardInto(&rec, w.path, place, nullptr, o).ok());
  EXPECT_EQ(params, original.buffers[0].values);
  EXPECT_EQ(momentum, original.buffers[1].values);
  ASSERT_GT(Prefetches(rec), 1);
  // Reads 0 and 1 are the prefix and the header; the payload starts at the
  // first hint, and every payload read lies inside what was hinted before
  // it, at most a window and a quarter (plus a block) ahead.
  int64_t payload_at = -1, hinted = -1;
  for (const FaultEnv::Access& e : rec.accesses()) {
    if (e.prefetch) {
      if (payload_at < 0) payload_at = hinted = e.offset;
      EXPECT_EQ(e.offset, hinted);
      hinted = e.offset + e.bytes;
    } else if (payload_at >= 0) {
      EXPECT_LE(e.offset + e.bytes, hinted);
      EXPECT_LE(hinted - e.offset, o.prefetch_window + o.prefetch_window / 4 + 4096);
    }
  }
  EXPECT_EQ(hinted - payload_at, 160000);

  o.prefetch_min_bytes = 160001;
  FaultEnv quiet(env);
  quiet.RecordAccesses();
  ASSERT_TRUE(ReadShardInto(&quiet, w.path, place, nullptr, o).ok());
  EXPECT_EQ(Prefetches(quiet), 0);
}

TEST(ShardFileTest, TruncatedZeroByteAndForeignFilesAreRejected) {
  const std::string dir = FreshDir();
  Env* env = Env::Default();
  WrittenShard w = *WriteShard(env, dir, "s.ckpt", Sample(1000));
  const std::string bytes = *env->ReadFile(w.path, kMaxDataFileBytes);
  struct Case {
    std::string contents;
    std::string expect;
  };
  const std::vector<Case> cases = {
      {bytes.substr(0, bytes.size() - 4), "truncated file"},
      {"", "zero-byte"},
      {std::string(64, 'x'), "bad magic"},
      {bytes.substr(0, 30), "truncated inside the header"},
  };
  for (const Case& c : cases) {
    ASSERT_TRUE(WriteFileAtomically(env, dir + "/bad.ckpt", c.contents).ok());
    absl::StatusOr<ShardContents> r = ReadShard(env, dir + "/bad.ckpt");
    EXPECT_EQ(r.status().code(), absl::StatusCode::kDataLoss) << c.expect;
    EXPECT_TRUE(absl::StrContains(r.status().message(), c.expect)) << r.status();
    EXPECT_TRUE(absl::StrContains(r.status().message(), dir + "/bad.ckpt")) << r.status();
  }
  std::string header_flip = bytes;
  header_flip[22] ^= 0x40;
  ASSERT_TRUE(WriteFileAtomically(env, dir + "/bad.ckpt", header_flip).ok());
  EXPECT_TRUE(absl::StrContains(ReadShard(env, dir + "/bad.ckpt").status().message(), "header checksum mismatch"));
}

TEST(ShardFileTest, BufferOfTheWrongLengthIsRefused) {
  ShardContents c = Sample(100);
  c.buffers[1].values.pop_back();
  absl::StatusOr<WrittenShard> w = WriteShard(Env::Default(), FreshDir(), "s.ckpt", c);
  EXPECT_EQ(w.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_TRUE(absl::StrContains(w.status().message(), "momentum")) << w.status();
}

}  // namespace
}  // namespace shardline


namespace shardline {
namespace {


// Both write paths: through the page cache, and around it (O_DIRECT where
// the test's file system has it, else the page cache again).
ShardWriteOptions Path(bool unbuffered) {
  ShardWriteOptions o;
  if (unbuffered) o.unbuffered_min_bytes = 0;
  return o;
}

TEST(ShardFileTest, BothWritePathsGiveTheSameBytes) {
  const ShardContents original = Sample(300001);  // not a multiple of the alignment
  std::string bytes[2];
  for (bool unbuffered : {false, true}) {
    const std::string dir = FreshDir() + (unbuffered ? "_unbuffered" : "");
    std::system(("mkdir -p '" + dir + "'").c_str());
    absl::StatusOr<WrittenShard> w = WriteShard(Env::Default(), dir, "s.ckpt", original, Path(unbuffered));
    ASSERT_TRUE(w.ok()) << w.status();
    EXPECT_EQ(*Env::Default()->GetFileSize(w->path), w->size);
    EXPECT_FALSE(Env::Default()->FileExists(w->path + ".tmp"));
    bytes[unbuffered] = *Env::Default()->ReadFile(w->path, kMaxDataFileBytes);
    absl::StatusOr<ShardContents> back = ReadShard(Env::Default(), w->path);
    ASSERT_TRUE(back.ok()) << back.status();
    EXPECT_EQ(back->buffers[1].values, original.buffers[1].values);
  }
  EXPECT_EQ(bytes[0].size(), bytes[1].size());
  EXPECT_TRUE(bytes[0] == bytes[1]);
}


TEST(ShardFileTest, RefusedUnbufferedWritesFallBackToTheCache) {
  const std::string dir = FreshDir();
  // A file system that accepts O_DIRECT at open but refuses the writes.
  FaultEnv env;
  env.RefuseUnbufferedWrites();
  const ShardContents original = Sample(1000);
  absl::StatusOr<WrittenShard> w = WriteShard(&env, dir, "s.ckpt", original, Path(/*unbuffered=*/true));
  ASSERT_TRUE(w.ok()) << w.status();
  EXPECT_EQ(env.unbuffered_opened(), 1);
  absl::StatusOr<ShardContents> back = ReadShard(Env::Default(), w->path);
  ASSERT_TRUE(back.ok()) << back.status();
  EXPECT_EQ(back->buffers[0].values, original.buffers[0].values);
}

TEST(ShardFileTest, FailedFsyncOrFullDiskLeavesNoShardAndNoTemporary) {
  for (const auto& [unbuffered, full_disk] : {std::pair{false, false}, std::pair{false, true},
                                              std::pair{true, false}, std::pair{true, true}}) {
    SCOPED_TRACE(unbuffered ? "unbuffered" : "buffered");
    const std::string dir = FreshDir();
    FaultEnv env;
    env.FailWrites(full_disk ? FaultEnv::WriteFault::kNoSpace : FaultEnv::WriteFault::kSyncFails);
    absl::StatusOr<WrittenShard> w = WriteShard(&env, dir, "s.ckpt", Sample(1000), Path(unbuffered));
    ASSERT_FALSE(w.ok());
    EXPECT_TRUE(absl::StrContains(w.status().message(), dir + "/s.ckpt")) << w.status();
    EXPECT_TRUE(absl::StrContains(w.status().message(), full_disk ? "No space" : "fsync failed")) << w.status();
    EXPECT_FALSE(Env::Default()->FileExists(dir + "/s.ckpt"));
    EXPECT_FALSE(Env::Default()->FileExists(dir + "/s.ckpt.tmp"));
  }
}

}  // namespace
}  // namespace shardline
