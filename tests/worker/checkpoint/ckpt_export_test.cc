// `shardline ckpt export` streams: the file is SafetensorsBytes' for the
// whole parameters, whatever the window, from shards whose pieces
// interleave across buckets; a damaged shard leaves nothing behind.
#include "worker/checkpoint/ckpt_export.h"

#include <gtest/gtest.h>

#include <cstdlib>
#include <fstream>
#include <random>
#include <string>
#include <vector>

#include "absl/strings/match.h"
#include "common/checkpoint/buffer_names.h"
#include "common/checkpoint/checkpoint_dir.h"
#include "common/checkpoint/shard_file.h"
#include "worker/checkpoint/safetensors.h"

namespace shardline {
namespace {

constexpr int kWorld = 3;
constexpr int64_t kTotal = 1000;

// Tensors of 1000 parameters: [10, 30], [300], [400], [0] and [..] filling
// the rest, in flat order.
std::vector<state::TensorEntry> Tensors() {
  std::vector<state::TensorEntry> out;
  int64_t offset = 0;
  for (const auto& [name, shape] : std::vector<std::pair<std::string, std::vector<int64_t>>>{
           {"a.weight", {10, 30}}, {"a.bias", {300}}, {"b.weight", {20, 20}}, {"empty", {0}}}) {
    state::TensorEntry& t = out.emplace_back();
    t.set_name(name);
    for (int64_t d : shape) t.add_shape(d);
    t.set_offset(offset);
    int64_t n = 1;
    for (int64_t d : shape) n *= d;
    offset += n;
  }
  return out;
}

// Step 9 of the model above, saved by three ranks, each owning its
// ShardRange of two buckets [0, 450) and [450, 1000), in 64-byte blocks.
std::string Commit(const std::string& name, const std::vector<float>& params) {
  Env* env = Env::Default();
  const std::string root = ::testing::TempDir() + "/ckpt_export_test_" + name;
  std::system(("rm -rf '" + root + "'").c_str());
  const std::string dir = StepDir(root, 9);
  EXPECT_TRUE(env->CreateDirs(dir).ok());
  state::CheckpointManifest m;
  m.set_step(9);
  m.set_world_size(kWorld);
  const std::vector<Range> buckets = {{0, 450}, {450, kTotal}};
  for (int rank = 0; rank < kWorld; ++rank) {
    ShardContents c;
    c.header.set_step(9);
    c.header.set_world_size(kWorld);
    c.header.set_rank(rank);
    c.header.set_total_size(kTotal);
    for (const state::TensorEntry& t : Tensors()) *c.header.add_tensors() = t;
    std::vector<Range> pieces;
    std::vector<float> mine, moments;
    for (const Range& b : buckets) {
      const Range p = OwnedPiece(b, rank, kWorld);
      pieces.push_back(p);
      for (int64_t i = p.begin; i < p.end; ++i) {
        mine.push_back(params[static_cast<size_t>(i)]);
        moments.push_back(-params[static_cast<size_t>(i)]);
      }
    }
    SetShardPieces(pieces, &c.header);
    c.buffers.push_back({kParamsBuffer, mine});
    c.buffers.push_back({"momentum", moments});
    ShardWriteOptions o;
    o.block_size = 64;
    absl::StatusOr<WrittenShard> w = WriteShard(env, dir, ShardFileName(rank, kWorld), c, o);
    EXPECT_TRUE(w.ok()) << w.status();
    state::ShardEntry* e = m.add_shards();
    e->set_rank(rank);
    e->set_file(ShardFileName(rank, kWorld));
    e->set_size(w->size);
    e->set_crc32c(w->crc32c);
  }
  EXPECT_TRUE(WriteCommitted(env, dir, m).ok());
  return dir;
}

std::vector<float> RandomParams() {
  std::mt19937 gen(7);
  std::normal_distribution<float> normal;
  std::vector<float> p(kTotal);
  for (float& v : p) v = normal(gen);
  return p;
}

std::string Read(const std::string& path) {
  absl::StatusOr<std::string> s = Env::Default()->ReadFile(path, 1 << 20);
  return s.ok() ? *s : std::string();
}

TEST(ExportCheckpointTest, TheFileIsTheWholeParametersWhateverTheWindow) {
  const std::vector<float> params = RandomParams();
  const std::string dir = Commit("whole", params);
  ExportOptions options;
  options.metadata = {{"format", "pt"}, {"step", "9"}};
  const std::string want = SafetensorsBytes(Tensors(), params, options.metadata);
  for (int64_t window : {int64_t{1}, int64_t{7}, int64_t{64}, int64_t{450}, int64_t{1} << 22}) {
    options.window_floats = window;
    const std::string out = dir + "/export.safetensors";
    absl::StatusOr<ExportedCheckpoint> e = ExportCheckpoint(Env::Default(), dir, out, options);
    ASSERT_TRUE(e.ok()) << e.status();
    EXPECT_EQ(e->tensors, 4);
    EXPECT_EQ(e->parameters, kTotal);
    EXPECT_EQ(e->bytes, static_cast<int64_t>(want.size()));
    EXPECT_EQ(Read(out), want) << "window " << window;
    EXPECT_FALSE(Env::Default()->FileExists(out + ".tmp"));
  }
}

TEST(ExportCheckpointTest, ADamagedShardIsNamedAndNothingIsWritten) {
  const std::string dir = Commit("damaged", RandomParams());
  const std::string shard = dir + "/" + ShardFileName(1, kWorld);
  {
    std::fstream f(shard, std::ios::in | std::ios::out | std::ios::binary);
    f.seekp(-5, std::ios::end);  // in the momentum buffer: export still verifies it
    f.put('\x7f');
  }
  const std::string out = dir + "/export.safetensors";
  absl::StatusOr<ExportedCheckpoint> e = ExportCheckpoint(Env::Default(), dir, out, {});
  EXPECT_TRUE(absl::IsDataLoss(e.status())) << e.status();
  EXPECT_TRUE(absl::StrContains(e.status().message(), ShardFileName(1, kWorld))) << e.status();
  EXPECT_FALSE(Env::Default()->FileExists(out));
  EXPECT_FALSE(Env::Default()->FileExists(out + ".tmp"));
}

TEST(ShardReaderTest, ReadsAnyRangeAcrossBlocksAndNamesADamagedBlock) {
  const std::vector<float> params = RandomParams();
  const std::string dir = Commit("reader", params);
  const std::string path = dir + "/" + ShardFileName(2, kWorld);
  absl::StatusOr<std::unique_ptr<ShardReader>> r = ShardReader::Open(Env::Default(), path);
  ASSERT_TRUE(r.ok()) << r.status();
  const std::vector<Range> pieces = ShardPieces((*r)->header());
  ASSERT_EQ(pieces.size(), 2u);
  // The second piece's floats 3..40 (crossing 64-byte blocks), and the
  // first piece's first float, out of order.
  std::vector<float> got(37);
  const int64_t first = pieces[0].size();
  ASSERT_TRUE((*r)->Read(kParamsBuffer, first + 3, first + 40, got.data()).ok());
  for (int i = 0; i < 37; ++i) EXPECT_EQ(got[static_cast<size_t>(i)], params[static_cast<size_t>(pieces[1].begin + 3 + i)]);
  float one = 0;
  ASSERT_TRUE((*r)->Read(kParamsBuffer, 0, 1, &one).ok());
  EXPECT_EQ(one, params[static_cast<size_t>(pieces[0].begin)]);
  ASSERT_TRUE((*r)->Read("momentum", 0, 1, &one).ok());
  EXPECT_EQ(one, -params[static_cast<size_t>(pieces[0].begin)]);
  EXPECT_EQ((*r)->Read("nope", 0, 1, &one).code(), absl::StatusCode::kNotFound);
  EXPECT_EQ((*r)->Read(kParamsBuffer, 0, 100000, got.data()).code(), absl::StatusCode::kInvalidArgument);
  {
    std::fstream f(path, std::ios::in | std::ios::out | std::ios::binary);
    f.seekp(-5, std::ios::end);
    f.put('\x7f');
  }
  absl::StatusOr<std::unique_ptr<ShardReader>> again = ShardReader::Open(Env::Default(), path);
  ASSERT_TRUE(again.ok()) << again.status();
  const int64_t floats = PiecesSize(pieces);
  const absl::Status bad = (*again)->Read("momentum", floats - 1, floats, &one);
  EXPECT_TRUE(absl::IsDataLoss(bad)) << bad;
  EXPECT_TRUE(absl::StrContains(bad.message(), "checksum mismatch in block")) << bad;
}

}  // namespace
}  // namespace shardline
