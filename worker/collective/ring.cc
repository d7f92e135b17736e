#include "worker/collective/ring.h"

#include <algorithm>

#include "absl/strings/str_cat.h"
#include "common/shard.h"
#include "common/status_macros.h"

namespace shardline {
namespace {

absl::Span<const char> Bytes(const float* p, int64_t n) {
  return absl::Span<const char>(reinterpret_cast<const char*>(p), static_cast<size_t>(n) * sizeof(float));
}

absl::Span<char> MutableBytes(float* p, int64_t n) {
  return absl::Span<char>(reinterpret_cast<char*>(p), static_cast<size_t>(n) * sizeof(float));
}

}  // namespace

RingCollectives::RingCollectives(Transport* transport, CollectiveOptions options)
    : transport_(transport),
      options_(options),
      rank_(transport->rank()),
      world_(transport->world_size()),
      next_((transport->rank() + 1) % transport->world_size()),
      prev_((transport->rank() + transport->world_size() - 1) % transport->world_size()) {}

uint64_t RingCollectives::Tag(uint64_t step, uint64_t segment) const {
  // 24 bits of op, 20 of step, 20 of segment.
  return ((op_ & 0xFFFFFF) << 40) | ((step & 0xFFFFF) << 20) | (segment & 0xFFFFF);
}

std::vector<std::pair<int64_t, int64_t>> RingCollectives::Segments(int64_t size, int chunk) const {
  const Range c = ShardRange(size, chunk, world_);
  const int64_t seg = std::max<int64_t>(1, options_.max_segment_bytes / static_cast<int64_t>(sizeof(float)));
  std::vector<std::pair<int64_t, int64_t>> out;
  for (int64_t b = c.begin; b < c.end; b += seg) out.emplace_back(b, std::min(seg, c.end - b));
  return out;
}

absl::Status RingCollectives::Send(int peer, uint64_t tag, absl::Span<const char> data, absl::Time deadline) {
  bytes_sent_ += static_cast<int64_t>(data.size());
  return transport_->Send(peer, tag, data, deadline);
}

absl::StatusOr<std::unique_ptr<Payload>> RingCollectives::Receive(int peer, uint64_t tag, absl::Time deadline) {
  absl::StatusOr<std::unique_ptr<Payload>> p = transport_->Receive(peer, tag, deadline);
  if (p.ok()) bytes_received_ += static_cast<int64_t>((*p)->size());
  return p;
}

absl::Status RingCollectives::RecvInto(int peer, uint64_t tag, absl::Span<char> out, absl::Time deadline) {
  absl::StatusOr<std::unique_ptr<Payload>> p = Receive(peer, tag, deadline);
  if (!p.ok()) return p.status();
  return CopyPayloadInto(**p, out);
}

absl::Status RingCollectives::Finish(absl::Status status, absl::Time deadline) {
  // Sent segments point into the caller's buffer: it is theirs again only
  // once the transport lets go of them, whether or not the op succeeded.
  absl::Status flushed = transport_->Flush(deadline);
  return status.ok() ? flushed : status;
}

absl::Status RingCollectives::ReduceScatter(absl::Span<float> buffer) {
  ++op_;
  if (world_ == 1) return absl::OkStatus();
  const absl::Time deadline = absl::Now() + options_.timeout;
  return Finish(ReduceScatterSteps(buffer, deadline), deadline);
}

absl::Status RingCollectives::ReduceScatterSteps(absl::Span<float> buffer, absl::Time deadline) {
  const int64_t size = static_cast<int64_t>(buffer.size());
  auto chunk = [&](int k) { return ((rank_ - k) % world_ + world_) % world_; };
  int seg_index = 0;
  for (const auto& [begin, len] : Segments(size, chunk(1))) {
    RETURN_IF_ERROR(Annotate(Send(next_, Tag(0, seg_index++), Bytes(buffer.data() + begin, len), deadline),
                             "reduce-scatter"));
  }
  for (int k = 0; k <= world_ - 2; ++k) {
    const auto segments = Segments(size, chunk(k + 2));
    for (size_t j = 0; j < segments.size(); ++j) {
      const auto [begin, len] = segments[j];
      const std::string where = absl::StrCat("reduce-scatter step ", k);
      absl::StatusOr<std::unique_ptr<Payload>> in = Receive(prev_, Tag(k, j), deadline);
      if (!in.ok()) return Annotate(in.status(), where);
      float* dst = buffer.data() + begin;
      RETURN_IF_ERROR(Annotate(AddPayloadInto(**in, absl::MakeSpan(dst, static_cast<size_t>(len))), where));
      if (k + 1 <= world_ - 2) {
        RETURN_IF_ERROR(Annotate(Send(next_, Tag(k + 1, j), Bytes(dst, len), deadline),
                                 absl::StrCat("reduce-scatter step ", k + 1)));
      }
    }
  }
  return absl::OkStatus();
}

absl::Status RingCollectives::AllGather(absl::Span<float> buffer) {
  ++op_;
  if (world_ == 1) return absl::OkStatus();
  const absl::Time deadline = absl::Now() + options_.timeout;
  return Finish(AllGatherSteps(buffer, deadline), deadline);
}

absl::Status RingCollectives::AllGatherSteps(absl::Span<float> buffer, absl::Time deadline) {
  const int64_t size = static_cast<int64_t>(buffer.size());
  auto chunk = [&](int k) { return ((rank_ - k) % world_ + world_) % world_; };
  int seg_index = 0;
  for (const auto& [begin, len] : Segments(size, rank_)) {
    RETURN_IF_ERROR(Annotate(Send(next_, Tag(0, seg_index++), Bytes(buffer.data() + begin, len), deadline),
                             "all-gather"));
  }
  for (int k = 0; k <= world_ - 2; ++k) {
    const auto segments = Segments(size, chunk(k + 1));
    for (size_t j = 0; j < segments.size(); ++j) {
      const auto [begin, len] = segments[j];
      float* dst = buffer.data() + begin;
      RETURN_IF_ERROR(Annotate(RecvInto(prev_, Tag(k, j), MutableBytes(dst, len), deadline),
                               absl::StrCat("all-gather step ", k)));
      if (k + 1 <= world_ - 2) {
        RETURN_IF_ERROR(Annotate(Send(next_, Tag(k + 1, j), Bytes(dst, len), deadline),
                                 absl::StrCat("all-gather step ", k + 1)));
      }
    }
  }
  return absl::OkStatus();
}

absl::Status RingCollectives::AllReduce(absl::Span<float> buffer) {
  RETURN_IF_ERROR(ReduceScatter(buffer));
  return AllGather(buffer);
}

absl::Status RingCollectives::Broadcast(absl::Span<float> buffer, int root) {
  ++op_;
  if (root < 0 || root >= world_) {
    return absl::InvalidArgumentError(absl::StrCat("broadcast root ", root, " is not a rank of ", world_));
  }
  if (world_ == 1) return absl::OkStatus();
  const absl::Time deadline = absl::Now() + options_.timeout;
  return Finish(BroadcastSteps(buffer, root, deadline), deadline);
}

absl::Status RingCollectives::BroadcastSteps(absl::Span<float> buffer, int root, absl::Time deadline) {
  const int position = (rank_ - root + world_) % world_;
  const int64_t size = static_cast<int64_t>(buffer.size());
  const int64_t seg = std::max<int64_t>(1, options_.max_segment_bytes / static_cast<int64_t>(sizeof(float)));
  uint64_t j = 0;
  for (int64_t begin = 0; begin < size; begin += seg, ++j) {
    const int64_t len = std::min(seg, size - begin);
    float* p = buffer.data() + begin;
    if (position > 0) {
      RETURN_IF_ERROR(Annotate(RecvInto(prev_, Tag(0, j), MutableBytes(p, len), deadline), "broadcast"));
    }
    if (position < world_ - 1) {
      RETURN_IF_ERROR(Annotate(Send(next_, Tag(0, j), Bytes(p, len), deadline), "broadcast"));
    }
  }
  return absl::OkStatus();
}

absl::Status RingCollectives::AllReduceScalars(absl::Span<double> values,
                                               absl::Span<const ReduceOp> ops) {
  ++op_;
  if (world_ == 1) return absl::OkStatus();
  const absl::Time deadline = absl::Now() + options_.timeout;
  if (ops.size() != values.size()) {
    return absl::InvalidArgumentError("scalar all-reduce needs one op per value");
  }
  // Sent from a copy that outlives the steps (Finish waits until the
  // transport lets go of it), so `values` can take the result right away.
  const std::vector<double> mine(values.begin(), values.end());
  return Finish(AllReduceScalarsSteps(mine, values, ops, deadline), deadline);
}

absl::Status RingCollectives::AllReduceScalarsSteps(const std::vector<double>& mine, absl::Span<double> values,
                                                    absl::Span<const ReduceOp> ops, absl::Time deadline) {
  const absl::Span<const char> bytes(reinterpret_cast<const char*>(mine.data()), mine.size() * sizeof(double));
  for (int peer = 0; peer < world_; ++peer) {
    if (peer != rank_) RETURN_IF_ERROR(Annotate(Send(peer, Tag(0, 0), bytes, deadline), "scalar all-reduce"));
  }
  std::vector<double> all(values.size() * static_cast<size_t>(world_));
  for (int peer = 0; peer < world_; ++peer) {
    double* slot = all.data() + values.size() * static_cast<size_t>(peer);
    if (peer == rank_) {
      std::copy(mine.begin(), mine.end(), slot);
      continue;
    }
    RETURN_IF_ERROR(Annotate(RecvInto(peer, Tag(0, 0),
                                      absl::Span<char>(reinterpret_cast<char*>(slot), values.size() * sizeof(double)),
                                      deadline),
                             "scalar all-reduce"));
  }
  for (size_t i = 0; i < values.size(); ++i) {
    double acc = all[i];
    for (int peer = 1; peer < world_; ++peer) {
      const double v = all[values.size() * static_cast<size_t>(peer) + i];
      switch (ops[i]) {
        case ReduceOp::kSum: acc += v; break;
        case ReduceOp::kMax: acc = std::max(acc, v); break;
        case ReduceOp::kMin: acc = std::min(acc, v); break;
      }
    }
    values[i] = acc;
  }
  return absl::OkStatus();
}

}  // namespace shardline
