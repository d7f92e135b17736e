#include "worker/control/peer_directory.h"

#include "absl/status/status.h"
#include "absl/strings/match.h"
#include "gtest/gtest.h"

namespace shardline {
namespace {

coordinator::RegisterResponse Answer(int rank, int world) {
  coordinator::RegisterResponse w;
  w.set_rank(rank);
  w.set_world_size(world);
  return w;
}

TEST(PeerDirectoryTest, AListedDirectoryIsLaidOutByRank) {
  coordinator::RegisterResponse w = Answer(2, 6);
  for (int r : {1, 2, 3}) {
    w.add_peer_ranks(r);
    w.add_peers("h:" + std::to_string(r));
    w.add_peer_tags("t" + std::to_string(r));
  }
  absl::StatusOr<PeerDirectory> d = ReadPeerDirectory(w);
  ASSERT_TRUE(d.ok()) << d.status();
  EXPECT_EQ(d->addresses, (std::vector<std::string>{"", "h:1", "h:2", "h:3", "", ""}));
  EXPECT_EQ(d->tags, (std::vector<std::string>{"", "t1", "t2", "t3", "", ""}));
}

TEST(PeerDirectoryTest, WithoutRanksEveryRankIsListedInOrder) {
  coordinator::RegisterResponse w = Answer(0, 2);
  w.add_peers("a:1");
  w.add_peers("b:2");
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
  std::vector<Case> cases;
  {
    coordinator::RegisterResponse w = Answer(0, 3);  // dense, one short
    w.add_peers("a:1");
    w.add_peers("b:2");
    cases.push_back({w, "world_size"});
  }
  {
    coordinator::RegisterResponse w = Answer(0, 3);
    w.add_peer_ranks(0);
    w.add_peer_ranks(1);
    w.add_peers("a:1");
    cases.push_back({w, "peer_ranks"});
  }
  {
    coordinator::RegisterResponse w = Answer(0, 3);
    w.add_peer_ranks(0);
    w.add_peer_ranks(3);
    w.add_peers("a:1");
    w.add_peers("b:2");
    cases.push_back({w, "peer rank 3"});
  }
  {
    coordinator::RegisterResponse w = Answer(0, 3);
    w.add_peer_ranks(1);
    w.add_peer_ranks(1);
    w.add_peers("a:1");
    w.add_peers("b:2");
    cases.push_back({w, "peer rank 1"});
  }
  {
    coordinator::RegisterResponse w = Answer(0, 3);
    w.add_peer_ranks(0);
    w.add_peers("a:1");
    w.add_peer_tags("x");
    w.add_peer_tags("y");
    cases.push_back({w, "peer_tags"});
  }
  {
    coordinator::RegisterResponse w = Answer(0, 3);
    w.add_peer_ranks(0);
    w.add_peers("");
    cases.push_back({w, "no address for peer rank 0"});
  }
  cases.push_back({Answer(4, 3), "rank 4"});
  for (const Case& c : cases) {
    absl::StatusOr<PeerDirectory> d = ReadPeerDirectory(c.w);
    EXPECT_TRUE(absl::IsInvalidArgument(d.status())) << c.names << ": " << d.status();
    EXPECT_TRUE(absl::StrContains(d.status().message(), c.names)) << d.status();
  }
}

}  // namespace
}  // namespace shardline
