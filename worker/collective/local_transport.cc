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
    if (absl::Status bad = CheckPeer(peer); !bad.ok()) return bad;
    // An in-process world has no untrusted sender: no cap is set.
    return fabric_->mailboxes_[static_cast<size_t>(peer)]->Put(
        rank_, tag, std::make_unique<StringPayload>(std::string(data.data(), data.size())));
  }

  absl::Status Flush(absl::Time) override { return absl::OkStatus(); }  // Send copies

  absl::StatusOr<std::unique_ptr<Payload>> Receive(int peer, uint64_t tag, absl::Time deadline) override {
    if (absl::Status bad = CheckPeer(peer); !bad.ok()) return bad;
    absl::StatusOr<std::unique_ptr<Payload>> p = box()->Take(peer, tag, deadline);
    Report(p.status());
    return p;
  }

  absl::Status ExpectReceive(int peer, uint64_t tag, ReceiveHandler handler) override {
    if (absl::Status bad = CheckPeer(peer); !bad.ok()) return bad;
    box()->Expect(peer, tag, std::move(handler));
    return absl::OkStatus();
  }

  absl::Status AwaitReceive(int peer, uint64_t tag, absl::Time deadline) override {
    if (absl::Status bad = CheckPeer(peer); !bad.ok()) return bad;
    absl::Status s = box()->Await(peer, tag, deadline);
    Report(s);
    return s;
  }

  void CancelReceives() override { box()->CancelExpected(); }

  void Shutdown() override { box()->Shutdown(); }

 private:
  Mailbox* box() { return fabric_->mailboxes_[static_cast<size_t>(rank_)].get(); }

  // As the gRPC transport does: a rank that sees a peer fail tells every
  // rank, so the whole world fails fast.
  void Report(const absl::Status& s) {
    if ((absl::IsUnavailable(s) || absl::IsDeadlineExceeded(s)) && !box()->poisoned()) {
      const std::string why = absl::StrCat(s.message(), " (reported by rank ", rank_, ")");
      for (auto& other : fabric_->mailboxes_) other->Poison(why);  // first poison wins
    }
  }

  absl::Status CheckPeer(int peer) const {
    if (peer >= 0 && peer < world_size()) return absl::OkStatus();
    return absl::InvalidArgumentError(absl::StrCat("no rank ", peer, " in a world of ", world_size()));
  }

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
