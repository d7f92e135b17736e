// `shardline data tokenizer` and `shardline data tokenize`: a SentencePiece
// tokenizer trained on text files, and text files of any size turned into
// token shards (worker/data/tokenize.h) that `data.tokens { dir }` trains on.
#ifndef SHARDLINE_WORKER_CLI_DATA_TOKENS_COMMAND_H_
#define SHARDLINE_WORKER_CLI_DATA_TOKENS_COMMAND_H_

#include "absl/status/status.h"
#include "common/platform/args.h"

namespace shardline {

// Each subcommand's single-valued flags (beside `data austen`'s); both take
// --out and --input, which repeats.
inline constexpr const char* kTokenizerFlags[] = {"vocab_size", "model_type", "max_lines", "seed"};
inline constexpr const char* kTokenizeFlags[] = {"tokenizer", "val", "val_fraction", "shard_tokens"};

// shardline data tokenizer --input FILE... --vocab_size V [--model_type bpe|unigram] --out DIR
absl::Status DataTokenizer(const Args& args);
// shardline data tokenize --tokenizer FILE --input FILE... --out DIR [--val_fraction F | --val FILE]
absl::Status DataTokenize(const Args& args);

}  // namespace shardline

#endif  // SHARDLINE_WORKER_CLI_DATA_TOKENS_COMMAND_H_
