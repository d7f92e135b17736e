// Membership and generations as a pure state machine: which workers hold
// which slots and ranks, when a world forms, when it breaks, when the job's
// workers have all finished. No threads, no gRPC, no clock, no disk, no
// logging: Step(state, event, now) updates the state and returns what the
// caller must act on (effects). Job (job.h) is the locked shell around it:
// it turns RPCs and timers into events, and applies the effects (restore
// planning, persistence, logs, crash points).
//
// Life of a generation:
//   forming  -- Claim events take slots for generation + 1; once every slot
//               is claimed (or, elastic, at least min_workers after
//               replace_timeout), the pending claims become the members of
//               the next generation, ranked by slot: WorldFormed. Elastic
//               by islands (min_islands), only the claims of whole islands
//               do; the others wait, as joiners, for their island to fill.
//   running  -- Heard (a report), Finished, Left, Watchdog, StreamEnded and
//               Tick (heartbeat deadlines) events; a loss breaks the world:
//               WorldBroken, and the job is forming again.
//   stopping -- as running, after a Stop: the caller picks the stop step.
//   done     -- every member finished (EveryWorkerFinished), or a Stop while
//               no world ran; failed -- a Fail event. Both are final.
//
// Step updates `state` in place (a report a worker sends ten times a second
// must not copy a world of members); tests copy it where they compare.
#ifndef SHARDLINE_COORDINATOR_DECIDE_MEMBERSHIP_H_
#define SHARDLINE_COORDINATOR_DECIDE_MEMBERSHIP_H_

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <variant>
#include <vector>

#include "absl/status/status.h"
#include "absl/time/time.h"
#include "proto/coordinator.pb.h"

namespace shardline {

enum class JobState { kForming, kRunning, kStopping, kDone, kFailed };
const char* JobStateName(JobState state);

struct MembershipConfig {
  int slots = 1;                  // runtime.num_workers
  int min_workers = 0;            // > 0: elastic (runtime.min_workers)
  // collective.islands: slot s is in island s / (slots / islands).
  int islands = 1;
  // > 0: elastic by whole islands (runtime.min_islands): a smaller world is
  // the islands whose every slot is claimed, at least this many of them.
  int min_islands = 0;
  absl::Duration replace_timeout;  // runtime.replace_timeout_seconds
  absl::Duration heartbeat_timeout = absl::Seconds(5);
  // False: no checkpoint will come, so a worker joining a smaller world
  // grows it at once rather than at the next commit.
  bool saves_checkpoints = true;
  // Held snapshot shards taken from one claim (keep_steps x copies is a
  // handful; the rest is ignored).
  size_t max_held_snapshots = 64;
  // A graceful stop whose world broke (say the workers were stopped first)
  // waits this long for a world to form again and save its first step;
  // then the job stops as it is, its committed checkpoints kept for a new
  // run to resume from. Never forming forever.
  absl::Duration stop_forming_timeout = absl::Seconds(15);
};

struct WorldMember {
  // Read by Step.
  int slot = 0;  // in [0, slots); members are keyed by rank
  uint64_t incarnation = 0;
  absl::Time last_seen;
  int64_t steps_done = 0;
  bool attached = false;  // its heartbeat stream is open
  bool finished = false;
  bool evicted = false;
  bool left = false;  // said it leaves because the world broke around it
  // Carried for the caller, never read by Step.
  std::string address;
  // Random per registration: binds reports and data-plane streams to the
  // process that registered (docs/security.md).
  std::string secret;
  // In-memory snapshot shards it said it holds when it claimed its slot.
  std::vector<coordinator::HeldSnapshot> held;
  double busy_seconds_per_step = 0;
  coordinator::TimeAccount time;
  // The greatest (sent - received) of its reports: its clock's offset from
  // ours minus the shortest one-way latency seen.
  std::optional<int64_t> clock_offset_micros;
};

struct Membership {
  JobState state = JobState::kForming;
  uint64_t generation = 0;               // the running (or last) generation
  std::map<int, WorldMember> members;    // of `generation`, by rank
  std::map<int, WorldMember> pending;    // claims for generation + 1, by slot
  int world_size = 0;                    // the running (or last formed) world; 0 before the first
  int size_before_start = 0;             // the last world's size before this coordinator started
  int form_target = 0;                   // > 0 after a planned break: form once this many claimed
  absl::Time forming_since;              // for replace_timeout
  absl::Time warned_short = absl::InfinitePast();
  bool stop_requested = false;
  uint64_t evictions = 0;                // a count the command version folds in

  // The minimum of the members' reported steps; 0 without members.
  int64_t GlobalStep() const;
  int64_t FurthestStep() const;
  bool SlotHeld(int slot) const;
  bool Running() const { return state == JobState::kRunning || state == JobState::kStopping; }
  bool Over() const { return state == JobState::kDone || state == JobState::kFailed; }
};

// Events. Rank and generation checks of reports are the caller's (it also
// checks the member's secret): a Heard/Left/Watchdog/Finished event names a
// member of the running generation.
namespace membership_event {
// A registration asks for a slot (requested_slot -1: any).
struct Claim {
  int requested_slot = -1;
  int island = -1;  // the island the worker's host is in; -1: any
  uint64_t incarnation = 0;
  uint64_t previous_generation = 0;
  std::string reason;  // why it registers again, if it does
  std::string address;
  std::string secret;
  std::vector<coordinator::HeldSnapshot> held;
};
// A waiting registration went away: its claim, if still its own, is freed.
struct Cancel {
  int slot = -1;
  uint64_t incarnation = 0;
};
// A report of `rank` was accepted.
struct Heard {
  int rank = 0;
  int64_t steps_done = 0;
};
// A registration of `rank` was answered: its heartbeat deadline runs from
// here (it cannot report before).
struct Answered {
  int rank = 0;
  uint64_t generation = 0;
};
struct Left {
  int rank = 0;
  std::string why;
};
struct Watchdog {
  int rank = 0;
  std::string why;
};
struct Finished {
  int rank = 0;
};
struct StreamEnded {
  int rank = 0;
  uint64_t generation = 0;
  bool broken = false;
};
// Time passed: heartbeat deadlines, an elastic world's replace timeout.
struct Tick {};
// The coordinator itself did not run for a while: every deadline restarts.
struct RestartDeadlines {};
// The running world breaks for a reason outside membership (a bad
// checkpoint, a snapshot that failed to restore).
struct Break {
  std::string why;
};
// The checkpoint of `step` committed: a smaller elastic world with workers
// waiting grows now.
struct Committed {
  int64_t step = 0;
};
// A graceful stop.
struct Stop {};
// The job failed (the caller holds the reason).
struct Fail {};
}  // namespace membership_event

using MembershipEvent =
    std::variant<membership_event::Claim, membership_event::Cancel, membership_event::Heard,
                 membership_event::Answered, membership_event::Left, membership_event::Watchdog,
                 membership_event::Finished, membership_event::StreamEnded, membership_event::Tick,
                 membership_event::RestartDeadlines, membership_event::Break, membership_event::Committed,
                 membership_event::Stop, membership_event::Fail>;

// What one Step decided, for the caller to act on in this order: broken,
// then formed, then the rest.
struct MembershipEffects {
  struct Broken {
    std::string why;
    // On purpose, to grow an elastic world at the checkpoint of grow_step;
    // not a loss.
    bool planned = false;
    int64_t grow_step = 0;
  };
  struct Formed {
    std::string why;  // for the world history
    int previous_size = 0;
  };
  // The answer to a Claim: taken (wait for generation `target` to be
  // durable), refused, or waiting for the job's end (a member that finished
  // asks again).
  struct ClaimTaken {
    int slot = -1;
    uint64_t target = 0;
    bool joining = false;  // joins a smaller running world at its next checkpoint
    int claimed = 0;       // claims pending for the next generation
  };
  struct ShortOfWorkers {
    int have = 0;
    int whole_islands = 0;  // with min_islands: the islands with every slot claimed
    absl::Duration waited;
  };
  std::optional<Broken> broken;
  std::optional<Formed> formed;
  std::optional<ClaimTaken> claim_taken;
  std::optional<absl::Status> claim_refused;
  bool claim_waits_for_end = false;
  // A joiner waits for the next checkpoint and none is scheduled by policy:
  // the caller should ask for one.
  bool wants_checkpoint = false;
  bool every_worker_finished = false;
  bool stop_scheduled = false;   // a running world is stopping: pick the step
  bool stopped_forming = false;  // a stop while no world ran: the job is done
  // With stopped_forming: it came after waiting stop_forming_timeout for a
  // world that did not form during a stop (for the log).
  bool stop_gave_up_forming = false;
  std::optional<ShortOfWorkers> short_of_workers;
  bool deadlines_restarted = false;
  // A member's stream broke while its world was already forming: nothing
  // breaks, the caller logs it.
  std::optional<std::string> lost_while_forming;
};

// The transition function: applies `event` at time `now` to `state`.
MembershipEffects Step(const MembershipConfig& config, Membership& state, const MembershipEvent& event,
                       absl::Time now);

}  // namespace shardline

#endif  // SHARDLINE_COORDINATOR_DECIDE_MEMBERSHIP_H_
