#include "common/encoding/sha256.h"

#include <openssl/evp.h>

#include "absl/strings/escaping.h"
#include <cstdlib>

namespace shardline {

struct Sha256::Context {
  EVP_MD_CTX* md = EVP_MD_CTX_new();
  ~Context() { EVP_MD_CTX_free(md); }
};

// OpenSSL's digest calls fail only when it cannot allocate: as a failed
// new does, that ends the process.
namespace {
void Check(bool ok) {
  if (!ok) std::abort();
}
}  // namespace

Sha256::Sha256() : ctx_(std::make_unique<Context>()) {
  Check(ctx_->md != nullptr);
  Reset();
}

Sha256::~Sha256() = default;

void Sha256::Reset() { Check(EVP_DigestInit_ex(ctx_->md, EVP_sha256(), nullptr) == 1); }

void Sha256::Update(absl::string_view bytes) {
  Check(EVP_DigestUpdate(ctx_->md, bytes.data(), bytes.size()) == 1);
}

std::string Sha256::HexDigest() {
  unsigned char md[EVP_MAX_MD_SIZE];
  unsigned int n = 0;
  Check(EVP_DigestFinal_ex(ctx_->md, md, &n) == 1);
  return absl::BytesToHexString(absl::string_view(reinterpret_cast<const char*>(md), n));
}

std::string Sha256Hex(absl::string_view bytes) {
  Sha256 h;
  h.Update(bytes);
  return h.HexDigest();
}

}  // namespace shardline
