#include "tests/util/proof.h"

#include <chrono>

#include "common/net/auth_proof.h"
#include "common/net/grpc_util.h"
#include "proto/coordinator.grpc.pb.h"

namespace shardline {

std::string RegisterMethod() { return coordinator::RegisterRequest::descriptor()->full_name(); }
std::string StatusMethod() { return coordinator::StatusRequest::descriptor()->full_name(); }
std::string HeartbeatMethod() { return coordinator::WorkerReport::descriptor()->full_name(); }

std::string MethodOfPath(const std::string& path) {
  const std::string name = path.substr(path.rfind('/') + 1);
  const google::protobuf::MethodDescriptor* m = coordinator::RegisterRequest::descriptor()->file()->FindServiceByName("Coordinator")->FindMethodByName(name);
  return m == nullptr ? "" : m->input_type()->full_name();
}

std::string ProofHeader(const std::string& address, const std::string& secret, const std::string& method) {
  if (secret.empty()) return "";
  absl::StatusOr<Credential> c = ParseCredential(secret);
  if (!c.ok()) return "";
  auto stub = coordinator::Coordinator::NewStub(
      grpc::CreateCustomChannel(address, grpc::InsecureChannelCredentials(), DefaultChannelArguments()));
  grpc::ClientContext ctx;
  ctx.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(30));
  ctx.set_wait_for_ready(true);
  coordinator::HelloRequest request;
  request.set_rank(c->rank);
  request.set_client_nonce(*NewNonce());
  coordinator::HelloReply reply;
  if (!stub->Hello(&ctx, request, &reply).ok()) return "";
  CallProof p;
  p.rank = c->rank;
  p.client_nonce = request.client_nonce();
  p.server_nonce = reply.server_nonce();
  p.seq = 0;
  p.proof = ClientProof(c->key, p.client_nonce, p.server_nonce, method, p.seq);
  return FormatCallProof(p);
}

void AddProof(grpc::ClientContext* ctx, const std::string& address, const std::string& secret,
              const std::string& method) {
  const std::string header = ProofHeader(address, secret, method);
  if (!header.empty()) ctx->AddMetadata(kProofMetadataKey, header);
}

}  // namespace shardline
