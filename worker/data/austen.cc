#include "worker/data/austen.h"

#include <map>

#include "absl/strings/ascii.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "common/platform/status_macros.h"
#include "worker/data/rdata.h"

namespace shardline {
namespace {

// Each novel's first line (its title), upper-cased, in publication order;
// the last is the validation text.
constexpr const char* kNovels[] = {"SENSE AND SENSIBILITY", "PRIDE AND PREJUDICE", "MANSFIELD PARK", "EMMA",
                                   "NORTHANGER ABBEY",      "PERSUASION"};

}  // namespace

std::vector<std::string> AustenRdataPaths() {
  return {"/usr/lib/R/site-library/janeaustenr/data/Rdata.rdb",
          "/opt/shardline/janeaustenr/usr/lib/R/site-library/janeaustenr/data/Rdata.rdb"};
}

absl::StatusOr<std::string> FindAustenRdata(Env* env) {
  const std::vector<std::string> paths = AustenRdataPaths();
  for (const std::string& p : paths) {
    if (env->FileExists(p)) return p;
  }
  return absl::NotFoundError(absl::StrCat(
      "Jane Austen's novels not found (looked for ", absl::StrJoin(paths, " and "),
      "); deploy/install-deps.sh unpacks Debian's r-cran-janeaustenr there, or pass --rdb PATH"));
}

absl::StatusOr<AustenText> ReadAusten(Env* env, const std::string& path) {
  ASSIGN_OR_RETURN(std::string rdb, env->ReadFile(path, kMaxDataFileBytes));
  ASSIGN_OR_RETURN(std::vector<RStrings> objects, ReadRdataStrings(rdb, path));
  std::map<std::string, std::string> by_title;
  for (const RStrings& novel : objects) {
    if (novel.strings.empty()) continue;
    by_title[absl::AsciiStrToUpper(novel.strings.front())] = absl::StrCat(absl::StrJoin(novel.strings, "\n"), "\n");
  }
  AustenText text;
  for (const char* title : kNovels) {
    auto it = by_title.find(title);
    if (it == by_title.end()) {
      return absl::InvalidArgumentError(
          absl::StrCat(path, ": no novel titled \"", title, "\" among its ", objects.size(), " records"));
    }
    std::string& into = std::string(title) == kNovels[std::size(kNovels) - 1] ? text.val : text.train;
    into += it->second;
  }
  return text;
}

}  // namespace shardline
