// Inflated copies of gzipped files, kept so that a worker that starts again
// (a replacement after a loss, the next run on the same host) reads the
// bytes instead of inflating them: Fashion-MNIST's training images take
// about 0.25 s of zlib per process start, the copy a few milliseconds. The
// same habit as torchvision's processed-data directory.
//
//   ASSIGN_OR_RETURN(std::string raw, InflateCached(env, dir + "/train-images-idx3-ubyte.gz", cache_dir));
//
// A copy is named by the gzip file's name, size and the CRC32C of all its
// bytes, so a changed source (even one flipped byte) never matches an old
// copy, and ends with the CRC32C of its own
// bytes, so a torn or damaged copy is never used (it is written again).
// Failing to write a copy only costs the next start the inflate.
#ifndef SHARDLINE_WORKER_DATA_INFLATE_CACHE_H_
#define SHARDLINE_WORKER_DATA_INFLATE_CACHE_H_

#include <string>

#include "absl/status/statusor.h"
#include "common/platform/env.h"
#include "proto/config.pb.h"

namespace shardline {

// The inflated bytes of the gzip file `path`, from a copy in `cache_dir` if
// a sound one is there, else inflated (and the copy written). Empty
// `cache_dir`: no copy is read or written. Errors are the gzip file's
// (unreadable, not gzip), naming it.
absl::StatusOr<std::string> InflateCached(Env* env, const std::string& path, const std::string& cache_dir);

// The per-user cache directory: $XDG_CACHE_HOME/shardline, else
// $HOME/.cache/shardline; empty if neither variable is set.
std::string DefaultCacheDir();

// The directory data.keep_inflated and data.cache_dir name: empty (no
// copies) when keep_inflated is off, cache_dir if set, else
// DefaultCacheDir().
std::string InflateCacheDir(const config::DataConfig& data);

}  // namespace shardline

#endif  // SHARDLINE_WORKER_DATA_INFLATE_CACHE_H_
