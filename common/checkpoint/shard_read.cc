#include "common/checkpoint/shard_file.h"

#include <algorithm>
#include <cstdlib>
#include <memory>
#include <cstring>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "common/encoding/crc32c.h"
#include "common/faults/fault_injection.h"
#include "common/platform/mutex.h"
#include "common/platform/status_macros.h"

#include "common/checkpoint/shard_layout.h"

// Reading shards: the header checked against the file, then each placed
// byte read straight into its destination and every block's CRC checked
// (ReadShardInto, ShardReader, ReadShard).

namespace shardline {

using shard_layout::GetU32;
using shard_layout::kMagic;
using shard_layout::kOneRangeVersion;
using shard_layout::kPrefixBytes;
using shard_layout::kVersion;

namespace {

// A shard file's header, checked against the file: the format version, the
// header's CRC, pieces in order inside the model, and a payload of exactly
// the buffers the header names.
struct CheckedHeader {
  state::ShardHeader h;
  uint32_t crc = 0;
  int64_t floats = 0;      // per buffer
  int64_t payload_at = 0;  // file offset
  int64_t payload = 0;     // bytes
};

absl::StatusOr<CheckedHeader> ReadCheckedHeader(RandomAccessFile& file, const std::string& path) {
  auto bad = [&](const std::string& what) { return absl::DataLossError(absl::StrCat("checkpoint shard ", path, ": ", what)); };
  const int64_t file_size = file.size();
  if (file_size == 0) return bad("empty (zero-byte) file");
  if (file_size < static_cast<int64_t>(kPrefixBytes)) return bad(absl::StrCat("truncated: ", file_size, " bytes"));
  char prefix[kPrefixBytes];
  RETURN_IF_ERROR(file.ReadExactly(0, kPrefixBytes, prefix));
  if (std::memcmp(prefix, kMagic, 8) != 0) return bad("not a shardline checkpoint shard (bad magic)");
  const uint32_t version = GetU32(prefix + 8);
  if (version != kVersion && version != kOneRangeVersion) {
    return bad(absl::StrCat("format version ", version, "; this build reads ", kOneRangeVersion, " and ", kVersion));
  }
  const uint32_t header_len = GetU32(prefix + 12);
  if (file_size < static_cast<int64_t>(kPrefixBytes + header_len)) return bad("truncated inside the header");
  std::string header(header_len, '\0');
  RETURN_IF_ERROR(file.ReadExactly(kPrefixBytes, header_len, header.data()));
  CheckedHeader c;
  c.crc = crc32c::Value(header.data(), header_len);
  if (crc32c::Unmask(GetU32(prefix + 16)) != c.crc) return bad("header checksum mismatch");
  state::ShardHeader& h = c.h;
  if (!h.ParseFromString(header)) return bad("header does not parse");
  if (version == kOneRangeVersion) {
    h.clear_pieces();
    if (h.begin() < h.end()) SetShardPieces({Range{h.begin(), h.end()}}, &h);
  } else if (h.has_begin() || h.has_end()) {
    return bad("a version 2 header with a version 1 range");
  }
  if (h.pieces_size() % 2 != 0) return bad("pieces are not begin, end pairs");
  for (int i = 0; i < h.pieces_size(); i += 2) {
    const int64_t begin = h.pieces(i), end = h.pieces(i + 1);
    if (begin < 0 || begin >= end || end > h.total_size() || (i > 0 && begin < h.pieces(i - 1))) {
      return bad(absl::StrCat("piece [", begin, ", ", end, ") is empty, out of order or not inside the model's ",
                              h.total_size(), " parameters"));
    }
    c.floats += end - begin;
  }
  c.payload_at = static_cast<int64_t>(kPrefixBytes + header_len);
  c.payload = file_size - c.payload_at;
  if (c.payload != h.payload_bytes()) {
    return bad(absl::StrCat("payload is ", c.payload, " bytes; the header says ", h.payload_bytes(),
                            c.payload < h.payload_bytes() ? " (truncated file)" : ""));
  }
  if (h.block_size() <= 0) return bad("block size is not positive");
  const int64_t nblocks = (c.payload + h.block_size() - 1) / h.block_size();
  if (nblocks != h.block_crc_size()) return bad("block checksum count does not match the payload");
  if (c.floats * static_cast<int64_t>(sizeof(float)) * h.buffers_size() != c.payload) {
    return bad("buffers do not add up to the payload");
  }
  return c;
}

// Where each buffer's placed bytes go, as payload byte ranges.
struct Target {
  int64_t begin, end;  // payload bytes
  char* dst;
};

absl::StatusOr<std::vector<Target>> PlaceBuffers(const CheckedHeader& c, const PlaceFn& place,
                                                 const std::string& path) {
  const int64_t buffer_bytes = c.floats * static_cast<int64_t>(sizeof(float));
  std::vector<Target> targets;
  for (int i = 0; i < c.h.buffers_size(); ++i) {
    const state::BufferEntry& e = c.h.buffers(i);
    if (e.floats() != c.floats) {
      return absl::DataLossError(
          absl::StrCat("checkpoint shard ", path, ": buffer ", e.name(), " does not cover the shard's range"));
    }
    ASSIGN_OR_RETURN(Placements places, place(c.h, e));
    for (const Placement& p : places) {
      if (p.begin < 0 || p.end > c.floats || p.begin > p.end || (p.begin < p.end && p.dst == nullptr)) {
        return absl::InternalError(absl::StrCat("bad placement of buffer ", e.name(), " of ", path));
      }
      if (p.begin == p.end) continue;
      const int64_t at = i * buffer_bytes;
      targets.push_back({at + p.begin * static_cast<int64_t>(sizeof(float)),
                         at + p.end * static_cast<int64_t>(sizeof(float)), reinterpret_cast<char*>(p.dst)});
    }
  }
  return targets;
}

// Block by block: read straight into the destination when the block lies
// inside one target, else through a scratch block; then check the block's
// CRC on the bytes just read (still in cache). The kernel's readahead (or,
// for large payloads, Prefetch a window ahead) keeps the disk busy
// meanwhile.
absl::Status ReadBlocks(RandomAccessFile& file, const CheckedHeader& c, const std::vector<Target>& targets,
                        const ShardReadOptions& options, const std::string& path) {
  const state::ShardHeader& h = c.h;
  const int64_t payload = c.payload;
  const int64_t nblocks = h.block_crc_size();
  std::vector<char> scratch;
  const bool prefetch = payload >= options.prefetch_min_bytes;
  const int64_t window = options.prefetch_window;
  int64_t prefetched = 0;  // payload bytes asked for so far
  for (int64_t b = 0; b < nblocks; ++b) {
    const int64_t begin = b * h.block_size();
    const int64_t n = std::min(h.block_size(), payload - begin);
    if (prefetch && prefetched < std::min(payload, begin + window)) {
      // Keep the device a window ahead of the reads, in quarter-window asks.
      const int64_t until = std::min(payload, begin + window + window / 4);
      file.Prefetch(c.payload_at + prefetched, until - prefetched);
      prefetched = until;
    }
    char* into = nullptr;
    for (const Target& t : targets) {
      if (t.begin <= begin && begin + n <= t.end) into = t.dst + (begin - t.begin);
    }
    if (into == nullptr) {
      scratch.resize(static_cast<size_t>(h.block_size()));
      into = scratch.data();
    }
    RETURN_IF_ERROR(Annotate(file.ReadExactly(c.payload_at + begin, static_cast<size_t>(n), into),
                             absl::StrCat("checkpoint shard ", path)));
    if (crc32c::Mask(crc32c::Value(into, static_cast<size_t>(n))) != h.block_crc(static_cast<int>(b))) {
      return absl::DataLossError(absl::StrCat("checkpoint shard ", path, ": checksum mismatch in block ", b,
                                              " (payload bytes ", begin, "..", begin + n, ")"));
    }
    if (into != scratch.data()) continue;
    for (const Target& t : targets) {
      const int64_t lo = std::max(t.begin, begin), hi = std::min(t.end, begin + n);
      if (lo < hi) std::memcpy(t.dst + (lo - t.begin), into + (lo - begin), static_cast<size_t>(hi - lo));
    }
  }
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<state::ShardHeader> ReadShardInto(Env* env, const std::string& path, const PlaceFn& place,
                                                 uint32_t* checksum, const ShardReadOptions& options) {
  ASSIGN_OR_RETURN(std::unique_ptr<RandomAccessFile> file, env->NewRandomAccessFile(path));
  ASSIGN_OR_RETURN(CheckedHeader c, ReadCheckedHeader(*file, path));
  if (checksum != nullptr) *checksum = c.crc;
  ASSIGN_OR_RETURN(const std::vector<Target> targets, PlaceBuffers(c, place, path));
  RETURN_IF_ERROR(ReadBlocks(*file, c, targets, options, path));
  return std::move(c.h);
}

struct ShardReader::State {
  std::string path;
  std::unique_ptr<RandomAccessFile> file;
  CheckedHeader c;
  int64_t block = -1;  // the block `bytes` holds; -1 none
  std::vector<char> bytes;
};

ShardReader::ShardReader(std::unique_ptr<State> s) : s_(std::move(s)) {}
ShardReader::~ShardReader() = default;

absl::StatusOr<std::unique_ptr<ShardReader>> ShardReader::Open(Env* env, const std::string& path) {
  auto s = std::make_unique<State>();
  s->path = path;
  ASSIGN_OR_RETURN(s->file, env->NewRandomAccessFile(path));
  ASSIGN_OR_RETURN(s->c, ReadCheckedHeader(*s->file, path));
  return std::unique_ptr<ShardReader>(new ShardReader(std::move(s)));
}

const state::ShardHeader& ShardReader::header() const { return s_->c.h; }

absl::Status ShardReader::Read(const std::string& buffer, int64_t begin, int64_t end, float* dst) {
  const CheckedHeader& c = s_->c;
  int index = -1;
  for (int i = 0; i < c.h.buffers_size(); ++i) {
    if (c.h.buffers(i).name() == buffer) index = i;
  }
  if (index < 0) return absl::NotFoundError(absl::StrCat("checkpoint shard ", s_->path, " has no buffer ", buffer));
  if (begin < 0 || begin > end || end > c.floats) {
    return absl::InvalidArgumentError(absl::StrCat("floats [", begin, ", ", end, ") of buffer ", buffer, " of ",
                                                   s_->path, ": it holds ", c.floats));
  }
  const int64_t block_size = c.h.block_size();
  const int64_t at = index * c.floats * static_cast<int64_t>(sizeof(float));
  int64_t from = at + begin * static_cast<int64_t>(sizeof(float));
  const int64_t to = at + end * static_cast<int64_t>(sizeof(float));
  char* out = reinterpret_cast<char*>(dst);
  while (from < to) {
    const int64_t b = from / block_size;
    const int64_t block_begin = b * block_size;
    const int64_t n = std::min(block_size, c.payload - block_begin);
    if (s_->block != b) {
      s_->block = -1;
      s_->bytes.resize(static_cast<size_t>(block_size));
      RETURN_IF_ERROR(Annotate(s_->file->ReadExactly(c.payload_at + block_begin, static_cast<size_t>(n), s_->bytes.data()),
                               absl::StrCat("checkpoint shard ", s_->path)));
      if (crc32c::Mask(crc32c::Value(s_->bytes.data(), static_cast<size_t>(n))) != c.h.block_crc(static_cast<int>(b))) {
        return absl::DataLossError(absl::StrCat("checkpoint shard ", s_->path, ": checksum mismatch in block ", b,
                                                " (payload bytes ", block_begin, "..", block_begin + n, ")"));
      }
      s_->block = b;
    }
    const int64_t upto = std::min(to, block_begin + n);
    std::memcpy(out, s_->bytes.data() + (from - block_begin), static_cast<size_t>(upto - from));
    out += upto - from;
    from = upto;
  }
  return absl::OkStatus();
}

absl::StatusOr<ShardContents> ReadShard(Env* env, const std::string& path) {
  ShardContents c;
  absl::StatusOr<state::ShardHeader> h = ReadShardInto(
      env, path,
      [&](const state::ShardHeader&, const state::BufferEntry& e) -> absl::StatusOr<Placements> {
        ShardBuffer& b = c.buffers.emplace_back();
        b.name = e.name();
        b.values.resize(static_cast<size_t>(e.floats()));
        return Placements{{b.values.data(), 0, e.floats()}};
      },
      &c.checksum);
  if (!h.ok()) return h.status();
  c.header = std::move(*h);
  return c;
}


}  // namespace shardline
