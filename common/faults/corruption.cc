#include "common/faults/corruption.h"

#include <fcntl.h>
#include <unistd.h>

#include <atomic>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <vector>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"

namespace shardline {
namespace {

constexpr char kVariable[] = "SHARDLINE_CORRUPT";

constexpr CorruptSite kSites[] = {CorruptSite::kGathered, CorruptSite::kGradient, CorruptSite::kReduced,
                                  CorruptSite::kParam, CorruptSite::kMoment, CorruptSite::kOuter};

absl::Status Bad(absl::string_view text, absl::string_view why) {
  return absl::InvalidArgumentError(absl::StrCat(kVariable, "=\"", text, "\": ", why,
                                                 " (expected <rank>:<step or *>:<site>:<bit>[:<marker file>], sites "
                                                 "gathered, gradient, reduced, param, moment, outer; bit 0-31)"));
}

// The spec, parsed once per process: nullopt when unset or unparsable
// (CorruptionFromEnv reports the latter).
const std::optional<CorruptionSpec>& Armed() {
  static const std::optional<CorruptionSpec> spec = [] {
    absl::StatusOr<std::optional<CorruptionSpec>> s = CorruptionFromEnv();
    return s.ok() ? *s : std::nullopt;
  }();
  return spec;
}

}  // namespace

absl::string_view CorruptSiteName(CorruptSite site) {
  switch (site) {
    case CorruptSite::kGathered: return "gathered";
    case CorruptSite::kGradient: return "gradient";
    case CorruptSite::kReduced: return "reduced";
    case CorruptSite::kParam: return "param";
    case CorruptSite::kMoment: return "moment";
    case CorruptSite::kOuter: return "outer";
  }
  return "?";
}

absl::StatusOr<CorruptionSpec> ParseCorruption(absl::string_view text) {
  const std::vector<std::string> parts = absl::StrSplit(text, absl::MaxSplits(':', 4));
  if (parts.size() < 4) return Bad(text, "too few fields");
  CorruptionSpec s;
  if (!absl::SimpleAtoi(parts[0], &s.rank) || s.rank < 0) return Bad(text, "the rank is not a rank");
  if (parts[1] == "*") {
    s.step = kEveryStep;
  } else if (!absl::SimpleAtoi(parts[1], &s.step) || s.step < 0) {
    return Bad(text, "the step is not a step");
  }
  bool known = false;
  for (CorruptSite site : kSites) {
    if (parts[2] == CorruptSiteName(site)) {
      s.site = site;
      known = true;
    }
  }
  if (!known) return Bad(text, absl::StrCat("no site is called \"", parts[2], "\""));
  if (!absl::SimpleAtoi(parts[3], &s.bit) || s.bit < 0 || s.bit > 31) return Bad(text, "the bit is not 0-31");
  if (parts.size() == 5) {
    if (parts[4].empty()) return Bad(text, "the marker file is empty");
    s.marker = parts[4];
  }
  return s;
}

absl::StatusOr<std::optional<CorruptionSpec>> CorruptionFromEnv() {
  const char* v = std::getenv(kVariable);
  if (v == nullptr || *v == '\0') return std::optional<CorruptionSpec>();
  absl::StatusOr<CorruptionSpec> s = ParseCorruption(v);
  if (!s.ok()) return s.status();
  return std::optional<CorruptionSpec>(*s);
}

bool CorruptionDue(CorruptSite site, int rank, int64_t step) {
  const std::optional<CorruptionSpec>& spec = Armed();
  if (!spec.has_value() || spec->site != site || spec->rank != rank) return false;
  if (spec->step == kEveryStep) return true;
  if (spec->step != step) return false;
  static std::atomic<bool> fired{false};
  if (fired.exchange(true)) return false;
  if (spec->marker.empty()) return true;
  const int fd = open(spec->marker.c_str(), O_WRONLY | O_CREAT | O_EXCL, 0644);
  if (fd < 0) return false;
  close(fd);
  return true;
}

void FlipFloatBit(float* v, int bit) {
  uint32_t u;
  std::memcpy(&u, v, sizeof(u));
  u ^= 1u << bit;
  std::memcpy(v, &u, sizeof(u));
}

bool MaybeCorrupt(CorruptSite site, int rank, int64_t step, float* v, int64_t index) {
  if (!CorruptionDue(site, rank, step)) return false;
  const float before = *v;
  FlipFloatBit(v, Armed()->bit);
  std::fprintf(stderr, "%s: rank %d flipped bit %d of the %s value at index %ld in step %ld (%.9g -> %.9g)\n",
               kVariable, rank, Armed()->bit, std::string(CorruptSiteName(site)).c_str(), static_cast<long>(index),
               static_cast<long>(step), before, *v);
  std::fflush(stderr);
  return true;
}

}  // namespace shardline
