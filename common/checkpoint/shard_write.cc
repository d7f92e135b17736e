#include "common/checkpoint/shard_file.h"

#include <algorithm>
#include <cstdlib>
#include <memory>
#include <thread>
#include <cstring>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "common/encoding/crc32c.h"
#include "common/faults/fault_injection.h"
#include "common/platform/mutex.h"
#include "common/platform/status_macros.h"

#include "common/checkpoint/shard_layout.h"

// WriteShard: the prefix, header and buffers of a shard, each block's CRC
// recorded, written buffered (page cache, writeback kicked as it goes) or
// unbuffered (O_DIRECT through two staging blocks).

namespace shardline {
namespace {

using shard_layout::kMagic;
using shard_layout::kPrefixBytes;
using shard_layout::kVersion;
using shard_layout::PutU32;

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
  out.numerics = c.header.numerics();
  return out;
}

}  // namespace shardline
