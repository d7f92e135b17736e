// One split of a token-shard directory, read in place: each shard is mapped
// read-only (Env::MapFile), so the workers of a host share one copy of the
// corpus in the page cache, and a worker's own memory does not grow with
// the corpus. The split's shards read as one stream of tokens.
//
//   ASSIGN_OR_RETURN(TokenManifest m, ReadTokenManifest(env, dir));
//   ASSIGN_OR_RETURN(auto train, TokenCorpus::Open(env, dir, m, m.train, {}));
//   std::vector<int32_t> window(129);
//   RETURN_IF_ERROR(train->Read(pos, 129, window.data()));
#ifndef SHARDLINE_WORKER_DATA_TOKEN_CORPUS_H_
#define SHARDLINE_WORKER_DATA_TOKEN_CORPUS_H_

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "common/platform/env.h"
#include "worker/data/token_manifest.h"

namespace shardline {

struct TokenCorpusOptions {
  // Also hash every shard against the manifest's SHA-256 and check every
  // token is below the vocabulary (reads the whole split once); without it
  // only each shard's size is checked at open, and each token as it is read.
  bool verify_contents = false;
  // How the shards will be read (a hint to the kernel): training windows
  // are scattered (kRandom), validation tiles the split (kSequential).
  MappedFile::Access access = MappedFile::Access::kNormal;
};

class TokenCorpus {
 public:
  // Maps the shards of `split` (one of manifest.train / manifest.val) from
  // `dir`. NotFound naming a missing shard; DataLoss naming a shard whose
  // size (or, verifying, hash or a token) does not match the manifest.
  static absl::StatusOr<std::unique_ptr<TokenCorpus>> Open(Env* env, const std::string& dir,
                                                           const TokenManifest& manifest,
                                                           const std::vector<TokenShard>& split,
                                                           const TokenCorpusOptions& options);

  int64_t num_tokens() const { return num_tokens_; }
  int64_t text_bytes() const { return text_bytes_; }
  int vocab_size() const { return vocab_size_; }

  // Tokens [pos, pos + n) of the stream into out. DataLoss naming the shard
  // and the token's offset if one is not below the vocabulary (nothing is
  // trained on it). Requires 0 <= pos, pos + n <= num_tokens().
  absl::Status Read(int64_t pos, int64_t n, int32_t* out) const;

 private:
  struct Shard {
    std::string path;
    int64_t first = 0;  // stream offset of its first token
    int64_t tokens = 0;
    std::unique_ptr<MappedFile> map;
  };
  TokenCorpus() = default;
  absl::Status Check(const Shard& shard, int64_t at, int64_t n, const int32_t* out) const;

  std::vector<Shard> shards_;
  int64_t num_tokens_ = 0;
  int64_t text_bytes_ = 0;
  int vocab_size_ = 0;
  int token_bytes_ = 2;
};

}  // namespace shardline

#endif  // SHARDLINE_WORKER_DATA_TOKEN_CORPUS_H_
