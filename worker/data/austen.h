// Jane Austen's six novels (public domain) from Debian's r-cran-janeaustenr,
// read from the package's data file without R (rdata.h), as the default
// text corpus of the language models.
//
// Each novel is one character vector, a string per line; its text is the
// lines joined by "\n", ending in "\n". The training text is five novels in
// order of publication (Sense and Sensibility, Pride and Prejudice,
// Mansfield Park, Emma, Northanger Abbey); the validation text is the last,
// Persuasion (1818), about 12% of the bytes.
//
//   ASSIGN_OR_RETURN(AustenText text, ReadAusten(env, FindAustenRdata(env)));
//   // text.train.size() == 3558175, text.val.size() == 466854 (package 1.0.0)
#ifndef SHARDLINE_WORKER_DATA_AUSTEN_H_
#define SHARDLINE_WORKER_DATA_AUSTEN_H_

#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "common/platform/env.h"

namespace shardline {

// Where the package's data file is looked for, in order: where dpkg installs
// it, and where deploy/install-deps.sh unpacks the package without R.
std::vector<std::string> AustenRdataPaths();

// The first of AustenRdataPaths that exists; NotFound naming them all, and
// how to get the package, if none does.
absl::StatusOr<std::string> FindAustenRdata(Env* env);

struct AustenText {
  std::string train;
  std::string val;
};

// The corpus from the Rdata.rdb at `path`. Fails naming the file if a novel
// is missing or its records do not parse.
absl::StatusOr<AustenText> ReadAusten(Env* env, const std::string& path);

// SHA-256 (hex) of train.txt and val.txt as made from r-cran-janeaustenr
// 1.0.0, Debian 12's: what `shardline data austen` checks it wrote.
inline constexpr char kAustenTrainSha256[] = "e7f350a699a3253d94ef05d5798aa581ce70f4f0eecd7786886d6f6457fe071a";
inline constexpr char kAustenValSha256[] = "8061549557aebd2fd6e353d18d9197cb707029112bd52d4d8b174583a925848a";

}  // namespace shardline

#endif  // SHARDLINE_WORKER_DATA_AUSTEN_H_
