#include "coordinator/goodput.h"

#include <algorithm>

#include "absl/strings/str_cat.h"
#include "common/platform/logging.h"
#include "common/platform/status_macros.h"

namespace shardline {
namespace {

constexpr char kGoodputKey[] = "goodput";

// The furthest rank per kind: the world waits for the slowest.
coordinator::TimeAccount Furthest(const coordinator::JobStatus& s) {
  coordinator::TimeAccount m;
  for (const coordinator::WorkerStatus& w : s.workers()) {
    const coordinator::TimeAccount& t = w.time();
    m.set_restore_seconds(std::max(m.restore_seconds(), t.restore_seconds()));
    m.set_data_seconds(std::max(m.data_seconds(), t.data_seconds()));
    m.set_checkpoint_seconds(std::max(m.checkpoint_seconds(), t.checkpoint_seconds()));
    m.set_eval_seconds(std::max(m.eval_seconds(), t.eval_seconds()));
  }
  return m;
}

}  // namespace

GoodputLedger::GoodputLedger(JobStore* store, coordinator::Goodput account, absl::Time now)
    : store_(store), account_(std::move(account)), last_tick_(now), last_persist_(now) {
  for (const char* kind : BadputKinds()) (*account_.mutable_badput_seconds())[kind] += 0;
}

absl::StatusOr<std::unique_ptr<GoodputLedger>> GoodputLedger::Load(JobStore* store, absl::Time now) {
  ASSIGN_OR_RETURN(std::optional<std::string> bytes, store->Get(kGoodputKey));
  coordinator::Goodput account;
  if (bytes.has_value() && !account.ParseFromString(*bytes)) {
    return absl::DataLossError("job store: the goodput account does not parse");
  }
  std::unique_ptr<GoodputLedger> ledger(new GoodputLedger(store, std::move(account), now));
  MutexLock lock(&ledger->mu_);
  coordinator::Goodput& a = ledger->account_;
  if (a.started() && a.updated_unix_micros() > 0) {
    const double down = std::max(0.0, absl::ToDoubleSeconds(now - absl::FromUnixMicros(a.updated_unix_micros())));
    ledger->Add("recovery", down);
    a.set_disruptions(a.disruptions() + 1);
    SLOG(INFO) << "goodput: resuming the account; " << down << " s since the last coordinator's write count as recovery";
  }
  return ledger;
}

void GoodputLedger::Add(const char* kind, double seconds) {
  if (seconds <= 0) return;
  (*account_.mutable_badput_seconds())[kind] += seconds;
}

void GoodputLedger::Advance(const coordinator::JobStatus& s, absl::Time now) {
  MutexLock lock(&mu_);
  const double dt = std::max(0.0, absl::ToDoubleSeconds(now - last_tick_));
  last_tick_ = now;
  if (s.worker_losses() > losses_seen_) {
    account_.set_disruptions(account_.disruptions() + (s.worker_losses() - losses_seen_));
    losses_seen_ = s.worker_losses();
    dirty_ = true;
  }
  if (s.generation() != generation_) {  // new processes' accounts start at 0
    if (generation_ != 0) dirty_ = true;  // persisted at once: a disruption must not be lost
    generation_ = s.generation();
    redo_until_ = account_.high_water_step();
    last_step_ = 0;
    accounted_.Clear();
    ahead_ = 0;
  }
  account_.set_updated_unix_micros(absl::ToUnixMicros(now));
  const char* waiting = account_.started() ? "recovery" : "startup";
  switch (s.state()) {
    case coordinator::JobStatus::FORMING:
      Add(waiting, dt);
      return;
    case coordinator::JobStatus::RUNNING:
    case coordinator::JobStatus::STOPPING:
      break;
    default:  // done or failed: nothing runs, but the last steps count
      if (s.global_step() > account_.high_water_step()) account_.set_high_water_step(s.global_step());
      return;
  }
  const coordinator::TimeAccount now_reported = Furthest(s);
  auto delta = [](double now_value, double before) { return std::max(0.0, now_value - before); };
  const double restore = delta(now_reported.restore_seconds(), accounted_.restore_seconds());
  const double data = delta(now_reported.data_seconds(), accounted_.data_seconds());
  const double save = delta(now_reported.checkpoint_seconds(), accounted_.checkpoint_seconds());
  const double eval = delta(now_reported.eval_seconds(), accounted_.eval_seconds());
  accounted_ = now_reported;
  Add("checkpoint_restore", restore);
  Add("data_loading", data);
  Add("checkpoint_save", save);
  Add("evaluation", eval);
  double rest = dt - (restore + data + save + eval) - ahead_;
  ahead_ = 0;
  if (rest < 0) {
    ahead_ = -rest;
    rest = 0;
  }
  // Reported steps are absolute; 0 until every rank completed one here.
  if (s.global_step() == 0) {
    Add(waiting, rest);
  } else {
    // The steps done since the last tick, (from, to]: those up to
    // redo_until_ were done before, by an earlier world. A tick with no
    // new step goes by where the world stands.
    const int64_t from = last_step_ > 0 ? last_step_ : s.start_step();
    const int64_t to = std::max(s.global_step(), from);
    double redone = to > from ? static_cast<double>(std::clamp(redo_until_ - from, int64_t{0}, to - from)) / (to - from)
                              : (to < redo_until_ ? 1.0 : 0.0);
    Add("wasted_progress", rest * redone);
    account_.set_goodput_seconds(account_.goodput_seconds() + rest * (1 - redone));
    last_step_ = to;
  }
  if (s.global_step() > account_.high_water_step()) {
    account_.set_high_water_step(s.global_step());
    account_.set_started(true);
  }
}

absl::Status GoodputLedger::MaybePersist(absl::Time now, bool force, absl::Duration every) {
  std::string bytes;
  {
    MutexLock lock(&mu_);
    if (!force && !dirty_ && now - last_persist_ < every) return absl::OkStatus();
    last_persist_ = now;
    dirty_ = false;
    account_.SerializeToString(&bytes);
  }
  return Annotate(store_->Put(kGoodputKey, bytes, /*sync=*/true), "persisting the goodput account");
}

coordinator::Goodput GoodputLedger::Snapshot() const {
  MutexLock lock(&mu_);
  return account_;
}

}  // namespace shardline
