#include "worker/collective/grpc_frame.h"

#include <cstring>
#include <vector>

#include "worker/collective/comm_memory.h"

namespace shardline {

void SendTracker::Add() {
  MutexLock lock(&mu_);
  ++outstanding_;
}

void SendTracker::Release() {
  MutexLock lock(&mu_);
  --outstanding_;
}

bool SendTracker::WaitIdle(absl::Time deadline) {
  MutexLock lock(&mu_);
  auto idle = [this]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) { return outstanding_ == 0; };
  return mu_.AwaitWithDeadline(absl::Condition(&idle), deadline);
}

namespace {

// Protobuf wire-format keys of Frame's fields: (field << 3) | wire type.
constexpr uint8_t kSrcRankKey = (1 << 3) | 0;
constexpr uint8_t kGenerationKey = (2 << 3) | 0;
constexpr uint8_t kTagKey = (3 << 3) | 0;
constexpr uint8_t kPayloadKey = (4 << 3) | 2;

void PutVarint(uint64_t v, std::string* out) {
  while (v >= 0x80) {
    out->push_back(static_cast<char>(v | 0x80));
    v >>= 7;
  }
  out->push_back(static_cast<char>(v));
}

// The payload of a received frame: a byte range over gRPC's slices.
class SlicePayload : public Payload {
 public:
  SlicePayload(std::vector<grpc::Slice> slices, size_t first, size_t offset, size_t size)
      : Payload(size), slices_(std::move(slices)), first_(first), offset_(offset), size_(size) {}
  size_t size() const override { return size_; }
  void ForEachPiece(const std::function<void(absl::Span<const char>)>& fn) const override {
    size_t left = size_, offset = offset_;
    for (size_t i = first_; i < slices_.size() && left > 0; ++i, offset = 0) {
      const size_t n = std::min(left, slices_[i].size() - offset);
      fn(absl::Span<const char>(reinterpret_cast<const char*>(slices_[i].begin()) + offset, n));
      left -= n;
    }
  }

 private:
  std::vector<grpc::Slice> slices_;
  size_t first_, offset_, size_;
};

// Reads bytes sequentially across slices.
class Cursor {
 public:
  explicit Cursor(const std::vector<grpc::Slice>& slices) : slices_(slices) { SkipEmpty(); }
  bool done() const { return index_ >= slices_.size(); }
  size_t index() const { return index_; }
  size_t offset() const { return offset_; }

  bool ReadByte(uint8_t* b) {
    if (done()) return false;
    *b = slices_[index_].begin()[offset_];
    Advance(1);
    return true;
  }
  bool ReadVarint(uint64_t* v) {
    *v = 0;
    for (int shift = 0; shift < 64; shift += 7) {
      uint8_t b;
      if (!ReadByte(&b)) return false;
      *v |= static_cast<uint64_t>(b & 0x7F) << shift;
      if ((b & 0x80) == 0) return true;
    }
    return false;
  }
  bool Skip(uint64_t n) {
    while (n > 0) {
      if (done()) return false;
      const size_t here = std::min<uint64_t>(n, slices_[index_].size() - offset_);
      Advance(here);
      n -= here;
    }
    return true;
  }

 private:
  void Advance(size_t n) {
    offset_ += n;
    if (offset_ == slices_[index_].size()) {
      ++index_;
      offset_ = 0;
      SkipEmpty();
    }
  }
  void SkipEmpty() {
    while (index_ < slices_.size() && slices_[index_].size() == 0) ++index_;
  }

  const std::vector<grpc::Slice>& slices_;
  size_t index_ = 0;
  size_t offset_ = 0;
};

grpc::Status Malformed(const char* what) {
  return grpc::Status(grpc::StatusCode::INTERNAL, std::string("malformed transport frame: ") + what);
}

}  // namespace
}  // namespace shardline

namespace grpc {

Status SerializationTraits<shardline::OutFrame, void>::Serialize(const shardline::OutFrame& f,
                                                                  ByteBuffer* buffer, bool* own_buffer) {
  using namespace shardline;  // NOLINT: the wire constants live there
  const absl::Span<const char> payload = f.owned.empty() ? f.payload : absl::Span<const char>(f.owned);
  std::string header;
  header.push_back(static_cast<char>(kSrcRankKey));
  PutVarint(static_cast<uint32_t>(f.src_rank), &header);
  header.push_back(static_cast<char>(kGenerationKey));
  PutVarint(f.generation, &header);
  header.push_back(static_cast<char>(kTagKey));
  PutVarint(f.tag, &header);
  header.push_back(static_cast<char>(kPayloadKey));
  PutVarint(payload.size(), &header);
  // The payload is copied once, into a slice gRPC owns. (A slice pointing at
  // the caller's memory, released by a destroy callback, would save that
  // copy, but gRPC 1.51 keeps payloads of 128 KiB and less referenced until
  // the stream ends - measured: see docs/collectives.md - so the memory
  // could not be handed back at the end of an operation.) The copy is
  // counted in the process's communication memory until gRPC lets go of it.
  if (payload.empty()) {
    Slice slice(header.data(), header.size());
    *buffer = ByteBuffer(&slice, 1);
  } else {
    char* copy = new char[payload.size()];
    std::memcpy(copy, payload.data(), payload.size());
    AddCommMemory(static_cast<int64_t>(payload.size()));
    Slice slices[2] = {Slice(header.data(), header.size()), Slice(copy, payload.size(), [](void* p, size_t n) {
                         delete[] static_cast<char*>(p);
                         AddCommMemory(-static_cast<int64_t>(n));
                       })};
    *buffer = ByteBuffer(slices, 2);
  }
  *own_buffer = true;
  return Status::OK;
}

Status SerializationTraits<shardline::OutFrame, void>::Deserialize(ByteBuffer*, shardline::OutFrame*) {
  return Status(StatusCode::UNIMPLEMENTED, "OutFrame is send-only");
}

Status SerializationTraits<shardline::InFrame, void>::Serialize(const shardline::InFrame&, ByteBuffer*, bool*) {
  return Status(StatusCode::UNIMPLEMENTED, "InFrame is receive-only");
}

Status SerializationTraits<shardline::InFrame, void>::Deserialize(ByteBuffer* buffer, shardline::InFrame* f) {
  using namespace shardline;  // NOLINT
  std::vector<Slice> slices;
  const Status dumped = buffer->Dump(&slices);
  buffer->Clear();
  if (!dumped.ok()) return dumped;
  Cursor cursor(slices);
  size_t payload_index = 0, payload_offset = 0;
  uint64_t payload_size = 0;
  bool have_payload = false;
  while (!cursor.done()) {
    uint64_t key, v;
    if (!cursor.ReadVarint(&key)) return Malformed("truncated field key");
    switch (key & 7) {
      case 0:
        if (!cursor.ReadVarint(&v)) return Malformed("truncated varint");
        if (key == kSrcRankKey) f->src_rank = static_cast<int32_t>(v);
        if (key == kGenerationKey) f->generation = v;
        if (key == kTagKey) f->tag = v;
        break;
      case 2:
        if (!cursor.ReadVarint(&v)) return Malformed("truncated length");
        if (key == kPayloadKey) {
          payload_index = cursor.index();
          payload_offset = cursor.offset();
          payload_size = v;
          have_payload = true;
        }
        if (!cursor.Skip(v)) return Malformed("field runs past the end of the message");
        break;
      case 1:
        if (!cursor.Skip(8)) return Malformed("truncated fixed64");
        break;
      case 5:
        if (!cursor.Skip(4)) return Malformed("truncated fixed32");
        break;
      default:
        return Malformed("unknown wire type");
    }
  }
  if (!have_payload || payload_size == 0) {
    f->payload = std::make_unique<StringPayload>("");
  } else {
    f->payload = std::make_unique<SlicePayload>(std::move(slices), payload_index, payload_offset, payload_size);
  }
  return Status::OK;
}

}  // namespace grpc
