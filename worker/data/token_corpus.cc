#include "worker/data/token_corpus.h"

#include <algorithm>
#include <cstring>

#include "absl/strings/str_cat.h"
#include "common/encoding/sha256.h"
#include "common/platform/logging.h"
#include "common/platform/status_macros.h"

namespace shardline {

absl::StatusOr<std::unique_ptr<TokenCorpus>> TokenCorpus::Open(Env* env, const std::string& dir,
                                                                const TokenManifest& manifest,
                                                                const std::vector<TokenShard>& split,
                                                                const TokenCorpusOptions& options) {
  std::unique_ptr<TokenCorpus> c(new TokenCorpus());
  c->vocab_size_ = manifest.vocab_size;
  c->token_bytes_ = manifest.token_bytes;
  for (const TokenShard& s : split) {
    Shard shard;
    shard.path = absl::StrCat(dir, "/", s.file);
    shard.first = c->num_tokens_;
    shard.tokens = s.tokens;
    absl::StatusOr<std::unique_ptr<MappedFile>> map = env->MapFile(shard.path);
    if (absl::IsNotFound(map.status())) {
      return absl::NotFoundError(absl::StrCat("token shard ", shard.path, " named by ", dir, "/", kTokenManifestFile,
                                              " does not exist"));
    }
    if (!map.ok()) return Annotate(map.status(), absl::StrCat("token shard ", shard.path));
    shard.map = std::move(*map);
    const int64_t want = s.tokens * manifest.token_bytes;
    const auto have = static_cast<int64_t>(shard.map->bytes().size());
    if (have != want) {
      return absl::DataLossError(absl::StrCat("token shard ", shard.path, " has ", have, " bytes; field tokens of ",
                                              dir, "/", kTokenManifestFile, " says ", s.tokens, " tokens of ",
                                              manifest.token_bytes, " bytes = ", want,
                                              have < want ? " (truncated?)" : ""));
    }
    // Every shard's identity, at every start (issue 62: another tokenizer's
    // shard cut to the same size trained silently with verify off): its
    // ends digest, or, in a manifest made before there was one, its whole
    // SHA-256 (0.7 s a GB on one core here: bench/history/2026-12.md).
    if (options.verify_contents || s.ends_sha256.empty()) {
      const std::string digest = Sha256Hex(shard.map->bytes());
      if (digest != s.sha256) {
        return absl::DataLossError(absl::StrCat("token shard ", shard.path, " has SHA-256 ", digest, "; field sha256 of ",
                                                dir, "/", kTokenManifestFile, " says ", s.sha256));
      }
    } else if (const std::string ends = ShardEndsSha256(shard.map->bytes()); ends != s.ends_sha256) {
      return absl::DataLossError(absl::StrCat("token shard ", shard.path, " has ends SHA-256 ", ends,
                                              "; field ends_sha256 of ", dir, "/", kTokenManifestFile, " says ",
                                              s.ends_sha256,
                                              ": another tokenizer's shard, or one changed since it was made"));
    }
    c->num_tokens_ += s.tokens;
    c->text_bytes_ += s.text_bytes;
    c->shards_.push_back(std::move(shard));
  }
  if (options.verify_contents) {
    std::vector<int32_t> buf(size_t{1} << 20);
    for (int64_t pos = 0; pos < c->num_tokens_; pos += static_cast<int64_t>(buf.size())) {
      RETURN_IF_ERROR(c->Read(pos, std::min<int64_t>(static_cast<int64_t>(buf.size()), c->num_tokens_ - pos), buf.data()));
    }
  }
  for (const Shard& shard : c->shards_) shard.map->Advise(options.access);  // after the verifying read's readahead
  return c;
}

absl::Status TokenCorpus::Check(const Shard& shard, int64_t at, int64_t n, const int32_t* out) const {
  int32_t worst = 0;
  for (int64_t i = 0; i < n; ++i) worst = std::max(worst, out[i]);
  if (worst < vocab_size_ && worst >= 0) return absl::OkStatus();
  for (int64_t i = 0; i < n; ++i) {
    if (out[i] >= vocab_size_ || out[i] < 0) {
      return absl::DataLossError(absl::StrCat("token shard ", shard.path, ": token ", at + i, " is ",
                                              static_cast<uint32_t>(out[i]), ", not below the vocabulary size ",
                                              vocab_size_, " (field tokenizer.vocab_size of the manifest)"));
    }
  }
  return absl::OkStatus();
}

absl::Status TokenCorpus::Read(int64_t pos, int64_t n, int32_t* out) const {
  SCHECK(pos >= 0 && n >= 0 && pos + n <= num_tokens_) << pos << "+" << n << " of " << num_tokens_;
  // The shard holding pos: the last whose first token is at or before it.
  auto it = std::upper_bound(shards_.begin(), shards_.end(), pos,
                             [](int64_t p, const Shard& s) { return p < s.first; });
  --it;
  while (n > 0) {
    const Shard& s = *it;
    const int64_t at = pos - s.first;
    const int64_t take = std::min(n, s.tokens - at);
    const char* src = s.map->bytes().data() + at * token_bytes_;
    if (token_bytes_ == 2) {
      const auto* p = reinterpret_cast<const uint16_t*>(src);  // little-endian: this build's x86-64
      for (int64_t i = 0; i < take; ++i) out[i] = p[i];
    } else {
      std::memcpy(out, src, static_cast<size_t>(take) * 4);
    }
    RETURN_IF_ERROR(Check(s, at, take, out));
    out += take;
    pos += take;
    n -= take;
    ++it;
  }
  return absl::OkStatus();
}

}  // namespace shardline
