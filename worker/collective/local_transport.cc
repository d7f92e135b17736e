#include "worker/collective/local_transport.h"

#include "absl/strings/str_cat.h"

namespace shardline {

class LocalTransport : public Transport {
 public:
  LocalTransport(LocalFabric* fabric, int rank) : fabric_(fabric), rank_(rank) {}
  ~LocalTransport() override { Shutdown(); }

  int rank() const override { return rank_; }
  int world_size() const override { return fabric_->world_size(); }

  absl::Status Send(int peer, uint64_t tag, absl::Span<const char> data, absl::Time) override {
    if (peer < 0 || peer >= world_size()) {
      return absl::InvalidArgumentError(absl::StrCat("no rank ", peer, " in a world of ", world_size()));
    }
    fabric_->mailboxes_[static_cast<size_t>(peer)]->Put(
        rank_, tag, std::make_unique<StringPayload>(std::string(data.data(), data.size())));
    return absl::OkStatus();
  }

  absl::Status Flush(absl::Time) override { return absl::OkStatus(); }  // Send copies

  absl::StatusOr<std::unique_ptr<Payload>> Receive(int peer, uint64_t tag, absl::Time deadline) override {
    if (peer < 0 || peer >= world_size()) {
      return absl::InvalidArgumentError(absl::StrCat("no rank ", peer, " in a world of ", world_size()));
    }
    Mailbox* box = fabric_->mailboxes_[static_cast<size_t>(rank_)].get();
    absl::StatusOr<std::unique_ptr<Payload>> p = box->Take(peer, tag, deadline);
    const absl::Status s = p.status();
    // As the gRPC transport does: a rank that sees a peer fail tells every
    // rank, so the whole world fails fast.
    if ((absl::IsUnavailable(s) || absl::IsDeadlineExceeded(s)) && !box->poisoned()) {
      const std::string why = absl::StrCat(s.message(), " (reported by rank ", rank_, ")");
      for (auto& other : fabric_->mailboxes_) other->Poison(why);  // first poison wins
    }
    return p;
  }

  void Shutdown() override { fabric_->mailboxes_[static_cast<size_t>(rank_)]->Shutdown(); }

 private:
  LocalFabric* fabric_;
  int rank_;
};

LocalFabric::LocalFabric(int world_size) {
  for (int r = 0; r < world_size; ++r) mailboxes_.push_back(std::make_unique<Mailbox>(world_size));
}

std::unique_ptr<Transport> LocalFabric::Connect(int rank) {
  return std::make_unique<LocalTransport>(this, rank);
}

void LocalFabric::Kill(int rank) {
  for (size_t r = 0; r < mailboxes_.size(); ++r) {
    if (static_cast<int>(r) == rank) {
      mailboxes_[r]->Shutdown();
    } else {
      mailboxes_[r]->MarkGone(rank, "killed");
    }
  }
}

}  // namespace shardline
