// Certificates for TLS tests, made with openssl in a directory the test
// owns: a CA, a server and a client certificate it signed (both naming
// 127.0.0.1 and localhost), a client certificate from another CA, and an
// expired one.
//
//   TestPki pki(::testing::TempDir() + "/pki");
//   ASSERT_TRUE(pki.ok());
//   auth.set_tls(pki.Pem("server"));   // or pki.File("server.pem")
#ifndef SHARDLINE_TESTS_UTIL_PKI_H_
#define SHARDLINE_TESTS_UTIL_PKI_H_

#include <string>

#include "common/net/rpc_auth.h"

namespace shardline {

class TestPki {
 public:
  explicit TestPki(const std::string& dir);
  bool ok() const { return ok_; }
  // `leaf` is one of server, client, stranger (other CA), expired; `ca` the
  // CA to trust (ca or other_ca).
  TlsPem Pem(const std::string& leaf, const std::string& ca = "ca") const;
  std::string File(const std::string& name) const { return dir_ + "/" + name; }

 private:
  std::string dir_;
  bool ok_ = false;
};

}  // namespace shardline

#endif  // SHARDLINE_TESTS_UTIL_PKI_H_
