#include "common/checkpoint/shard_file.h"

#include <algorithm>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_format.h"

// Shard file names and the pieces a header describes. Writing is
// shard_write.cc, reading shard_read.cc.

namespace shardline {

std::string ShardFileName(int rank, int world) { return absl::StrFormat("shard-%05d-of-%05d.ckpt", rank, world); }

bool IsShardFileName(const std::string& name) {
  return absl::StartsWith(name, "shard-") && absl::EndsWith(name, ".ckpt");
}

bool ParseShardFileName(const std::string& name, int* rank, int* world) {
  // "shard-00001-of-00004.ckpt"
  if (name.size() != 25 || !IsShardFileName(name) || name.substr(11, 4) != "-of-") return false;
  return absl::SimpleAtoi(name.substr(6, 5), rank) && absl::SimpleAtoi(name.substr(15, 5), world) && *world > 0 &&
         *rank >= 0 && *rank < *world;
}

int ShardIslands(const state::ShardHeader& header) { return header.islands() > 1 ? header.islands() : 1; }

int ShardIsland(const state::ShardHeader& header) {
  const int k = ShardIslands(header);
  return k > 1 && header.world_size() % k == 0 ? IslandOfRank(header.rank(), header.world_size(), k) : 0;
}

std::vector<Range> ShardPieces(const state::ShardHeader& header) {
  std::vector<Range> pieces;
  for (int i = 0; i + 1 < header.pieces_size(); i += 2) pieces.push_back(Range{header.pieces(i), header.pieces(i + 1)});
  return pieces;
}

void SetShardPieces(absl::Span<const Range> pieces, state::ShardHeader* header) {
  header->clear_pieces();
  for (const Range& p : pieces) {
    if (p.empty()) continue;
    header->add_pieces(p.begin);
    header->add_pieces(p.end);
  }
}

Placements PlacePiecesAt(const state::ShardHeader& header, float* flat) {
  Placements out;
  int64_t packed = 0;
  for (const Range& p : ShardPieces(header)) {
    out.push_back(Placement{flat + p.begin, packed, packed + p.size()});
    packed += p.size();
  }
  return out;
}


}  // namespace shardline
