#include "tests/util/pki.h"

#include <cstdlib>

#include "common/platform/env.h"

namespace shardline {
namespace {

std::string Escape(const std::string& s) {
  std::string out;
  for (char c : s) {
    if (c == '"' || c == '$' || c == '\\' || c == '`') out += '\\';
    out += c;
  }
  return out;
}

}  // namespace

TestPki::TestPki(const std::string& dir) : dir_(dir) {
  const std::string script = "set -e; rm -rf '" + dir + "'; mkdir -p '" + dir + "'; cd '" + dir + "'\n" + R"(
    ca() { openssl req -x509 -newkey rsa:2048 -nodes -keyout $1.key -out $1.pem -days 2 -subj /CN=$1 2>/dev/null; }
    leaf() {  # name ca days
      openssl req -newkey rsa:2048 -nodes -keyout $1.key -out $1.csr -subj /CN=$1 2>/dev/null
      printf 'subjectAltName=IP:127.0.0.1,DNS:localhost' > san.ext
      openssl x509 -req -in $1.csr -CA $2.pem -CAkey $2.key -CAcreateserial -out $1.pem -days $3 -extfile san.ext 2>/dev/null
    }
    ca ca; ca other_ca
    leaf server ca 2; leaf client ca 2; leaf stranger other_ca 2; leaf expired ca -1
    chmod 600 *.key
  )";
  ok_ = std::system(("bash -c \"" + Escape(script) + "\"").c_str()) == 0;
}

TlsPem TestPki::Pem(const std::string& leaf, const std::string& ca) const {
  auto read = [&](const std::string& name) { return *Env::Default()->ReadFile(File(name), kMaxDataFileBytes); };
  return TlsPem{read(leaf + ".pem"), read(leaf + ".key"), read(ca + ".pem")};
}

}  // namespace shardline
