#include "common/job/shard.h"

namespace shardline {

std::vector<Range> OwnedPieces(absl::Span<const Range> buckets, int rank, int world) {
  std::vector<Range> pieces;
  for (const Range& b : buckets) {
    const Range piece = OwnedPiece(b, rank, world);
    if (!piece.empty()) pieces.push_back(piece);
  }
  return pieces;
}

int64_t PiecesSize(absl::Span<const Range> pieces) {
  int64_t n = 0;
  for (const Range& p : pieces) n += p.size();
  return n;
}

std::vector<PieceCopy> SharedRuns(absl::Span<const Range> from, absl::Span<const Range> to) {
  std::vector<PieceCopy> runs;
  size_t i = 0, j = 0;
  int64_t packed_from = 0, packed_to = 0;  // packed offsets of from[i] and to[j]
  while (i < from.size() && j < to.size()) {
    const Range both = Overlap(from[i], to[j]);
    if (!both.empty()) {
      runs.push_back(PieceCopy{both.begin, packed_from + (both.begin - from[i].begin),
                               packed_to + (both.begin - to[j].begin), both.size()});
    }
    // Step past whichever piece ends first (both when they end together).
    if (from[i].end <= to[j].end) packed_from += from[i++].size();
    else packed_to += to[j++].size();
  }
  return runs;
}

}  // namespace shardline
