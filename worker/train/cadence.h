// The train loop's cadence as a pure function: after `steps_done` steps,
// with the requests every rank agreed on in that step, what is due - a
// metrics line, an eval, a save, an in-memory snapshot, the stop. Every
// rank computes it from the same inputs, so all evaluate, save and stop at
// the same steps. No clock, no state: the loop keeps what it did last
// (a step saved twice is skipped there) and decides nothing else.
#ifndef SHARDLINE_WORKER_TRAIN_CADENCE_H_
#define SHARDLINE_WORKER_TRAIN_CADENCE_H_

#include <cstdint>

#include "proto/config.pb.h"

namespace shardline {

struct CadenceOptions {
  int64_t total_steps = 0;
  int64_t log_every = 1;      // train.log_every (>= 1)
  int64_t eval_every = 0;     // train.eval_every; 0: only at the end and on request
  int64_t save_every = 0;     // checkpoint.every_steps; 0: none by count
  int64_t memory_every = 0;   // checkpoint.memory_every_steps; 0: no snapshots (a world of one takes none)
  bool save_final = false;    // checkpoint.save_final
};

// The options a job's config gives; `memory_snapshots` false (a world of
// one, or no snapshot store) turns memory_every off.
CadenceOptions CadenceFromConfig(const config::JobConfig& config, int64_t total_steps, bool memory_snapshots);

// What the ranks agreed on in the step just done (StepResult::agreed_*;
// kNoStep: nothing asked).
struct AgreedRequests {
  int64_t stop = 0;
  int64_t checkpoint = 0;
  int64_t eval = 0;
};

struct Due {
  bool stop = false;      // a requested stop reached before the last step
  bool last = false;      // the run ends after this step (the last step, or the stop)
  bool log = false;       // a metrics line (train.log_every, and the last step)
  bool eval = false;      // train.eval_every, the last step, or a requested eval
  bool save = false;      // checkpoint.every_steps, a requested save, or the final save; a new best eval adds one
  bool snapshot = false;  // an in-memory snapshot (never at the last step: the final save covers it)
};

// True when the step that completes `steps_done` logs a metrics line
// (known before the step: the step computes its norms only then).
bool LogDue(const CadenceOptions& options, int64_t steps_done);

// What is due once `steps_done` steps are complete.
Due DueAfter(const CadenceOptions& options, int64_t steps_done, const AgreedRequests& agreed);

}  // namespace shardline

#endif  // SHARDLINE_WORKER_TRAIN_CADENCE_H_
