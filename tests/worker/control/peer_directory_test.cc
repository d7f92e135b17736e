#include "worker/control/peer_directory.h"

#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/match.h"
#include "gtest/gtest.h"

namespace shardline {
namespace {

// A registration answer for `rank` of `world` listing `ranks`, `peers` and
// `tags` as given (empty: the field absent).
coordinator::RegisterResponse Answer(int rank, int world, std::vector<int> ranks = {},
                                     std::vector<std::string> peers = {}, std::vector<std::string> tags = {}) {
  coordinator::RegisterResponse w;
  w.set_rank(rank);
  w.set_world_size(world);
  for (int r : ranks) w.add_peer_ranks(r);
  for (const std::string& p : peers) w.add_peers(p);
  for (const std::string& t : tags) w.add_peer_tags(t);
  return w;
}

TEST(PeerDirectoryTest, AListedDirectoryIsLaidOutByRank) {
  const coordinator::RegisterResponse w = Answer(2, 6, {1, 2, 3}, {"h:1", "h:2", "h:3"}, {"t1", "t2", "t3"});
  absl::StatusOr<PeerDirectory> d = ReadPeerDirectory(w);
  ASSERT_TRUE(d.ok()) << d.status();
  EXPECT_EQ(d->addresses, (std::vector<std::string>{"", "h:1", "h:2", "h:3", "", ""}));
  EXPECT_EQ(d->tags, (std::vector<std::string>{"", "t1", "t2", "t3", "", ""}));
}

TEST(PeerDirectoryTest, WithoutRanksEveryRankIsListedInOrder) {
  const coordinator::RegisterResponse w = Answer(0, 2, {}, {"a:1", "b:2"});
  absl::StatusOr<PeerDirectory> d = ReadPeerDirectory(w);
  ASSERT_TRUE(d.ok()) << d.status();
  EXPECT_EQ(d->addresses, (std::vector<std::string>{"a:1", "b:2"}));
  EXPECT_TRUE(d->tags.empty());
}

TEST(PeerDirectoryTest, ABadListIsRefusedNamingWhatIsWrong) {
  struct Case {
    coordinator::RegisterResponse w;
    const char* names;
  };
  const std::vector<Case> cases = {
      {Answer(0, 3, {}, {"a:1", "b:2"}), "world_size"},  // dense, one short
      {Answer(0, 3, {0, 1}, {"a:1"}), "peer_ranks"},
      {Answer(0, 3, {0, 3}, {"a:1", "b:2"}), "peer rank 3"},
      {Answer(0, 3, {1, 1}, {"a:1", "b:2"}), "peer rank 1"},
      {Answer(0, 3, {0}, {"a:1"}, {"x", "y"}), "peer_tags"},
      {Answer(0, 3, {0}, {""}), "no address for peer rank 0"},
      {Answer(4, 3), "rank 4"},
  };
  for (const Case& c : cases) {
    absl::StatusOr<PeerDirectory> d = ReadPeerDirectory(c.w);
    EXPECT_TRUE(absl::IsInvalidArgument(d.status())) << c.names << ": " << d.status();
    EXPECT_TRUE(absl::StrContains(d.status().message(), c.names)) << d.status();
  }
}

}  // namespace
}  // namespace shardline
