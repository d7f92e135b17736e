#include "worker/collective/ring.h"

#include "common/platform/logging.h"

#include <algorithm>
#include <cmath>

#include "absl/strings/str_cat.h"
#include "common/job/shard.h"
#include "common/platform/status_macros.h"
#include "common/encoding/bf16.h"
#include "common/topology/doubling_schedule.h"
#include "worker/collective/peer_fault.h"
#include "common/platform/clock.h"

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
      prev_((transport->rank() + transport->world_size() - 1) % transport->world_size()) {
  SCHECK(options_.env != nullptr) << "CollectiveOptions.env is required";
}

uint64_t RingCollectives::Tag(uint64_t step, uint64_t segment) const {
  // 21 bits of op, 20 of step, 20 of segment; the top 3 bits are left to
  // the group a ring may run in (subgroup_transport.h: kSpaceBits).
  return ((op_ & 0x1FFFFF) << 40) | ((step & 0xFFFFF) << 20) | (segment & 0xFFFFF);
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

absl::Status RingCollectives::Expect(int peer, uint64_t tag,
                                     std::function<absl::Status(std::unique_ptr<Payload>)> handler) {
  return transport_->ExpectReceive(peer, tag, [this, handler = std::move(handler)](std::unique_ptr<Payload> in) {
    bytes_received_ += static_cast<int64_t>(in->size());
    return handler(std::move(in));
  });
}

absl::Status RingCollectives::Await(int peer, uint64_t tag, absl::Time deadline) {
  return transport_->AwaitReceive(peer, tag, deadline);
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
  // Posted receives write into the caller's buffer: after a failure, make
  // sure none runs once we return.
  if (!status.ok()) transport_->CancelReceives();
  // Sent segments point into the caller's buffer: it is theirs again only
  // once the transport lets go of them, whether or not the op succeeded.
  absl::Status flushed = transport_->Flush(deadline);
  return status.ok() ? flushed : status;
}

int RingCollectives::nonfinite_source() const {
  return nonfinite_peer_.load(std::memory_order_relaxed);
}

int RingCollectives::Chunk(int k) const { return ((rank_ - k) % world_ + world_) % world_; }

absl::Status RingCollectives::ForEachReceivedSegment(
    int64_t size, int chunk_offset,
    const std::function<absl::Status(int k, size_t j, int64_t begin, int64_t len)>& fn) const {
  for (int k = 0; k <= world_ - 2; ++k) {
    const auto segments = Segments(size, Chunk(k + chunk_offset));
    for (size_t j = 0; j < segments.size(); ++j) {
      RETURN_IF_ERROR(fn(k, j, segments[j].first, segments[j].second));
    }
  }
  return absl::OkStatus();
}

absl::Status RingCollectives::SendFloats(absl::Span<const float> buffer, int64_t begin, int64_t len, uint64_t tag,
                                         absl::Time deadline) {
  if (!wire_bf16_) return Send(next_, tag, Bytes(buffer.data() + begin, len), deadline);
  uint16_t* wire = wire_.data() + begin;
  RoundToBf16(buffer.subspan(static_cast<size_t>(begin), static_cast<size_t>(len)), wire);
  return Send(next_, tag,
              absl::Span<const char>(reinterpret_cast<const char*>(wire), static_cast<size_t>(len) * sizeof(uint16_t)),
              deadline);
}

absl::Status RingCollectives::SendChunk(absl::Span<const float> buffer, int chunk, uint64_t step,
                                        const char* what, absl::Time deadline) {
  int seg_index = 0;
  for (const auto& [begin, len] : Segments(static_cast<int64_t>(buffer.size()), chunk)) {
    RETURN_IF_ERROR(Annotate(SendFloats(buffer, begin, len, Tag(step, seg_index++), deadline), what));
  }
  return absl::OkStatus();
}

absl::Status RingCollectives::ExpectReduceScatter(absl::Span<float> buffer) {
  return ForEachReceivedSegment(static_cast<int64_t>(buffer.size()), 2,
                                [&](int k, size_t j, int64_t begin, int64_t len) {
    const absl::Span<float> dst(buffer.data() + begin, static_cast<size_t>(len));
    return Expect(prev_, Tag(k, j), [this, dst, bf16 = wire_bf16_](std::unique_ptr<Payload> in) {
      bool nonfinite = false;
      absl::Status s = bf16 ? AddBf16Into(*in, dst, &nonfinite) : AddFloatsInto(*in, dst, &nonfinite);
      if (nonfinite) nonfinite_peer_.store(prev_, std::memory_order_relaxed);
      return s;
    });
  });
}

absl::Status RingCollectives::ExpectAllGather(absl::Span<float> buffer, int first_step) {
  return ForEachReceivedSegment(static_cast<int64_t>(buffer.size()), 1,
                                [&](int k, size_t j, int64_t begin, int64_t len) {
    const absl::Span<float> dst(buffer.data() + begin, static_cast<size_t>(len));
    return Expect(prev_, Tag(first_step + k, j), [this, dst](std::unique_ptr<Payload> in) {
      bool nonfinite = false;
      absl::Status s = CopyFloatsInto(*in, dst, &nonfinite);
      if (nonfinite) nonfinite_peer_.store(prev_, std::memory_order_relaxed);
      return s;
    });
  });
}

absl::Status RingCollectives::ReduceScatter(absl::Span<float> buffer) {
  ++op_;
  nonfinite_peer_.store(-1, std::memory_order_relaxed);
  if (world_ == 1) return absl::OkStatus();
  const absl::Time deadline = WallNow(options_.env) + options_.timeout;
  wire_bf16_ = options_.bf16_reduce_scatter;
  if (wire_bf16_ && wire_.size() < buffer.size()) {
    wire_.resize(buffer.size());
    wire_held_.Reset(wire_.capacity() * sizeof(uint16_t));
  }
  absl::Status s = ExpectReduceScatter(buffer);
  if (s.ok()) s = ReduceScatterSteps(buffer, /*then_gather=*/false, deadline);
  s = Finish(s, deadline);
  wire_bf16_ = false;
  return s;
}

std::string RingCollectives::Hop(const char* op, int k) const {
  return absl::StrCat(op, ", ring hop ", k + 1, " of ", world_ - 1);
}

absl::Status RingCollectives::ReduceScatterSteps(absl::Span<float> buffer, bool then_gather, absl::Time deadline) {
  RETURN_IF_ERROR(SendChunk(buffer, Chunk(1), 0, "reduce-scatter", deadline));
  return ForEachReceivedSegment(static_cast<int64_t>(buffer.size()), 2,
                                [&](int k, size_t j, int64_t begin, int64_t len) -> absl::Status {
    // The posted handler has added the segment into place.
    RETURN_IF_ERROR(Annotate(Await(prev_, Tag(k, j), deadline), Hop("reduce-scatter", k)));
    const bool last = k == world_ - 2;
    if (last && !then_gather) return absl::OkStatus();
    // Forwarded at once: the next step, or (our own chunk, now final) the
    // all-gather's first step (never bf16: then_gather is AllReduce's).
    return Annotate(SendFloats(buffer, begin, len, Tag(k + 1, j), deadline),
                    last ? Hop("all-gather", 0) : Hop("reduce-scatter", k + 1));
  });
}

absl::Status RingCollectives::AllGather(absl::Span<float> buffer) {
  ++op_;
  nonfinite_peer_.store(-1, std::memory_order_relaxed);
  if (world_ == 1) return absl::OkStatus();
  const absl::Time deadline = WallNow(options_.env) + options_.timeout;
  absl::Status s = ExpectAllGather(buffer, /*first_step=*/0);
  if (s.ok()) s = SendChunk(buffer, rank_, 0, "all-gather", deadline);
  if (s.ok()) s = AllGatherSteps(buffer, /*first_step=*/0, deadline);
  return Finish(s, deadline);
}

absl::Status RingCollectives::AllGatherSteps(absl::Span<float> buffer, int first_step, absl::Time deadline) {
  return ForEachReceivedSegment(static_cast<int64_t>(buffer.size()), 1,
                                [&](int k, size_t j, int64_t begin, int64_t len) -> absl::Status {
    // The posted handler has copied the segment into place.
    RETURN_IF_ERROR(Annotate(Await(prev_, Tag(first_step + k, j), deadline), Hop("all-gather", k)));
    if (k == world_ - 2) return absl::OkStatus();
    return Annotate(Send(next_, Tag(first_step + k + 1, j), Bytes(buffer.data() + begin, len), deadline),
                    Hop("all-gather", k + 1));
  });
}

absl::Status RingCollectives::AllReduce(absl::Span<float> buffer) {
  ++op_;
  nonfinite_peer_.store(-1, std::memory_order_relaxed);
  if (world_ == 1) return absl::OkStatus();
  const absl::Time deadline = WallNow(options_.env) + options_.timeout;
  if (buffer.empty()) return absl::OkStatus();  // every rank has the same (empty) length: nothing to move
  if (static_cast<int64_t>(buffer.size() * sizeof(float)) <= options_.doubling_max_bytes) {
    std::vector<std::vector<float>> sent;
    const absl::Status s = DoublingSteps<float>(
        buffer,
        [](absl::Span<const float> lo, absl::Span<const float> hi, absl::Span<float> out) {
          for (size_t i = 0; i < out.size(); ++i) out[i] = lo[i] + hi[i];
        },
        [this](int peer, std::vector<float>& theirs) {
          if (!std::all_of(theirs.begin(), theirs.end(), [](float v) { return std::isfinite(v); })) {
            int none = -1;
            nonfinite_peer_.compare_exchange_strong(none, peer, std::memory_order_relaxed);
          }
        },
        &sent, "all-reduce", deadline);
    return Finish(s, deadline);
  }
  // One pipeline: each segment of our own chunk goes on around the ring as
  // soon as it is fully reduced. The all-gather writes every chunk but our
  // own, including ones whose segments the reduce-scatter sent by
  // reference; but a segment of chunk c arrives in the all-gather only after
  // its reduction chain, which includes our send of that same segment, has
  // consumed that send.
  absl::Status s = ExpectReduceScatter(buffer);
  if (s.ok()) s = ExpectAllGather(buffer, /*first_step=*/world_ - 1);
  if (s.ok()) s = ReduceScatterSteps(buffer, /*then_gather=*/true, deadline);
  if (s.ok()) s = AllGatherSteps(buffer, /*first_step=*/world_ - 1, deadline);
  return Finish(s, deadline);
}

absl::Status RingCollectives::Broadcast(absl::Span<float> buffer, int root) {
  ++op_;
  if (root < 0 || root >= world_) {
    return absl::InvalidArgumentError(absl::StrCat("broadcast root ", root, " is not a rank of ", world_));
  }
  if (world_ == 1) return absl::OkStatus();
  const absl::Time deadline = WallNow(options_.env) + options_.timeout;
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

absl::StatusOr<std::string> RingCollectives::SendRecv(int send_to, absl::string_view data, int recv_from) {
  ++op_;
  if (send_to < -1 || send_to >= world_ || recv_from < -1 || recv_from >= world_) {
    return absl::InvalidArgumentError(absl::StrCat("send-receive with ranks ", send_to, " and ", recv_from,
                                                   " in a world of ", world_));
  }
  if (send_to == rank_ || recv_from == rank_) {
    if (send_to != recv_from) return absl::InvalidArgumentError("a rank sends to itself only what it receives");
    return std::string(data);
  }
  const absl::Time deadline = WallNow(options_.env) + options_.timeout;
  const uint64_t length = data.size();
  const int64_t seg = std::max<int64_t>(1, options_.max_segment_bytes);
  std::string received;
  absl::Status s = [&]() -> absl::Status {
    if (send_to >= 0) {
      RETURN_IF_ERROR(Annotate(Send(send_to, Tag(0, 0), absl::Span<const char>(reinterpret_cast<const char*>(&length),
                                                                             sizeof(length)), deadline),
                               "send-receive"));
      uint64_t j = 0;
      for (int64_t at = 0; at < static_cast<int64_t>(data.size()); at += seg, ++j) {
        const int64_t len = std::min<int64_t>(seg, static_cast<int64_t>(data.size()) - at);
        RETURN_IF_ERROR(Annotate(Send(send_to, Tag(1, j), absl::Span<const char>(data.data() + at, len), deadline),
                                 "send-receive"));
      }
    }
    if (recv_from >= 0) {
      uint64_t n = 0;
      RETURN_IF_ERROR(Annotate(RecvInto(recv_from, Tag(0, 0), absl::Span<char>(reinterpret_cast<char*>(&n), sizeof(n)),
                                        deadline),
                               "send-receive"));
      if (n > options_.max_message_bytes) {
        return absl::DataLossError(absl::StrCat("send-receive: rank ", recv_from, " announced ", n,
                                                " bytes, more than the ", options_.max_message_bytes,
                                                " any message of this job may have"));
      }
      received.resize(n);
      uint64_t j = 0;
      for (int64_t at = 0; at < static_cast<int64_t>(n); at += seg, ++j) {
        const int64_t len = std::min<int64_t>(seg, static_cast<int64_t>(n) - at);
        RETURN_IF_ERROR(Annotate(RecvInto(recv_from, Tag(1, j), absl::Span<char>(received.data() + at, len), deadline),
                                 "send-receive"));
      }
    }
    return absl::OkStatus();
  }();
  RETURN_IF_ERROR(Finish(s, deadline));
  return received;
}

template <typename T>
absl::Status RingCollectives::DoublingSteps(
    absl::Span<T> values, const std::function<void(absl::Span<const T>, absl::Span<const T>, absl::Span<T>)>& combine,
    const std::function<void(int, std::vector<T>&)>& inspect, std::vector<std::vector<T>>* sent, const char* what,
    absl::Time deadline) {
  const std::vector<DoublingStep> steps = RecursiveDoublingSchedule(rank_, world_);
  sent->reserve(steps.size());  // sent buffers stay put until Finish
  std::vector<T> theirs(values.size());
  for (const DoublingStep& step : steps) {
    const uint64_t tag = Tag(static_cast<uint64_t>(step.round), 0);
    auto send = [&]() -> absl::Status {
      sent->emplace_back(values.begin(), values.end());
      const std::vector<T>& copy = sent->back();
      return Annotate(Send(step.peer, tag,
                           absl::Span<const char>(reinterpret_cast<const char*>(copy.data()), copy.size() * sizeof(T)),
                           deadline),
                      absl::StrCat(what, " round ", step.round));
    };
    auto receive = [&]() -> absl::Status {
      RETURN_IF_ERROR(Annotate(RecvInto(step.peer, tag,
                                        absl::Span<char>(reinterpret_cast<char*>(theirs.data()), theirs.size() * sizeof(T)),
                                        deadline),
                               absl::StrCat(what, " round ", step.round)));
      if (inspect) inspect(step.peer, theirs);
      return absl::OkStatus();
    };
    const absl::Span<const T> mine(values.data(), values.size());
    const absl::Span<const T> other(theirs.data(), theirs.size());
    switch (step.kind) {
      case DoublingStep::kSendValues:
      case DoublingStep::kSendResult:
        RETURN_IF_ERROR(send());
        break;
      case DoublingStep::kFoldExtra:
        RETURN_IF_ERROR(receive());
        combine(mine, other, values);
        break;
      case DoublingStep::kExchange:
        RETURN_IF_ERROR(send());
        RETURN_IF_ERROR(receive());
        if (step.mine_first) {
          combine(mine, other, values);
        } else {
          combine(other, mine, values);
        }
        break;
      case DoublingStep::kReceiveResult:
        RETURN_IF_ERROR(receive());
        std::copy(theirs.begin(), theirs.end(), values.begin());
        break;
    }
  }
  return absl::OkStatus();
}

absl::Status RingCollectives::AllReduceScalars(absl::Span<double> values,
                                               absl::Span<const ReduceOp> ops) {
  ++op_;
  if (world_ == 1) return absl::OkStatus();
  const absl::Time deadline = WallNow(options_.env) + options_.timeout;
  if (ops.size() != values.size()) {
    return absl::InvalidArgumentError("scalar all-reduce needs one op per value");
  }
  // The values, then one more: the lowest rank known to have put in a
  // non-finite value (world_: none), reduced with min. Every rank runs the
  // whole op either way, so all learn the same culprit at the same time.
  const size_t n = values.size();
  const double none = static_cast<double>(world_);
  std::vector<double> all(values.begin(), values.end());
  const bool mine_finite = std::all_of(all.begin(), all.end(), [](double v) { return std::isfinite(v); });
  all.push_back(mine_finite ? none : static_cast<double>(rank_));
  std::vector<std::vector<double>> sent;
  absl::Status s = DoublingSteps<double>(
      absl::MakeSpan(all),
      [n, ops](absl::Span<const double> lo, absl::Span<const double> hi, absl::Span<double> out) {
        for (size_t i = 0; i < n; ++i) {
          switch (ops[i]) {
            case ReduceOp::kSum: out[i] = lo[i] + hi[i]; break;
            case ReduceOp::kMax: out[i] = std::max(lo[i], hi[i]); break;
            case ReduceOp::kMin: out[i] = std::min(lo[i], hi[i]); break;
          }
        }
        out[n] = std::min(lo[n], hi[n]);
      },
      [n, none](int peer, std::vector<double>& theirs) {
        // A partial that is not finite without naming who put that in, or
        // whose culprit is no rank, is the sending peer's fault.
        const double culprit = theirs[n];
        const bool named = culprit >= 0 && culprit < none && culprit == std::floor(culprit);
        const bool finite = std::all_of(theirs.begin(), theirs.begin() + static_cast<std::ptrdiff_t>(n),
                                        [](double v) { return std::isfinite(v); });
        if (!(culprit == none || named) || (!finite && !named)) theirs[n] = static_cast<double>(peer);
      },
      &sent, "scalar all-reduce", deadline);
  RETURN_IF_ERROR(Finish(s, deadline));
  if (!mine_finite) {
    return absl::InvalidArgumentError("a scalar all-reduce was given a non-finite value on this rank");
  }
  const int culprit = static_cast<int>(all[n]);
  if (culprit < world_) {
    return PeerFaultError(culprit, absl::StrCat("rank ", culprit, " sent a non-finite value in a scalar all-reduce"));
  }
  std::copy(all.begin(), all.begin() + static_cast<std::ptrdiff_t>(n), values.begin());
  return absl::OkStatus();
}

}  // namespace shardline
