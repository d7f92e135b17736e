// SHA-256 (OpenSSL's), for what is named by its content: data sets checked
// against a published digest, token shards and the tokenizer they were made
// with.
//
//   Sha256 h;
//   h.Update(part1);
//   h.Update(part2);
//   std::string hex = h.HexDigest();  // == Sha256Hex(part1 + part2)
#ifndef SHARDLINE_COMMON_ENCODING_SHA256_H_
#define SHARDLINE_COMMON_ENCODING_SHA256_H_

#include <memory>
#include <string>

#include "absl/strings/string_view.h"

namespace shardline {

// An incremental digest. Not thread-safe.
class Sha256 {
 public:
  Sha256();
  ~Sha256();
  Sha256(const Sha256&) = delete;
  Sha256& operator=(const Sha256&) = delete;

  void Update(absl::string_view bytes);
  // The digest of everything updated so far, as 64 lowercase hex digits.
  // Ends this digest: call Update or HexDigest again only after Reset.
  std::string HexDigest();
  void Reset();

 private:
  struct Context;
  std::unique_ptr<Context> ctx_;
};

// The digest of `bytes`, as 64 lowercase hex digits.
std::string Sha256Hex(absl::string_view bytes);

}  // namespace shardline

#endif  // SHARDLINE_COMMON_ENCODING_SHA256_H_
