// shardline data austen --out DIR [--rdb PATH]
// shardline data tokenizer --input FILE... --vocab_size V [--model_type bpe|unigram] --out DIR
// shardline data tokenize --tokenizer FILE --input FILE... --out DIR [--val_fraction F | --val FILE]

#include <cstdio>
#include <iterator>
#include <set>

#include "absl/strings/str_cat.h"
#include "common/encoding/sha256.h"
#include "common/platform/args.h"
#include "common/platform/env.h"
#include "common/platform/status_macros.h"
#include "worker/cli/commands.h"
#include "worker/cli/data_tokens_command.h"
#include "worker/data/austen.h"

namespace shardline {
namespace {

constexpr char kHelp[] =
    "usage: shardline data austen --out DIR [--rdb PATH] [--any_version]\n"
    "       shardline data tokenizer --input FILE... --vocab_size V [--model_type unigram|bpe]\n"
    "                                [--max_lines N] [--seed S] --out DIR\n"
    "       shardline data tokenize --tokenizer DIR/tokenizer.model --input FILE... --out DIR\n"
    "                               [--val_fraction F | --val FILE] [--shard_tokens N]\n"
    "\n"
    "austen: writes DIR/train.txt and DIR/val.txt, the text corpus of the language\n"
    "models (data.text.train_path and val_path): Jane Austen's six novels, public\n"
    "domain, from Debian's r-cran-janeaustenr, read from its data file without R.\n"
    "train.txt holds five novels in order of publication (3,558,175 bytes), val.txt\n"
    "the last, Persuasion (466,854 bytes). The package's data file is looked for\n"
    "where dpkg installs it and where deploy/install-deps.sh unpacks it; --rdb\n"
    "names another. Both files are checked against the SHA-256 of the corpus made\n"
    "from the package's version 1.0.0 (Debian 12); --any_version accepts others.\n"
    "\n"
    "Exit 0 when both are written and match; 1 otherwise, naming the file.\n"
    "\n"
    "tokenizer: trains a SentencePiece model (Debian's libsentencepiece; default\n"
    "unigram) of V pieces on the files' lines and writes DIR/tokenizer.model. The\n"
    "same inputs and flags give the same bytes (one thread; corpora of more than\n"
    "--max_lines lines, default 2000000, are sampled with --seed). Bytes are seen\n"
    "as they are (no normalization), \"\\n\" is a piece, and every byte has a\n"
    "fallback piece, so any byte sequence encodes and decodes to itself.\n"
    "\n"
    "tokenize: streams the files (any size: a chunk at a time) through the\n"
    "tokenizer into DIR/train-NNNNN.tok and DIR/val-NNNNN.tok (little-endian\n"
    "uint16 tokens, uint32 past 65,536 pieces; a shard ends at the first line end\n"
    "past --shard_tokens, default 100000000), copies the tokenizer to DIR and\n"
    "writes DIR/manifest.json last (tokenizer SHA-256; each shard's tokens, text\n"
    "bytes and SHA-256). The validation split is --val FILE, or the last\n"
    "--val_fraction (default 0.1) of the inputs' bytes from a line start. Safe\n"
    "to rerun or interrupt: without manifest.json the directory is not done.\n"
    "Train on it with data.tokens { dir: \"DIR\" } (docs/config.md).\n";

absl::Status Austen(const Args& args) {
  if (args.positional.size() != 1) {
    return absl::InvalidArgumentError(absl::StrCat("shardline data austen takes no argument '", args.positional[1], "'"));
  }
  const std::string out = args.Get("out");
  if (out.empty()) return absl::InvalidArgumentError("--out is required");
  Env* env = Env::Default();
  std::string rdb = args.Get("rdb");
  if (rdb.empty()) {
    ASSIGN_OR_RETURN(rdb, FindAustenRdata(env));
  }
  ASSIGN_OR_RETURN(AustenText text, ReadAusten(env, rdb));
  const bool any_version = args.Get("any_version") == "true";
  RETURN_IF_ERROR(Annotate(env->CreateDirs(out), "--out"));
  struct File {
    const char* name;
    const std::string* bytes;
    const char* expected;
  };
  for (const File& f : {File{"train.txt", &text.train, kAustenTrainSha256}, File{"val.txt", &text.val, kAustenValSha256}}) {
    const std::string path = absl::StrCat(out, "/", f.name);
    const std::string digest = Sha256Hex(*f.bytes);
    if (digest != f.expected && !any_version) {
      return absl::DataLossError(absl::StrCat(path, ": made from ", rdb, " with SHA-256 ", digest, ", not ", f.expected,
                                              " (r-cran-janeaustenr 1.0.0); not written. Another version of the "
                                              "package? --any_version accepts it"));
    }
    RETURN_IF_ERROR(WriteFileAtomically(env, path, *f.bytes, /*durable=*/true));
    std::printf("%s  %s  (%zu bytes)\n", digest.c_str(), path.c_str(), f.bytes->size());
  }
  return absl::OkStatus();
}

// Each subcommand's flags: another's is an error naming it.
absl::Status Data(const Args& args) {
  const std::string sub = args.positional.empty() ? "" : args.positional[0];
  std::set<std::string> allowed = {"out"};
  if (sub == "austen") allowed.insert({"rdb", "any_version"});
  if (sub == "tokenizer") allowed.insert(std::begin(kTokenizerFlags), std::end(kTokenizerFlags));
  if (sub == "tokenize") allowed.insert(std::begin(kTokenizeFlags), std::end(kTokenizeFlags));
  if (sub != "austen") allowed.insert("input");
  if (sub != "austen" && sub != "tokenizer" && sub != "tokenize") {
    return absl::InvalidArgumentError(
        absl::StrCat(sub.empty() ? "expected a subcommand" : absl::StrCat("unknown subcommand '", sub, "'"),
                     ": shardline data austen|tokenizer|tokenize (see --help)"));
  }
  for (const auto& [flag, values] : args.flags) {
    if (allowed.count(flag) == 0) {
      return absl::InvalidArgumentError(absl::StrCat("shardline data ", sub, " takes no --", flag, " (see --help)"));
    }
  }
  if (sub == "tokenizer") return DataTokenizer(args);
  if (sub == "tokenize") return DataTokenize(args);
  return Austen(args);
}

}  // namespace

int DataCommand(int argc, char** argv) {
  Args args;
  std::set<std::string> single = {"out", "rdb"};
  single.insert(std::begin(kTokenizerFlags), std::end(kTokenizerFlags));
  single.insert(std::begin(kTokenizeFlags), std::end(kTokenizeFlags));
  absl::Status parsed = ParseArgs(argc, argv, 2, {single, {"input"}, {"any_version"}}, "shardline data", &args);
  return RunCommand(parsed, args, kHelp, "shardline data", Data);
}

}  // namespace shardline
