// Checkpoint shard files: one rank's pieces of the master parameters and its
// optimizer state, with a header and a CRC32C per 1 MiB block. The format is
// docs/checkpoint_format.md.
//
//   ShardContents c;
//   c.header = ...;                       // step, world, rank, tensors, position
//   SetShardPieces(pieces, &c.header);
//   c.buffers = {{kParamsBuffer, shard_params}, {kMomentumBuffer, momentum}};
//   ASSIGN_OR_RETURN(WrittenShard w, WriteShard(env, step_dir, "shard-00000-of-00002.ckpt", c));
//   ASSIGN_OR_RETURN(ShardContents back, ReadShard(env, w.path));   // verifies every CRC
#ifndef SHARDLINE_COMMON_CHECKPOINT_SHARD_FILE_H_
#define SHARDLINE_COMMON_CHECKPOINT_SHARD_FILE_H_

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/types/span.h"
#include "common/platform/env.h"
#include "common/job/shard.h"
#include "proto/train_state.pb.h"

namespace shardline {

struct ShardBuffer {
  std::string name;
  std::vector<float> values;  // PiecesSize(ShardPieces(header)) floats, packed
  // For WriteShard only, instead of `values`: the buffer is these spans one
  // after another, written from where they are (a synchronous save from the
  // live parameters and optimizer state, with no copy of the shard). They
  // must stay unchanged until WriteShard returns.
  std::vector<absl::Span<const float>> parts;
  // The buffer's floats, as written: `parts` if set, else `values`.
  std::vector<absl::Span<const float>> Spans() const {
    return parts.empty() ? std::vector<absl::Span<const float>>{absl::MakeConstSpan(values)} : parts;
  }
  int64_t size() const {
    int64_t n = 0;
    for (absl::Span<const float> s : Spans()) n += static_cast<int64_t>(s.size());
    return n;
  }
};

struct ShardContents {
  // The writer fills buffers, block_size, block_crc and payload_bytes.
  state::ShardHeader header;
  std::vector<ShardBuffer> buffers;
  uint32_t checksum = 0;  // set by ReadShard: the shard's checksum (see WrittenShard)
};

struct WrittenShard {
  std::string path;
  int64_t size = 0;    // bytes of the file
  // The shard's checksum for the manifest: the CRC32C (unmasked) of its
  // header, which lists the CRC of every payload block, so it covers the
  // whole file without a second pass over the payload.
  uint32_t crc32c = 0;
  bool best = false;    // the header marks this step as the best so far
  double best_value = 0;
  uint64_t numerics = 0;  // the header's numerics fingerprint; 0: none
};

inline constexpr int64_t kShardBlockBytes = 1 << 20;

// The file name of `rank` of `world`: "shard-00001-of-00004.ckpt".
std::string ShardFileName(int rank, int world);
// True for names of that form ("shard-*.ckpt"), any rank and world.
bool IsShardFileName(const std::string& name);
// The rank and world of a ShardFileName; false for any other name.
bool ParseShardFileName(const std::string& name, int* rank, int* world);

struct ShardWriteOptions {
  // Bytes covered by each payload CRC.
  int64_t block_size = kShardBlockBytes;
  // Files at least this large are written around the page cache (O_DIRECT,
  // through two aligned staging blocks, one filled while the other is
  // written), where the file system allows it; smaller ones through the
  // cache, starting the device's writeback every 4 MiB. Measured on this
  // project's machine (bench/RESULTS.md): O_DIRECT wins from ~256 MiB up and
  // loses below ~128 MiB.
  int64_t unbuffered_min_bytes = int64_t{128} << 20;
};

// The flat ranges a header's shard holds (its `pieces` field; see
// train_state.proto), and setting them. Headers ReadShardInto returns have
// passed its checks of the pieces.
std::vector<Range> ShardPieces(const state::ShardHeader& header);
// The islands a shard's checkpoint has (ShardHeader.islands; 1 if absent),
// and the island the shard belongs to: rank / (world_size / islands).
int ShardIslands(const state::ShardHeader& header);
int ShardIsland(const state::ShardHeader& header);
void SetShardPieces(absl::Span<const Range> pieces, state::ShardHeader* header);

// Writes `dir`/`name` durably and atomically: "<name>.tmp", fsync, rename,
// fsync `dir`. A crash leaves either no file or the whole file. Every buffer
// must hold the header's pieces' floats, packed.
absl::StatusOr<WrittenShard> WriteShard(Env* env, const std::string& dir, const std::string& name,
                                        ShardContents contents, const ShardWriteOptions& options = {});

// Reads and verifies a shard file: magic, version, header CRC, sizes, and
// every block's CRC. kDataLoss naming the file (and the block) on any
// mismatch, a truncated or a zero-byte file.
absl::StatusOr<ShardContents> ReadShard(Env* env, const std::string& path);

// Where ReadShardInto puts part of a buffer: its floats [begin, end)
// (packed offsets: counted from the buffer's first float) go to
// dst[0, end - begin). A buffer may go to several places, or to none (its
// bytes are still verified).
struct Placement {
  float* dst = nullptr;
  int64_t begin = 0;
  int64_t end = 0;
};
using Placements = std::vector<Placement>;

// Every piece of a buffer of the shard `header` describes at its flat index
// in `flat` (a whole-model buffer): the buffer unpacked.
Placements PlacePiecesAt(const state::ShardHeader& header, float* flat);
using PlaceFn = std::function<absl::StatusOr<Placements>(const state::ShardHeader&, const state::BufferEntry&)>;

struct ShardReadOptions {
  // Payloads at least this large are read with the kernel asked to fetch
  // `prefetch_window` bytes ahead (RandomAccessFile::Prefetch) instead of
  // leaving it to readahead. Measured on this project's machine, cold,
  // alternated runs: 1 GiB 2.1-2.3 GB/s without, 3.8-4.2 with a 16 MiB
  // window (3.0-3.3 with 256 MiB); but 256 MiB and 33.7 MB shards read
  // slower with it (3.7-4.2 -> 2.8, 3.4-3.8 -> 1.8-2.6), hence the
  // threshold.
  int64_t prefetch_min_bytes = int64_t{512} << 20;
  int64_t prefetch_window = int64_t{16} << 20;
};

// The same verification as ReadShard, reading each placed byte straight into
// its destination. Reads format versions 1 and 2 (docs/checkpoint_format.md). place(header, buffer) is called for every buffer, in
// order, after the header is verified and before any payload is read; an
// error from it is returned as is. Sets *checksum (may be null) like
// WrittenShard::crc32c. Returns the header. On an error the destinations may
// hold part of the shard. Checks one file; VerifyCheckpoint
// (common/checkpoint/verify.h) checks a whole committed checkpoint with it.
absl::StatusOr<state::ShardHeader> ReadShardInto(Env* env, const std::string& path, const PlaceFn& place,
                                                 uint32_t* checksum, const ShardReadOptions& options = {});

// One shard open for reads of parts of its buffers, in any order, holding
// one payload block: for a reader of a model larger than its memory
// (`shardline ckpt export` streams the parameters through it). The header
// is checked as ReadShardInto checks it, and every block's CRC as the block
// is read; kDataLoss naming the file (and the block) otherwise. Not
// thread-safe.
//
//   ASSIGN_OR_RETURN(std::unique_ptr<ShardReader> r, ShardReader::Open(env, path));
//   RETURN_IF_ERROR(r->Read(kParamsBuffer, /*begin=*/0, /*end=*/1024, dst));
class ShardReader {
 public:
  static absl::StatusOr<std::unique_ptr<ShardReader>> Open(Env* env, const std::string& path);
  ~ShardReader();

  const state::ShardHeader& header() const;
  // Floats [begin, end) (packed offsets, as Placement's) of the buffer named
  // `buffer` into dst[0, end - begin). kNotFound if the shard has no such
  // buffer; kInvalidArgument if the range is not inside it.
  absl::Status Read(const std::string& buffer, int64_t begin, int64_t end, float* dst);

 private:
  struct State;
  explicit ShardReader(std::unique_ptr<State> s);
  std::unique_ptr<State> s_;
};

}  // namespace shardline

#endif  // SHARDLINE_COMMON_CHECKPOINT_SHARD_FILE_H_
