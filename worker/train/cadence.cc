#include "worker/train/cadence.h"

#include "worker/train/train_step.h"

namespace shardline {

CadenceOptions CadenceFromConfig(const config::JobConfig& config, int64_t total_steps, bool memory_snapshots) {
  CadenceOptions o;
  o.total_steps = total_steps;
  o.log_every = config.train().log_every() > 0 ? config.train().log_every() : 1;
  o.eval_every = config.train().eval_every();
  o.save_every = config.checkpoint().every_steps();
  o.memory_every = memory_snapshots ? config.checkpoint().memory_every_steps() : 0;
  o.save_final = config.checkpoint().save_final();
  return o;
}

bool LogDue(const CadenceOptions& options, int64_t steps_done) {
  return steps_done % options.log_every == 0 || steps_done == options.total_steps;
}

Due DueAfter(const CadenceOptions& o, int64_t steps_done, const AgreedRequests& agreed) {
  auto every = [steps_done](int64_t period) { return period > 0 && steps_done % period == 0; };
  Due d;
  d.stop = Reached(agreed.stop, steps_done) && steps_done < o.total_steps;
  d.last = steps_done == o.total_steps || d.stop;
  d.log = LogDue(o, steps_done) || d.last;
  d.eval = every(o.eval_every) || d.last || Reached(agreed.eval, steps_done);
  d.save = every(o.save_every) || Reached(agreed.checkpoint, steps_done) || (d.last && o.save_final);
  d.snapshot = every(o.memory_every) && !d.last;
  return d;
}

}  // namespace shardline
