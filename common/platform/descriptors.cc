#include "common/platform/descriptors.h"

#include <sys/resource.h>

#include <algorithm>

namespace shardline {
namespace {

int64_t AsLimit(rlim_t v) { return v == RLIM_INFINITY ? int64_t{1} << 20 : static_cast<int64_t>(v); }

}  // namespace

int64_t RaiseDescriptorLimit() {
  rlimit r{};
  if (getrlimit(RLIMIT_NOFILE, &r) != 0) return DescriptorLimit();
  if (r.rlim_cur < r.rlim_max) {
    rlimit want = r;
    want.rlim_cur = r.rlim_max;
    // An unlimited hard limit is refused above fs.nr_open: settle for
    // 1 << 20, Linux's default nr_open.
    if (setrlimit(RLIMIT_NOFILE, &want) != 0 && r.rlim_max == RLIM_INFINITY) {
      want.rlim_cur = std::max<rlim_t>(r.rlim_cur, rlim_t{1} << 20);
      setrlimit(RLIMIT_NOFILE, &want);
    }
  }
  return DescriptorLimit();
}

int64_t DescriptorLimit() {
  rlimit r{};
  if (getrlimit(RLIMIT_NOFILE, &r) != 0) return 1024;
  return AsLimit(r.rlim_cur);
}

}  // namespace shardline
