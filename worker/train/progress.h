// The live progress line and the end-of-run summary.
//
//   "step 1200/7020 | epoch 2.56 | loss 0.3412 | 98.2k samples/s | ETA 0:35"
//
// On a terminal the line is redrawn in place (logging::SetStatusLine); in a
// log file a line is written every `log_every` steps instead.
#ifndef SHARDLINE_WORKER_TRAIN_PROGRESS_H_
#define SHARDLINE_WORKER_TRAIN_PROGRESS_H_

#include <cstdint>
#include <string>

namespace shardline {

// "1:02:03" or "2:03".
std::string FormatDuration(double seconds);

class Progress {
 public:
  Progress(int64_t total_steps, int64_t steps_per_epoch, int global_batch_size, int64_t log_every);

  // After each step: `train_seconds` is the time spent training so far
  // (evaluation excluded), used for samples/s and ETA.
  void Step(int64_t steps_done, double loss, double train_seconds);
  // Clears the live line.
  void Finish();

  // The text of the line for the given state.
  std::string Line(int64_t steps_done, double loss, double samples_per_second) const;

 private:
  int64_t total_steps_;
  int64_t steps_per_epoch_;
  int global_batch_size_;
  int64_t log_every_;
  double last_draw_ = -1;
  int64_t window_steps_ = 0;
  double window_start_ = 0;
  double rate_ = 0;
};

}  // namespace shardline

#endif  // SHARDLINE_WORKER_TRAIN_PROGRESS_H_
