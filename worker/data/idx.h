// Reading the IDX format (LeCun's MNIST container) from gzipped files, as
// shipped by Debian's dataset-fashion-mnist.
//
//   ASSIGN_OR_RETURN(IdxArray images, ReadIdxFile(env, dir + "/train-images-idx3-ubyte.gz"));
//   // images.dims == {60000, 28, 28}; images.data has 60000*28*28 bytes
//
// Every error names the file and what is wrong (bad gzip stream, truncated
// payload, wrong magic number, size mismatch).
#ifndef SHARDLINE_WORKER_DATA_IDX_H_
#define SHARDLINE_WORKER_DATA_IDX_H_

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "common/platform/env.h"

namespace shardline {

// An unsigned-byte IDX array.
struct IdxArray {
  std::vector<int64_t> dims;
  std::string data;  // row-major, product(dims) bytes
};

// Inflates a complete gzip stream. `name` is used in errors.
absl::StatusOr<std::string> Gunzip(absl::string_view compressed, absl::string_view name);

// Parses raw (decompressed) IDX bytes: magic 0x0000 08 NN (unsigned byte,
// NN dimensions), NN big-endian uint32 sizes, then the payload, which must be
// exactly product(dims) bytes. With `want_dims` > 0 the magic number must
// declare that many dimensions (checked before any size is read, so a wrong
// magic number is reported as one, not as a size mismatch).
absl::StatusOr<IdxArray> ParseIdx(absl::string_view bytes, absl::string_view name, int want_dims = 0);

// ReadFile + Gunzip + ParseIdx; the inflated bytes come from (and are kept
// in) `cache_dir` when it is not empty (inflate_cache.h).
absl::StatusOr<IdxArray> ReadIdxFile(Env* env, const std::string& path, int want_dims = 0,
                                     const std::string& cache_dir = "");

}  // namespace shardline

#endif  // SHARDLINE_WORKER_DATA_IDX_H_
