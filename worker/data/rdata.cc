#include "worker/data/rdata.h"

#include <zlib.h>

#include <algorithm>
#include <cstdint>
#include <cstring>

#include "absl/strings/str_cat.h"

namespace shardline {
namespace {

constexpr int kStrSxp = 16;   // character vector
constexpr int kCharSxp = 9;   // one string
constexpr uint32_t kTypeMask = 0xff;

// A big-endian reader over bytes; every read is bounds-checked.
class XdrReader {
 public:
  explicit XdrReader(absl::string_view bytes) : bytes_(bytes) {}
  bool Int(int32_t* v) {
    if (bytes_.size() - pos_ < 4) return false;
    const auto* p = reinterpret_cast<const unsigned char*>(bytes_.data() + pos_);
    *v = static_cast<int32_t>(uint32_t{p[0]} << 24 | uint32_t{p[1]} << 16 | uint32_t{p[2]} << 8 | uint32_t{p[3]});
    pos_ += 4;
    return true;
  }
  bool Bytes(size_t n, absl::string_view* out) {
    if (bytes_.size() - pos_ < n) return false;
    *out = bytes_.substr(pos_, n);
    pos_ += n;
    return true;
  }
  size_t pos() const { return pos_; }

 private:
  absl::string_view bytes_;
  size_t pos_ = 0;
};

// Inflates one zlib stream from the front of `in` into exactly `size` bytes;
// *consumed is how many bytes of `in` the stream took.
absl::StatusOr<std::string> InflateExactly(absl::string_view in, size_t size, size_t* consumed) {
  // One byte of room more than stated, to notice a stream that is longer.
  std::string out(size + 1, '\0');
  z_stream zs;
  std::memset(&zs, 0, sizeof(zs));
  if (inflateInit(&zs) != Z_OK) return absl::InternalError("zlib: inflateInit failed");
  zs.next_in = reinterpret_cast<Bytef*>(const_cast<char*>(in.data()));
  zs.avail_in = static_cast<uInt>(std::min<size_t>(in.size(), UINT32_MAX));
  zs.next_out = reinterpret_cast<Bytef*>(out.data());
  zs.avail_out = static_cast<uInt>(out.size());
  const int rc = inflate(&zs, Z_FINISH);
  const size_t produced = out.size() - zs.avail_out;
  *consumed = in.size() - zs.avail_in;
  inflateEnd(&zs);
  if (produced > size) {
    return absl::DataLossError(absl::StrCat("the stream inflates to more than its stated ", size, " bytes"));
  }
  if (rc != Z_STREAM_END) {
    return absl::DataLossError(absl::StrCat("the zlib stream is corrupt or cut short (zlib code ", rc, ")"));
  }
  if (produced != size) {
    return absl::DataLossError(absl::StrCat("the stream inflates to ", produced, " bytes, not its stated ", size));
  }
  out.resize(size);
  return out;
}

}  // namespace

absl::StatusOr<RStrings> ParseRSerializedStrings(absl::string_view bytes) {
  if (bytes.substr(0, 2) != "X\n") {
    return absl::InvalidArgumentError("not R's XDR serialisation (does not start with \"X\\n\")");
  }
  XdrReader r(bytes.substr(2));
  int32_t version = 0, writer = 0, reader = 0;
  if (!r.Int(&version) || !r.Int(&writer) || !r.Int(&reader)) return absl::DataLossError("cut short in the header");
  if (version != 2 && version != 3) {
    return absl::InvalidArgumentError(absl::StrCat("serialisation format ", version, " (2 or 3 are read)"));
  }
  if (version == 3) {
    int32_t n = 0;
    absl::string_view encoding;
    if (!r.Int(&n) || n < 0 || !r.Bytes(static_cast<size_t>(n), &encoding)) {
      return absl::DataLossError("cut short in the native encoding's name");
    }
  }
  int32_t flags = 0, length = 0;
  if (!r.Int(&flags) || !r.Int(&length)) return absl::DataLossError("cut short before the object");
  if ((static_cast<uint32_t>(flags) & kTypeMask) != kStrSxp) {
    return absl::InvalidArgumentError(
        absl::StrCat("the object is of R type ", static_cast<uint32_t>(flags) & kTypeMask, ", not a character vector (16)"));
  }
  if (length < 0) return absl::InvalidArgumentError(absl::StrCat("a character vector of length ", length));
  RStrings out;
  // Each element takes at least 8 bytes: bound the reservation by the input.
  out.strings.reserve(std::min<size_t>(static_cast<size_t>(length), bytes.size() / 8));
  for (int32_t i = 0; i < length; ++i) {
    int32_t eflags = 0, n = 0;
    if (!r.Int(&eflags) || !r.Int(&n)) return absl::DataLossError(absl::StrCat("cut short at element ", i));
    if ((static_cast<uint32_t>(eflags) & kTypeMask) != kCharSxp) {
      return absl::InvalidArgumentError(absl::StrCat("element ", i, " is of R type ",
                                                     static_cast<uint32_t>(eflags) & kTypeMask, ", not a string (9)"));
    }
    if (n == -1) {
      out.strings.emplace_back();
      ++out.na;
      continue;
    }
    absl::string_view s;
    if (n < 0 || !r.Bytes(static_cast<size_t>(n), &s)) {
      return absl::DataLossError(absl::StrCat("cut short in element ", i, " (", n, " bytes)"));
    }
    out.strings.emplace_back(s);
  }
  return out;
}

absl::StatusOr<std::vector<RStrings>> ReadRdataStrings(absl::string_view rdb, absl::string_view name,
                                                       const RdataLimits& limits) {
  std::vector<RStrings> objects;
  size_t offset = 0;
  int64_t total = 0;
  while (offset < rdb.size()) {
    const size_t at = offset;
    const int index = static_cast<int>(objects.size());
    auto bad = [&](const absl::Status& s) {
      return absl::Status(s.code(), absl::StrCat(name, ": record ", index, " at byte ", at, ": ", s.message()));
    };
    XdrReader r(rdb.substr(offset));
    int32_t size = 0;
    if (!r.Int(&size)) return bad(absl::DataLossError("cut short in its length"));
    if (size < 0 || size > limits.max_object_bytes || total + size > limits.max_total_bytes) {
      return bad(absl::InvalidArgumentError(absl::StrCat("states ", size, " bytes; at most ", limits.max_object_bytes,
                                                         " per record and ", limits.max_total_bytes, " in all")));
    }
    size_t consumed = 0;
    absl::StatusOr<std::string> bytes = InflateExactly(rdb.substr(offset + 4), static_cast<size_t>(size), &consumed);
    if (!bytes.ok()) return bad(bytes.status());
    absl::StatusOr<RStrings> strings = ParseRSerializedStrings(*bytes);
    if (!strings.ok()) return bad(strings.status());
    objects.push_back(std::move(*strings));
    total += size;
    offset += 4 + consumed;
  }
  if (objects.empty()) return absl::InvalidArgumentError(absl::StrCat(name, ": no records (an empty file)"));
  return objects;
}

}  // namespace shardline
