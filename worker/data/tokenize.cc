#include "worker/data/tokenize.h"

#include <cmath>
#include <cstring>
#include <memory>
#include <set>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/types/span.h"
#include "common/encoding/coding.h"
#include "common/encoding/sha256.h"
#include "common/platform/status_macros.h"

namespace shardline {
namespace {

constexpr size_t kWriteBufferBytes = size_t{1} << 20;

// One split's shards, written as lines' tokens arrive.
class ShardSink {
 public:
  ShardSink(Env* env, std::string dir, std::string prefix, int token_bytes, int64_t shard_tokens)
      : env_(env), dir_(std::move(dir)), prefix_(std::move(prefix)), token_bytes_(token_bytes),
        shard_tokens_(shard_tokens) {}

  absl::Status AddLine(absl::Span<const int32_t> ids, int64_t text_bytes) {
    if (file_ == nullptr) RETURN_IF_ERROR(Open());
    for (int32_t id : ids) AppendLittleEndian(&buffer_, static_cast<uint32_t>(id), token_bytes_);
    current_.tokens += static_cast<int64_t>(ids.size());
    current_.text_bytes += text_bytes;
    if (buffer_.size() >= kWriteBufferBytes) RETURN_IF_ERROR(Drain());
    if (current_.tokens >= shard_tokens_) RETURN_IF_ERROR(Close());
    return absl::OkStatus();
  }

  // Ends the last shard. FailedPrecondition when the split has no tokens.
  absl::Status Finish(const std::string& what) {
    if (file_ != nullptr && current_.tokens > 0) RETURN_IF_ERROR(Close());
    if (shards_.empty()) return absl::FailedPreconditionError(absl::StrCat(what, " holds no text: no tokens to write"));
    return absl::OkStatus();
  }

  const std::vector<TokenShard>& shards() const { return shards_; }

 private:
  std::string Path(const std::string& file) const { return absl::StrCat(dir_, "/", file); }

  absl::Status Open() {
    current_ = TokenShard{};
    current_.file = absl::StrFormat("%s-%05d.tok", prefix_, shards_.size());
    ASSIGN_OR_RETURN(file_, env_->NewWritableFile(Path(current_.file) + ".tmp"));
    sha_.Reset();
    head_.clear();
    tail_.clear();
    return absl::OkStatus();
  }

  absl::Status Drain() {
    sha_.Update(buffer_);
    // The shard's ends, for its ends digest (token_manifest.h).
    if (head_.size() < kShardEndBytes) head_.append(buffer_, 0, kShardEndBytes - head_.size());
    tail_ += buffer_;
    if (tail_.size() > kShardEndBytes) tail_.erase(0, tail_.size() - kShardEndBytes);
    RETURN_IF_ERROR(file_->Append(buffer_));
    buffer_.clear();
    return absl::OkStatus();
  }

  absl::Status Close() {
    RETURN_IF_ERROR(Drain());
    RETURN_IF_ERROR(file_->Sync());
    RETURN_IF_ERROR(file_->Close());
    file_.reset();
    RETURN_IF_ERROR(env_->RenameFile(Path(current_.file) + ".tmp", Path(current_.file)));
    current_.sha256 = sha_.HexDigest();
    current_.ends_sha256 = ShardEndsSha256(head_, tail_);
    shards_.push_back(current_);
    return absl::OkStatus();
  }

  Env* env_;
  const std::string dir_, prefix_;
  const int token_bytes_;
  const int64_t shard_tokens_;
  std::unique_ptr<WritableFile> file_;
  Sha256 sha_;
  std::string head_, tail_;  // the shard's first and last kShardEndBytes
  TokenShard current_;
  std::string buffer_;
  std::vector<TokenShard> shards_;
};

// Where each line of a chunk goes: `global` is the offset of the chunk's
// first byte over all inputs.
struct Router {
  Env* env;
  const Tokenizer* tokenizer;
  ShardSink* train;
  ShardSink* val;
  int64_t val_from;  // lines starting here or later go to val (INT64_MAX: none)
  std::vector<int32_t> ids;
  std::vector<size_t> ends;
  double encode_seconds = 0;

  absl::Status Chunk(absl::string_view text, int64_t global) {
    ids.clear();
    ends.clear();
    const int64_t t0 = env->NowMicros();
    RETURN_IF_ERROR(tokenizer->EncodeLines(text, &ids, &ends));
    encode_seconds += static_cast<double>(env->NowMicros() - t0) * 1e-6;
    size_t begin = 0, first_id = 0;
    for (size_t end_id : ends) {
      size_t end = text.find('\n', begin);
      end = end == absl::string_view::npos ? text.size() : end + 1;
      ShardSink* sink = global + static_cast<int64_t>(begin) >= val_from ? val : train;
      RETURN_IF_ERROR(sink->AddLine(absl::MakeConstSpan(ids).subspan(first_id, end_id - first_id),
                                    static_cast<int64_t>(end - begin)));
      begin = end;
      first_id = end_id;
    }
    return absl::OkStatus();
  }
};

// Reads `path` in chunks cut after a newline (or, for a line longer than a
// chunk, at a UTF-8 character boundary) and hands each line to `router`.
// `base` is the file's first byte's offset over all inputs.
absl::Status StreamFile(Env* env, const std::string& path, int64_t chunk_bytes, int64_t base, Router* router) {
  ASSIGN_OR_RETURN(std::unique_ptr<RandomAccessFile> file, env->NewRandomAccessFile(path));
  const int64_t size = file->size();
  std::string buf;
  int64_t read = 0;       // bytes of the file read into buf so far
  int64_t buf_start = 0;  // file offset of buf[0]
  while (read < size || !buf.empty()) {
    if (read < size) {
      const size_t n = static_cast<size_t>(std::min<int64_t>(chunk_bytes, size - read));
      const size_t old = buf.size();
      buf.resize(old + n);
      RETURN_IF_ERROR(file->ReadExactly(read, n, buf.data() + old));
      read += static_cast<int64_t>(n);
    }
    // The part of buf to tokenize now: up to its last newline; all of it at
    // the end of the file; else, for a line longer than a chunk, up to a
    // character boundary.
    size_t cut = buf.rfind('\n');
    cut = cut == std::string::npos ? 0 : cut + 1;
    if (read == size) {
      cut = buf.size();
    } else if (cut == 0 && static_cast<int64_t>(buf.size()) >= chunk_bytes) {
      cut = buf.size();
      for (int k = 0; k < 3 && cut > 1 && (static_cast<unsigned char>(buf[cut - 1]) & 0xc0) == 0x80; ++k) --cut;
      if ((static_cast<unsigned char>(buf[cut - 1]) & 0xc0) == 0xc0) --cut;  // a lead byte without its tail
      if (cut == 0) cut = buf.size();
    }
    RETURN_IF_ERROR(router->Chunk(absl::string_view(buf.data(), cut), base + buf_start));
    buf.erase(0, cut);
    buf_start += static_cast<int64_t>(cut);
    if (cut == 0 && read == size) break;
  }
  return absl::OkStatus();
}

bool IsShardName(const std::string& name) {
  for (const char* prefix : {"train-", "val-"}) {
    if (absl::StartsWith(name, prefix) && (absl::EndsWith(name, ".tok") || absl::EndsWith(name, ".tok.tmp"))) return true;
  }
  return false;
}

}  // namespace

absl::StatusOr<TokenizeResult> TokenizeCorpus(Env* env, const Tokenizer& tokenizer, const TokenizeOptions& o) {
  if (o.inputs.empty()) return absl::InvalidArgumentError("--input: name at least one text file");
  if (o.out_dir.empty()) return absl::InvalidArgumentError("--out: name the directory for the shards");
  if (o.val_path.empty() && !(o.val_fraction > 0 && o.val_fraction < 1)) {
    return absl::InvalidArgumentError(absl::StrCat("--val_fraction ", o.val_fraction, ": must be in (0, 1)"));
  }
  if (o.shard_tokens < 1) return absl::InvalidArgumentError(absl::StrCat("--shard_tokens ", o.shard_tokens, ": at least 1"));
  if (o.chunk_bytes < 16) return absl::InvalidArgumentError(absl::StrCat("chunk of ", o.chunk_bytes, " bytes: at least 16"));
  int64_t total = 0;
  std::vector<int64_t> sizes;
  for (const std::string& in : o.inputs) {
    absl::StatusOr<int64_t> size = env->GetFileSize(in);
    if (!size.ok()) return Annotate(size.status(), absl::StrCat("--input ", in));
    sizes.push_back(*size);
    total += *size;
  }
  if (!o.val_path.empty()) {
    absl::StatusOr<int64_t> size = env->GetFileSize(o.val_path);
    if (!size.ok()) return Annotate(size.status(), absl::StrCat("--val ", o.val_path));
  }

  RETURN_IF_ERROR(env->CreateDirs(o.out_dir));
  const std::string manifest_path = absl::StrCat(o.out_dir, "/", kTokenManifestFile);
  if (env->FileExists(manifest_path)) {  // from now on the directory is not done
    RETURN_IF_ERROR(env->DeleteFile(manifest_path));
    RETURN_IF_ERROR(env->SyncDir(o.out_dir));
  }

  TokenizeResult result;
  TokenManifest& m = result.manifest;
  m.tokenizer_sha256 = tokenizer.sha256();
  m.vocab_size = tokenizer.vocab_size();
  m.token_bytes = TokenBytesFor(m.vocab_size);
  RETURN_IF_ERROR(WriteFileAtomically(env, absl::StrCat(o.out_dir, "/", m.tokenizer_file), tokenizer.model(),
                                      /*durable=*/true));
  ShardSink train(env, o.out_dir, "train", m.token_bytes, o.shard_tokens);
  ShardSink val(env, o.out_dir, "val", m.token_bytes, o.shard_tokens);
  Router router{env, &tokenizer, &train, &val, INT64_MAX, {}, {}, 0};
  if (o.val_path.empty()) {
    router.val_from = total - static_cast<int64_t>(std::floor(static_cast<double>(total) * o.val_fraction));
  }
  int64_t base = 0;
  for (size_t i = 0; i < o.inputs.size(); ++i) {
    RETURN_IF_ERROR(Annotate(StreamFile(env, o.inputs[i], o.chunk_bytes, base, &router),
                             absl::StrCat("--input ", o.inputs[i])));
    base += sizes[i];
  }
  if (!o.val_path.empty()) {
    Router to_val = router;
    to_val.val_from = 0;
    RETURN_IF_ERROR(Annotate(StreamFile(env, o.val_path, o.chunk_bytes, 0, &to_val), absl::StrCat("--val ", o.val_path)));
    router.encode_seconds = to_val.encode_seconds;
  }
  RETURN_IF_ERROR(train.Finish("the training split (--input)"));
  RETURN_IF_ERROR(val.Finish(o.val_path.empty()
                                 ? absl::StrCat("the validation split (the last ", o.val_fraction,
                                                " of the inputs, from a line start)")
                                 : absl::StrCat("the validation split (--val ", o.val_path, ")")));
  m.train = train.shards();
  m.val = val.shards();
  result.text_bytes = TokenManifest::TextBytes(m.train) + TokenManifest::TextBytes(m.val);
  result.encode_seconds = router.encode_seconds;
  RETURN_IF_ERROR(WriteFileAtomically(env, manifest_path, TokenManifestJson(m), /*durable=*/true));

  // Shards an earlier run left that this manifest does not name.
  std::set<std::string> named;
  for (const auto* split : {&m.train, &m.val}) {
    for (const TokenShard& s : *split) named.insert(s.file);
  }
  ASSIGN_OR_RETURN(std::vector<std::string> children, env->GetChildren(o.out_dir));
  for (const std::string& name : children) {
    if (IsShardName(name) && named.count(name) == 0) RETURN_IF_ERROR(env->DeleteFile(absl::StrCat(o.out_dir, "/", name)));
  }
  return result;
}

}  // namespace shardline
