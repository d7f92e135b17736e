// A data-plane frame as gRPC hands its bytes to the transport.
#include <cstddef>
#include <cstdint>

#include "grpcpp/support/byte_buffer.h"
#include "grpcpp/support/slice.h"
#include "worker/collective/grpc_frame.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  // Split into two slices, as gRPC may.
  const size_t half = size / 2;
  grpc::Slice slices[2] = {grpc::Slice(data, half), grpc::Slice(data + half, size - half)};
  grpc::ByteBuffer buffer(slices, 2);
  shardline::InFrame frame;
  if (grpc::SerializationTraits<shardline::InFrame>::Deserialize(&buffer, &frame).ok() && frame.payload != nullptr) {
    std::string out(frame.payload->size(), '\0');
    (void)shardline::CopyPayloadInto(*frame.payload, absl::MakeSpan(out));
  }
  return 0;
}
