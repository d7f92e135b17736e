// Helpers for end-to-end tests: fresh directories, files, JSON fields,
// free ports, finding processes, scraping /metrics.
#ifndef SHARDLINE_TESTS_E2E_E2E_UTIL_H_
#define SHARDLINE_TESTS_E2E_E2E_UTIL_H_

#include <sys/types.h>

#include <cstdint>
#include <string>
#include <vector>

#include "absl/time/time.h"

namespace shardline {

// The default job config, deploy/configs/fmnist_mlp.textproto.
std::string DefaultConfig();
// deploy/configs/<name>.textproto in the source tree.
std::string ConfigPath(const std::string& name);
// argv of `shardline launch --config <config, else the default> --workers N
// --workdir DIR --max_restarts K --set ...`.
std::vector<std::string> LaunchArgv(const std::string& dir, int workers, const std::vector<std::string>& sets,
                                    int max_restarts = 0, const std::string& config = "");
// argv of `shardline train --config <default> --workdir DIR --set ...`.
std::vector<std::string> TrainArgv(const std::string& dir, const std::vector<std::string>& sets);

// TempDir()/<name>, emptied.
std::string FreshDir(const std::string& name);
std::string ReadAll(const std::string& path);
std::vector<std::string> ReadLines(const std::string& path);
// The number after "key": in a one-line JSON object; NaN if absent.
double JsonField(const std::string& line, const std::string& key);
// Lines of metrics.jsonl with "split":"<split>".
std::vector<std::string> SplitLines(const std::string& metrics_path, const std::string& split);

// The step of the coordinator log's "the world changed size: FROM -> TO
// workers at step S" (-1: none).
int64_t WorldChangeStep(const std::string& coordinator_log, int from, int to);
// The furthest step of a train line in DIR/metrics.jsonl (0: none yet).
int64_t LoggedStep(const std::string& dir);
// Waits until LoggedStep(dir) >= step.
bool WaitForStep(const std::string& dir, int64_t step, absl::Duration timeout);
// Waits until `path` contains `needle` (or exists, for an empty needle).
bool WaitForText(const std::string& path, const std::string& needle, absl::Duration timeout);
// A TCP port on 127.0.0.1 that was free a moment ago, outside the ephemeral
// range, so no other test's bind(":0") can take it before the child binds it.
int FreePort();
// Pids of processes whose argv contains every one of `parts`.
std::vector<pid_t> FindProcesses(const std::vector<std::string>& parts);
// Pids of `shardline launch`'s worker of `rank` and of its coordinator, for
// the job in `workdir`.
std::vector<pid_t> LaunchedWorker(const std::string& workdir, int rank);
std::vector<pid_t> LaunchedCoordinator(const std::string& workdir);
// Sends `signal` to that worker of `rank`, or to that coordinator; false,
// and nothing sent, unless exactly one such process runs.
bool SignalLaunchedWorker(const std::string& workdir, int rank, int signal);
bool SignalLaunchedCoordinator(const std::string& workdir, int signal);
// The value of an unlabelled sample `name` in a Prometheus text page; NaN if absent.
double PromValue(const std::string& page, const std::string& name);

}  // namespace shardline

#endif  // SHARDLINE_TESTS_E2E_E2E_UTIL_H_
