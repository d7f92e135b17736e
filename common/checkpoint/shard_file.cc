#include "common/checkpoint/shard_file.h"

#include <algorithm>
#include <cstdlib>
#include <memory>
#include <thread>
#include <cstring>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "common/encoding/crc32c.h"
#include "common/faults/fault_injection.h"
#include "common/platform/mutex.h"
#include "common/platform/status_macros.h"

namespace shardline {
namespace {

constexpr char kMagic[8] = {'S', 'H', 'L', 'D', 'C', 'K', 'P', 'T'};
// 2: a shard holds pieces (ShardHeader.pieces). 1: one range [begin, end).
constexpr uint32_t kVersion = 2;
constexpr uint32_t kOneRangeVersion = 1;
constexpr size_t kPrefixBytes = 20;  // magic, version, header_len, header_crc

void PutU32(uint32_t v, char* out) {
  for (int i = 0; i < 4; ++i) out[i] = static_cast<char>(v >> (8 * i));
}

uint32_t GetU32(const char* p) {
  uint32_t v = 0;
  for (int i = 0; i < 4; ++i) v |= static_cast<uint32_t>(static_cast<unsigned char>(p[i])) << (8 * i);
  return v;
}

// How much WriteShard appends between writeback kicks.
constexpr size_t kWritebackBytes = size_t{4} << 20;
// Size of each of the two staging blocks of an unbuffered write.
constexpr size_t kStagingBytes = size_t{8} << 20;

// Feeds a byte stream and records the masked CRC of every block.
class BlockCrcs {
 public:
  explicit BlockCrcs(int64_t block_size) : block_size_(block_size) {}
  void Add(const char* p, size_t n) {
    while (n > 0) {
      const size_t take = std::min<size_t>(n, static_cast<size_t>(block_size_ - filled_));
      crc_ = crc32c::Extend(crc_, p, take);
      filled_ += static_cast<int64_t>(take);
      p += take;
      n -= take;
      if (filled_ == block_size_) Flush();
    }
  }
  std::vector<uint32_t> Finish() {
    if (filled_ > 0) Flush();
    return std::move(crcs_);
  }

 private:
  void Flush() {
    crcs_.push_back(crc32c::Mask(crc_));
    crc_ = 0;
    filled_ = 0;
  }
  const int64_t block_size_;
  int64_t filled_ = 0;
  uint32_t crc_ = 0;
  std::vector<uint32_t> crcs_;
};

// The file's bytes in order: prefix, header, then each buffer.
std::vector<absl::string_view> Pieces(const char* prefix, const std::string& header,
                                      const std::vector<ShardBuffer>& buffers) {
  std::vector<absl::string_view> pieces = {absl::string_view(prefix, kPrefixBytes), header};
  for (const ShardBuffer& b : buffers) {
    for (absl::Span<const float> s : b.Spans()) {
      if (!s.empty()) pieces.emplace_back(reinterpret_cast<const char*>(s.data()), s.size() * sizeof(float));
    }
  }
  return pieces;
}

// Page-cache writes in pieces, starting the device's writeback after each:
// the disk writes piece k while piece k+1 is copied into the cache, and the
// final Sync waits only for the tail.
absl::Status WriteBuffered(const std::vector<absl::string_view>& pieces, WritableFile* f) {
  for (absl::string_view piece : pieces) {
    while (!piece.empty()) {
      const size_t n = std::min(piece.size(), kWritebackBytes);
      RETURN_IF_ERROR(f->Append(piece.substr(0, n)));
      RETURN_IF_ERROR(f->StartWriteback());
      piece.remove_prefix(n);
    }
  }
  return absl::OkStatus();
}

// Unbuffered (O_DIRECT) writes through aligned staging blocks, since the
// pieces' memory and file offsets are not aligned. Two blocks: this thread
// fills one while a writer thread waits for the device on the other.
absl::Status WriteStaged(const std::vector<absl::string_view>& pieces, WritableFile* f) {
  struct Free {
    void operator()(char* p) const { free(p); }
  };
  std::unique_ptr<char, Free> blocks[2];
  for (auto& b : blocks) {
    void* raw = nullptr;
    if (posix_memalign(&raw, kUnbufferedAlignment, kStagingBytes) != 0) {
      return absl::ResourceExhaustedError("no memory for a staging block");
    }
    b.reset(static_cast<char*>(raw));
  }
  // What the two threads share, under mu.
  struct Shared {
    Mutex mu;
    size_t pending = 0;  // bytes of the block handed to the writer; 0: none
    int block = 0;
    bool done = false;
    absl::Status written;
    static bool Idle(Shared* x) { return x->pending == 0; }
    static bool Work(Shared* x) { return x->pending > 0 || x->done; }
  } sh;
  std::thread writer([&] {
    for (;;) {
      size_t n;
      int k;
      {
        MutexLock lock(&sh.mu);
        sh.mu.Await(absl::Condition(&Shared::Work, &sh));
        if (sh.pending == 0) return;
        n = sh.pending;
        k = sh.block;
      }
      absl::Status s = f->Append(absl::string_view(blocks[k].get(), n));
      MutexLock lock(&sh.mu);
      if (!s.ok() && sh.written.ok()) sh.written = s;
      sh.pending = 0;
    }
  });
  // Hands block k's first n bytes to the writer once it has finished the
  // other block; returns the first write error so far.
  auto hand_over = [&](int k, size_t n) {
    MutexLock lock(&sh.mu);
    sh.mu.Await(absl::Condition(&Shared::Idle, &sh));
    sh.pending = n;
    sh.block = k;
    return sh.written;
  };
  absl::Status s;
  int k = 0;
  size_t filled = 0;
  for (absl::string_view piece : pieces) {
    while (s.ok() && !piece.empty()) {
      const size_t n = std::min(piece.size(), kStagingBytes - filled);
      std::memcpy(blocks[k].get() + filled, piece.data(), n);
      filled += n;
      piece.remove_prefix(n);
      if (filled == kStagingBytes) {
        s = hand_over(k, filled);
        k = 1 - k;
        filled = 0;
      }
    }
  }
  if (s.ok() && filled > 0) s = hand_over(k, filled);
  {
    MutexLock lock(&sh.mu);
    sh.mu.Await(absl::Condition(&Shared::Idle, &sh));
    sh.done = true;
    if (s.ok()) s = sh.written;
  }
  writer.join();
  return s;
}

}  // namespace

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

absl::StatusOr<WrittenShard> WriteShard(Env* env, const std::string& dir, const std::string& name,
                                        ShardContents c, const ShardWriteOptions& options) {
  const int64_t block_size = options.block_size;
  if (c.header.pieces_size() % 2 != 0) return absl::InvalidArgumentError("shard pieces are not begin, end pairs");
  if (c.header.has_begin() || c.header.has_end()) {
    return absl::InvalidArgumentError("shard header sets the version 1 range [begin, end); version 2 sets pieces");
  }
  const int64_t floats = PiecesSize(ShardPieces(c.header));
  BlockCrcs blocks(block_size);
  c.header.clear_buffers();
  for (const ShardBuffer& b : c.buffers) {
    if (b.size() != floats) {
      return absl::InvalidArgumentError(absl::StrCat("buffer ", b.name, " has ", b.size(),
                                                     " floats; the shard covers ", floats));
    }
    state::BufferEntry* e = c.header.add_buffers();
    e->set_name(b.name);
    e->set_floats(floats);
    for (absl::Span<const float> s : b.Spans()) blocks.Add(reinterpret_cast<const char*>(s.data()), s.size() * sizeof(float));
  }
  c.header.set_block_size(block_size);
  c.header.clear_block_crc();
  for (uint32_t crc : blocks.Finish()) c.header.add_block_crc(crc);
  c.header.set_payload_bytes(floats * static_cast<int64_t>(sizeof(float)) * static_cast<int64_t>(c.buffers.size()));

  const std::string header = c.header.SerializeAsString();
  char prefix[kPrefixBytes];
  std::memcpy(prefix, kMagic, 8);
  PutU32(kVersion, prefix + 8);
  PutU32(static_cast<uint32_t>(header.size()), prefix + 12);
  // The header lists every block's CRC, so its own CRC covers the file.
  const uint32_t header_crc = crc32c::Value(header.data(), header.size());
  PutU32(crc32c::Mask(header_crc), prefix + 16);

  WrittenShard out;
  out.path = dir + "/" + name;
  out.size = static_cast<int64_t>(kPrefixBytes + header.size()) + c.header.payload_bytes();
  out.crc32c = header_crc;
  const std::string tmp = out.path + ".tmp";
  absl::Status s;
  {
    const std::vector<absl::string_view> pieces = Pieces(prefix, header, c.buffers);
    std::unique_ptr<WritableFile> f;
    s = absl::UnimplementedError("small file: through the page cache");
    if (out.size >= options.unbuffered_min_bytes) {
      absl::StatusOr<std::unique_ptr<WritableFile>> u = env->NewUnbufferedFile(tmp);
      s = u.status();
      if (u.ok()) {
        f = std::move(*u);
        s = WriteStaged(pieces, f.get());
      }
    }
    if (absl::IsUnimplemented(s)) {  // small, or no O_DIRECT on this file system
      absl::StatusOr<std::unique_ptr<WritableFile>> buffered = env->NewWritableFile(tmp);
      s = buffered.status();
      if (buffered.ok()) {
        f = std::move(*buffered);
        s = WriteBuffered(pieces, f.get());
      }
    }
    if (s.ok()) s = f->Sync();
    if (s.ok()) s = f->Close();
  }
  if (s.ok()) CrashPoint("before_shard_rename", c.header.step());
  if (s.ok()) s = env->RenameFile(tmp, out.path);
  if (s.ok()) s = env->SyncDir(dir);
  if (!s.ok()) {
    env->DeleteFile(tmp).IgnoreError();
    return Annotate(s, absl::StrCat("writing checkpoint shard ", out.path));
  }
  out.best = c.header.has_best_step() && c.header.best_step() == c.header.step();
  out.best_value = c.header.best_value();
  return out;
}

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
