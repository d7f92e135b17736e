#include "coordinator/decide/membership.h"

#include <algorithm>
#include <climits>
#include <type_traits>

#include "absl/strings/str_cat.h"
#include "common/job/shard.h"

namespace shardline {

const char* JobStateName(JobState state) {
  switch (state) {
    case JobState::kForming: return "forming";
    case JobState::kRunning: return "running";
    case JobState::kStopping: return "stopping";
    case JobState::kDone: return "done";
    case JobState::kFailed: return "failed";
  }
  return "unknown";
}

int64_t Membership::GlobalStep() const {
  if (members.empty()) return 0;
  int64_t step = INT64_MAX;
  for (const auto& [rank, m] : members) step = std::min(step, m.steps_done);
  return step;
}

int64_t Membership::FurthestStep() const {
  int64_t furthest = 0;
  for (const auto& [rank, m] : members) furthest = std::max(furthest, m.steps_done);
  return furthest;
}

bool Membership::SlotHeld(int slot) const {
  for (const auto& [rank, m] : members) {
    if (m.slot == slot) return true;
  }
  return false;
}

namespace {

namespace ev = membership_event;
using Effects = MembershipEffects;

std::string Workers(int n) { return absl::StrCat(n, n == 1 ? " worker" : " workers"); }

bool Elastic(const MembershipConfig& c) { return c.min_workers > 0 || c.min_islands > 0; }

// The pending slots a world may form from: all of them; elastic by islands,
// those of islands whose every slot is claimed (a world is whole islands).
std::vector<int> FormableSlots(const MembershipConfig& c, const Membership& s) {
  std::vector<int> slots;
  const int islands = std::max(c.islands, 1);
  std::vector<int> claimed(c.min_islands > 0 ? static_cast<size_t>(islands) : 0, 0);  // per island
  for (const auto& [slot, m] : s.pending) {
    if (c.min_islands > 0) ++claimed[static_cast<size_t>(IslandOfRank(slot, c.slots, islands))];
  }
  for (const auto& [slot, m] : s.pending) {
    if (c.min_islands <= 0 || claimed[static_cast<size_t>(IslandOfRank(slot, c.slots, islands))] == c.slots / islands) {
      slots.push_back(slot);
    }
  }
  return slots;
}

// Names the islands of `c` none of whose slots is in `slots`.
std::string MissingIslands(const MembershipConfig& c, const std::vector<int>& slots) {
  const int islands = std::max(c.islands, 1);
  std::vector<bool> present(static_cast<size_t>(islands), false);
  for (int slot : slots) present[static_cast<size_t>(IslandOfRank(slot, c.slots, islands))] = true;
  std::string out;
  for (int i = 0; i < islands; ++i) {
    if (!present[static_cast<size_t>(i)]) absl::StrAppend(&out, out.empty() ? "" : ", ", i);
  }
  return out;
}

// Ends the running generation (nothing if none runs).
void BreakWorld(Membership& s, Effects& out, absl::Time now, std::string why, bool planned = false,
                int64_t grow_step = 0) {
  if (!s.Running()) return;
  out.broken = Effects::Broken{std::move(why), planned, grow_step};
  s.form_target = 0;
  s.forming_since = now;
  s.state = JobState::kForming;
}

// Makes the pending claims of `slots` (ascending) the next generation,
// ranked by slot: with every slot there, rank == slot; a smaller world
// closes the gaps. Other claims stay pending, for a later generation.
void Form(Membership& s, Effects& out, absl::Time now, std::string why, const std::vector<int>& slots) {
  s.generation += 1;
  s.members.clear();
  int next_rank = 0;
  for (int slot : slots) {
    auto it = s.pending.find(slot);
    WorldMember& m = it->second;
    m.slot = slot;
    m.last_seen = now;
    s.members[next_rank++] = std::move(m);
    s.pending.erase(it);
  }
  s.form_target = 0;
  const int previous = s.world_size > 0 ? s.world_size : s.size_before_start;
  s.world_size = next_rank;
  s.state = s.stop_requested ? JobState::kStopping : JobState::kRunning;
  out.formed = Effects::Formed{std::move(why), previous};
}

// Forms the next world when it is complete: every slot claimed, or, after
// a planned break, the workers it waits for; or, elastic, a smaller one
// once replace_timeout has passed with at least min_workers.
void MaybeForm(const MembershipConfig& c, Membership& s, Effects& out, absl::Time now) {
  if (s.state != JobState::kForming) return;
  const std::vector<int> slots = FormableSlots(c, s);
  const int have = static_cast<int>(slots.size()), n = c.slots;
  if (have == n || (s.form_target > 0 && have >= s.form_target)) {
    Form(s, out, now,
         s.world_size > 0 && have > s.world_size ? absl::StrCat(Workers(have - s.world_size), " returned")
                                                 : std::string("every worker is there"),
         slots);
    return;
  }
  if (!Elastic(c) || now - s.forming_since < c.replace_timeout) return;
  const int island_size = c.slots / std::max(c.islands, 1);
  const int whole = have / std::max(island_size, 1);
  if (c.min_islands > 0 ? whole < c.min_islands : have < c.min_workers) {
    if (now - s.warned_short >= c.replace_timeout) {
      out.short_of_workers =
          Effects::ShortOfWorkers{static_cast<int>(s.pending.size()), whole, now - s.forming_since};
      s.warned_short = now;
    }
    return;
  }
  const int pending = static_cast<int>(s.pending.size());
  std::string why = absl::StrCat(n - pending, " of ", n, " workers not back within runtime.replace_timeout_seconds (",
                                 absl::ToInt64Seconds(c.replace_timeout), " s)");
  if (c.min_islands > 0) absl::StrAppend(&why, "; island ", MissingIslands(c, slots), " left out");
  Form(s, out, now, std::move(why), slots);
}

// A smaller elastic world with workers waiting breaks on purpose at the
// checkpoint of `step`, to re-form larger.
void MaybeGrow(const MembershipConfig& c, Membership& s, Effects& out, absl::Time now, int64_t step) {
  if (s.state != JobState::kRunning || s.world_size >= c.slots) return;
  const int formable = static_cast<int>(FormableSlots(c, s).size());
  if (formable == 0) return;  // no one waiting, or no island whole yet
  const int target = std::min<int>(c.slots, static_cast<int>(s.members.size()) + formable);
  BreakWorld(s, out, now,
             absl::StrCat("growing from ", s.world_size, " to ", target, " workers at the checkpoint of step ", step),
             /*planned=*/true, step);
  s.form_target = target;
}

// A claim while a world runs. A running world takes no one, unless a
// member says the world broke - or a member that finished and did not hear
// the job's end (its stream timed out) asks again: it waits for that end,
// breaking nothing. A smaller elastic world takes newcomers for its next,
// larger generation: they wait until the next committed checkpoint. False
// when the claim has been answered here (refused, or told to wait).
bool AdmitWhileRunning(const MembershipConfig& c, Membership& s, Effects& out, absl::Time now, const ev::Claim& e) {
  const int n = c.slots;
  for (const auto& [rank, m] : s.members) {
    if (m.incarnation != e.incarnation || e.previous_generation != s.generation) continue;
    if (m.finished) {
      out.claim_waits_for_end = true;
      return false;
    }
    BreakWorld(s, out, now,
               absl::StrCat("worker rank ", rank, " left it: ", e.reason.empty() ? "a collective failed" : e.reason));
    break;
  }
  if (s.state == JobState::kForming) return true;
  if (e.requested_slot >= 0 && s.SlotHeld(e.requested_slot)) {
    // The refusal names no member's address: the caller may be anyone with
    // the token.
    out.claim_refused = absl::AlreadyExistsError(absl::StrCat("rank ", e.requested_slot,
                                                              " is held by a live worker (generation ", s.generation,
                                                              "); a second worker may not claim it"));
    return false;
  }
  const bool joins = Elastic(c) && s.state == JobState::kRunning && s.world_size < n &&
                     static_cast<int>(s.members.size() + s.pending.size()) < n;
  if (!joins) {
    out.claim_refused = absl::ResourceExhaustedError(absl::StrCat("all ", n, " ranks are held by live workers"));
    return false;
  }
  return true;
}

// The claim's slot: the one asked for, else the one this worker claimed
// before, else the lowest one free (for a joiner: not held by a member).
// -1 with out.claim_refused set when there is none.
int PickSlot(const MembershipConfig& c, const Membership& s, Effects& out, const ev::Claim& e, bool joining) {
  const int n = c.slots;
  // With an island, the slots of its block only.
  const Range block = e.island >= 0 ? IslandRanks(e.island, n, std::max(c.islands, 1)) : Range{0, n};
  const int first = static_cast<int>(block.begin), end = static_cast<int>(block.end);
  int slot = e.requested_slot;
  if (slot >= 0) {
    auto it = s.pending.find(slot);
    if (it != s.pending.end() && it->second.incarnation != e.incarnation) {
      out.claim_refused = absl::AlreadyExistsError(absl::StrCat(
          "rank ", slot, " was already claimed by another worker for generation ", s.generation + 1));
      return -1;
    }
    return slot;
  }
  for (const auto& [p, m] : s.pending) {
    if (m.incarnation == e.incarnation) slot = p;
  }
  for (int p = first; p < end && slot < 0; ++p) {
    if (s.pending.count(p) == 0 && !(joining && s.SlotHeld(p))) slot = p;
  }
  if (slot < 0) {
    out.claim_refused = absl::ResourceExhaustedError(
        e.island >= 0 ? absl::StrCat("all ", end - first, " ranks of island ", e.island, " (ranks ", first, " to ",
                                     end - 1, ") are held by live workers")
                      : absl::StrCat("all ", n, " ranks are held by live workers"));
  }
  return slot;
}

// The claimant as a pending member of `slot`, with the snapshots it holds
// (bounded and sane, or ignored: a bad list can only cost a disk restore).
void AddPending(const MembershipConfig& c, Membership& s, int slot, const ev::Claim& e) {
  WorldMember& m = s.pending[slot];
  m = WorldMember{};
  m.address = e.address;
  m.incarnation = e.incarnation;
  m.secret = e.secret;
  for (const coordinator::HeldSnapshot& h : e.held) {
    if (m.held.size() >= c.max_held_snapshots || h.world_size() < 1 || h.world_size() > c.slots || h.rank() < 0 ||
        h.rank() >= h.world_size() || h.step() <= 0) {
      continue;
    }
    m.held.push_back(h);
  }
}

void On(const MembershipConfig& c, Membership& s, Effects& out, absl::Time now, const ev::Claim& e) {
  if (s.Over()) {
    out.claim_refused = absl::FailedPreconditionError("the job is over");
    return;
  }
  if (e.requested_slot < -1 || e.requested_slot >= c.slots) {
    out.claim_refused = absl::InvalidArgumentError(
        absl::StrCat("requested rank ", e.requested_slot, " is not in a world of ", c.slots));
    return;
  }
  const int islands = std::max(c.islands, 1);
  if (e.island < -1 || e.island >= islands) {
    out.claim_refused = absl::InvalidArgumentError(absl::StrCat(
        "island ", e.island, " is not one of the job's ", islands, " (collective.islands)"));
    return;
  }
  if (e.island >= 0 && e.requested_slot >= 0 && IslandOfRank(e.requested_slot, c.slots, islands) != e.island) {
    const Range block = IslandRanks(e.island, c.slots, islands);
    out.claim_refused = absl::InvalidArgumentError(absl::StrCat(
        "rank ", e.requested_slot, " is in island ", IslandOfRank(e.requested_slot, c.slots, islands), ", not island ",
        e.island, " (ranks ", block.begin, " to ", block.end - 1, ")"));
    return;
  }
  if (s.Running() && !AdmitWhileRunning(c, s, out, now, e)) return;
  // A claim while a world runs is for the next, larger one.
  const bool joining = s.state != JobState::kForming;
  const int slot = PickSlot(c, s, out, e, joining);
  if (slot < 0) return;
  AddPending(c, s, slot, e);
  out.claim_taken = Effects::ClaimTaken{slot, s.generation + 1, joining, static_cast<int>(s.pending.size())};
  if (joining) {
    if (!c.saves_checkpoints) {
      MaybeGrow(c, s, out, now, s.GlobalStep());  // no checkpoint will come
    } else {
      out.wants_checkpoint = true;
    }
  }
  MaybeForm(c, s, out, now);
}

void On(const MembershipConfig&, Membership& s, Effects&, absl::Time, const ev::Cancel& e) {
  auto claim = s.pending.find(e.slot);
  if (claim != s.pending.end() && claim->second.incarnation == e.incarnation) s.pending.erase(claim);
}

void On(const MembershipConfig&, Membership& s, Effects&, absl::Time now, const ev::Heard& e) {
  auto it = s.members.find(e.rank);
  if (it == s.members.end()) return;
  it->second.attached = true;
  it->second.last_seen = now;
  it->second.steps_done = std::max(it->second.steps_done, e.steps_done);
}

void On(const MembershipConfig&, Membership& s, Effects&, absl::Time now, const ev::Answered& e) {
  auto it = s.members.find(e.rank);
  if (e.generation == s.generation && it != s.members.end()) it->second.last_seen = now;
}

void On(const MembershipConfig&, Membership& s, Effects& out, absl::Time now, const ev::Left& e) {
  auto it = s.members.find(e.rank);
  if (it == s.members.end() || it->second.left) return;
  // It is alive and saw a peer go: the world breaks, but it is not the one
  // lost (the silent peer is found by its own absence).
  it->second.left = true;
  BreakWorld(s, out, now, absl::StrCat("worker rank ", e.rank, " left it: ", e.why));
}

void On(const MembershipConfig&, Membership& s, Effects& out, absl::Time now, const ev::Watchdog& e) {
  auto it = s.members.find(e.rank);
  if (it == s.members.end()) return;
  it->second.evicted = true;
  ++s.evictions;
  BreakWorld(s, out, now, absl::StrCat("worker rank ", e.rank, "'s watchdog fired: ", e.why));
}

void On(const MembershipConfig&, Membership& s, Effects& out, absl::Time, const ev::Finished& e) {
  auto it = s.members.find(e.rank);
  if (it == s.members.end() || it->second.finished) return;
  it->second.finished = true;
  bool all = true;
  for (const auto& [rank, m] : s.members) all = all && m.finished;
  if (all && s.Running()) {
    s.state = JobState::kDone;
    out.every_worker_finished = true;
  }
}

void On(const MembershipConfig&, Membership& s, Effects& out, absl::Time now, const ev::StreamEnded& e) {
  auto it = s.members.find(e.rank);
  if (e.generation != s.generation || it == s.members.end()) return;
  WorldMember& m = it->second;
  m.attached = false;
  if (m.finished || m.left || s.Over()) return;
  const bool forming = s.state == JobState::kForming;
  BreakWorld(s, out, now,
             absl::StrCat("worker rank ", e.rank, " (", m.address, ") was lost: its heartbeat stream ",
                          e.broken ? "broke" : "ended"));
  if (forming && e.broken) {
    out.lost_while_forming = absl::StrCat("worker rank ", e.rank, " (", m.address, ") of generation ", e.generation,
                                          " was lost: its heartbeat stream broke");
  }
}

void On(const MembershipConfig& c, Membership& s, Effects& out, absl::Time now, const ev::Tick&) {
  if (s.state == JobState::kForming && s.stop_requested && now - s.forming_since >= c.stop_forming_timeout) {
    s.state = JobState::kDone;
    out.stopped_forming = true;
    out.stop_gave_up_forming = true;
    return;
  }
  MaybeForm(c, s, out, now);  // an elastic world's replace timeout
  if (!s.Running()) return;
  for (auto& [rank, m] : s.members) {
    if (!m.finished && now - m.last_seen > c.heartbeat_timeout) {
      m.evicted = true;
      ++s.evictions;
      BreakWorld(s, out, now,
                 absl::StrCat("worker rank ", rank, " (", m.address, ") was lost: no heartbeat for ",
                              absl::FormatDuration(now - m.last_seen)));
      return;
    }
  }
}

void On(const MembershipConfig&, Membership& s, Effects& out, absl::Time now, const ev::RestartDeadlines&) {
  if (!s.Running()) return;
  for (auto& [rank, m] : s.members) m.last_seen = std::max(m.last_seen, now);
  out.deadlines_restarted = true;
}

void On(const MembershipConfig&, Membership& s, Effects& out, absl::Time now, const ev::Break& e) {
  BreakWorld(s, out, now, e.why);
}

void On(const MembershipConfig& c, Membership& s, Effects& out, absl::Time now, const ev::Committed& e) {
  MaybeGrow(c, s, out, now, e.step);
}

void On(const MembershipConfig&, Membership& s, Effects& out, absl::Time, const ev::Stop&) {
  if (s.stop_requested) return;
  s.stop_requested = true;
  if (s.state == JobState::kForming) {
    s.state = JobState::kDone;
    out.stopped_forming = true;
  } else if (s.state == JobState::kRunning) {
    s.state = JobState::kStopping;
    out.stop_scheduled = true;
  }
}

void On(const MembershipConfig&, Membership& s, Effects&, absl::Time, const ev::Fail&) {
  if (!s.Over()) s.state = JobState::kFailed;
}

}  // namespace

MembershipEffects Step(const MembershipConfig& config, Membership& state, const MembershipEvent& event,
                       absl::Time now) {
  Effects out;
  std::visit([&](const auto& e) { On(config, state, out, now, e); }, event);
  return out;
}

}  // namespace shardline
