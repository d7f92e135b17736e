#include "common/checkpoint/verify.h"

#include <algorithm>
#include <utility>

#include "absl/strings/str_cat.h"
#include "common/checkpoint/checkpoint_dir.h"
#include "common/platform/status_macros.h"

namespace shardline {

absl::Status CheckManifest(const state::CheckpointManifest& m, const std::string& step_dir) {
  auto bad = [&](absl::string_view what) { return absl::DataLossError(absl::StrCat(step_dir, ": manifest ", what)); };
  if (m.world_size() <= 0) return bad(absl::StrCat("names a world of ", m.world_size()));
  if (m.shards_size() != m.world_size()) {
    return bad(absl::StrCat("lists ", m.shards_size(), " shards for a world of ", m.world_size()));
  }
  std::vector<bool> seen(static_cast<size_t>(m.world_size()), false);
  for (const state::ShardEntry& e : m.shards()) {
    if (e.rank() < 0 || e.rank() >= m.world_size() || seen[static_cast<size_t>(e.rank())]) {
      return bad(absl::StrCat("lists rank ", e.rank(), " out of range or twice"));
    }
    seen[static_cast<size_t>(e.rank())] = true;
    if (e.file() != ShardFileName(e.rank(), m.world_size())) {
      return bad(absl::StrCat("names '", e.file(), "' for rank ", e.rank(), "; expected ",
                              ShardFileName(e.rank(), m.world_size())));
    }
    if (e.size() < 0) return bad(absl::StrCat("gives rank ", e.rank(), " a negative size"));
  }
  return absl::OkStatus();
}

absl::Status CheckShardFiles(Env* env, const std::string& step_dir, const state::CheckpointManifest& m) {
  for (const state::ShardEntry& e : m.shards()) {
    const std::string path = step_dir + "/" + e.file();
    absl::StatusOr<int64_t> size = env->GetFileSize(path);
    // Only a missing shard or one of the wrong size is data loss. Any
    // other error (out of descriptors, permission, I/O) says nothing of the
    // shard itself: passed on with its code and payload, never as a
    // verdict that would send a restore to an older checkpoint.
    if (absl::IsNotFound(size.status())) {
      return absl::DataLossError(absl::StrCat("checkpoint shard ", path, " of rank ", e.rank(), " is missing"));
    }
    if (!size.ok()) return Annotate(size.status(), absl::StrCat("checkpoint shard ", path, " of rank ", e.rank()));
    if (*size != e.size()) {
      return absl::DataLossError(absl::StrCat("checkpoint shard ", path, " is ", *size, " bytes; the manifest says ",
                                              e.size()));
    }
  }
  return absl::OkStatus();
}

namespace {

// The pieces of the shards of each of `k` islands (only island `only`
// when it is >= 0) tile [0, total) without a gap or overlap.
absl::Status CheckPiecesTile(const std::string& step_dir, const std::vector<state::ShardHeader>& headers, int k,
                             int only, int64_t total) {
  for (int island = 0; island < k; ++island) {
    if (only >= 0 && island != only) continue;
    std::vector<std::pair<int64_t, int64_t>> ranges;
    for (const state::ShardHeader& h : headers) {
      if (ShardIsland(h) != island) continue;
      for (const Range& p : ShardPieces(h)) ranges.emplace_back(p.begin, p.end);
    }
    std::sort(ranges.begin(), ranges.end());
    int64_t covered = 0;
    for (const auto& [begin, end] : ranges) {
      if (begin != covered) break;
      covered = end;
    }
    if (covered != total) {
      return absl::DataLossError(absl::StrCat(step_dir, ": shards", k > 1 ? absl::StrCat(" of island ", island) : "",
                                              " cover [0, ", covered, ") of ", total,
                                              " parameters without a gap or overlap"));
    }
  }
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<VerifiedCheckpoint> VerifyCheckpoint(Env* env, const std::string& step_dir,
                                                    const VerifyOptions& options) {
  VerifiedCheckpoint out;
  ASSIGN_OR_RETURN(out.manifest, ReadCommitted(env, step_dir));
  const state::CheckpointManifest& m = out.manifest;
  RETURN_IF_ERROR(CheckManifest(m, step_dir));
  RETURN_IF_ERROR(CheckShardFiles(env, step_dir, m));
  out.total_size = -1;
  int islands = -1;  // what the first shard read says
  // A reader of one island (only_island) takes any checkpoint of islands:
  // its island j reads the checkpoint's island j mod K (IslandSource).
  const bool filtered = options.only_island >= 0;
  const int expected = filtered ? 0 : options.islands;
  auto skipped = [&](int rank) {
    return filtered && islands > 0 &&
           IslandOfRank(rank, m.world_size(), islands) != IslandSource(options.only_island, islands);
  };
  for (const state::ShardEntry& e : m.shards()) {
    const std::string path = step_dir + "/" + e.file();
    if (skipped(e.rank())) continue;
    uint32_t checksum = 0;
    bool header_checked = false;
    bool read_only = false;  // the first shard read, when it is of another island: verified, not kept
    auto check_header = [&](const state::ShardHeader& h) -> absl::Status {
      auto bad = [&](absl::string_view what) { return absl::DataLossError(absl::StrCat("checkpoint shard ", path, ": ", what)); };
      if (checksum != e.crc32c()) return bad("checksum does not match the manifest");
      if (h.step() != m.step() || h.rank() != e.rank() || h.world_size() != m.world_size()) {
        return bad(absl::StrCat("holds step ", h.step(), " rank ", h.rank(), " of ", h.world_size(),
                                "; the manifest says step ", m.step(), " rank ", e.rank(), " of ", m.world_size()));
      }
      if (out.total_size >= 0 && h.total_size() != out.total_size) {
        return bad(absl::StrCat("holds a model of ", h.total_size(), " parameters; other shards have ", out.total_size));
      }
      out.total_size = h.total_size();
      const int k = ShardIslands(h);
      if (expected > 0 && k != expected) {
        return absl::FailedPreconditionError(absl::StrCat("checkpoint shard ", path, " is of a job of ", k,
                                                          " islands; this one has ", expected,
                                                          " (collective.islands)"));
      }
      if (m.world_size() % k != 0 || (islands >= 0 && k != islands)) {
        return bad(absl::StrCat("says its world of ", h.world_size(), " is ", k, " islands; ",
                                islands >= 0 ? absl::StrCat("other shards say ", islands) : "that does not divide it"));
      }
      islands = k;
      header_checked = true;
      read_only = skipped(h.rank());
      return options.on_header && !read_only ? options.on_header(h) : absl::OkStatus();
    };
    absl::StatusOr<state::ShardHeader> header = ReadShardInto(
        env, path,
        [&](const state::ShardHeader& h, const state::BufferEntry& b) -> absl::StatusOr<Placements> {
          if (!header_checked) RETURN_IF_ERROR(check_header(h));
          return options.place && !read_only ? options.place(h, b) : Placements{};
        },
        &checksum);
    if (!header.ok()) return header.status();
    if (!header_checked) RETURN_IF_ERROR(check_header(*header));  // a shard without buffers
    if (!read_only) out.headers.push_back(*std::move(header));
  }
  // The pieces of all shards (of each island) must tile [0, total).
  const int k = std::max(islands, 1);
  RETURN_IF_ERROR(CheckPiecesTile(step_dir, out.headers, k, filtered ? IslandSource(options.only_island, k) : -1,
                                  out.total_size));
  return out;
}

}  // namespace shardline
