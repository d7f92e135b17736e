#include "worker/cli/data_tokens_command.h"

#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "common/platform/env.h"
#include "common/platform/status_macros.h"
#include "worker/data/tokenize.h"
#include "worker/data/tokenizer.h"

namespace shardline {
namespace {

// --input's files: every --input, and the arguments after the subcommand
// ("--input a.txt b.txt" leaves b.txt positional).
absl::StatusOr<std::vector<std::string>> Inputs(const Args& args) {
  std::vector<std::string> inputs = args.GetAll("input");
  inputs.insert(inputs.end(), args.positional.begin() + 1, args.positional.end());
  if (inputs.empty()) return absl::InvalidArgumentError("--input: name at least one text file");
  return inputs;
}

}  // namespace

absl::Status DataTokenizer(const Args& args) {
  TokenizerTrainOptions o;
  ASSIGN_OR_RETURN(o.inputs, Inputs(args));
  const std::string out = args.Get("out");
  if (out.empty()) return absl::InvalidArgumentError("--out is required: the directory for tokenizer.model");
  if (!args.Has("vocab_size")) return absl::InvalidArgumentError("--vocab_size is required (e.g. 4096)");
  ASSIGN_OR_RETURN(int64_t vocab, IntFlag(args, "vocab_size", 0));
  if (vocab < 1 || vocab > (int64_t{1} << 30)) {
    return absl::InvalidArgumentError(absl::StrCat("--vocab_size ", vocab, ": out of range"));
  }
  o.vocab_size = static_cast<int>(vocab);
  if (args.Has("model_type")) o.model_type = args.Get("model_type");
  ASSIGN_OR_RETURN(o.max_lines, IntFlag(args, "max_lines", o.max_lines));
  ASSIGN_OR_RETURN(int64_t seed, IntFlag(args, "seed", 0));
  if (seed < 0 || seed > UINT32_MAX - 1) return absl::InvalidArgumentError(absl::StrCat("--seed ", seed, ": out of range"));
  o.seed = static_cast<uint32_t>(seed);
  Env* env = Env::Default();
  for (const std::string& in : o.inputs) {
    if (!env->FileExists(in)) return absl::NotFoundError(absl::StrCat("--input ", in, " does not exist"));
  }
  const int64_t t0 = env->NowMicros();
  ASSIGN_OR_RETURN(std::string model, TrainTokenizer(env, o));
  ASSIGN_OR_RETURN(std::unique_ptr<Tokenizer> tok, Tokenizer::FromModel(env, model, "the trained model"));
  RETURN_IF_ERROR(Annotate(env->CreateDirs(out), "--out"));
  const std::string path = absl::StrCat(out, "/", kTokenizerFile);
  RETURN_IF_ERROR(WriteFileAtomically(env, path, model, /*durable=*/true));
  std::printf("%s  %s  (%s, %d pieces, trained in %.1f s)\n", tok->sha256().c_str(), path.c_str(), o.model_type.c_str(),
              tok->vocab_size(), static_cast<double>(env->NowMicros() - t0) * 1e-6);
  return absl::OkStatus();
}

absl::Status DataTokenize(const Args& args) {
  TokenizeOptions o;
  ASSIGN_OR_RETURN(o.inputs, Inputs(args));
  o.out_dir = args.Get("out");
  if (o.out_dir.empty()) return absl::InvalidArgumentError("--out is required: the directory for the shards");
  std::string tokenizer = args.Get("tokenizer");
  if (tokenizer.empty()) return absl::InvalidArgumentError("--tokenizer is required: DIR/tokenizer.model");
  Env* env = Env::Default();
  if (env->IsDirectory(tokenizer)) tokenizer = absl::StrCat(tokenizer, "/", kTokenizerFile);
  if (args.Has("val") && args.Has("val_fraction")) {
    return absl::InvalidArgumentError("give --val FILE or --val_fraction F, not both");
  }
  o.val_path = args.Get("val");
  ASSIGN_OR_RETURN(o.val_fraction, DoubleFlag(args, "val_fraction", o.val_fraction));
  ASSIGN_OR_RETURN(o.shard_tokens, IntFlag(args, "shard_tokens", o.shard_tokens));
  absl::StatusOr<std::unique_ptr<Tokenizer>> tok = Tokenizer::Load(env, tokenizer);
  if (!tok.ok()) return Annotate(tok.status(), absl::StrCat("--tokenizer ", tokenizer));
  const int64_t t0 = env->NowMicros();
  ASSIGN_OR_RETURN(TokenizeResult r, TokenizeCorpus(env, **tok, o));
  const double seconds = static_cast<double>(env->NowMicros() - t0) * 1e-6;
  const TokenManifest& m = r.manifest;
  std::printf("%s/%s: train %lld tokens in %zu shards from %lld bytes; val %lld tokens in %zu shards from %lld bytes; "
              "%.2f bytes per token; %.1f MB/s of text (%.1f MB/s in the tokenizer)\n",
              o.out_dir.c_str(), kTokenManifestFile, static_cast<long long>(TokenManifest::Tokens(m.train)),
              m.train.size(), static_cast<long long>(TokenManifest::TextBytes(m.train)),
              static_cast<long long>(TokenManifest::Tokens(m.val)), m.val.size(),
              static_cast<long long>(TokenManifest::TextBytes(m.val)),
              static_cast<double>(r.text_bytes) /
                  static_cast<double>(TokenManifest::Tokens(m.train) + TokenManifest::Tokens(m.val)),
              static_cast<double>(r.text_bytes) / 1e6 / seconds,
              static_cast<double>(r.text_bytes) / 1e6 / std::max(r.encode_seconds, 1e-9));
  return absl::OkStatus();
}

}  // namespace shardline
