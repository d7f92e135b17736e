#include "worker/data/idx.h"

#include "worker/data/inflate_cache.h"

#include <zlib.h>

#include "absl/strings/str_cat.h"
#include "common/encoding/checked_math.h"
#include "common/platform/status_macros.h"

namespace shardline {

absl::StatusOr<std::string> Gunzip(absl::string_view compressed, absl::string_view name) {
  z_stream zs = {};
  if (inflateInit2(&zs, 15 + 16) != Z_OK) {  // 16: expect a gzip header
    return absl::InternalError(absl::StrCat(name, ": cannot initialise zlib"));
  }
  zs.next_in = reinterpret_cast<Bytef*>(const_cast<char*>(compressed.data()));
  zs.avail_in = static_cast<uInt>(compressed.size());
  // Sized by the gzip trailer's ISIZE (the inflated size mod 2^32) when it
  // is at most 16x the input (a damaged trailer then costs at most that, for
  // as long as it takes to find the damage), so the payload is held once
  // and exactly; otherwise grown as it comes.
  size_t guess = std::max<size_t>(compressed.size() * 4, 1 << 16);
  if (compressed.size() >= 18) {
    const auto* t = reinterpret_cast<const unsigned char*>(compressed.data() + compressed.size() - 4);
    const size_t isize = size_t{t[0]} | size_t{t[1]} << 8 | size_t{t[2]} << 16 | size_t{t[3]} << 24;
    if (isize > 0 && isize / 16 <= compressed.size()) guess = isize;
  }
  std::string out;
  out.resize(guess);
  int rc = Z_OK;
  while (rc == Z_OK) {
    if (zs.total_out == out.size()) out.resize(out.size() * 2);
    zs.next_out = reinterpret_cast<Bytef*>(&out[zs.total_out]);
    zs.avail_out = static_cast<uInt>(out.size() - zs.total_out);
    rc = inflate(&zs, Z_NO_FLUSH);
    if (rc == Z_BUF_ERROR && zs.avail_in == 0) break;  // input ended early
    if (rc == Z_BUF_ERROR) rc = Z_OK;                  // output full: grow
  }
  const size_t produced = zs.total_out;
  const std::string detail = zs.msg ? zs.msg : "";
  inflateEnd(&zs);
  if (rc != Z_STREAM_END) {
    if (rc == Z_BUF_ERROR) {
      return absl::DataLossError(absl::StrCat(
          name, ": truncated gzip stream (ended after ", compressed.size(),
          " compressed bytes, ", produced, " inflated)"));
    }
    return absl::DataLossError(absl::StrCat(name, ": corrupt gzip stream",
                                            detail.empty() ? "" : ": ", detail));
  }
  out.resize(produced);
  if (out.capacity() > produced + (produced >> 4)) out.shrink_to_fit();  // grown past it: give the rest back
  return out;
}

namespace {

// Checks the IDX header of `bytes` and that the payload fits it; sets the
// dimensions and the header's length.
absl::Status ParseHeader(absl::string_view bytes, absl::string_view name, int want_dims, std::vector<int64_t>* dims,
                         size_t* header_bytes) {
  auto be32 = [&](size_t at) {
    const auto* p = reinterpret_cast<const unsigned char*>(bytes.data() + at);
    return (uint32_t{p[0]} << 24) | (uint32_t{p[1]} << 16) | (uint32_t{p[2]} << 8) | p[3];
  };
  if (bytes.size() < 4) {
    return absl::DataLossError(absl::StrCat(name, ": too short for an IDX header (",
                                            bytes.size(), " bytes)"));
  }
  const uint32_t magic = be32(0);
  const uint32_t rank = magic & 0xFF;
  if ((magic >> 8) != 0x08 || rank == 0 || rank > 4) {
    char hex[16];
    snprintf(hex, sizeof(hex), "0x%08x", magic);
    return absl::DataLossError(absl::StrCat(
        name, ": bad IDX magic number ", hex,
        " (want 0x000008NN: unsigned bytes, NN = 1..4 dimensions)"));
  }
  if (want_dims > 0 && rank != static_cast<uint32_t>(want_dims)) {
    char hex[16];
    snprintf(hex, sizeof(hex), "0x%08x", magic);
    return absl::DataLossError(absl::StrCat(name, ": bad IDX magic number ", hex, " (declares ", rank,
                                            " dimensions; this file must have ", want_dims, ")"));
  }
  const size_t header = 4 + 4 * rank;
  if (bytes.size() < header) {
    return absl::DataLossError(absl::StrCat(name, ": truncated IDX header"));
  }
  uint64_t count = 1;
  dims->clear();
  for (uint32_t i = 0; i < rank; ++i) {
    dims->push_back(be32(4 + 4 * i));
    // Four dimensions of up to 2^32 each can wrap 64 bits to the payload's
    // size: a product that does not fit is no file's.
    const std::optional<uint64_t> more = CheckedMul(count, static_cast<uint64_t>(dims->back()));
    if (!more.has_value()) {
      return absl::DataLossError(absl::StrCat(name, ": the IDX header's dimensions multiply past 2^64 bytes"));
    }
    count = *more;
  }
  const uint64_t payload = bytes.size() - header;
  if (payload != count) {
    return absl::DataLossError(absl::StrCat(
        name, ": IDX payload is ", payload, " bytes but the header's dimensions need ",
        count, payload < count ? " (truncated file)" : " (trailing bytes)"));
  }
  *header_bytes = header;
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<IdxArray> ParseIdx(absl::string_view bytes, absl::string_view name, int want_dims) {
  IdxArray out;
  size_t header = 0;
  RETURN_IF_ERROR(ParseHeader(bytes, name, want_dims, &out.dims, &header));
  out.data.assign(bytes.data() + header, bytes.size() - header);
  return out;
}

absl::StatusOr<IdxArray> ReadIdxFile(Env* env, const std::string& path, int want_dims,
                                     const std::string& cache_dir) {
  ASSIGN_OR_RETURN(std::string raw, InflateCached(env, path, cache_dir));
  IdxArray out;
  size_t header = 0;
  RETURN_IF_ERROR(ParseHeader(raw, path, want_dims, &out.dims, &header));
  raw.erase(0, header);  // in place: no second copy of the payload
  out.data = std::move(raw);
  return out;
}

}  // namespace shardline
