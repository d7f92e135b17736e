#include "common/checkpoint/verify.h"

#include <gtest/gtest.h>

#include <cerrno>
#include <cstdlib>
#include <functional>
#include <string>
#include <vector>

#include "absl/strings/match.h"
#include "common/platform/env_wrapper.h"
#include "common/platform/status_payload.h"
#include "common/checkpoint/buffer_names.h"
#include "common/checkpoint/checkpoint_dir.h"
#include "tests/corruption.h"

namespace shardline {
namespace {

// A committed checkpoint at step 7 of a 10-parameter model, written by a
// world of two whose shards cover `ranges`, with `edit` applied to the
// manifest before it is committed.
std::string Commit(const std::string& name, std::vector<std::pair<int64_t, int64_t>> ranges = {{0, 6}, {6, 10}},
                   const std::function<void(state::CheckpointManifest*)>& edit = nullptr) {
  Env* env = Env::Default();
  const std::string root = ::testing::TempDir() + "/verify_test_" + name;
  std::system(("rm -rf '" + root + "'").c_str());
  const std::string dir = StepDir(root, 7);
  EXPECT_TRUE(env->CreateDirs(dir).ok());
  state::CheckpointManifest m;
  m.set_step(7);
  m.set_world_size(2);
  for (int rank = 0; rank < 2; ++rank) {
    ShardContents c;
    c.header.set_step(7);
    c.header.set_world_size(2);
    c.header.set_rank(rank);
    c.header.set_total_size(10);
    SetShardPieces({Range{ranges[rank].first, ranges[rank].second}}, &c.header);
    const int64_t n = ranges[rank].second - ranges[rank].first;
    c.buffers.push_back({kParamsBuffer, std::vector<float>(static_cast<size_t>(n), 1.0f + rank)});
    absl::StatusOr<WrittenShard> w = WriteShard(env, dir, ShardFileName(rank, 2), c);
    EXPECT_TRUE(w.ok()) << w.status();
    state::ShardEntry* e = m.add_shards();
    e->set_rank(rank);
    e->set_file(ShardFileName(rank, 2));
    e->set_size(w->size);
    e->set_crc32c(w->crc32c);
  }
  if (edit) edit(&m);
  EXPECT_TRUE(WriteCommitted(env, dir, m).ok());
  return dir;
}

void ExpectDataLoss(const std::string& dir, absl::string_view naming) {
  absl::StatusOr<VerifiedCheckpoint> v = VerifyCheckpoint(Env::Default(), dir);
  EXPECT_TRUE(absl::IsDataLoss(v.status())) << v.status();
  EXPECT_TRUE(absl::StrContains(v.status().message(), naming)) << v.status();
}

TEST(VerifyCheckpointTest, AGoodCheckpointPassesAndPlacesEveryBuffer) {
  const std::string dir = Commit("good");
  std::vector<float> params(10, 0);
  VerifyOptions o;
  int headers = 0;
  o.on_header = [&](const state::ShardHeader&) {
    ++headers;
    return absl::OkStatus();
  };
  o.place = [&](const state::ShardHeader& h, const state::BufferEntry& b) -> absl::StatusOr<Placements> {
    return Placements{{params.data() + ShardPieces(h)[0].begin, 0, b.floats()}};
  };
  absl::StatusOr<VerifiedCheckpoint> v = VerifyCheckpoint(Env::Default(), dir, o);
  ASSERT_TRUE(v.ok()) << v.status();
  EXPECT_EQ(headers, 2);
  EXPECT_EQ(v->total_size, 10);
  EXPECT_EQ(params, std::vector<float>({1, 1, 1, 1, 1, 1, 2, 2, 2, 2}));
}

TEST(VerifyCheckpointTest, AManifestCannotNameAFileOutsideItsDirectory) {
  ExpectDataLoss(Commit("traversal", {{0, 6}, {6, 10}},
                        [](state::CheckpointManifest* m) { m->mutable_shards(1)->set_file("../../../../etc/passwd"); }),
                 "../../../../etc/passwd");
  EXPECT_TRUE(absl::IsDataLoss(CheckManifest(state::CheckpointManifest(), "dir")));
}

TEST(VerifyCheckpointTest, ARankListedTwiceOrMissingIsRefused) {
  ExpectDataLoss(Commit("twice", {{0, 6}, {6, 10}},
                        [](state::CheckpointManifest* m) { *m->mutable_shards(1) = m->shards(0); }),
                 "rank 0");
  ExpectDataLoss(Commit("missing_rank", {{0, 6}, {6, 10}},
                        [](state::CheckpointManifest* m) { m->mutable_shards()->RemoveLast(); }),
                 "lists 1 shards for a world of 2");
}

TEST(VerifyCheckpointTest, AMissingShardFileIsDataLossNamingIt) {
  const std::string dir = Commit("missing_file");
  std::remove((dir + "/" + ShardFileName(1, 2)).c_str());
  ExpectDataLoss(dir, ShardFileName(1, 2));
}

// Only a missing shard or a wrong size is data loss: a shard this process
// cannot stat (out of descriptors, refused) is passed on with its code and
// errno, naming the shard, so no caller takes it for a damaged checkpoint.
TEST(VerifyCheckpointTest, AShardThatCannotBeStatedIsNotDataLoss) {
  const std::string dir = Commit("unstatable");
  class Refusing : public EnvWrapper {
   public:
    Refusing(int err, absl::StatusCode code) : EnvWrapper(Env::Default()), err_(err), code_(code) {}
    absl::StatusOr<int64_t> GetFileSize(const std::string& p) override {
      if (absl::EndsWith(p, ShardFileName(1, 2))) {
        return WithIntPayload(absl::Status(code_, "stat failed"), kErrnoPayloadUrl, err_);
      }
      return EnvWrapper::GetFileSize(p);
    }

   private:
    int err_;
    absl::StatusCode code_;
  };
  Refusing out_of_fds(EMFILE, absl::StatusCode::kResourceExhausted);
  absl::StatusOr<VerifiedCheckpoint> v = VerifyCheckpoint(&out_of_fds, dir);
  EXPECT_TRUE(IsOutOfDescriptors(v.status())) << v.status();
  EXPECT_TRUE(absl::StrContains(v.status().message(), ShardFileName(1, 2))) << v.status();
  Refusing refused(EACCES, absl::StatusCode::kPermissionDenied);
  v = VerifyCheckpoint(&refused, dir);
  EXPECT_TRUE(absl::IsPermissionDenied(v.status())) << v.status();
  EXPECT_TRUE(absl::StrContains(v.status().message(), "rank 1")) << v.status();
}

TEST(VerifyCheckpointTest, SizeChecksumAndBlockDamageAreEachCaught) {
  const std::string sized = Commit("size", {{0, 6}, {6, 10}},
                                   [](state::CheckpointManifest* m) { m->mutable_shards(0)->set_size(3); });
  ExpectDataLoss(sized, "the manifest says 3");
  const std::string crc = Commit("crc", {{0, 6}, {6, 10}},
                                 [](state::CheckpointManifest* m) { m->mutable_shards(0)->set_crc32c(12345); });
  ExpectDataLoss(crc, "checksum does not match the manifest");
  const std::string payload = Commit("payload");
  ASSERT_TRUE(FlipByte(payload + "/" + ShardFileName(1, 2), -2, 0x10).ok());
  ExpectDataLoss(payload, ShardFileName(1, 2));
}

TEST(VerifyCheckpointTest, ShardsMustTileTheModel) {
  ExpectDataLoss(Commit("gap", {{0, 5}, {6, 10}}), "shards cover [0, 5) of 10");
  ExpectDataLoss(Commit("overlap", {{0, 6}, {5, 10}}), "shards cover [0, 6) of 10");
}

TEST(VerifyCheckpointTest, AHeaderRefusedByTheCallerStopsBeforeAnyPayload) {
  const std::string dir = Commit("refused");
  VerifyOptions o;
  bool placed = false;
  o.on_header = [](const state::ShardHeader&) { return absl::FailedPreconditionError("another model"); };
  o.place = [&](const state::ShardHeader&, const state::BufferEntry&) -> absl::StatusOr<Placements> {
    placed = true;
    return Placements{};
  };
  EXPECT_TRUE(absl::IsFailedPrecondition(VerifyCheckpoint(Env::Default(), dir, o).status()));
  EXPECT_FALSE(placed);
}

}  // namespace
}  // namespace shardline
