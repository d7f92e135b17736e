// Job: registrations - admitting a worker to the forming world (the claim
// through the membership state machine), waiting without a thread, and the
// answer with the world's peers.
#include <algorithm>

#include "coordinator/job.h"

#include "absl/strings/str_cat.h"
#include "common/faults/fault_injection.h"
#include "common/job/islands.h"
#include "common/platform/clock.h"
#include "common/platform/logging.h"
#include "common/platform/status_macros.h"
#include "common/net/rpc_auth.h"
#include "common/topology/peer_set.h"
#include "coordinator/decide/report_check.h"

namespace shardline {
namespace {

// Registrations are logged one by one in worlds up to this size; in larger
// ones only the first and the last of each forming world.
constexpr int kLoggedRegistrations = 64;

coordinator::RegisterResponse JobOver(const absl::Status& final_status) {
  coordinator::RegisterResponse over;
  over.set_job_over(true);
  over.set_job_error(std::string(final_status.message()));
  return over;
}

}  // namespace

absl::StatusOr<coordinator::RegisterResponse> Job::Register(const coordinator::RegisterRequest& req,
                                                           const std::function<bool()>& cancelled) {
  Notification answered;
  absl::StatusOr<coordinator::RegisterResponse> result;
  const uint64_t id = StartRegister(req, [&](absl::StatusOr<coordinator::RegisterResponse> r) {
    result = std::move(r);
    answered.Notify();
  });
  while (!answered.WaitForNotificationWithTimeout(absl::Milliseconds(100))) {
    CompleteRegistrations();  // no service may be driving them
    if (cancelled()) CancelRegistration(id);
  }
  return result;
}

uint64_t Job::StartRegister(const coordinator::RegisterRequest& req, RegisterDone done) {
  // Bounded before anything in it is logged or kept.
  if (absl::Status bad = CheckRegisterRequest(req, ReportLimits{}); !bad.ok()) {
    done(bad);
    return 0;
  }
  Parked p;
  p.req = req;
  p.done = std::move(done);
  // Made before taking the lock: reading /dev/urandom is I/O.
  absl::StatusOr<std::string> secret = NewToken();
  if (!secret.ok()) {
    p.done(secret.status());
    return 0;
  }
  p.secret = std::move(*secret);
  // A finished report sent along is taken, and the checkpoint it may
  // complete committed, before the registration can form a world: that
  // world then starts from it.
  Deferred later;
  {
    MutexLock lock(&mu_);
    TakeFinishedReportLocked(p.req, &later);
  }
  // The rare registration that carries a finished report waits for its
  // commit (on the disk thread, after whatever was queued before).
  RunDeferred(std::move(later), /*wait=*/true);
  std::optional<absl::StatusOr<coordinator::RegisterResponse>> answer;
  uint64_t id = 0;
  {
    MutexLock lock(&mu_);
    answer = AdmitLocked(p);
    if (!answer.has_value()) {
      id = next_registration_++;
      parked_.emplace(id, std::move(p));
    }
  }
  // A new or broken generation is made durable before any member of the
  // next one hears of it, without holding the lock over the disk write.
  PersistState();
  if (answer.has_value()) p.done(std::move(*answer));
  CompleteRegistrations();
  return id;
}

void Job::CancelRegistration(uint64_t id) {
  RegisterDone done;
  {
    MutexLock lock(&mu_);
    auto it = parked_.find(id);
    if (it == parked_.end()) return;
    const Parked& p = it->second;
    if (!p.waits_for_end) StepLocked(membership_event::Cancel{p.slot, p.req.incarnation()});
    done = std::move(it->second.done);
    parked_.erase(it);
  }
  done(absl::CancelledError("registration cancelled"));
}

void Job::CompleteRegistrations() {
  struct Answer {
    RegisterDone done;
    absl::StatusOr<coordinator::RegisterResponse> response;
    std::shared_ptr<const MemberBook> book;  // its peers still to fill in
  };
  std::vector<Answer> answers;
  for (;;) {
    {
      MutexLock lock(&mu_);
      if (!recheck_ && checked_durable_ == durable_generation_ && checked_generation_ == m_.generation &&
          checked_state_ == m_.state) {
        break;
      }
      recheck_ = false;
      checked_durable_ = durable_generation_;
      checked_generation_ = m_.generation;
      checked_state_ = m_.state;
      for (auto it = parked_.begin(); it != parked_.end();) {
        Parked& p = it->second;
        std::optional<absl::StatusOr<coordinator::RegisterResponse>> answer;
        std::shared_ptr<const MemberBook> book;
        if (p.waits_for_end) {
          if (m_.generation != p.finished_in || m_.state == JobState::kForming || m_.state == JobState::kDone ||
              m_.state == JobState::kFailed) {
            p.waits_for_end = false;
            answer = AdmitLocked(p);
            recheck_ = true;  // it may have formed a world, or wait for one now
          }
        } else if (StillPendingLocked(p)) {
          // Its island was left out of the world that formed (runtime.
          // min_islands): it waits, as a joiner, for the next one.
          p.target = m_.generation + 1;
        } else if (durable_generation_ >= p.target || m_.state == JobState::kDone || m_.state == JobState::kFailed) {
          answer = FinishRegistrationLocked(p, &book);
        }
        if (answer.has_value()) {
          answers.push_back({std::move(p.done), std::move(*answer), std::move(book)});
          it = parked_.erase(it);
        } else {
          ++it;
        }
      }
    }
    PersistState();
  }
  for (Answer& a : answers) {
    if (a.book != nullptr && a.response.ok()) {
      FillPeers(*a.book, options_.token, &*a.response);
      // Its heartbeat deadline runs from its answer: it cannot report
      // before, and in a large world answering everyone takes a while.
      MutexLock lock(&mu_);
      StepLocked(membership_event::Answered{a.response->rank(), a.response->generation()});
    }
    a.done(std::move(a.response));
  }
}

void Job::TakeFinishedReportLocked(const coordinator::RegisterRequest& req, Deferred* later) {
  if (m_.state == JobState::kDone || m_.state == JobState::kFailed || !req.has_finished_report() ||
      !req.finished_report().finished() || req.finished_report().generation() != m_.generation) {
    return;
  }
  // Taken as if it came on the stream (ReportLocked checks the member's
  // secret and the report's bounds); shards already committed are left be.
  // Also when the world broke meanwhile (its stream's end was seen first):
  // shards every rank of that generation saved are a whole checkpoint, and
  // the next world starts from it instead of redoing the steps.
  const absl::Status taken = ReportLocked(req.finished_report(), later);
  if (!taken.ok()) SLOG(WARNING) << "resent finished report not taken: " << taken;
}

std::optional<absl::StatusOr<coordinator::RegisterResponse>> Job::AdmitLocked(Parked& p) {
  const coordinator::RegisterRequest& req = p.req;
  if (m_.state == JobState::kDone && !finished_durable_) {
    return absl::UnavailableError("the job is finishing; register again in a moment");
  }
  if (m_.Over()) return JobOver(final_);
  membership_event::Claim claim;
  claim.requested_slot = req.requested_rank();
  claim.island = req.has_island() ? req.island() : -1;
  claim.incarnation = req.incarnation();
  claim.previous_generation = req.previous_generation();
  claim.reason = req.reason();
  claim.address = req.transport_address();
  claim.secret = p.secret;
  claim.held.assign(req.held_snapshots().begin(), req.held_snapshots().end());
  const MembershipEffects out = StepLocked(claim);
  if (out.claim_waits_for_end) {
    p.waits_for_end = true;
    p.finished_in = m_.generation;
    return std::nullopt;
  }
  if (out.claim_refused.has_value()) {
    // The refusal names no member's address: the caller may be anyone with
    // the token. The log has it.
    SLOG(WARNING) << "refused " << req.transport_address() << " rank " << req.requested_rank() << ": "
                  << out.claim_refused->message();
    return *out.claim_refused;
  }
  const MembershipEffects::ClaimTaken& taken = *out.claim_taken;
  const int n = options_.world_size;
  if (taken.joining) {
    SLOG(INFO) << "worker " << req.transport_address() << " registered as rank " << taken.slot
               << "; it joins the world of " << m_.world_size << " at the next committed checkpoint";
  } else if (n <= kLoggedRegistrations || taken.claimed == 1 || taken.claimed == n) {
    SLOG(INFO) << "worker " << req.transport_address() << " registered as rank " << taken.slot << " for generation "
               << taken.target << " (" << taken.claimed << "/" << n << ")";
  }
  // Answered once generation `target` is durable (CompleteRegistrations,
  // which notices: it is not yet).
  p.slot = taken.slot;
  p.target = taken.target;
  return std::nullopt;
}

bool Job::StillPendingLocked(const Parked& p) const {
  if (m_.Over() || p.target > m_.generation) return false;
  auto it = m_.pending.find(p.slot);
  return it != m_.pending.end() && it->second.incarnation == p.req.incarnation();
}

void Job::FillPeers(const MemberBook& book, const std::string& token, coordinator::RegisterResponse* resp) {
  RestoreMoves restore;
  if (resp->memory_step() > 0) {
    restore.from_world = resp->memory_world_size() > 0 ? resp->memory_world_size() : resp->world_size();
    restore.sources.assign(resp->memory_sources().begin(), resp->memory_sources().end());
  }
  // The rank itself is listed too, so a world of one still lists a rank.
  std::vector<int> listed =
      DataPlanePeers(resp->rank(), static_cast<int>(book.addresses.size()), restore, book.island_size);
  listed.insert(std::lower_bound(listed.begin(), listed.end(), resp->rank()), resp->rank());
  for (int s : listed) {
    resp->add_peer_ranks(s);
    resp->add_peers(book.addresses[static_cast<size_t>(s)]);
    resp->add_peer_tags(MemberTag(book.secrets[static_cast<size_t>(s)], book.generation, resp->rank()));
    resp->add_park_tags(token.empty() ? std::string()
                                 : ParkTag(KeyFor(token, s), book.generation, resp->rank()));
  }
}

absl::StatusOr<coordinator::RegisterResponse> Job::FinishRegistrationLocked(const Parked& p,
                                                                           std::shared_ptr<const MemberBook>* book) {
  int rank = -1;
  for (const auto& [r, member] : m_.members) {
    if (member.slot == p.slot && member.incarnation == p.req.incarnation()) rank = r;
  }
  if (m_.generation != p.target || rank < 0) {
    if (m_.state == JobState::kDone || m_.state == JobState::kFailed) return JobOver(final_);
    return absl::AbortedError("the generation this worker registered for was superseded; register again");
  }
  coordinator::RegisterResponse resp;
  resp.set_rank(rank);
  resp.set_slot(p.slot);
  resp.set_world_size(m_.world_size);
  resp.set_generation(m_.generation);
  if (book_ == nullptr || book_->generation != m_.generation) {
    auto made = std::make_shared<MemberBook>();
    made->generation = m_.generation;
    made->island_size = ShapeIslands(config_, m_.world_size).RegisteredIslandSize();
    for (const auto& [r, member] : m_.members) {
      made->addresses.push_back(member.address);
      made->secrets.push_back(member.secret);
    }
    book_ = std::move(made);
  }
  *book = book_;
  resp.set_member_secret(m_.members[rank].secret);
  resp.set_config_text(config_text_);
  resp.set_checkpoint_root(options_.checkpoint_root);
  resp.set_trace_dir(options_.trace_dir);
  if (snapshot_step_ > 0) {
    resp.set_start_step(snapshot_step_);
    resp.set_memory_step(snapshot_step_);
    for (int source : memory_sources_) resp.add_memory_sources(source);
    if (memory_world_ != m_.world_size) resp.set_memory_world_size(memory_world_);
  } else {
    const RestorePoint from = catalog_.Restore();
    resp.set_start_step(from.step);
    resp.set_restore_dir(from.dir);
  }
  resp.set_job_id(job_id_);
  resp.set_stop_at(stop_at_);
  return resp;
}

}  // namespace shardline
