// `shardline data tokenize`: text files of any size into token shards and
// their manifest (token_manifest.h), streaming: the text is read in chunks
// of `chunk_bytes` cut after a newline, so memory holds a chunk and its
// tokens, never a whole input.
//
// The training split is the inputs in order, one stream; the validation
// split is `val_path`, or else the last `val_fraction` of the inputs' bytes
// (from the first line that starts at or after that point). A shard ends at
// the first line end at or after `shard_tokens` tokens.
//
// Safe to rerun and to interrupt: the old manifest is removed first, each
// shard is written to a temporary name, synced and renamed, and the
// manifest is written last (synced, renamed, the directory synced), so a
// directory without a manifest is never taken as done, and a directory
// with one holds exactly the shards it names.
#ifndef SHARDLINE_WORKER_DATA_TOKENIZE_H_
#define SHARDLINE_WORKER_DATA_TOKENIZE_H_

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "common/platform/env.h"
#include "worker/data/token_manifest.h"
#include "worker/data/tokenizer.h"

namespace shardline {

struct TokenizeOptions {
  std::vector<std::string> inputs;
  std::string val_path;       // empty: the last val_fraction of the inputs
  double val_fraction = 0.1;  // in (0, 1)
  std::string out_dir;
  int64_t shard_tokens = 100000000;
  int64_t chunk_bytes = int64_t{4} << 20;
};

struct TokenizeResult {
  TokenManifest manifest;
  int64_t text_bytes = 0;  // read, over both splits
  double encode_seconds = 0;  // in the tokenizer alone
};

// Writes out_dir/{manifest.json,tokenizer.model,train-*.tok,val-*.tok}.
absl::StatusOr<TokenizeResult> TokenizeCorpus(Env* env, const Tokenizer& tokenizer, const TokenizeOptions& options);

}  // namespace shardline

#endif  // SHARDLINE_WORKER_DATA_TOKENIZE_H_
