// shardline data austen --out DIR [--rdb PATH]
#include <openssl/evp.h>

#include <cstdio>

#include "absl/strings/escaping.h"
#include "absl/strings/str_cat.h"
#include "common/platform/args.h"
#include "common/platform/env.h"
#include "common/platform/status_macros.h"
#include "worker/cli/commands.h"
#include "worker/data/austen.h"

namespace shardline {
namespace {

constexpr char kHelp[] =
    "usage: shardline data austen --out DIR [--rdb PATH] [--any_version]\n"
    "\n"
    "Writes DIR/train.txt and DIR/val.txt, the text corpus of the language\n"
    "models (data.text.train_path and val_path): Jane Austen's six novels, public\n"
    "domain, from Debian's r-cran-janeaustenr, read from its data file without R.\n"
    "train.txt holds five novels in order of publication (3,558,175 bytes), val.txt\n"
    "the last, Persuasion (466,854 bytes). The package's data file is looked for\n"
    "where dpkg installs it and where deploy/install-deps.sh unpacks it; --rdb\n"
    "names another. Both files are checked against the SHA-256 of the corpus made\n"
    "from the package's version 1.0.0 (Debian 12); --any_version accepts others.\n"
    "\n"
    "Exit 0 when both are written and match; 1 otherwise, naming the file.\n";

std::string Sha256Hex(const std::string& bytes) {
  unsigned char md[EVP_MAX_MD_SIZE];
  unsigned int n = 0;
  EVP_Digest(bytes.data(), bytes.size(), md, &n, EVP_sha256(), nullptr);
  return absl::BytesToHexString(absl::string_view(reinterpret_cast<const char*>(md), n));
}

absl::Status Data(const Args& args) {
  if (args.positional.size() != 1 || args.positional[0] != "austen") {
    return absl::InvalidArgumentError("expected: shardline data austen --out DIR (see --help)");
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

}  // namespace

int DataCommand(int argc, char** argv) {
  Args args;
  absl::Status parsed = ParseArgs(argc, argv, 2, {{"out", "rdb"}, {}, {"any_version"}}, "shardline data", &args);
  return RunCommand(parsed, args, kHelp, "shardline data", Data);
}

}  // namespace shardline
