// The manifest of a directory of token shards (`shardline data tokenize`):
// which tokenizer made them, and each shard's token count, the bytes of text
// it came from and its SHA-256. A shard is a file of little-endian unsigned
// tokens, 2 bytes each when the vocabulary has at most 65,536 pieces, else
// 4, and nothing else (as nanoGPT's train.bin), so it is read by mapping it.
//
//   DIR/manifest.json        written last: the directory is done when it exists
//   DIR/tokenizer.model      the tokenizer, as the manifest's sha256 names it
//   DIR/train-00000.tok ...  the training split, in order: one token stream
//   DIR/val-00000.tok ...    the validation split
//
// manifest.json:
//   {"format": "shardline.tokens.v1",
//    "tokenizer": {"file": "tokenizer.model", "sha256": "...", "vocab_size": 4096},
//    "token_bytes": 2,
//    "train": [{"file": "train-00000.tok", "tokens": 1000000, "text_bytes": 3531000, "sha256": "...",
//               "ends_sha256": "..."}, ...],
//    "val": [...]}
#ifndef SHARDLINE_WORKER_DATA_TOKEN_MANIFEST_H_
#define SHARDLINE_WORKER_DATA_TOKEN_MANIFEST_H_

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "common/platform/env.h"

namespace shardline {

inline constexpr char kTokenManifestFile[] = "manifest.json";
// The largest shard a manifest may name (it is mapped whole), and the most
// tokens (and bytes of text) a split may hold in all: far above any corpus
// this trains on, and far below where an int64 product or sum could wrap.
inline constexpr int64_t kMaxTokenShardBytes = int64_t{1} << 40;
inline constexpr int64_t kMaxSplitTokens = int64_t{1} << 50;
inline constexpr char kTokenFormat[] = "shardline.tokens.v1";

struct TokenShard {
  std::string file;  // relative to the directory
  int64_t tokens = 0;
  int64_t text_bytes = 0;
  std::string sha256;
  // ShardEndsSha256 of the shard: checked at every start, whatever
  // data.tokens.verify says (issue 62). "" in manifests made before it.
  std::string ends_sha256;
};

// How much of each end of a shard its ends digest covers.
inline constexpr size_t kShardEndBytes = size_t{64} << 10;
// A shard's identity, cheap to check at every start: SHA-256 of its first
// min(n, kShardEndBytes) bytes followed by its last min(n, kShardEndBytes).
// Another tokenizer's shard cut to the same size differs there; a change
// in the middle is data.tokens.verify's to find.
std::string ShardEndsSha256(absl::string_view head, absl::string_view tail);
// The same of a whole shard's bytes.
std::string ShardEndsSha256(absl::string_view shard);

struct TokenManifest {
  std::string tokenizer_file = "tokenizer.model";
  std::string tokenizer_sha256;
  int vocab_size = 0;
  int token_bytes = 2;  // 2 (uint16) or 4 (uint32)
  std::vector<TokenShard> train;
  std::vector<TokenShard> val;

  static int64_t Tokens(const std::vector<TokenShard>& split);
  static int64_t TextBytes(const std::vector<TokenShard>& split);
};

// 2 for a vocabulary of at most 65,536 pieces, else 4.
int TokenBytesFor(int vocab_size);

std::string TokenManifestJson(const TokenManifest& manifest);

// Parses DIR/manifest.json. NotFound naming the file when the directory has
// none (never made, or a tokenize run that did not finish); DataLoss naming
// the field for anything malformed.
absl::StatusOr<TokenManifest> ReadTokenManifest(Env* env, const std::string& dir);

// Parses manifest text; `source` names it in errors. Every size is
// checked: a shard's tokens x token_bytes at most kMaxTokenShardBytes, a
// split's tokens and text bytes at most kMaxSplitTokens in all (DataLoss
// naming the field).
absl::StatusOr<TokenManifest> ParseTokenManifest(const std::string& text, const std::string& source);

}  // namespace shardline

#endif  // SHARDLINE_WORKER_DATA_TOKEN_MANIFEST_H_
